"""What a runner's host does to timing, measured in a process of its own: how long fresh memory takes to
fault in (a VM whose host took memory back), and how far the host's moments move a kernel's speed
beside another's (the CPU time stolen by the hypervisor among them). The self-test's rows
(:mod:`kernelrank.runner.host.selftest`) read these figures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


#: Fresh memory (ms per MiB) above which the self-test's row says what it costs: bare metal zeroes
#: a huge page's worth in about 0.1 ms (0.05 ms per MiB); a VM can take 1.4-2.3 ms per MiB for
#: memory its host had taken back (docs/research/bench-history.md, section 17).
FRESH_MEMORY_SLOW_MS_PER_MIB = 0.5


#: Bytes of fresh memory :func:`measure_fresh_memory` faults in.
FRESH_MEMORY_BYTES = 64 * 1024 * 1024


def measure_fresh_memory(nbytes: int = FRESH_MEMORY_BYTES) -> float:
    """Milliseconds per MiB that this process takes to fault in ``nbytes`` of fresh anonymous
    memory, advised for huge pages as a child's reserved heap is
    (:func:`~kernelrank.runner.submission.steady.reserve_heap`: ``MADV_HUGEPAGE``, then
    ``MADV_POPULATE_WRITE``; a write per page where the kernel lacks the latter). Memory this
    process freed a moment ago comes back already backed (0.04 ms per MiB on the VM where
    fresh memory took 1.4-2.3): :func:`fresh_memory_in_new_process` measures what a child meets.

    Raises:
        OSError: the memory could not be mapped.
    """
    import mmap

    from kernelrank.runner.slotformat import MADV_HUGEPAGE, MADV_POPULATE_WRITE

    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        try:
            m.madvise(MADV_HUGEPAGE)
        except OSError:
            pass  # transparent huge pages off: small pages, as the children get
        started = time.perf_counter_ns()
        try:
            m.madvise(MADV_POPULATE_WRITE)
        except OSError:
            for offset in range(0, nbytes, mmap.PAGESIZE):
                m[offset] = 1
        elapsed = time.perf_counter_ns() - started
    finally:
        m.close()
    return elapsed / 1e6 / (nbytes / 2**20)


def fresh_memory_in_new_process(timeout_s: float = 60.0) -> float:
    """:func:`measure_fresh_memory` in a new Python process: its first mapping, as a child's first
    requests meet fresh memory (this process's own freed memory would come back backed). The
    figure is what the host gives at that moment, and may move 30-fold within hours on a VM with
    free page reporting (docs/research/bench-history.md, section 17).

    Raises:
        RuntimeError: the process failed or printed no figure.
    """
    import subprocess

    code = "from kernelrank.runner.host.hostprobe import measure_fresh_memory; print(measure_fresh_memory())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False)
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"the fresh-memory probe failed (exit {done.returncode}): {done.stderr[-300:]}") from None


#: Standard deviation of the log of a speedup from one moment to the next (:func:`measure_host_moments`)
#: above which the self-test's row says what it costs: sides on the same vector units read
#: 2.5-3.8%, sides on different units (bfloat16 AMX against float32 AVX-512) 9-19%, enough to spread
#: five scores of one file by 1.05-1.10 however long they are timed (docs/research/bench-history.md,
#: sections 22-23).
HOST_MOMENTS_NOISY = 0.05


#: Turns of :func:`measure_host_moments`, and the seconds of pairs each turn takes: moments on that
#: VM lasted from a tenth of a second to several seconds, so the probe spans a few seconds.
HOST_MOMENTS_TURNS = 16


HOST_MOMENTS_TURN_S = 0.25


def cpu_ticks() -> tuple[int, int]:
    """``(steal, total)`` clock ticks of all CPUs so far (``/proc/stat``'s ``cpu`` line; steal is
    time the hypervisor ran something else while this machine's vCPU wanted to run); ``(0, 0)``
    where ``/proc/stat`` cannot be read."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (values[7] if len(values) > 7 else 0), sum(values[:8])


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Steal's share of the CPUs' time between two :func:`cpu_ticks` readings (0 to 1; 0 when no
    tick passed)."""
    total = after[1] - before[1]
    return 0.0 if total <= 0 else (after[0] - before[0]) / total


def measure_host_moments(turns: int = HOST_MOMENTS_TURNS, turn_s: float = HOST_MOMENTS_TURN_S) -> tuple[float, float]:
    """How much this machine's moments move the speedup of one kernel over another that uses the
    hardware differently: ``(sd, steal)``.

    Two kernels alternate call by call on the same ``[256, 256]`` bfloat16 operands: ``torch.mm``
    in bfloat16 (oneDNN; AMX or AVX-512 bfloat16 where the CPU has them; the GEMM problem's
    reference) and the float32 formula ``(a.float() @ b.float()).to(torch.bfloat16)`` (float32
    ``sgemm`` and conversions, as a kernel that leaves the matrix units alone computes). Each turn
    of ``turn_s`` seconds gives a speedup, the ratio of the two kernels' median times. ``sd`` is
    the standard deviation of the logs of the ``turns`` speedups (0.05 is about ±5% from one
    moment to the next): pairing cancels a moment only where it slows both
    sides alike, and this is the part it does not cancel (``docs/research/studies/host_stretches.py`` measures
    the same with a problem's own kernels). ``steal`` is the share of the CPUs' time, 0 to 1,
    that the hypervisor gave to others meanwhile (``/proc/stat``): a large ``sd`` with little
    steal is the host's shared hardware (a core's other hyperthread, its vector and matrix units,
    its clock, the memory), not this machine's CPUs waiting.

    Raises:
        ValueError: ``turns`` below 2 or ``turn_s`` not positive.
    """
    import math
    import statistics

    import torch

    if turns < 2 or turn_s <= 0:
        raise ValueError("need at least 2 turns of a positive length")

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=gen).to(torch.bfloat16)
    b = torch.randn(256, 256, generator=gen).div_(16.0).to(torch.bfloat16)
    kernels = (lambda: torch.mm(a, b), lambda: (a.float() @ b.float()).to(torch.bfloat16))
    for _ in range(20):  # warm-up: oneDNN's primitives, the OpenMP team
        for kernel in kernels:
            kernel()
    before = cpu_ticks()
    logs = []
    for _ in range(turns):
        times: tuple[list[int], list[int]] = ([], [])
        end = time.perf_counter() + turn_s
        while time.perf_counter() < end or len(times[0]) < 3:
            for kernel, spent in zip(kernels, times):
                started = time.perf_counter_ns()
                kernel()
                spent.append(time.perf_counter_ns() - started)
        logs.append(math.log(statistics.median(times[1]) / statistics.median(times[0])))
    return statistics.pstdev(logs), steal_share(before, cpu_ticks())


def host_moments_in_new_process(turns: int = HOST_MOMENTS_TURNS, turn_s: float = HOST_MOMENTS_TURN_S,
                                timeout_s: float = 120.0) -> tuple[float, float]:
    """:func:`measure_host_moments` in a new Python process whose OpenMP threads are bound as the
    children's are (:func:`~kernelrank.runner.containment.childenv.child_environment`: one per CPU, huge-page
    allocations), so that it meets the machine as a timed call does.

    Raises:
        RuntimeError: the process failed or printed no figures.
    """
    import subprocess

    from kernelrank.runner.host.devices import cpu_threads
    from kernelrank.runner.containment.childenv import child_environment

    child = child_environment(Path(tempfile.gettempdir()), "cpu", cpu_threads())  # only its thread settings are used
    env = {**os.environ, **{k: v for k, v in child.items() if k.startswith(("OMP_", "MKL_", "THP_"))}}
    code = ("from kernelrank.runner.host.hostprobe import measure_host_moments; "
            f"print(*measure_host_moments({int(turns)}, {float(turn_s)!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                          check=False, env=env)
    try:
        sd, steal = (float(v) for v in done.stdout.strip().splitlines()[-1].split())
    except (ValueError, IndexError):
        raise RuntimeError(f"the host-moments probe failed (exit {done.returncode}): {done.stderr[-300:]}") from None
    return sd, steal
