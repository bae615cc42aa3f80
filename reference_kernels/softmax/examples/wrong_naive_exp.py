"""WRONG on purpose: softmax without subtracting the row max.

Bug: ``exp(x) / sum(exp(x))`` is the textbook formula, but ``exp`` overflows to ``inf`` for
values above ~88 (and underflows to 0 below ~-104) in float32, giving ``inf / inf = nan`` or
``0 / 0 = nan``. Ordinary standard-normal rows pass; the ``large: true`` test cases (values around
+-1e4) fail with nan in both dtypes.
"""

import torch


def custom_kernel(data):
    (x,) = data
    e = torch.exp(x.float())
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
