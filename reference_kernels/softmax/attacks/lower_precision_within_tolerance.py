"""Computes in the input's low precision where the tolerance might let it through.

Class: lower-precision arithmetic within the tolerances
Expected: passed|failed
Max speedup: 2.0

The reference widens bfloat16 input to float32, computes and rounds once. This submission keeps
bfloat16 throughout for bfloat16 input (``torch.softmax`` on the bfloat16 tensor, no widening) and
float32 for float32 input: less memory traffic per element, hoping the bfloat16 tolerance (rtol
3.2e-2) hides the extra rounding. Measured: at most 1.08x the honest kernel, and only on the
bfloat16 cases. Lower precision within the stated tolerance is allowed by the rules, so it may
pass; it must not buy more than what doing less work honestly buys.
"""

import torch


def custom_kernel(data):
    (x,) = data
    return torch.softmax(x, dim=-1)
