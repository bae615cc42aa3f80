"""The sandbox around submitted code and the harness's countermeasures, each against a fixture
submission that tries the attack (``tests/fixtures/submissions``).

Isolation depends on the machine: tests of a method the machine cannot provide are skipped with the
probe's reason; the fork bomb needs the ``setuid`` method (a judge running as root), the only one in
which a per-sandbox process limit holds for certain.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelrank.runner.containment import cgroups, isolation, isolation_check
from kernelrank.runner.judge.harness import EvalOptions, evaluate
from kernelrank.runner.containment.jobdisk import remove_tree
from kernelrank.runner.containment.rlimits import GiB, SandboxLimits
from kernelrank.runner.containment.procfs import ProcessWatch, host_autogroups, priority
from kernelrank.runner.submission.steady import VML_OPERATIONS
from tests.conftest import ROOT, submission
from tests.runner.listener import Listener

NAMESPACED = [m for m in ("setuid", "userns") if isolation_check.probe(m)[0]]
needs_namespaces = pytest.mark.skipif(not NAMESPACED, reason="no isolation method works here: "
                                      + "; ".join(f"{m}: {isolation_check.probe(m)[1]}" for m in ("setuid", "userns")))
needs_setuid = pytest.mark.skipif(not isolation_check.probe("setuid")[0],
                                  reason=f"setuid isolation unavailable: {isolation_check.probe('setuid')[1]}")


def _options(options: EvalOptions, **changes) -> EvalOptions:
    from dataclasses import replace

    return replace(options, **changes)


def _run(double, source: str, options: EvalOptions, mode: str = "test"):
    return evaluate(double.spec(), source, mode, "cpu", options)


def _attack(problem: str, name: str) -> str:
    """Source of an attack of the corpus (``reference_kernels/<problem>/attacks``)."""
    return (ROOT / "reference_kernels" / problem / "attacks" / f"{name}.py").read_text(encoding="utf-8")


# -- isolation ----------------------------------------------------------------------------------
@needs_namespaces
@pytest.mark.parametrize("method", NAMESPACED)
def test_network_is_unreachable(double, options, method: str) -> None:
    listener = Listener()
    try:
        src = submission("net_connect.py").replace("__PORT__", str(listener.port))
        r = _run(double, src, _options(options, isolation=method))
    finally:
        listener.close()
    assert r.status.value == "passed", r.message
    assert listener.connections == []
    assert "connection failed as it should" in r.logs["stdout"]
    assert r.isolation["network"] == "netns" and r.isolation["method"] == method


def test_network_is_reachable_without_isolation(double, options) -> None:
    """The control: the same submission connects when nothing isolates it."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        src = submission("net_connect.py").replace("__PORT__", str(port))
        r = _run(double, src, _options(options, isolation="none"))
    finally:
        listener.close()
    assert r.status.value == "error" and "reached the judge's machine" in r.message
    assert r.isolation["network"] == "none" and r.isolation["filesystem"] == "private-cwd"


@needs_namespaces
@pytest.mark.parametrize("method", NAMESPACED)
def test_writes_outside_the_folder_fail(double, options, method: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "pwned.txt"
    src = submission("write_outside.py").replace("__TARGET__", str(target))
    r = _run(double, src, _options(options, isolation=method))
    assert r.status.value == "passed", r.message
    assert not target.exists()
    assert r.isolation["filesystem"] == "read-only"


@needs_namespaces
@pytest.mark.parametrize("method", NAMESPACED)
def test_the_child_names_its_threads_and_system_knobs_stay_read_only(double, options, method: str) -> None:
    """CUDA's initialisation writes ``/proc/self/task/<tid>/comm`` (error 304 where it cannot: seen
    on an H200); the child's own ``/proc`` is writable, ``/proc/sys`` read-only."""
    r = _run(double, submission("proc_view.py"), _options(options, isolation=method))
    assert r.status.value == "passed", r.message
    assert "thread named 'kr-named'; /proc rw, /proc/sys ro" in r.logs["stdout"]


@needs_namespaces
def test_hidden_folders_cannot_be_read(double, options) -> None:
    """A folder named in ``hidden_paths`` (the service's data folder, say) is empty for the child."""
    from tests.conftest import ROOT

    data_dir = ROOT / f".kr-test-hidden-{os.getpid()}"
    data_dir.mkdir()
    try:
        secret = data_dir / "kernelrank.db"
        secret.write_text("secret seeds")
        secret.chmod(0o644)
        data_dir.chmod(0o755)
        src = submission("read_hidden.py").replace("__SECRET__", str(secret))
        # the control (visible unless hidden) only where nothing else hides the checkout: the
        # child's home and its private /tmp, /var/tmp, /dev/shm hide those anyway
        covered_by = (os.path.expanduser("~"), "/tmp", "/var/tmp", "/dev/shm")
        covered = any(str(ROOT) == c or str(ROOT).startswith(c.rstrip("/") + "/") for c in covered_by)
        if not covered:
            seen = _run(double, src, options)
            assert seen.status.value == "error" and "read a hidden file" in seen.message, seen.message
        r = _run(double, src, _options(options, hidden_paths=(data_dir,)))
        assert r.status.value == "passed", r.message
        assert "failed as it should" in r.logs["stdout"]
        if not covered:  # under a folder hidden anyway, the sandbox need not list it again
            assert str(data_dir) in r.isolation["hidden"]
    finally:
        remove_tree(data_dir)


def test_isolation_is_recorded(double, options) -> None:
    limits = SandboxLimits(processes=200, file_bytes=64 << 20, open_files=512, address_space_bytes=6 * GiB)
    r = _run(double, submission("double_ok.py"), _options(options, limits=limits))
    assert r.status.value == "passed", r.message
    iso = r.isolation
    assert iso["method"] in ("setuid", "userns", "none")
    lim = iso["limits"]
    assert (lim["file_bytes"], lim["open_files"], lim["address_space_bytes"], lim["core_bytes"]) == (
        64 << 20, 512, 6 * GiB, 0)
    assert lim["processes"] == (None if iso["method"] == "none" else 200)
    assert lim["cpu_seconds"] > double.definition.budgets.compile
    assert r.to_dict()["isolation"] == iso
    if iso["method"] == "setuid":
        assert iso["network"] == "netns" and iso["filesystem"] == "read-only"
        assert iso["user"] == "sandbox-uid" and iso["uid"] >= isolation.SANDBOX_UID_BASE
        assert iso["capabilities"] == "0000000000000000" and lim["processes_enforced"]


def _report(double, options, name: str, start: str) -> dict:
    """Run the fixture submission ``name`` in test mode in a child started ``cold`` or ``warm``
    (forked from a zygote), assert it passed, and return the JSON line it printed last."""
    from kernelrank.runner.host.devices import cpu_threads
    from kernelrank.runner.submission.zygote import Zygote

    zygote = Zygote.start("cpu", cpu_threads(0)) if start == "warm" else None
    try:
        r = _run(double, submission(name), _options(options, zygote=zygote))
    finally:
        if zygote is not None:
            zygote.close()
    assert r.status.value == "passed", r.message
    return json.loads([line for line in r.logs["stdout"].splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_openmp_threads_are_bound_one_per_cpu(double, options, start: str) -> None:
    """The timed child's OpenMP threads each keep to a CPU of their own, the main thread to the
    first CPU the judge may use, whether the child starts cold or is forked from a zygote
    (``childenv.child_environment``: unbound, the main thread and its worker shared a CPU for
    milliseconds at a time while the other stood idle)."""
    report = _report(double, options, "report_scheduling.py", start)
    cpus = sorted(os.sched_getaffinity(0))
    assert report["main"] == str(cpus[0]), report
    bound = {mask for mask in report["threads"].values() if mask.isdigit()}
    assert len(bound) >= min(report["torch_threads"], len(cpus)), report
    assert bound <= {str(c) for c in cpus}, report


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_large_blocks_are_page_aligned_huge_pages_where_the_host_has_them(double, options, start: str) -> None:
    """Where the host has transparent huge pages (``madvise`` or ``always``), the child's PyTorch
    allocator aligns blocks of 2 MiB or more to a page and advises them ``MADV_HUGEPAGE``
    (``THP_MEM_ALLOC_ENABLE``, ``childenv.child_environment``), whether the child starts cold or
    is forked from a zygote: processes otherwise ran the bfloat16 softmax cases at one of two
    speeds for their life (docs/research/bench-history.md, section 15). Elsewhere it is not asked for.

    The block may span two heap mappings (a forked child's heap is the zygote's, part of it advised
    by ``steady.reserve_heap``): each must be advised where THP is ``madvise``, and huge pages may
    back at least one."""
    from kernelrank.runner.containment.procfs import host_huge_pages

    report = _report(double, options, "report_memory.py", start)
    mode = host_huge_pages()
    if mode in ("madvise", "always"):
        assert report["env"] == "1" and report["offset"] == 0, report
        assert any(m["eligible"] == "1" for m in report["mappings"]), report
        assert mode == "always" or all(m["advised"] for m in report["mappings"]), report
    else:
        assert report["env"] is None, report


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_every_thread_of_the_child_runs_at_the_raised_priority_and_cannot_raise_it_further(
        double, options, start: str) -> None:
    """Where the judge may raise priorities (``CAP_SYS_NICE``: root), the child's threads, OpenMP's
    included, and its session's autogroup have nice ``isolation.CHILD_NICE``, whether the child
    starts cold or is forked from a zygote, so a timed call takes its CPUs ahead of the host's
    other work; a sandboxed child cannot lower its nice further. A judge that may not
    raise them leaves them at 0."""
    report = _report(double, options, "report_priority.py", start)
    method = isolation_check.choose("auto")[0]
    want = isolation.CHILD_NICE if isolation.may_raise_priority() else 0
    assert len(report["threads"]) >= report["torch_threads"], report
    assert set(report["threads"].values()) == {want}, report
    if host_autogroups():
        assert report["autogroup"] == want, report
    if method != "none":
        assert report["lower_thread"].startswith("refused"), report
        assert report["lower_autogroup"].startswith("refused") or report["autogroup"] is None, report


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_the_child_settles_vector_math_before_it_loads_the_submission(double, options, start: str) -> None:
    """oneMKL picks a vector-math kernel on the function's first call, and a first call made by
    several OpenMP threads at once can run the low-accuracy one for a thread's part
    (``steady.resolve_vector_math``; an honest softmax's first call failed its check that way). Cold or forked from a zygote, the child has made every such first call, in float32
    and float64, from its one thread, before the submission's module is even loaded."""
    report = _report(double, options, "report_vector_math.py", start)
    assert report["resolved"], report
    assert set(report["operations"]) == {f"{op}:{dt}" for op in VML_OPERATIONS for dt in ("float32", "float64")}


def test_settling_vector_math_starts_no_thread_and_computes_right() -> None:
    """``resolve_vector_math`` runs each operation on one element (below every parallel grain): in a
    fresh process with two OpenMP threads allowed, it starts no thread (the child's OpenMP team
    is still first made by the submission's own calls, bound as ``childenv.child_environment``
    says), and a later large ``exp`` still matches float64's."""
    code = """
import json, os, torch
from kernelrank.runner.submission.steady import resolve_vector_math
before = len(os.listdir("/proc/self/task"))
done = resolve_vector_math()
after = len(os.listdir("/proc/self/task"))
x = torch.linspace(-20, 5, 1 << 20)
err = ((x.exp() - x.double().exp()).abs() / x.double().exp()).max().item()
print(json.dumps({"before": before, "after": after, "done": len(done), "err": err}))
"""
    env = dict(os.environ, OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["after"] == report["before"], report
    assert report["done"] == 2 * len(VML_OPERATIONS)
    assert report["err"] < 1e-6, report


def test_the_judge_reads_a_process_priority_from_outside() -> None:
    """``procfs.priority`` reads the nice value of a live process's main thread and autogroup
    from ``/proc``; ``raise_priority`` sets both in the calling process's session."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process
        try:
            os.setsid()
            isolation.raise_priority(5)  # raising a nice value needs no privilege
            time.sleep(5)
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 5
        while priority(pid)["nice"] != 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        found = priority(pid)
        assert found["nice"] == 5, found
        assert found["autogroup"] == (5 if host_autogroups() else None), found
        mine = priority(os.getpid())
        assert mine["nice"] == os.getpriority(os.PRIO_PROCESS, 0), mine
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert priority(pid) == {"nice": None, "autogroup": None}


@pytest.mark.parametrize("method", NAMESPACED)
def test_the_childs_pid_one_dies_with_the_process_outside_its_namespace(method: str, tmp_path: Path) -> None:
    """The shim outside the child's PID namespace killed (an operator, the OOM killer), the process
    that runs the submission (PID 1 inside) ends with it: the sandbox user's ``setresuid`` clears
    the parent-death signal, so ``isolation.enter`` sets it again (before, with ``setuid``, PID 1
    ran on until the judge ended the job's processes)."""
    import signal

    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.containment.sandbox import SubmissionProcess

    child = SubmissionProcess("def custom_kernel(data):\n    return data[0]\n", "cpu", 2, scratch_dir=tmp_path,
                              method=method, limits=SandboxLimits().resolved("cpu", 60.0))
    try:
        child.start(time.monotonic() + 60)
        inner = isolation.inner_pid(child.proc.pid)
        assert inner != child.proc.pid
        os.kill(child.proc.pid, signal.SIGKILL)
        end = time.monotonic() + 10
        while cgroups._has_live_thread(inner) and time.monotonic() < end:
            time.sleep(0.02)
        assert not cgroups._has_live_thread(inner), "PID 1 of the child's namespace still running"
    finally:
        child.close(graceful=False)


def test_faults_count_a_huge_page_as_the_pages_it_makes_resident(tmp_path: Path) -> None:
    """``SubmissionProcess.faults`` counts in base pages: a 16 MiB output made resident in huge
    pages (8 faults of 2 MiB) reads as at least its 4096 pages, as it does in small pages, so
    the judge's warm-up (``timing.WARM_FAULTS_PER_CALL``) sees it either way."""
    import torch

    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.containment.sandbox import SubmissionProcess

    source = "held = []\ndef custom_kernel(data):\n    held.append(data[0] * 2)\n    return held[-1]\n"
    x = torch.randn(1024, 4096)  # 16 MiB
    child = SubmissionProcess(source, "cpu", 2, scratch_dir=tmp_path, method=isolation_check.choose("auto")[0],
                              limits=SandboxLimits().resolved("cpu", 60.0))
    try:
        deadline = time.monotonic() + 60
        child.start(deadline)
        assert child.request({"op": "load"}, deadline)["ok"]
        direct = child.memory is not None
        layout = child.arena.place((x,), 2 * x.numel() * 4, direct=direct)
        grown = []
        for _ in range(3):  # every call holds a new 16 MiB output: the heap grows by it
            before = child.faults()
            assert child.request({"op": "go", "inputs": layout, "direct": direct}, deadline)["ok"]
            after = child.faults()
            assert before is not None and after is not None
            grown.append(after - before)
    finally:
        child.close()
    assert min(grown[1:]) >= x.numel() * 4 // 4096, grown


def test_required_network_isolation_refuses_to_run_unisolated(double, options, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').close()\n" + submission("double_ok.py")
    r = _run(double, src, _options(options, isolation="none", require_network_isolation=True))
    assert r.status.value == "rejected"
    assert "network" in r.message and "not run" in r.message
    assert not marker.exists() and r.cases == []


@needs_namespaces
def test_required_network_isolation_runs_where_available(double, options) -> None:
    r = _run(double, submission("double_ok.py"), _options(options, require_network_isolation=True))
    assert r.status.value == "passed", r.message
    assert r.isolation["network"] == "netns"


# -- limits ---------------------------------------------------------------------------------------
@needs_setuid
def test_fork_bomb_ends_and_leaves_nothing(double, options) -> None:
    started = time.monotonic()
    r = _run(double, submission("fork_bomb.py"), _options(options, isolation="setuid"))
    assert r.status.value in ("timeout", "error"), r.message
    assert time.monotonic() - started < double.definition.budgets.test + 30
    uid = r.isolation["uid"]
    assert r.isolation["limits"]["processes_enforced"]
    assert ProcessWatch(-1, uid).members() == set()


def test_file_size_flood_is_cut(double, options) -> None:
    r = _run(double, submission("file_flood.py"), _options(options, limits=SandboxLimits(file_bytes=1 << 20)))
    assert r.status.value == "error", r.message
    assert "File too large" in r.message


def test_memory_bomb_is_an_error_on_cpu(double, options) -> None:
    limits = SandboxLimits(address_space_bytes=2 * GiB)
    r = _run(double, submission("memory_bomb.py"), _options(options, limits=limits, threads=1))
    assert r.status.value == "error", r.message
    assert "memory" in r.message.lower()


def test_planted_links_are_not_followed_on_cleanup(double, options, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    src = submission("plant_symlink.py").replace("__TARGET__", str(target))
    r = _run(double, src, options)
    assert r.status.value == "passed", r.message
    assert (target / "keep.txt").read_text() == "precious"
    assert list(options.scratch_dir.iterdir()) == []


@needs_namespaces
@pytest.mark.parametrize("method", NAMESPACED)
def test_host_sockets_other_jobs_and_ipc_are_out_of_reach(double, options, method: str, tmp_path: Path) -> None:
    """A listening Unix socket in a host folder (as a database's or Docker's), the cgroup tree, and
    a System V segment made for the next job: none reachable from the sandbox, nothing outlives it."""
    import ctypes
    import secrets

    if not os.access("/run", os.W_OK):
        # a judge that is not root cannot plant a socket in a host folder (a socket in its own
        # folders proves nothing: /tmp is private in the sandbox anyway); CI's judge is root
        pytest.skip("/run is not writable here: no host socket to plant")
    path = Path("/run") / f"kernelrank-test-{secrets.token_hex(4)}.sock"
    key = 0x4B000000 | secrets.randbits(20)
    listener = Listener(path)
    try:
        src = submission("host_services.py").replace("__SOCKET__", str(path)).replace("__KEY__", hex(key))
        r = _run(double, src, _options(options, isolation=method))
    finally:
        listener.close()
    assert r.status.value == "passed", r.message
    # the job's disk of its own, where the judge is root (runner/containment/jobdisk.py)
    assert r.isolation["disk_bytes"] == (SandboxLimits().disk_bytes if os.geteuid() == 0 else None)
    said = [line for line in r.logs["stdout"].splitlines() if line.startswith("[probe]")]
    assert listener.connections == [] and any("socket refused" in line for line in said), said
    assert "[probe] cgroup tree []" in said or any("cgroup tree refused" in line for line in said), said
    assert any(line.startswith("[probe] segment ") and not line.endswith(" -1") for line in said), said
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.shmget(key, 0, 0) == -1, "the job's System V segment outlived it, visible to the host"


@pytest.mark.skipif(os.geteuid() != 0, reason="a job's disk of its own is a tmpfs the judge mounts: root only")
def test_a_jobs_disk_is_bounded_as_a_whole(double, options) -> None:
    """The working folder is a disk of ``disk_bytes``: a flood of files each under the per-file
    limit stops there with ENOSPC, and the job still gets its verdict; nothing is left mounted."""
    limits = SandboxLimits(disk_bytes=64 << 20)
    r = _run(double, _attack("gemm", "disk_flood"), _options(options, limits=limits))
    assert r.status.value == "error" and "errno 28" in r.message, r.message  # ENOSPC
    written = int(r.message.split("refused after ")[1].split(" MiB")[0])
    assert 32 <= written <= 64, r.message
    assert list(options.scratch_dir.iterdir()) == []
    assert str(options.scratch_dir) not in Path("/proc/self/mountinfo").read_text()


def test_remove_tree_unlinks_links_and_reopens_locked_folders(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    job = tmp_path / "job"
    (job / "locked" / "inner").mkdir(parents=True)
    (job / "locked" / "inner" / "f").write_text("x")
    (job / "link").symlink_to(target)
    (job / "locked" / "link").symlink_to(target / "keep.txt")
    os.chmod(job / "locked", 0)
    remove_tree(job)
    assert not job.exists()
    assert (target / "keep.txt").read_text() == "precious"


def test_a_child_leaving_a_deep_folder_chain_still_gets_its_verdict(double, options) -> None:
    """3,000 nested folders and a locked one at the bottom (``shutil.rmtree`` on Python 3.11 raises
    RecursionError; a descriptor per level would pass the usual 1,024 open files): the verdict
    stands and the folder is gone."""
    r = _run(double, _attack("softmax", "deep_folder_chain"), options)
    assert r.status.value == "error" and "folder chain 3,000 deep" in r.message, r.message
    assert list(options.scratch_dir.iterdir()) == []


# -- countermeasures -------------------------------------------------------------------------------
def test_output_aliasing_an_input_fails(double, options) -> None:
    r = _run(double, submission("alias_input.py"), options)
    assert r.status.value == "failed", r.message
    assert "shares memory with an input" in r.message


def test_replayed_output_fails(double, options) -> None:
    """Replays its cached output, keyed by the input's address: every input set is placed at the
    same address of the shared slots, so the replay is caught as wrong values in test mode, and
    as the same object in benchmark mode (the same inputs on every call)."""
    r = _run(double, submission("replay_cached.py"), options)
    assert r.status.value == "failed" and "test case 1" in r.message, r.message
    r = _run(double, submission("replay_cached.py"), options, mode="benchmark")
    assert r.status.value == "failed", r.message
    assert "same tensor object as the previous call" in r.message


def test_output_cached_by_input_identity_fails_on_every_run(double, options) -> None:
    """Replays its cached output, keyed by ``id()`` of the input tensor: the child hands the
    kernel the same tensor object on every call, re-pointed at that call's slot, so the replay
    comes back on the second call of every run (not only when CPython happens to reuse a freed
    object's address): wrong values in test mode, the same object in benchmark mode."""
    for _ in range(2):
        r = _run(double, submission("replay_by_identity.py"), options)
        assert r.status.value == "failed" and "test case 1" in r.message, r.message
    r = _run(double, submission("replay_by_identity.py"), options, mode="benchmark")
    assert r.status.value == "failed", r.message
    assert "same tensor object as the previous call" in r.message


@pytest.mark.parametrize("name", ["thread_left.py", "process_left.py"])
def test_threads_and_processes_left_running_are_contained(double, options, name) -> None:
    """Threads and processes a submission keeps between calls are not cheating by themselves
    (libraries keep idle pools): the job's cgroup is frozen between calls, and clean-up ends
    every process of it."""
    r = _run(double, submission(name), options)
    assert r.status.value == "passed", r.message
    assert r.isolation["containment"] in ("v1", "v2", "hybrid") and r.isolation["cleanup"] == "by cgroup"


def test_replaced_functions_are_rejected(double, options) -> None:
    r = _run(double, submission("tamper_clock.py"), options)
    assert r.status.value == "rejected", r.message
    assert "time.perf_counter_ns" in r.message and "torch.Tensor.detach" in r.message


def test_a_retaken_tripwire_record_is_still_rejected(double, options) -> None:
    """The child's record re-taken after the patch: the fingerprint of the watched objects differs
    from the one the child sent before the submission was imported."""
    r = _run(double, submission("tamper_retake_record.py"), options)
    assert r.status.value == "rejected", r.message
    assert "no longer those it started with" in r.message and "loading the submission" in r.message


def test_no_submitted_code_runs_in_the_childs_own_bookkeeping(double, options) -> None:
    """Modes the submission leaves active between calls (``TorchFunctionMode``,
    ``TorchDispatchMode``) see none of the child's own torch calls around a call: nothing the
    judge's side does between the go-ahead and the clock can trigger submitted code."""
    r = _run(double, submission("mode_between_calls.py"), options, mode="benchmark")
    assert r.status.value == "passed", f"{r.message}\n{r.logs['stdout'][-1500:]}"


def test_outputs_are_let_go_inside_the_clock(double, options) -> None:
    """Finalizers on a submission's outputs and their storages (the previous call's, and those
    the judge read in place) fire inside the next call's clock, never in the child's bookkeeping
    before it: nothing of the submission's runs between the go-ahead and the clock."""
    r = _run(double, submission("finalizer_outside_clock.py"), options, mode="benchmark")
    assert r.status.value == "passed", f"{r.message}\n{r.logs['stdout'][-1500:]}"


def test_speedup_beyond_the_bound_needs_review(double, options) -> None:
    """A reference made 20 ms slower (busy, as a kernel is): the submission's speedup is far
    beyond a bound of 2x."""
    slow_reference = double.spec().reference_source.replace(
        '    return data[0] * 2\n',
        '    import time\n    end = time.perf_counter() + 0.02\n    while time.perf_counter() < end:\n        pass\n'
        '    return data[0] * 2\n')
    assert slow_reference != double.spec().reference_source
    definition = double.definition.model_copy(update={"review_speedup": 2.0})
    spec = double.spec().__class__(definition, slow_reference, "slow-reference")
    r = evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", _options(options, threads=1))
    assert r.status.value == "passed", r.message
    assert r.needs_review and "review bound of 2.00×" in r.review_reason
    assert r.to_dict()["needs_review"] is True


def test_ordinary_speedup_needs_no_review(double, options) -> None:
    r = _run(double, submission("double_ok.py"), options, mode="benchmark")
    assert r.status.value == "passed", r.message
    assert not r.needs_review and r.review_reason is None


def test_cpu_figures_cover_the_sandboxs_baseline_processes() -> None:
    """Without a cgroup, a process the submission started at import is in the judge's baseline,
    and its threads' CPU time is the job's (what the judge reads around the other side's calls)."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from kernelrank.runner.containment.sandbox import SubmissionProcess

    busy = "import time\nend = time.time() + 30\nprint('ready', flush=True)\nwhile time.time() < end: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        child, helper = procs

        def cpu(processes: set[int]) -> int:
            holder = SimpleNamespace(proc=child, pid=child.pid, group=None, _processes=processes)
            holder._tasks = lambda: SubmissionProcess._tasks(holder)  # type: ignore[arg-type]
            return SubmissionProcess.cpu_ns(holder)  # type: ignore[arg-type]

        both, alone = cpu({child.pid, helper.pid}), cpu(set())
        assert both > alone > 0
        time.sleep(0.2)
        assert cpu({child.pid, helper.pid}) > both  # two busy processes: seen growing
        main = SimpleNamespace(pid=child.pid)
        assert SubmissionProcess.main_cpu_ns(main) > 0  # type: ignore[arg-type]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_prepared_process_grows_no_memory_in_its_first_timed_request(tmp_path: Path) -> None:
    """Faults are the kernel's count (``SubmissionProcess.faults``), not the child's word. A
    process that holds five fresh 16 MiB outputs in one request grows its heap, and maps its
    larger slots, in page faults inside that request; the same request after the judge's
    ``reserve`` (its slots mapped at their size with their pages in, its heap given that much
    free memory, faulted in) needs next to none, so it can be counted from the start."""
    import torch

    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.containment.sandbox import SubmissionProcess
    from kernelrank.runner.timing import WARM_FAULTS_PER_CALL

    source = "def custom_kernel(data):\n    return data[0] * 2\n"
    x = torch.randn(1024, 4096)
    sets = [(x,)] * 5
    faults = {}
    for reserve in (False, True):
        child = SubmissionProcess(source, "cpu", 2, scratch_dir=tmp_path / str(reserve),
                                  method=isolation_check.choose("auto")[0], limits=SandboxLimits().resolved("cpu", 60.0))
        try:
            deadline = time.monotonic() + 60
            child.start(deadline)
            assert child.request({"op": "load"}, deadline)["ok"]
            direct = child.memory is not None
            one = child.arena.place(sets[0], 2 * x.numel() * 4, direct=direct)
            assert child.request({"op": "go", "inputs": one, "repeat": 3, "direct": direct}, deadline)["ok"]
            if reserve:
                size = child.arena.grow(5 * x.numel() * 4)
                reply = child.request({"op": "reserve", "size": size, "heap": 5 * 3 * x.numel() * 4}, deadline)
                assert reply["ok"] and reply["reserved"] >= 5 * 3 * x.numel() * 4
            layout = child.arena.place_sets(sets, 2 * x.numel() * 4, direct=direct)
            before = child.faults()
            reply = child.request({"op": "go", "inputs": layout, "direct": direct}, deadline)
            after = child.faults()
            assert reply["ok"] and before is not None and after is not None
            faults[reserve] = after - before
        finally:
            child.close()
    assert faults[False] > 4 * 4096, faults  # four more outputs of 4096 pages each, at least
    assert faults[True] <= 5 * WARM_FAULTS_PER_CALL, faults


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to choose between")
def test_the_judge_waits_for_an_answer_on_the_childs_main_cpu(tmp_path: Path) -> None:
    """The child's main thread is bound to one CPU (OpenMP's binding); the judge's thread waits
    for each answer there, not on the CPU where the child's OpenMP worker spin-waits after a
    call, and gets its own CPUs back after the request."""
    import torch

    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.containment.sandbox import SubmissionProcess

    child = SubmissionProcess("def custom_kernel(data):\n    return data[0] * 2\n", "cpu", 2,
                              scratch_dir=tmp_path, method=isolation_check.choose("auto")[0],
                              limits=SandboxLimits().resolved("cpu", 60.0))
    mine = os.sched_getaffinity(0)
    try:
        deadline = time.monotonic() + 60
        child.start(deadline)
        with open(f"/proc/{child.pid}/task/{child.pid}/status", encoding="ascii") as f:
            allowed = next(line for line in f if line.startswith("Cpus_allowed_list:")).split(":")[1].strip()
        assert child.home_cpu is not None and str(child.home_cpu) == allowed
        seen = []
        recv = child.channel.recv

        def watching(*args, **kwargs):
            seen.append(os.sched_getaffinity(0))
            return recv(*args, **kwargs)

        child.channel.recv = watching  # type: ignore[method-assign]
        assert child.request({"op": "load"}, deadline)["ok"]
        layout = child.arena.place((torch.ones(1000),), 8000, direct=child.memory is not None)
        assert child.request({"op": "go", "inputs": layout, "direct": child.memory is not None}, deadline)["ok"]
        assert seen == [{child.home_cpu}] * 2
        assert os.sched_getaffinity(0) == mine
    finally:
        child.close()


def test_the_sweep_removes_what_gone_judges_left_and_nothing_of_live_ones(tmp_path: Path) -> None:
    """Job folders carry their judge's pid; :func:`jobdisk.sweep` unmounts and removes those of
    judges that are gone (a deep chain inside, a tmpfs still mounted where root) and leaves live ones."""
    from kernelrank.runner.containment import jobdisk

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    gone, live = tmp_path / f"kr-job-{dead}-abc", tmp_path / f"{jobdisk.folder_prefix()}xyz"
    for folder in (gone, live):
        folder.mkdir()
    mounted = jobdisk.mount(gone, 16 << 20)
    chain = gone
    for _ in range(50):
        chain = chain / "d"
    chain.mkdir(parents=True)
    assert jobdisk.sweep(tmp_path) == 1
    assert not gone.exists() and live.is_dir()
    if mounted:
        assert str(gone) not in Path("/proc/self/mountinfo").read_text()
