"""WRONG on purpose: returns float32 for bfloat16 input.

Bug: the softmax is computed correctly in float32, but the result is never cast back to the
input's dtype, so the output dtype differs from ``x.dtype`` for bfloat16 input (the contract
says "same dtype as x"). Every float32 case passes; every bfloat16 test case fails the dtype check.
"""

import torch


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x.float(), dim=-1)
