"""Correct C++ GEMM (CPU): ``c = a @ b`` for bfloat16 ``a [M, K]``, ``b [K, N]``, float32 accumulation.

Built at import time with ``torch.utils.cpp_extension.load_inline``. The kernel:

1. converts ``b`` to a float32 ``[K, N]`` copy once (bfloat16 -> float32 is exact), in parallel;
2. splits ``c`` into tiles of 4 rows x 128 columns and runs the tiles with ``at::parallel_for``;
   consecutive tiles share the same 128-column panel of ``b``, so each thread keeps it in cache;
3. for a tile, walks k = 0..K-1 and does ``acc[r][j] += a[i+r, k] * b[k, j]`` into float32
   accumulators: the inner loop runs over contiguous ``j`` with no reduction, so ``-O3``
   vectorises it without reassociating any sum;
4. rounds each accumulator to bfloat16 once (round-to-nearest-even via ``c10::BFloat16``).

Tails (M not a multiple of 4, N not a multiple of 128, K = 1) are handled by the loop bounds.
"""

from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <algorithm>
#include <vector>

namespace {
constexpr int64_t MR = 4;    // rows of c per tile
constexpr int64_t NB = 128;  // columns of c per tile
}

torch::Tensor gemm_bf16(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu(), "CPU tensors expected");
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16, "bfloat16 expected");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
  a = a.contiguous();
  b = b.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;

  const at::BFloat16* A = a.data_ptr<at::BFloat16>();
  const at::BFloat16* B = b.data_ptr<at::BFloat16>();
  at::BFloat16* C = c.data_ptr<at::BFloat16>();

  // 1. b -> float32 [K, N], once.
  std::vector<float> bf(static_cast<size_t>(K) * N);
  float* BF = bf.data();
  at::parallel_for(0, K * N, 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) BF[t] = static_cast<float>(B[t]);
  });

  // 2-4. tiles of MR x NB, ordered panel-major so a thread reuses one panel of b.
  const int64_t row_tiles = (M + MR - 1) / MR;
  const int64_t col_tiles = (N + NB - 1) / NB;
  at::parallel_for(0, row_tiles * col_tiles, 1, [&](int64_t lo, int64_t hi) {
    alignas(64) float acc[MR][NB];
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t jt = t / row_tiles, it = t % row_tiles;
      const int64_t i0 = it * MR, j0 = jt * NB;
      const int64_t mr = std::min(MR, M - i0), nb = std::min(NB, N - j0);
      for (int64_t r = 0; r < MR; ++r)
        for (int64_t j = 0; j < NB; ++j) acc[r][j] = 0.f;
      for (int64_t k = 0; k < K; ++k) {
        float av[MR];
        for (int64_t r = 0; r < MR; ++r)
          av[r] = r < mr ? static_cast<float>(A[(i0 + r) * K + k]) : 0.f;
        const float* brow = BF + k * N + j0;
        if (nb == NB) {
          for (int64_t j = 0; j < NB; ++j) {
            const float bv = brow[j];
            acc[0][j] += av[0] * bv;
            acc[1][j] += av[1] * bv;
            acc[2][j] += av[2] * bv;
            acc[3][j] += av[3] * bv;
          }
        } else {
          for (int64_t j = 0; j < nb; ++j) {
            const float bv = brow[j];
            acc[0][j] += av[0] * bv;
            acc[1][j] += av[1] * bv;
            acc[2][j] += av[2] * bv;
            acc[3][j] += av[3] * bv;
          }
        }
      }
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t j = 0; j < nb; ++j) C[(i0 + r) * N + j0 + j] = at::BFloat16(acc[r][j]);
    }
  });
  return c;
}
"""

_ext = load_inline(
    name="gemm_example_cpp",
    cpp_sources=[_CPP],
    functions=["gemm_bf16"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    a, b = data
    return _ext.gemm_bf16(a, b)
