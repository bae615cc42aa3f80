"""Reference for the ``gemm`` problem: ``c = a @ b`` in bfloat16 with float32 accumulation.

Data contract (see ``problems/gemm/problem.yaml``):

- ``data = (a, b)``: ``a`` is ``[M, K]`` bfloat16, ``b`` is ``[K, N]`` bfloat16, both contiguous
  (row-major) and on the run's device.
- output ``c``: ``[M, N]`` bfloat16, ``c[i, j] = sum_k a[i, k] * b[k, j]`` with the products and the
  sum carried in float32 and rounded to bfloat16 once at the end.

Roofline figures (the usual GEMM conventions, e.g. NVIDIA's "Matrix Multiplication Background"
guide, https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/):
``flops = 2*M*N*K`` (one multiply and one add per term) and the minimum traffic
``bytes = (M*K + K*N + M*N) * 2`` (read ``a`` and ``b`` once, write ``c`` once, 2 bytes per bf16).
"""

from __future__ import annotations

import math
import random

import torch

ELEM_SIZE = 2  # bytes per bfloat16 element


def generate_input(
    *, M: int, N: int, K: int, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``(a, b)`` for one case, deterministic for ``seed`` on a given device.

    ``a[i, k] ~ N(0, 1)`` and ``b[k, j] ~ N(0, 1) / sqrt(K)``, drawn in float32 and rounded to
    bfloat16. With that scaling every output ``c[i, j] = sum_k a[i, k] b[k, j]`` has variance
    ``K * 1 * (1/K) = 1`` whatever ``K`` is, so outputs are O(1): a relative-plus-absolute
    tolerance means the same thing for ``K = 1`` and ``K = 14336``, and an accumulator kept in
    bfloat16 (whose rounding error grows with ``K``) is caught on the large-``K`` cases.

    Args:
        M: rows of ``a`` and of the output.
        N: columns of ``b`` and of the output.
        K: the reduction length (columns of ``a``, rows of ``b``).
        seed: seed of a local ``torch.Generator`` (the global RNG is never touched).
        device: where to create the tensors (``"cpu"``, ``"cuda"``...).

    Returns:
        ``(a, b)``: ``a`` ``[M, K]`` and ``b`` ``[K, N]``, bfloat16, contiguous, on ``device``.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32)
    b = torch.randn(K, N, generator=gen, device=device, dtype=torch.float32)
    b.mul_(1.0 / math.sqrt(K))
    return a.to(torch.bfloat16).contiguous(), b.to(torch.bfloat16).contiguous()


def _rotate(x1: torch.Tensor, x2: torch.Tensor, rng: random.Random) -> torch.Tensor:
    """``cos(t) * x1 + sin(t) * roll(x2, k)`` over the flattened values, in ``x1``'s dtype (torch
    computes each bfloat16 operation in float32 and rounds it), shaped as ``x1``; ``t`` uniform in
    ``[0, 2 pi)`` and ``k`` in ``[0, numel)``. Two passes: 1.2 ms for 4M bfloat16 values here,
    against 4.6 ms through a float32 copy and 12 ms for ``torch.randn`` and rounding."""
    angle = rng.uniform(0.0, 2.0 * math.pi)
    n = x1.numel()
    k = rng.randrange(n)
    x = torch.mul(x1.reshape(-1), math.cos(angle))
    flat = x2.reshape(-1)
    x[: n - k].add_(flat[k:], alpha=math.sin(angle))
    x[n - k :].add_(flat[:k], alpha=math.sin(angle))
    return x.view(x1.shape)


def derive_input(
    first: tuple[torch.Tensor, torch.Tensor], second: tuple[torch.Tensor, torch.Tensor], *, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh ``(a, b)`` from two input sets of one case (:func:`generate_input`'s, of different
    seeds), as the judge makes its timed sets.

    Each of ``a`` and ``b`` is ``cos(t) * x1 + sin(t) * roll(x2, k)`` of its two sets' tensors
    over the flattened values (its own angle ``t`` uniform in ``[0, 2 pi)`` and circular shift
    ``k``, both from ``seed``), in bfloat16 (each operation computed in float32 and rounded).
    Each value is the sum of two independent normal values scaled by ``cos(t)`` and ``sin(t)``: normal with the
    same variance (1 for ``a``, ``1 / K`` for ``b``) and independent of the others, so the
    distribution is :func:`generate_input`'s (up to roundings in bfloat16), with values
    no earlier set had. A product of derived sets cannot be put together from products of the
    pooled ones: the shifts move values across rows and columns, ``k`` anywhere in the tensor.

    Args:
        first, second: ``(a1, b1)`` and ``(a2, b2)`` of one case, on one device (not modified).
        seed: decides the angles and shifts.

    Returns:
        ``(a, b)``: new contiguous ``[M, K]`` and ``[K, N]`` bfloat16 tensors on the sets' device.
    """
    rng = random.Random(seed)
    return _rotate(first[0], second[0], rng), _rotate(first[1], second[1], rng)


def ref_kernel(data: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``c = a @ b`` by the library's bfloat16 GEMM, ``torch.mm(a, b)``: products summed in float32
    and rounded once to bfloat16 (oneDNN on CPU, AMX or AVX-512 where the CPU has them; cuBLAS on
    CUDA, tensor cores).

    It is both the expected output and the timing baseline, so a speedup reads "over the library",
    as GPU MODE's and KernelBench's do (the native-dtype op, not a float32 formula). The baseline
    uses the units a fast submission uses, so a moment of the machine that slows those units slows
    both sides of a pair alike (bench/README.md, sections 22-23 and 25). On this project's CPUs its
    outputs equal ``(a.float() @ b.float()).to(torch.bfloat16)`` but for at most one bfloat16 unit
    in the last place on a few elements (sums taken in another order), far inside the tolerance.
    On CUDA, cuBLAS may add split-K partial sums in bfloat16 (torch's
    ``allow_bf16_reduced_precision_reduction``, on by default): each partial sum then rounds by at
    most 2**-9 of itself, also far inside it.

    Args:
        data: ``(a, b)`` with ``a`` ``[M, K]`` and ``b`` ``[K, N]`` bfloat16 (not modified).

    Returns:
        ``[M, N]`` bfloat16 on the inputs' device.
    """
    a, b = data
    return torch.mm(a, b)


def flops(case: dict) -> int:
    """Floating-point operations of one call: ``2 * M * N * K`` (a multiply and an add per term)."""
    return 2 * int(case["M"]) * int(case["N"]) * int(case["K"])


def bytes(case: dict) -> int:  # noqa: A001 - name required by the harness
    """Minimum DRAM traffic of one call: ``(M*K + K*N + M*N) * 2`` (read a, b once; write c once; bf16)."""
    M, N, K = int(case["M"]), int(case["N"]), int(case["K"])
    return (M * K + K * N + M * N) * ELEM_SIZE
