"""Correct C++ (CPU) MLA decode: paged online-softmax attention with explicit loops.

``data = (q, kv_cache, block_table, cache_seqlens, softmax_scale)``; returns ``[b, s_q, h_q, 512]`` bf16.

Work is split with ``at::parallel_for`` over (sequence, block of 16 query rows), where the ``s_q * h_q``
rows of a sequence are ``t * h_q + h``: all of them share the single latent KV head, so each page is
widened from bf16 to float once per block of rows. For each page of the sequence (looked up in
``block_table``) and each row: scores of the keys the row may see (fewer on the sequence's last page,
and fewer for early tokens when ``s_q > 1``: token ``t`` sees keys ``< L - s_q + 1 + t``), then an
online-softmax update in float (running max and sum; the accumulator is rescaled once per page).
Only slots below the sequence's length are ever read, so the NaN padding of the cache never enters.
The extension is built at import time with ``load_inline``.
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

namespace {
constexpr int64_t kPage = 64;
constexpr int64_t kDqk = 576;
constexpr int64_t kDv = 512;
constexpr int64_t kRowBlock = 16;

// 16 independent partial sums, so the compiler can vectorise without reassociating.
inline float dot576(const float* a, const float* b) {
  float part[16] = {0};
  for (int64_t d = 0; d < kDqk; d += 16)
    for (int u = 0; u < 16; ++u) part[u] += a[d + u] * b[d + u];
  float s = 0.f;
  for (int u = 0; u < 16; ++u) s += part[u];
  return s;
}
}  // namespace

torch::Tensor mla_decode(torch::Tensor q, torch::Tensor kv_cache, torch::Tensor block_table,
                         torch::Tensor cache_seqlens, double softmax_scale) {
  TORCH_CHECK(q.device().is_cpu(), "CPU tensors expected");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && kv_cache.scalar_type() == at::kBFloat16, "bf16 q and cache");
  TORCH_CHECK(q.dim() == 4 && q.size(3) == kDqk, "q must be [b, s_q, h_q, 576]");
  TORCH_CHECK(kv_cache.dim() == 4 && kv_cache.size(1) == kPage && kv_cache.size(2) == 1 && kv_cache.size(3) == kDqk,
              "kv_cache must be [num_blocks, 64, 1, 576]");
  q = q.contiguous();
  kv_cache = kv_cache.contiguous();
  block_table = block_table.to(at::kInt).contiguous();
  cache_seqlens = cache_seqlens.to(at::kInt).contiguous();

  const int64_t b = q.size(0), s_q = q.size(1), h_q = q.size(2);
  const int64_t rows = s_q * h_q;
  const int64_t max_blocks = block_table.size(1);
  const int64_t n_row_blocks = (rows + kRowBlock - 1) / kRowBlock;
  auto out = torch::empty({b, s_q, h_q, kDv}, q.options());

  const at::BFloat16* qp = q.data_ptr<at::BFloat16>();
  const at::BFloat16* kvp = kv_cache.data_ptr<at::BFloat16>();
  const int32_t* btp = block_table.data_ptr<int32_t>();
  const int32_t* lenp = cache_seqlens.data_ptr<int32_t>();
  at::BFloat16* op = out.data_ptr<at::BFloat16>();
  const float scale = static_cast<float>(softmax_scale);

  at::parallel_for(0, b * n_row_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kf(kPage * kDqk), qf(kRowBlock * kDqk), acc(kRowBlock * kDv);
    std::vector<float> m(kRowBlock), l(kRowBlock), s(kPage);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / n_row_blocks;
      const int64_t r0 = (task % n_row_blocks) * kRowBlock;
      const int64_t nr = std::min(kRowBlock, rows - r0);
      const int64_t L = lenp[i];

      // q rows, pre-scaled by softmax_scale
      for (int64_t r = 0; r < nr; ++r) {
        const at::BFloat16* src = qp + (i * rows + r0 + r) * kDqk;
        for (int64_t d = 0; d < kDqk; ++d) qf[r * kDqk + d] = static_cast<float>(src[d]) * scale;
      }
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.f);
      std::fill(acc.begin(), acc.end(), 0.f);

      const int64_t n_pages = (L + kPage - 1) / kPage;
      for (int64_t pg = 0; pg < n_pages; ++pg) {
        const int64_t first = pg * kPage;
        const int64_t nk = std::min(kPage, L - first);  // valid slots of this page
        const at::BFloat16* page = kvp + static_cast<int64_t>(btp[i * max_blocks + pg]) * kPage * kDqk;
        for (int64_t j = 0; j < nk * kDqk; ++j) kf[j] = static_cast<float>(page[j]);

        for (int64_t r = 0; r < nr; ++r) {
          const int64_t t = (r0 + r) / h_q;
          const int64_t visible = L - s_q + 1 + t;                  // keys [0, visible) for this row
          const int64_t nvis = std::min(nk, visible - first);
          if (nvis <= 0) continue;
          const float* qr = qf.data() + r * kDqk;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < nvis; ++j) {
            s[j] = dot576(qr, kf.data() + j * kDqk);
            mx = std::max(mx, s[j]);
          }
          const float m_new = std::max(m[r], mx);
          const float alpha = std::exp(m[r] - m_new);  // 0 on the first page (m = -inf)
          float sum = 0.f;
          for (int64_t j = 0; j < nvis; ++j) {
            s[j] = std::exp(s[j] - m_new);
            sum += s[j];
          }
          float* a = acc.data() + r * kDv;
          for (int64_t d = 0; d < kDv; ++d) a[d] *= alpha;
          for (int64_t j = 0; j < nvis; ++j) {
            const float p = s[j];
            const float* v = kf.data() + j * kDqk;  // V = first 512 dims of the row
            for (int64_t d = 0; d < kDv; ++d) a[d] += p * v[d];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = m_new;
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        const float inv = 1.f / l[r];  // l > 0: every row sees key 0
        at::BFloat16* dst = op + (i * rows + r0 + r) * kDv;
        for (int64_t d = 0; d < kDv; ++d) dst[d] = static_cast<at::BFloat16>(acc[r * kDv + d] * inv);
      }
    }
  });
  return out;
}
"""

_ext = load_inline(
    name="mla_decode_correct_cpp",
    cpp_sources=_CPP,
    functions=["mla_decode"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    return _ext.mla_decode(q, kv_cache, block_table, cache_seqlens, float(softmax_scale))
