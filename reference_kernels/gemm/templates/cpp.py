"""C++ (CPU) starting point for ``gemm``: ``c = a @ b`` in bfloat16 with float32 accumulation.

Contract: ``custom_kernel(data)`` receives ``data = (a, b)`` with ``a`` ``[M, K]`` and ``b``
``[K, N]``, both bfloat16, contiguous (row-major), and returns ``c`` ``[M, N]`` bfloat16:
``c[i, j] = sum_k a[i, k] * b[k, j]`` accumulated in float32, rounded to bfloat16 once.
M, N and K are arbitrary positive integers (K may be 1). Do not modify ``a`` or ``b``.

The extension is compiled at import time by ``load_inline`` (keep ``use_pch=True`` and
``extra_cflags=["-O3"]``: the precompiled header makes the build ~10 s instead of ~40 s).
The kernel: ``b`` is converted to float32 once; rows of ``c`` are split across threads with
``at::parallel_for``; each row is a float32 buffer updated as ``acc[j] += a[i, k] * b[k, j]``
(contiguous in ``j``, so the compiler vectorises it), then rounded to bfloat16.
"""

from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>

torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16, "bfloat16 expected");
  a = a.contiguous();
  b = b.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  const at::BFloat16* A = a.data_ptr<at::BFloat16>();
  const at::BFloat16* B = b.data_ptr<at::BFloat16>();
  at::BFloat16* C = c.data_ptr<at::BFloat16>();

  std::vector<float> bf(static_cast<size_t>(K) * N);  // b in float32, converted once
  for (int64_t t = 0; t < K * N; ++t) bf[t] = static_cast<float>(B[t]);

  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(N);
    for (int64_t i = begin; i < end; ++i) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t k = 0; k < K; ++k) {
        const float aik = static_cast<float>(A[i * K + k]);
        const float* brow = bf.data() + k * N;
        for (int64_t j = 0; j < N; ++j) acc[j] += aik * brow[j];
      }
      for (int64_t j = 0; j < N; ++j) C[i * N + j] = at::BFloat16(acc[j]);
    }
  });
  return c;
}
"""

_ext = load_inline(
    name="gemm_template_cpp",
    cpp_sources=[CPP_SOURCE],
    functions=["gemm"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    a, b = data
    return _ext.gemm(a, b)
