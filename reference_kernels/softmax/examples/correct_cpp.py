"""Correct C++ (CPU) softmax: explicit loops over rows, split across ``std::thread`` workers.

``data = (x,)`` with ``x``: ``[M, N]`` float32 or bfloat16; returns ``[M, N]`` of ``x.dtype``.

Per row: widen to float into a scratch buffer while taking the max, then ``exp(x - max)`` with
the sum accumulated in double (accurate for long rows), then scale by ``1 / sum`` and narrow to
the output type once. Rows are split into ``at::get_num_threads()`` contiguous chunks, one
``std::thread`` each (``at::parallel_for`` would run serially here: with PyTorch's OpenMP backend
it needs ``-fopenmp``, and the build flags are fixed to ``-O3``). The extension is built at
import time with ``load_inline``.
"""

import torch
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

template <typename T>
static void softmax_rows(const T* x, T* out, int64_t begin, int64_t end, int64_t N) {
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
}

template <typename T>
static void softmax_parallel(const T* x, T* out, int64_t M, int64_t N) {
  // One thread per ~64K elements at most, never more than PyTorch's intra-op thread count.
  const int64_t by_work = std::max<int64_t>(1, (M * N) / 65536);
  const int64_t nthreads = std::min<int64_t>({static_cast<int64_t>(at::get_num_threads()), by_work, M});
  if (nthreads <= 1) {
    softmax_rows<T>(x, out, 0, M, N);
    return;
  }
  const int64_t chunk = (M + nthreads - 1) / nthreads;
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < nthreads; ++t) {
    const int64_t b = t * chunk, e = std::min(M, b + chunk);
    if (b < e) workers.emplace_back(softmax_rows<T>, x, out, b, e, N);
  }
  softmax_rows<T>(x, out, 0, std::min(M, chunk), N);  // first chunk on the calling thread
  for (auto& w : workers) w.join();
}

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "x must be [M, N]");
  TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const int64_t M = x.size(0), N = x.size(1);
  if (x.scalar_type() == at::kFloat) {
    softmax_parallel<float>(x.data_ptr<float>(), out.data_ptr<float>(), M, N);
  } else if (x.scalar_type() == at::kBFloat16) {
    softmax_parallel<at::BFloat16>(x.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>(), M, N);
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
