"""Softmax template (C++ on the CPU): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (x,) with x: [M, N], torch.float32 or torch.bfloat16, contiguous, on the run's device
    out: [M, N], same dtype and device as x, out[i, :] = softmax(x[i, :])

The C++ function widens x to float32, runs three plain loops per row (max, exp and sum, scale)
and narrows the result back to x's dtype. It is compiled once, when this file is imported, by
torch.utils.cpp_extension.load_inline; keep the flags below as they are (a shared precompiled
header makes the build take seconds instead of a minute). Faster versions parallelise over rows
(at::parallel_for) and work on bfloat16 directly instead of converting whole tensors.
"""

import torch
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "x must be [M, N]");
  auto xf = x.to(torch::kFloat).contiguous();
  auto out = torch::empty_like(xf);
  const int64_t M = xf.size(0), N = xf.size(1);
  const float* in = xf.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < M; ++i) {
    const float* row = in + i * N;
    float* orow = o + i * N;
    float mx = row[0];
    for (int64_t j = 1; j < N; ++j) mx = std::max(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      orow[j] = std::exp(row[j] - mx);  // <= 1: no overflow
      sum += orow[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < N; ++j) orow[j] *= inv;
  }
  return out.to(x.scalar_type());
}
"""

ext = load_inline(
    name="softmax_template_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["softmax_forward"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    (x,) = data
    return ext.softmax_forward(x)
