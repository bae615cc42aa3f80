"""A runner's ceilings: the memory copy bandwidth and the dense matmul rate per dtype it measures
on its own device when it starts, the denominators of each case's roofline share
(:mod:`kernelrank.roofline`).

Datasheet peaks are leads, not what a given machine, driver and torch build reach; a large copy
and a large matmul measured on the runner are the honest ceilings (as Proton's roofline and the
field's roofline plots use). One probe for every device class: the same buffers, sizes chosen
the same way, the same clock (``time.perf_counter_ns`` around a batch of calls, with the
device synchronised before and after: a no-op on the CPU, ``torch.cuda.synchronize`` on CUDA),
so a CPU figure and a GPU figure mean the same thing.

- **Copy bandwidth** (GB/s, 10^9 bytes per second): ``dst.copy_(src)`` of a buffer far larger than
  the last-level cache (:data:`COPY_BYTES`), counting the bytes read and written (``2 * bytes``,
  STREAM's "Copy" convention; a CPU's write-allocate traffic is not counted, as in STREAM).
- **Matmul rate** (TFLOP/s, 10^12 per second) per dtype in :data:`DTYPES`: ``a @ b`` of square
  ``n x n`` matrices, ``2 * n**3`` operations per call; ``n`` doubles from :data:`MATMUL_START`
  until one call takes :data:`MATMUL_CALL_S` or ``n`` reaches the device's largest size, so a
  slow dtype (bf16 on a CPU without bf16 units) is measured in milliseconds, not minutes. float32
  is plain fp32 (torch's default: no TF32 on CUDA).

Each figure is the best of several batches within a time budget (:data:`BUDGET_S` per figure):
the ceiling is what the machine can reach, so the fastest batch is the estimate.

Run as ``python -m kernelrank.runner.host.ceilings --device cpu --threads 4``: one JSON object on
stdout (what :func:`measure` returns). The runner does so in a subprocess when it starts
(``kernelrank.runner.worker.heartbeat_info``), before it takes a job, so nothing else of the
runner runs meanwhile and no CUDA or OpenMP state reaches the worker's processes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from kernelrank.vocab import DeviceClass

#: Dtypes whose dense matmul rate is measured (the dtypes problems state in their contracts).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
#: Bytes of the copied buffer: well past the last-level cache (CPUs: tens of MiB; H100 L2: 50 MiB).
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 1024 * 2**20}
#: Smallest matmul size tried, and the largest per device class.
MATMUL_START = 512
MATMUL_MAX = {"cpu": 2048, "cuda": 8192}
#: A matmul size is large enough once one call takes this long (seconds).
MATMUL_CALL_S = 0.05
#: Seconds of timed batches per figure (at least :data:`MIN_BATCHES` batches are timed).
BUDGET_S = 0.4
MIN_BATCHES = 3


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":  # pragma: no cover - GPU-only
        torch.cuda.synchronize(device)


def _best_rate(fn: Any, work: float, device: Any, budget_s: float) -> tuple[float, int]:
    """``(best work per second, batches)`` of ``fn`` over batches timed within ``budget_s``
    (at least :data:`MIN_BATCHES`); a batch is as many calls as fill ~1/10 of the budget."""
    fn()  # warm-up: allocation, kernel selection, thread pool start
    _sync(device)
    t0 = time.perf_counter_ns()
    fn()
    _sync(device)
    once = max(time.perf_counter_ns() - t0, 1) / 1e9
    calls = max(1, int(budget_s / 10 / once))
    best, batches, start = 0.0, 0, time.perf_counter()
    while batches < MIN_BATCHES or time.perf_counter() - start < budget_s:
        _sync(device)
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        _sync(device)
        elapsed = max(time.perf_counter_ns() - t0, 1) / 1e9
        best = max(best, work * calls / elapsed)
        batches += 1
    return best, batches


def copy_bandwidth(device: Any, nbytes: int, budget_s: float = BUDGET_S) -> float:
    """Copy bandwidth of ``device`` in GB/s: ``dst.copy_(src)`` of ``nbytes``-byte buffers,
    counting ``2 * nbytes`` (read and write) per copy; the best batch."""
    import torch

    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    rate, _ = _best_rate(lambda: dst.copy_(src), 2.0 * n * 4, device, budget_s)
    del src, dst
    return rate / 1e9


def matmul_rate(device: Any, dtype: str, largest: int, budget_s: float = BUDGET_S) -> tuple[float, int]:
    """``(TFLOP/s, n)``: the dense matmul rate of ``device`` in ``dtype`` on ``n x n`` matrices,
    ``n`` grown from :data:`MATMUL_START` (doubling, at most ``largest``) until one call takes
    :data:`MATMUL_CALL_S`; the best batch.

    Raises:
        RuntimeError: torch has no matmul for ``dtype`` on ``device``.
    """
    import torch

    dt = getattr(torch, dtype)
    n = MATMUL_START
    while True:
        a = torch.randn(n, n, device=device).to(dt)
        b = torch.randn(n, n, device=device).to(dt)
        _sync(device)
        t0 = time.perf_counter_ns()
        torch.matmul(a, b)
        _sync(device)
        t0 = time.perf_counter_ns()  # the first call warmed up; time the second
        torch.matmul(a, b)
        _sync(device)
        once = (time.perf_counter_ns() - t0) / 1e9
        if once >= MATMUL_CALL_S or n * 2 > largest:
            break
        n *= 2
    rate, _ = _best_rate(lambda: torch.matmul(a, b), 2.0 * n**3, device, budget_s)
    return rate / 1e12, n


def measure(device: str = DeviceClass.cpu, threads: int = 0, dtypes: tuple[str, ...] = DTYPES,
            copy_bytes: int | None = None, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Measure the ceilings of ``device`` (``"cpu"`` or ``"cuda"``: GPU 0) now.

    Args:
        device: the device class.
        threads: CPU intra-op threads (0: every core this process may use), as the runner's
            judge gives a kernel; ignored on CUDA.
        dtypes: matmul dtypes to measure (a dtype torch cannot multiply there is left out).
        copy_bytes: copied buffer size (default :data:`COPY_BYTES` of the device class).
        budget_s: seconds of timed batches per figure.

    Returns:
        ``{"device", "name", "threads", "copy_gbps", "matmul_tflops": {dtype: TFLOP/s},
        "matmul_n": {dtype: n}, "copy_bytes", "seconds", "method"}``: JSON-ready.

    Raises:
        ValueError: an unknown device class. RuntimeError: CUDA asked for and not usable.
    """
    import torch

    from kernelrank.runner.host.devices import cpu_threads, device_info

    if device not in COPY_BYTES:
        raise ValueError(f"unknown device {device!r}: cpu or cuda")
    started = time.perf_counter()
    info = device_info(device, threads)
    if device == DeviceClass.cpu:
        torch.set_num_threads(cpu_threads(threads))
    dev = torch.device("cuda", 0) if device == DeviceClass.cuda else torch.device("cpu")
    nbytes = copy_bytes or COPY_BYTES[device]
    out: dict[str, Any] = {"device": device, "name": info.name, "threads": info.threads,
                           "copy_gbps": copy_bandwidth(dev, nbytes, budget_s), "matmul_tflops": {},
                           "matmul_n": {}, "copy_bytes": nbytes}
    for dtype in dtypes:
        try:
            rate, n = matmul_rate(dev, dtype, MATMUL_MAX[device], budget_s)
        except (RuntimeError, TypeError, AttributeError):  # no kernel for this dtype here
            continue
        out["matmul_tflops"][dtype] = rate
        out["matmul_n"][dtype] = n
    out["seconds"] = round(time.perf_counter() - started, 3)
    out["method"] = ("best batch of dst.copy_(src) (2 x bytes per copy) and of n x n matmuls (2 n^3 flop), "
                     "timed with perf_counter_ns around device synchronisations")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m kernelrank.runner.host.ceilings``: print :func:`measure`'s result as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=sorted(COPY_BYTES))
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of timed batches per figure")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.device, args.threads, budget_s=args.budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
