"""Correct C++ (CPU) softmax: explicit loops over rows, parallelised with ``at::parallel_for``.

``data = (x,)`` with ``x``: ``[M, N]`` float32 or bfloat16; returns ``[M, N]`` of ``x.dtype``.

Per row: widen to float into a scratch buffer while taking the max, then ``exp(x - max)`` with
the sum accumulated in double (accurate for long rows), then scale by ``1 / sum`` and narrow to
the output type once. The extension is built at import time with ``load_inline``.
"""

import torch
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

template <typename T>
static void softmax_rows(const T* x, T* out, int64_t M, int64_t N) {
  // Chunks of at least ~32K elements so threads are not started for tiny work.
  const int64_t grain = std::max<int64_t>(1, 32768 / N);
  at::parallel_for(0, M, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(N);
    float* b = buf.data();
    for (int64_t i = begin; i < end; ++i) {
      const T* xr = x + i * N;
      T* orow = out + i * N;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < N; ++j) {
        const float v = static_cast<float>(xr[j]);
        b[j] = v;
        mx = std::max(mx, v);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < N; ++j) {
        const float e = std::exp(b[j] - mx);
        b[j] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < N; ++j) {
        orow[j] = static_cast<T>(b[j] * inv);
      }
    }
  });
}

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "x must be [M, N]");
  TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const int64_t M = x.size(0), N = x.size(1);
  if (x.scalar_type() == at::kFloat) {
    softmax_rows<float>(x.data_ptr<float>(), out.data_ptr<float>(), M, N);
  } else if (x.scalar_type() == at::kBFloat16) {
    softmax_rows<at::BFloat16>(x.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>(), M, N);
  } else {
    TORCH_CHECK(false, "x must be float32 or bfloat16");
  }
  return out;
}
"""

_ext = load_inline(
    name="softmax_correct_cpp",
    cpp_sources=_CPP,
    functions=["softmax_forward"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    (x,) = data
    return _ext.softmax_forward(x)
