"""The environment of the child that runs submitted code: the variables it gets, and nothing else
of the judge's (no secrets: only :data:`ENV_ALLOWLIST` passes through)."""

from __future__ import annotations

import os
from pathlib import Path

from kernelrank.runner.containment.procfs import host_huge_pages
from kernelrank.vocab import DeviceClass

#: Variables passed through from the judge's environment when set; everything else is dropped.
ENV_ALLOWLIST = (
    "PATH", "LANG", "LC_ALL", "TZ", "CC", "CXX", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
    "VIRTUAL_ENV",
)
#: The child's user name (``USER``, ``LOGNAME``): libraries that name caches after the user
#: (``getpass.getuser()``, e.g. torch inductor's) fail for a uid with no account.
SANDBOX_USER = "kernelrank-sandbox"


def child_environment(workdir: Path, device: str, threads: int, source_env: dict[str, str] | None = None,
                      build_dir: str | None = None) -> dict[str, str]:
    """The child's whole environment: allowlisted variables plus its own folders and settings.

    ``TRITON_INTERPRET=1`` on the CPU device runs Triton kernels under Triton's interpreter;
    ``TORCH_EXTENSIONS_DIR`` gives C++/CUDA builds a per-process build folder (``build_dir``, where
    the child sees it, :data:`~kernelrank.runner.containment.isolation.BUILD_VIEW`; else the folder's
    ``build``). OpenMP keeps
    its default spin-wait: idle threads that sleep at once make every call after a pause pay for
    waking them (a softmax 2x slower after 30 ms of idle threads). OpenMP's
    threads are bound one per CPU (``OMP_PROC_BIND=close``, ``OMP_PLACES=threads``; the main
    thread on the first CPU the child may use): unbound, the child's main thread and its OpenMP
    worker were often left sharing one CPU while the other stood idle after the judge's thread
    went to sleep there, for 4-12 ms until the kernel's balancer moved one (15-20% of a softmax's
    calls took 4x their time, and per-request log ratios had a standard deviation of 0.5-0.8
    against 0.03-0.1 bound: ``docs/research/bench-history.md``). Threads a submission starts itself,
    outside OpenMP, inherit the main thread's CPU.

    Where the host lets transparent huge pages back advised memory (:func:`host_huge_pages`:
    ``madvise`` or ``always``), ``THP_MEM_ALLOC_ENABLE=1`` makes PyTorch's CPU allocator align
    every block of 2 MiB or more to a page and advise it ``MADV_HUGEPAGE``;
    :func:`~kernelrank.runner.submission.steady.reserve_heap` advises the reserved heap alike. Without it,
    processes ran the bfloat16 softmax cases at one of two speeds each, 20-25% apart, for their
    life (the reference's and ``correct_pytorch``'s alike): the largest part of a run's interval
    and of the spread between runs. With it, they ran at one speed. Without huge pages (THP
    ``never``) the page alignment alone put every process in the slow mode, the reference's
    bfloat16 softmax 15-30% slower, so it is not asked for there (docs/research/bench-history.md, section 15).
    """
    src = os.environ if source_env is None else source_env
    env = {k: src[k] for k in ENV_ALLOWLIST if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    n = str(max(threads, 1))
    env.update({
        "HOME": str(workdir),
        "TMPDIR": str(workdir / "tmp"),
        "TORCH_EXTENSIONS_DIR": build_dir or str(workdir / "build"),
        "TRITON_CACHE_DIR": str(workdir / "triton-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor-cache"),
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
        "OMP_NUM_THREADS": n,
        "OMP_PROC_BIND": "close",  # one thread per CPU: see the docstring
        "OMP_PLACES": "threads",
        "MKL_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MAX_JOBS": n,
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
    })
    if host_huge_pages() in ("madvise", "always"):
        env["THP_MEM_ALLOC_ENABLE"] = "1"  # large blocks page-aligned, in huge pages: see the docstring
    if device == DeviceClass.cpu:
        env["TRITON_INTERPRET"] = "1"
    return env
