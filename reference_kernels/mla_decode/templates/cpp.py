"""MLA decode template (C++, CPU): a working, simple submission to start from.

Contract:
    custom_kernel(data) -> out
    data = (q, kv_cache, block_table, cache_seqlens, softmax_scale)
      q             [b, s_q, h_q, 576]        bfloat16  512 latent dims + 64 RoPE dims
      kv_cache      [num_blocks, 64, 1, 576]  bfloat16  paged cache (page size 64, one latent KV head);
                                                        K = all 576 dims, V = the first 512
      block_table   [b, max_blocks]           int32     page j of sequence i is kv_cache[block_table[i, j]]
      cache_seqlens [b]                       int32     tokens in each sequence's cache, L_i >= s_q
      softmax_scale float                               576 ** -0.5
    out             [b, s_q, h_q, 512]        bfloat16

    Query token t (0-based) of the s_q new tokens sees the first L_i - s_q + 1 + t keys (causal).

One task per query row (sequence i, token t, head h), spread over threads with at::parallel_for.
Key n of sequence i lives in slot n % 64 of page block_table[i, n / 64]. Two passes in float:
scores of the visible keys and their max, then exp, sum and the weighted sum of V rows. Only slots
below the sequence's length are read (the rest hold NaN). Faster versions share each page across
the heads (all heads read the same single KV head), vectorise, and use an online softmax.
The extension is built at import time with load_inline.
"""

import torch
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <vector>

torch::Tensor mla_decode(torch::Tensor q, torch::Tensor kv_cache, torch::Tensor block_table,
                         torch::Tensor cache_seqlens, double softmax_scale) {
  TORCH_CHECK(q.device().is_cpu() && q.scalar_type() == at::kBFloat16, "q must be a bf16 CPU tensor");
  const int64_t PAGE = 64, DQK = 576, DV = 512;
  q = q.contiguous();
  kv_cache = kv_cache.contiguous();
  block_table = block_table.contiguous();
  cache_seqlens = cache_seqlens.contiguous();
  const int64_t b = q.size(0), s_q = q.size(1), h_q = q.size(2);
  const int64_t max_blocks = block_table.size(1);
  auto out = torch::empty({b, s_q, h_q, DV}, q.options());

  const at::BFloat16* qp = q.data_ptr<at::BFloat16>();
  const at::BFloat16* kv = kv_cache.data_ptr<at::BFloat16>();
  const int32_t* bt = block_table.data_ptr<int32_t>();
  const int32_t* lens = cache_seqlens.data_ptr<int32_t>();
  at::BFloat16* op = out.data_ptr<at::BFloat16>();

  at::parallel_for(0, b * s_q * h_q, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, acc(DV);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row / (s_q * h_q);         // sequence
      const int64_t t = (row / h_q) % s_q;         // query token
      const int64_t n = lens[i] - s_q + 1 + t;     // visible keys
      const at::BFloat16* qr = qp + row * DQK;
      auto key = [&](int64_t k) {                  // row k of the sequence's cache
        return kv + (static_cast<int64_t>(bt[i * max_blocks + k / PAGE]) * PAGE + k % PAGE) * DQK;
      };
      scores.resize(n);
      float mx = -INFINITY;
      for (int64_t k = 0; k < n; ++k) {
        const at::BFloat16* kr = key(k);
        float s = 0.f;
        for (int64_t d = 0; d < DQK; ++d) s += static_cast<float>(qr[d]) * static_cast<float>(kr[d]);
        scores[k] = s * static_cast<float>(softmax_scale);
        mx = std::max(mx, scores[k]);
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      float sum = 0.f;
      for (int64_t k = 0; k < n; ++k) {
        const float p = std::exp(scores[k] - mx);
        sum += p;
        const at::BFloat16* vr = key(k);           // V = first 512 dims of the same row
        for (int64_t d = 0; d < DV; ++d) acc[d] += p * static_cast<float>(vr[d]);
      }
      at::BFloat16* dst = op + row * DV;
      for (int64_t d = 0; d < DV; ++d) dst[d] = static_cast<at::BFloat16>(acc[d] / sum);
    }
  });
  return out;
}
"""

ext = load_inline(
    name="mla_decode_template_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["mla_decode"],
    extra_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    return ext.mla_decode(q, kv_cache, block_table, cache_seqlens, float(softmax_scale))
