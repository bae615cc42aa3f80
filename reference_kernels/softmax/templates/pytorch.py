"""Softmax template (PyTorch): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (x,) with x: [M, N], torch.float32 or torch.bfloat16, contiguous, on the run's device
    out: [M, N], same dtype and device as x, out[i, :] = softmax(x[i, :])

Softmax over the last dimension, in its numerically stable form:
    out[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])
Some test rows hold values around +-1e4, where exp(x) without the max subtraction overflows.
Compute in float32 and return x.dtype.
"""

import torch


def custom_kernel(data):
    (x,) = data
    xf = x.float()                                   # bfloat16 -> float32 for the arithmetic
    row_max = xf.amax(dim=-1, keepdim=True)          # [M, 1]
    e = torch.exp(xf - row_max)                      # in (0, 1]: cannot overflow
    out = e / e.sum(dim=-1, keepdim=True)
    return out.to(x.dtype)                           # same dtype as the input
