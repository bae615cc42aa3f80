"""Computes the softmax in place in the input buffer and returns the input itself.

Class: returning or modifying the input
Expected: rejected|failed

The contract says "do not modify x". Working in place saves the output allocation and a full
write stream, so the kernel looks faster, and since the judge keeps its own pristine copy of the
inputs the values it receives are right. A harness that lets this rank accepts a submission that
breaks the contract (and would corrupt a caller's data, or a reference computed afterwards from the
same buffers, as in KernelBench's documented "modifying inputs" hole). A working defence notices
that the output aliases an input, or that the input changed during the call.
"""

import torch


def custom_kernel(data):
    (x,) = data
    if x.dtype == torch.float32:
        x.sub_(x.amax(dim=-1, keepdim=True)).exp_()
        x.div_(x.sum(dim=-1, keepdim=True))
    else:  # bfloat16: compute in float32, write back into x
        x.copy_(torch.softmax(x.float(), dim=-1))
    return x
