"""What keeps a process that times kernels steady, the judge's and the child's alike: glibc's
allocator thresholds fixed (no fresh pages per large block), vector math resolved before the
first timed call, and a heap reserved in faulted pages.
"""

from __future__ import annotations

import functools
import os
from typing import Any


#: glibc ``mallopt`` parameters (malloc.h) and the values the child sets before torch loads.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Largest block glibc serves from its heap rather than a fresh ``mmap`` (its own ceiling on
#: 64-bit: ``DEFAULT_MMAP_THRESHOLD_MAX`` = 32 MiB).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Free heap memory glibc keeps instead of returning it to the system (``mallopt`` takes a C
#: ``int``: its largest value, 2 GiB).
TRIM_THRESHOLD_BYTES = 2**31 - 1


def steady_allocator() -> bool:
    """Make memory allocation cost the same on every timed call; returns whether it was set.

    By default glibc serves a large block (an output tensor of a few MiB) with a fresh ``mmap``
    and returns it to the system on free, then raises its thresholds by itself as the process
    goes: early calls pay a page fault per 4 KiB of output (6.5 ms against 2 ms for a
    16 MiB softmax output) and later calls do not, at a moment that
    varies from process to process. With fixed thresholds (which also turns glibc's adjustment
    off) blocks up to 32 MiB come from the heap and freed memory is kept, as in a long-running
    process like the one ``torch.utils.benchmark.Timer`` measures in. Not glibc (e.g. musl):
    nothing is changed.
    """
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


#: torch's CPU unary operations that MKL's vector math (VML) computes in builds with MKL (ATen's
#: ``cpu/vml.h``, ``IMPLEMENT_VML_MKL``; the list differs between torch versions, so this is the
#: union), each for ``float32`` and ``float64``: what :func:`resolve_vector_math` calls once.
VML_OPERATIONS = ("abs", "acos", "asin", "atan", "cos", "cosh", "erf", "erfc", "erfinv", "exp", "expm1", "log",
                  "log10", "log1p", "log2", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")


@functools.lru_cache(maxsize=1)
def resolve_vector_math() -> tuple[str, ...]:
    """Call every operation of :data:`VML_OPERATIONS` once, in ``float32`` and ``float64``, on one
    element, on this thread; returns what was called (``"exp:float32"``, ...). Once per process.

    oneMKL picks each vector-math function's kernel lazily, on its first call. When that first call
    comes from several of torch's OpenMP threads at once (each computing its own part of a large
    tensor), one thread can run oneMKL's low-accuracy AVX2 "EP" kernel for its part although torch
    asks for high accuracy (``VML_HA``): about half the bits right (pytorch/pytorch#188792; oneMKL
    2024.2, which torch 2.13's wheels link; gone in 2025.0). An honest softmax
    failed its check so (the second thread's half of its first call, relative errors up to 1.8e-4)
    in 3 of 20 leaderboard runs beside a one-core hog (docs/research/bench-history.md, sections 19-20). A
    first call on one element, from one thread, before the submission runs, settles every choice.
    Without MKL (other builds, other platforms) the calls are merely cheap; no OpenMP thread starts
    (one element is below every parallel grain).
    """
    import torch

    done = []
    for dtype in (torch.float32, torch.float64):
        one = torch.full((1,), 0.5, dtype=dtype)
        for name in VML_OPERATIONS:
            getattr(torch, name)(one)
            done.append(f"{name}:{str(dtype).removeprefix('torch.')}")
    return tuple(done)


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library (``ctypes.CDLL``, errno kept), or ``None``. Looked up once: ``find_library``
    runs ``ldconfig`` or a compiler, tens of ms."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


#: Size of the blocks :func:`reserve_heap` takes from glibc: under :data:`MMAP_THRESHOLD_BYTES`,
#: so they come from the heap and stay there once freed.
_RESERVE_BLOCK_BYTES = 16 * 1024 * 1024


def reserve_heap(nbytes: int) -> int:
    """Take ``nbytes`` from the process's heap (growing it where it must), fault the pages in, and
    give them back to glibc, which keeps them (:func:`steady_allocator`); returns the bytes
    reserved (0 where glibc is not the allocator).

    Blocks of :data:`_RESERVE_BLOCK_BYTES` are allocated together, advised ``MADV_HUGEPAGE`` (so
    that PyTorch's large blocks, advised alike under the child's ``THP_MEM_ALLOC_ENABLE``
    (:func:`~kernelrank.runner.containment.childenv.child_environment`), find huge pages there from the first
    call, not small ones that ``khugepaged`` would collapse in the middle of a run; ignored where
    the host has transparent huge pages off), faulted in (``madvise``'s
    ``MADV_POPULATE_WRITE``: about 1.2 µs a page here, half the cost of touching each page; a
    ``memset`` where the kernel lacks it), then freed: the heap's free memory then holds that
    many bytes of mapped pages, so allocations a kernel's calls make within it never fault. The
    judge asks for about what a timed request's calls hold at once (their outputs, until it has
    read them) before a case's first timed request (``harness._Evaluation._reserve``): otherwise
    each process grew its heap in page faults over its first requests, and again now and then
    later as the held outputs and a kernel's temporaries left the heap fragmented (a process's
    16 MiB of new pages: 4096 faults, ~20 ms, in one call of 1.3 ms).
    """
    import ctypes

    from kernelrank.runner.slotformat import MADV_HUGEPAGE, MADV_POPULATE_WRITE

    libc = _libc()
    if nbytes <= 0 or libc is None:
        return 0
    try:
        malloc, free, madvise = libc.malloc, libc.free, libc.madvise
    except AttributeError:
        return 0
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = os.sysconf("SC_PAGE_SIZE")
    blocks = []
    try:
        for _ in range(-(-nbytes // _RESERVE_BLOCK_BYTES)):
            address = malloc(_RESERVE_BLOCK_BYTES)
            if not address:
                break
            blocks.append(address)
            start = -(-address // page) * page
            length = (address + _RESERVE_BLOCK_BYTES - start) // page * page
            madvise(start, length, MADV_HUGEPAGE)  # fails harmlessly where THP is off
            if madvise(start, length, MADV_POPULATE_WRITE) != 0:
                ctypes.memset(address, 0, _RESERVE_BLOCK_BYTES)
    finally:
        for address in blocks:
            free(address)
    return len(blocks) * _RESERVE_BLOCK_BYTES

