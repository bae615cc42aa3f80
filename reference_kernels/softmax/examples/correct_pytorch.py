"""Correct PyTorch softmax: the numerically stable formula with in-place tensor ops.

``data = (x,)`` with ``x``: ``[M, N]`` float32 or bfloat16; returns ``[M, N]`` of ``x.dtype``,
softmax over the last dimension. Computes in float32 and rounds to ``x.dtype`` once at the end.

One float32 working copy of ``x`` is made (never ``x`` itself: the input must not change) and
every later step updates it in place, so a call allocates one large buffer (plus the bfloat16
result for bfloat16 input) instead of one per operation.
"""

import torch


def custom_kernel(data):
    (x,) = data
    e = x.to(torch.float32, copy=True)
    # Subtracting the row max keeps exp() in (0, 1]: no overflow for rows around +-1e4.
    e.sub_(e.amax(dim=-1, keepdim=True)).exp_()
    e.div_(e.sum(dim=-1, keepdim=True))
    return e.to(x.dtype)
