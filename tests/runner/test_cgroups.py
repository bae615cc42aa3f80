"""Per-job cgroups (runner/containment/cgroups.py): layouts, freezing, killing, limits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelrank.runner.containment import cgroups

LAYOUT = cgroups.detect()
needs_cgroups = pytest.mark.skipif(LAYOUT.freezer is None,
                                   reason="no writable cgroup freezer on this machine (not root, no delegation)")


def _cpu_ns(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def test_layouts_are_told_apart(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    assert cgroups.detect(str(v2)).name == "v2"
    assert set(cgroups.detect(str(v2)).controllers) == {"pids", "memory", "cpu"}
    hybrid = tmp_path / "hybrid"
    (hybrid / "unified").mkdir(parents=True)
    (hybrid / "unified" / "cgroup.procs").write_text("")
    for c in ("pids", "memory", "freezer"):
        (hybrid / c).mkdir()
    layout = cgroups.detect(str(hybrid))
    assert layout.name == "hybrid" and layout.freezer == ("v2", hybrid / "unified")
    assert set(layout.controllers) == {"pids", "memory"}
    v1 = tmp_path / "v1"
    for c in ("freezer", "pids"):
        (v1 / c).mkdir(parents=True)
    assert cgroups.detect(str(v1)).name == "v1"
    assert cgroups.detect(str(tmp_path / "nothing")).name == "none"


@needs_cgroups
def test_a_frozen_group_runs_nothing_and_is_killed_whole() -> None:
    """A busy process and a grandchild that left its session: frozen, neither uses CPU; thawed,
    they run again; killed, the group is empty (a zombie leader's live thread included)."""
    group = cgroups.JobGroup(f"test-{os.getpid()}-freeze", LAYOUT, pids_max=64)
    script = ("import os, threading, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    threading.Thread(target=lambda: [sum(range(1000)) for _ in iter(int, 1)]).start()\n"
              "    import ctypes; ctypes.CDLL(None).pthread_exit(None)\n"
              "while True: sum(range(1000))\n")
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files())
    proc = subprocess.Popen([sys.executable, "-c", join + script])
    try:
        deadline = time.monotonic() + 10
        while len(group.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = group.pids()
        assert len(members) >= 2 and proc.pid in members
        group.freeze()
        before = {p: _cpu_ns(p) for p in members}
        time.sleep(0.3)
        assert {p: _cpu_ns(p) for p in members} == before
        group.thaw()
        time.sleep(0.3)
        assert sum(_cpu_ns(p) for p in members) > sum(before.values())
        assert group.kill() == 0
        assert group.live_pids() == set()
        # the grandchild's leader is a zombie whose thread spun on: no thread of any member runs
        assert not any(cgroups._has_live_thread(p) for p in set(members) | group.pids())
        proc.wait(timeout=5)
    finally:
        group.kill()
        proc.kill()
        proc.wait()
        group.remove()


@needs_cgroups
def test_groups_of_dead_judges_are_swept() -> None:
    """A judge killed outright leaves its child frozen in its group; the next group made sweeps
    every group named after a judge pid that no longer exists, and leaves the others."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now (and unlikely to be reused within this test)
    stale = cgroups.JobGroup(f"job-{dead.pid}-1", LAYOUT, pids_max=16)
    mine = cgroups.JobGroup(f"job-{os.getpid()}-sweep", LAYOUT)
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in stale.procs_files())
    proc = subprocess.Popen([sys.executable, "-c", join + "while True: sum(range(1000))\n"])
    try:
        deadline = time.monotonic() + 10
        while not stale.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in stale.pids()
        stale.freeze()
        assert cgroups.sweep_stale(LAYOUT) == [stale.name]
        assert proc.wait(timeout=10) == -9
        assert not stale.freezer_dir.exists()
        assert mine.freezer_dir.exists()  # a live judge's group stays
    finally:
        proc.kill()
        proc.wait()
        for g in (stale, mine):
            g.kill()
            g.remove()


@needs_cgroups
@pytest.mark.skipif("pids" not in LAYOUT.controllers, reason="no pids controller on this machine")
def test_the_group_bounds_tasks() -> None:
    group = cgroups.JobGroup(f"test-{os.getpid()}-pids", LAYOUT, pids_max=8)
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files())
    script = join + ("import threading, time\nstarted = 0\n"
                     "try:\n"
                     "    for _ in range(32):\n"
                     "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start(); started += 1\n"
                     "except RuntimeError:\n    pass\nprint(started)\n")
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
        assert int(out.stdout.strip()) < 8, out
        assert group.limits["pids_max"] == 8
    finally:
        group.kill()
        group.remove()


@needs_cgroups
def test_the_isolation_record_names_the_containment(double, options) -> None:
    from kernelrank.runner.judge.harness import evaluate

    r = evaluate(double.spec(), "def custom_kernel(data):\n    return data[0] * 2\n", "test", "cpu", options)
    assert r.status.value == "passed", r.message
    assert r.isolation["containment"] == LAYOUT.name and r.isolation["cleanup"] == "by cgroup"
    if r.isolation["method"] != "none":
        assert r.isolation["pid_namespace"] is True


_READ_ONLY_TREE = """set -e
for m in $(awk '$5 ~ "^/sys/fs/cgroup" {print $5}' /proc/self/mountinfo); do mount -o remount,bind,ro "$m"; done
exec "$@"
"""


@needs_cgroups
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/unshare").exists(), reason="needs root and unshare")
def test_a_read_only_cgroup_tree_is_one_problem_that_names_the_fix() -> None:
    """Docker's default: the cgroup tree mounted read-only. Here every cgroup mount is remounted
    read-only in a mount namespace of the probe's own; the same probe on the real tree finds none."""
    probe = "from kernelrank.runner.containment import cgroups; print(cgroups.containment_problem())"
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _READ_ONLY_TREE, "sh",
                          sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    problem = out.stdout.strip()
    assert problem.startswith("the runner cannot make job cgroups") and "leaderboard jobs are refused" in problem
    assert "`cgroup: private`" in problem and "Delegate=yes" in problem
    assert cgroups.containment_problem() is None  # the real tree: a probe group made and removed
    assert not any((mount / cgroups.PARENT / f"probe-{os.getpid()}").exists()
                   for mount in [LAYOUT.freezer[1], *(m for _k, m in LAYOUT.controllers.values())])


def test_no_tree_at_all_is_a_problem(tmp_path: Path) -> None:
    assert "nothing under" in (cgroups.containment_problem(str(tmp_path / "absent")) or "")
    cgroups.detect.cache_clear()


def test_a_limit_without_its_controller_says_why_the_controller_is_missing(tmp_path: Path) -> None:
    """cgroup v2 in a container whose own group holds processes: enabling ``+pids`` for the subtree
    fails (EBUSY), the job group has no ``pids.max``, and the limit's error carries the reason."""
    root = tmp_path / "v2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("pids memory\n")
    (root / "cgroup.subtree_control").mkdir()  # a write into it fails, as EBUSY would
    layout = cgroups.detect(str(root))
    group = cgroups.JobGroup("probe-1", layout)
    assert set(group.enable_errors) == {"pids", "memory"}
    (group.freezer_dir / "pids.max").mkdir()  # the limit's file cannot be written
    with pytest.raises(cgroups.CgroupError, match=r"pids controller could not be enabled: \+pids into .*_control"):
        group._write_limit("pids", "pids.max", "8")
    cgroups.detect.cache_clear()


@needs_cgroups
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/unshare").exists(), reason="needs root and unshare")
def test_the_runner_containers_entrypoint_makes_a_read_only_tree_usable() -> None:
    """deploy/runner-entrypoint.sh (the compose runners' entrypoint) remounts the read-only cgroup
    tree read-write in its own mount namespace; after it, the runner's start-up check finds no problem."""
    entrypoint = Path(__file__).resolve().parents[2] / "deploy" / "runner-entrypoint.sh"
    probe = "from kernelrank.runner.containment import cgroups; print(cgroups.containment_problem())"
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _READ_ONLY_TREE, "sh",
                          str(entrypoint), sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "None", (out.stdout, out.stderr)
