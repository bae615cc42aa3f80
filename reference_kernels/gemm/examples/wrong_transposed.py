"""WRONG on purpose: reads ``b`` as if it were stored transposed (``[N, K]``, nn.Linear layout).

The bug: code adapted from an ``nn.Linear`` kernel, where the weight is ``[out_features,
in_features] = [N, K]`` and the product is ``a @ w.T``. Here ``b`` is ``[K, N]`` row-major, but
the code views its memory as ``[N, K]`` (the element ``b[k, j]`` is read from offset ``j*K + k``
instead of ``k*N + j``). Shapes still line up, so nothing crashes; the values are wrong on every
test case with ``N > 1`` and ``K > 1`` (e.g. the square ``M=N=K=128`` case).
"""

import torch
import torch.nn.functional as F


def custom_kernel(data):
    a, b = data
    K, N = b.shape
    weight = b.view(N, K)  # BUG: b is [K, N]; this reinterprets its memory as [N, K]
    return F.linear(a, weight)
