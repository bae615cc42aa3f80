"""Reference for ``softmax``: row-wise softmax over the last dimension of an ``[M, N]`` matrix.

Formula (numerically stable form, e.g. the PyTorch ``torch.softmax`` documentation and
Milakov & Gimelshein, "Online normalizer calculation for softmax", arXiv:1805.02867)::

    out[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])

Data contract:

- ``data = (x,)`` with ``x``: ``[M, N]``, ``torch.float32`` or ``torch.bfloat16``, contiguous,
  on the run's device.
- output: ``[M, N]``, same dtype as ``x``, on the same device.

The reference computes in float32 (bfloat16 input is widened first) and rounds the result to the
input's dtype once.
"""

from __future__ import annotations

import math
import random

import torch

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

#: Scale of the values in ``large=True`` rows: ``exp`` of such values overflows (or underflows)
#: in float32, so a softmax without the max subtraction returns inf/nan.
LARGE_SCALE = 1.0e4


def generate_input(
    *, M: int, N: int, dtype: str, seed: int, device: str = "cpu", large: bool = False
) -> tuple[torch.Tensor]:
    """Build ``data = (x,)`` for one case.

    Args:
        M: number of rows (>= 1).
        N: row length, the softmax dimension (>= 1).
        dtype: ``"float32"`` or ``"bfloat16"``.
        seed: seeds a local generator on ``device``; the same seed on the same device gives the
            same ``x``.
        device: where ``x`` is created (``"cpu"``, ``"cuda"``...).
        large: if true, values are ``randn * 1e4`` (around +-1e4, where a naive ``exp``
            overflows); otherwise standard normal.

    Returns:
        ``(x,)`` with ``x``: ``[M, N]`` of ``dtype``, contiguous, on ``device``. Values are drawn
        in float32 and then rounded to ``dtype``.
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    if M < 1 or N < 1:
        raise ValueError(f"M and N must be >= 1, got M={M} N={N}")
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device, dtype=torch.float32)
    if large:
        x = x * LARGE_SCALE
    return (x.to(_DTYPES[dtype]).contiguous(),)


def derive_input(first: tuple[torch.Tensor], second: tuple[torch.Tensor], *, seed: int) -> tuple[torch.Tensor]:
    """A fresh ``data = (x,)`` from two input sets of one case (:func:`generate_input`'s, of
    different seeds), as the judge makes its timed sets.

    ``x = cos(t) * x1 + sin(t) * roll(x2, k)`` over the flattened values, in the case's dtype
    (torch computes each bfloat16 operation in float32 and rounds it), with the angle ``t`` uniform in ``[0, 2 pi)`` and the
    circular shift ``k`` uniform in ``[0, M * N)``, both from ``seed``. Each value is the sum of
    two independent normal values scaled by ``cos(t)`` and ``sin(t)``, so it is normal with the
    same variance (``cos^2 + sin^2 = 1``: standard normal, or ``1e4`` times that for ``large``
    cases) and independent of the other values of ``x``: the same distribution as
    :func:`generate_input`'s (up to roundings in bfloat16, of a few units in its last place), with
    values no earlier set had. Using it cannot help a kernel: recognising a derived set means
    reading ``x``, which is what a softmax costs.

    Args:
        first, second: ``(x1,)`` and ``(x2,)``, ``[M, N]`` of one dtype, on one device (not
            modified).
        seed: decides ``t`` and ``k``.

    Returns:
        ``(x,)``: a new contiguous ``[M, N]`` tensor of ``x1``'s dtype on its device.

    Cost: two passes over the values (about 0.3 ns per value here, against 2.5-3.8 ns for
    ``torch.randn`` and rounding; bench/README.md, issue 14).
    """
    (x1,), (x2,) = first, second
    rng = random.Random(seed)
    angle = rng.uniform(0.0, 2.0 * math.pi)
    n = x1.numel()
    k = rng.randrange(n)
    x = torch.mul(x1.reshape(-1), math.cos(angle))
    flat = x2.reshape(-1)
    x[: n - k].add_(flat[k:], alpha=math.sin(angle))
    x[n - k :].add_(flat[:k], alpha=math.sin(angle))
    return (x.view(x1.shape),)


def ref_kernel(data: tuple[torch.Tensor]) -> torch.Tensor:
    """Softmax of ``x`` over its last dimension.

    Args:
        data: ``(x,)`` with ``x``: ``[M, N]`` float32 or bfloat16.

    Returns:
        ``[M, N]`` tensor of ``x.dtype`` on ``x.device``; computed in float32 and rounded once.
        ``data`` is not modified.
    """
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def _elem_size(dtype: str) -> int:
    return torch.empty((), dtype=_DTYPES[dtype]).element_size()


def flops(case: dict) -> int:
    """Floating-point operations of one call: ``5 * M * N``.

    Counted per element: one comparison for the row max, one subtraction ``x - max``, one
    ``exp``, one addition into the row sum and one multiplication by ``1 / sum`` (the per-row
    reciprocal is neglected).
    """
    return 5 * int(case["M"]) * int(case["N"])


def bytes(case: dict) -> int:  # noqa: A001 - name fixed by the problem interface
    """Minimum DRAM traffic of one call: ``2 * M * N * elem_size`` (``x`` read once, ``out``
    written once; 4 bytes per element for float32, 2 for bfloat16)."""
    return 2 * int(case["M"]) * int(case["N"]) * _elem_size(case["dtype"])
