"""The self-test's rows about the host: the judge's clock and what contains a child.

Each ``*_check`` turns one measured fact into a :class:`Check` (a row of the table); most pass
either way and say in their detail what the fact costs (wider intervals, slower checking), since
every verdict holds on such hosts. :func:`measure_overhead` starts one probe child through the
same sandbox, freezer and socket as a job, and :func:`clock_rows` makes every row from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelrank import vocab
from kernelrank.runner.containment.cgroups import CONTAINMENT_FIX
from kernelrank.runner.host.hostprobe import (FRESH_MEMORY_SLOW_MS_PER_MIB, HOST_MOMENTS_NOISY,
                                              fresh_memory_in_new_process, host_moments_in_new_process)

@dataclass
class Check:
    """One row of the self-test's table."""

    group: str
    name: str
    mode: str
    expected: str
    got: str
    passed: bool
    seconds: float
    detail: str = ""


def priority_check(found: dict[str, Any] | None) -> Check:
    """The row for the children's scheduling priority (``isolation.priority`` of the probe's child,
    read from ``/proc`` by the judge: :func:`~kernelrank.runner.containment.procfs.priority`). The nice value
    :data:`~kernelrank.runner.containment.isolation.CHILD_NICE` on the child's thread, and on its autogroup where
    the kernel has autogroups on, is expected. Anything else passes with a note: every verdict
    holds and both sides of a pair are treated alike, but a timed call then shares its CPUs with
    the host's other work as an equal, so scores taken on a busy machine spread more
    (docs/research/bench-history.md, section 16). The usual cause is a judge not running as root (no
    ``CAP_SYS_NICE``)."""
    from kernelrank.runner.containment.isolation import CHILD_NICE

    found = found or {}
    nice, group = found.get("nice"), found.get("autogroup")
    ok = nice == CHILD_NICE and group in (None, CHILD_NICE)
    shown = f"nice {nice}" + (f", autogroup {group}" if group is not None else "")
    return Check("containment", "priority", "-", f"nice {CHILD_NICE}",
                 shown if ok else f"{shown} (not raised: timed calls share their CPUs with other work)", True, 0.0,
                 "" if ok else f"the children could not be given nice {CHILD_NICE} (CAP_SYS_NICE: run the runner "
                               "as root): on a busy machine, timed calls share their CPUs with the host's other "
                               "work as equals, so scores spread more; verdicts are the same")


def host_moments_check(sd: float, steal: float) -> Check:
    """The row for how much the host's moments move a speedup (:func:`measure_host_moments`). It
    passes either way: every verdict holds, and each score's interval carries what its run saw.
    Above :data:`HOST_MOMENTS_NOISY` the row says what that costs: kernels that use the hardware
    differently from their reference (a bfloat16 matmul against a float32 one) see their speedup
    move with the host's other work, by more than pairing cancels and over minutes as well as
    seconds, so one file's scores spread more between runs and more entries tie; a runner whose
    cores are its own (no other tenant on their hyperthreads) avoids it."""
    ok = sd <= HOST_MOMENTS_NOISY
    shown = f"speedup ±{sd * 100:.1f}% a moment, steal {steal * 100:.1f}%"
    return Check("judge's clock", "host moments", "-", f"< ±{HOST_MOMENTS_NOISY * 100:.0f}% a moment",
                 shown if ok else f"{shown} (the host's other work moves speedups)", True, 0.0,
                 "" if ok else "the host's moments move the speedup of kernels that use the hardware differently "
                               "(its other tenants share these cores' hyperthreads, vector and matrix units, clock or "
                               "memory): such kernels' scores spread more between runs and tie more often; give the "
                               "runner cores of its own for steadier figures; verdicts are the same")


def fresh_memory_check(ms_per_mib: float, reporting: bool | None) -> Check:
    """The row for what fresh memory costs a process here (:func:`measure_fresh_memory`) and
    whether the machine hands its free memory back to a hypervisor
    (:func:`~kernelrank.runner.containment.procfs.host_free_page_reporting`). It passes either way: every
    verdict and every paired speedup holds. Above :data:`FRESH_MEMORY_SLOW_MS_PER_MIB`, or with
    free page reporting on, the row says what that costs: each run's readying of its processes
    (their slots and heaps faulted in before the first timed request) takes seconds (3.4 s of a
    softmax leaderboard run), and memory-bound code may run up to 1.6x slower for minutes at a
    time, which moves such kernels' speedups (docs/research/bench-history.md, section 17)."""
    ok = ms_per_mib <= FRESH_MEMORY_SLOW_MS_PER_MIB and not reporting
    shown = f"{ms_per_mib:.2f} ms per MiB" + (", free page reporting on" if reporting else "")
    return Check("containment", "fresh memory", "-", f"< {FRESH_MEMORY_SLOW_MS_PER_MIB} ms per MiB",
                 shown if ok else f"{shown} (a VM whose host backs memory on first touch)", True, 0.0,
                 "" if ok else "fresh memory is backed by the host on first touch (a virtual machine with a memory "
                               "balloon's free page reporting, or memory not preallocated): each run spends seconds "
                               "readying its processes, and such hosts may run memory-bound code at other speeds for "
                               "minutes at a time; give the VM preallocated memory without free page reporting for "
                               "steadier figures; verdicts are the same")


def huge_pages_check(setting: str) -> Check:
    """The row for the host's transparent huge pages (``isolation.huge_pages``,
    :func:`~kernelrank.runner.containment.procfs.host_huge_pages`). ``madvise`` or ``always`` is expected:
    the children's large blocks are then huge pages
    (:func:`~kernelrank.runner.containment.childenv.child_environment`), and processes run a case at one
    speed. Any other setting passes with a note: every verdict holds, but processes may run the
    bfloat16 cases at one of two speeds, so intervals are wider and scores spread more (1.07
    against 1.04 at idle, docs/research/bench-history.md, section 15)."""
    ok = setting in ("madvise", "always")
    return Check("containment", "huge pages", "-", "madvise or always",
                 setting if ok else f"{setting} (processes may differ in speed: wider intervals)", True, 0.0,
                 "" if ok else "transparent huge pages are off: set /sys/kernel/mm/transparent_hugepage/enabled "
                               "to madvise for steadier timings")


#: ``shmem_enabled`` settings under which advised shared memory may be huge pages.
SHARED_HUGE_PAGES = ("advise", "always", "within_size", "force")


def shared_huge_pages_check(setting: str) -> Check:
    """The row for the host's huge pages for shared memory (``isolation.shared_huge_pages``:
    ``/sys/kernel/mm/transparent_hugepage/shmem_enabled``). ``advise`` (or any setting of
    :data:`SHARED_HUGE_PAGES`) is expected: the slots' memory file, which both sides advise
    (:func:`~kernelrank.runner.slotformat.advise_huge`), is then 2 MiB pages, and each timed
    process's slots fault in ~9x faster. Any other setting (the kernel's default is ``never``)
    passes with a note: every verdict and score holds, but a CPU run readies its processes about
    2 s slower (bench/README.md, *A ranked verdict's wall time*)."""
    ok = setting in SHARED_HUGE_PAGES
    return Check("containment", "slot huge pages", "-", "advise",
                 setting if ok else f"{setting} (slower readying)", True, 0.0,
                 "" if ok else "huge pages for shared memory are off: set "
                               "/sys/kernel/mm/transparent_hugepage/shmem_enabled to advise: a CPU run's processes "
                               "ready their slots ~2 s sooner")


def output_check_row(device: str) -> Check:
    """The row for how this judge decides the quick rule on CPU outputs
    (:func:`kernelrank.runner.judge.native_check.method`): ``native`` is expected (one pass, built with
    the host's C compiler); ``torch`` passes with a note (no compiler built it: the torch passes
    decide, the same verdicts, 3-6x slower, so fewer pairs fit a case's budget). On CUDA outputs
    are checked on the device by torch in any case."""
    from kernelrank.runner.judge import native_check

    if device != vocab.DeviceClass.cpu:
        return Check("judge's clock", "output check", "-", "torch on the device", "torch on the device", True, 0.0)
    got = native_check.method()
    return Check("judge's clock", "output check", "-", "native", got if got == "native" else f"{got} (slower)", True,
                 0.0, "" if got == "native" else
                 f"no C compiler built the native quick rule ({native_check.compiler() or 'none found'}): outputs "
                 "are checked by torch's passes, 3-6x slower, so fewer pairs fit a case's budget; verdicts are the same")


def output_reads_check(device: str, method: str | None) -> Check:
    """The row for how the judge reads a child's outputs (``isolation.output_reads`` of the probe's
    child, :class:`~kernelrank.runner.judge.slots.ChildMemory`). ``process_vm_readv`` is expected: each
    output is read where the child left it. Two fallbacks pass with a note, since every verdict
    holds on them but the checking is slower: ``/proc/<pid>/mem`` (the host refused the call: a
    seccomp profile, ``kernel.yama.ptrace_scope``; 16 MiB read in 4.3 ms instead of 1.7 ms,
    docs/research/bench-history.md, section 14) and ``slots`` (the child's memory unreadable either
    way: the child copies each output into its shared slots after its call; on CUDA outputs are
    device memory shared with the child in any case). Anything else fails."""
    got = method or "unknown"
    # per way that passes: what the row shows after its name, and its detail
    passing = {"process_vm_readv": ("", ""),
              "/proc/<pid>/mem": (" (process_vm_readv refused: about 2.5x slower)",
                                  "process_vm_readv was refused here (a seccomp profile, or ptrace_scope): outputs are "
                                  "read through /proc/<pid>/mem, about 2.5x slower; verdicts are the same"),
              "slots": ("", "") if device != vocab.DeviceClass.cpu else
                       (" (the child's memory unreadable: each output copied by the child, slower)",
                        "the child's memory could not be read: each output is copied into the shared slots by the "
                        "child after its call, a copy per output; verdicts are the same")}
    shown, detail = passing.get(got, ("", f"unknown way of reading outputs: {got}"))
    return Check("containment", "output reads", "-", "process_vm_readv", got + shown, got in passing, 0.0, detail)


#: Requests of a do-nothing call measured for the runner's overhead.
OVERHEAD_REQUESTS = 60
_NOOP = "def custom_kernel(data):\n    return data[0].clone()\n"


def measure_overhead(device: str, scratch: Path, requests: int = OVERHEAD_REQUESTS) -> tuple[Any, dict[str, Any]]:
    """The runner's per-request overhead (:func:`~kernelrank.runner.judge.judging.runner_overhead`) from
    ``go`` requests of a call that only copies a 4-element input, through the same sandbox,
    freezer and socket as a job; and the probe child's isolation record
    (:meth:`~kernelrank.runner.containment.sandbox.SubmissionProcess.start`), its ``host_memory`` what bounds
    the child's host memory (``"cgroup <n> bytes"``, ``"address space <n> bytes"`` or
    ``"unbounded"``), its ``output_reads`` how the judge reads the child's outputs and its
    ``priority`` the child's nice values.

    Raises:
        RuntimeError: the child did not answer as expected.
    """
    import torch

    from kernelrank.runner.containment import isolation_check
    from kernelrank.runner.containment.rlimits import SandboxLimits
    from kernelrank.runner.judge.judging import runner_overhead
    from kernelrank.runner.containment.procfs import host_memory_bound
    from kernelrank.runner.containment.sandbox import SubmissionProcess

    method, _ = isolation_check.choose("auto")
    child = SubmissionProcess(_NOOP, device, 1 if device == vocab.DeviceClass.cpu else 0, scratch_dir=scratch, method=method,
                              limits=SandboxLimits().resolved(device, 120.0))
    try:
        deadline = time.monotonic() + 120
        measured = child.start(deadline)
        reply = child.request({"op": "load"}, deadline)
        if not reply.get("ok"):
            raise RuntimeError(f"loading the probe failed: {reply.get('message')}")
        data = (torch.ones(4, device=device),)
        samples = []
        for _ in range(requests):
            layout = child.arena.place(data, 64)
            reply = child.request({"op": "go", "inputs": layout, "repeat": 1, "direct": child.memory is not None},
                                  deadline)
            if not reply.get("ok"):
                raise RuntimeError(f"the probe's call failed: {reply.get('message')}")
            samples.append(child.span_ns - sum(reply["times_ns"]))
        measured = dict(measured, host_memory=measured.get("host_memory") or host_memory_bound(measured))
        return runner_overhead(samples[len(samples) // 6:]), measured
    finally:
        child.close()


def sandbox_check(measured: dict[str, Any]) -> Check:
    """The row for the sandbox in force around the probe's child, read from ``/proc`` by the judge
    (:func:`~kernelrank.runner.containment.isolation_check.measure`): its isolation method, its
    own network and process namespaces, the read-only filesystem and the per-job cgroup, frozen
    outside the child's calls (the probe's requests went through the freezer). It fails where an
    isolation method was chosen but the child is not in its own network and process namespaces
    (a sandbox that does not hold what it planned); without namespaces or a cgroup at all it
    passes with a note, since the runner then refuses leaderboard jobs unless its operator allows
    them (``KERNELRANK_RUNNER_ALLOW_UNISOLATED_NETWORK``)."""
    method = str(measured.get("method") or "none")
    cgroup = str(measured.get("containment") or "none")
    namespaces = measured.get("network") == "netns" and bool(measured.get("pid_namespace"))
    parts = [method, "network and process namespaces" if namespaces else "no namespaces",
             str(measured.get("filesystem") or "?"),
             f"cgroup {cgroup}, frozen outside calls" if cgroup != "none" else "no cgroup"]
    held = method == "none" or namespaces
    whole = namespaces and cgroup != "none"
    return Check("containment", "sandbox", "-", "namespaces, cgroup, freezer", ", ".join(parts), held, 0.0,
                 "" if whole else
                 "the isolation method was chosen but the child shares the judge's namespaces" if not held else
                 "submitted code is not fully contained here (no namespaces or no cgroup): this runner refuses "
                 f"leaderboard jobs unless its operator allows them. Fix: {CONTAINMENT_FIX}")


def clock_rows(device: str, scratch: Path) -> tuple[list[Check], dict[str, Any]]:
    """Every host row, from one probe child (:func:`measure_overhead`) and two probes in new
    processes (fresh memory; on the CPU, the host's moments), and the facts a self-test's summary
    carries (``overhead``, ``host_memory``, ``output_reads``, ``priority``, ``fresh_memory``,
    ``host_moments``). A probe child that fails is a failed overhead row and ends the rows."""
    from kernelrank.runner.containment.procfs import host_free_page_reporting

    rows: list[Check] = []
    facts: dict[str, Any] = {}
    started = time.monotonic()
    try:
        overhead, measured = measure_overhead(device, scratch)
    except Exception as e:  # noqa: BLE001 - a failed probe is a failed row
        rows.append(Check("judge's clock", "per-request overhead", "-", "measured", "failed", False,
                          time.monotonic() - started, f"{type(e).__name__}: {e}"[:500]))
        return rows, facts
    memory = str(measured["host_memory"])
    facts.update(overhead=overhead.to_dict(), host_memory=memory, output_reads=str(measured.get("output_reads") or ""))
    rows.append(Check("judge's clock", "per-request overhead", "-", "measured",
                      f"{overhead.median_ns / 1e3:.0f} ± {overhead.spread_ns / 1e3:.0f} µs", True,
                      time.monotonic() - started))
    rows.append(sandbox_check(measured))
    rows.append(Check("containment", "host memory", "-", "bounded", memory,
                      memory.startswith("cgroup") or device == vocab.DeviceClass.cpu, 0.0,
                      "" if memory.startswith("cgroup") else
                      "no cgroup memory controller: on CUDA (no address-space limit) a memory bomb meets "
                      "the host's OOM killer"))
    rows.append(output_reads_check(device, facts["output_reads"] or None))
    rows.append(output_check_row(device))
    rows.append(huge_pages_check(str(measured.get("huge_pages") or "unknown")))
    rows.append(shared_huge_pages_check(str(measured.get("shared_huge_pages") or "unknown")))
    row = priority_check(measured.get("priority"))
    facts["priority"] = row.got
    rows.append(row)
    row = fresh_memory_check(fresh_memory_in_new_process(), host_free_page_reporting())
    facts["fresh_memory"] = row.got
    rows.append(row)
    if device == vocab.DeviceClass.cpu:
        started = time.monotonic()
        try:
            moments = host_moments_in_new_process()
        except Exception as e:  # noqa: BLE001 - a figure for the operator: the row passes either way
            rows.append(Check("judge's clock", "host moments", "-", "measured", "not measured", True,
                              time.monotonic() - started, f"{type(e).__name__}: {e}"[:500]))
        else:
            row = host_moments_check(*moments)
            row.seconds = time.monotonic() - started
            facts["host_moments"] = row.got
            rows.append(row)
    return rows, facts
