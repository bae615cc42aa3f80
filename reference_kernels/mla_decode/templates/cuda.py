"""MLA decode template (CUDA): a working, simple submission to start from.

GPU-only: not exercised on CPU CI (it needs an NVIDIA GPU and a CUDA build of PyTorch).

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

One thread block of 128 threads per query row (sequence i, row t * h_q + h). The row's q is kept
in shared memory as float. For each page the row can see (looked up in block_table): each warp
computes the scores of some of the page's keys (lanes split the 576 dims, warp-shuffle sum), then
every thread applies the online-softmax update (running max m, running sum l) to the 4 output
dims it owns. Slots past the visible length are never read (the cache holds NaN there).
Faster versions let one block serve many heads (they all read the same KV row), split long
sequences across blocks, and use tensor cores (FlashMLA).
"""

import torch
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int PAGE = 64, DQK = 576, DV = 512, THREADS = 128, WARPS = THREADS / 32;
constexpr int PER_THREAD = DV / THREADS;

__global__ void mla_decode_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kv,
                                  const int* __restrict__ bt, const int* __restrict__ lens,
                                  __nv_bfloat16* __restrict__ out, float scale, int s_q, int h_q,
                                  int max_blocks) {
  __shared__ float qs[DQK];
  __shared__ float sc[PAGE];
  const int i = blockIdx.x;                       // sequence
  const int row = blockIdx.y;                     // t * h_q + h
  const int rows = s_q * h_q;
  const int visible = lens[i] - s_q + 1 + row / h_q;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const __nv_bfloat16* qr = q + (static_cast<int64_t>(i) * rows + row) * DQK;
  for (int d = threadIdx.x; d < DQK; d += THREADS) qs[d] = __bfloat162float(qr[d]) * scale;
  __syncthreads();

  float m = -INFINITY, l = 0.f, acc[PER_THREAD] = {};
  const int n_pages = (visible + PAGE - 1) / PAGE;
  for (int pg = 0; pg < n_pages; ++pg) {
    const int nk = min(PAGE, visible - pg * PAGE);
    const __nv_bfloat16* page = kv + static_cast<int64_t>(bt[static_cast<int64_t>(i) * max_blocks + pg]) * PAGE * DQK;
    for (int j = warp; j < nk; j += WARPS) {
      const __nv_bfloat16* kr = page + static_cast<int64_t>(j) * DQK;
      float s = 0.f;
      for (int d = lane; d < DQK; d += 32) s += qs[d] * __bfloat162float(kr[d]);
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) sc[j] = s;
    }
    __syncthreads();
    float m_new = m;
    for (int j = 0; j < nk; ++j) m_new = fmaxf(m_new, sc[j]);
    const float alpha = expf(m - m_new);          // 0 on the first page (m = -inf)
    l *= alpha;
    for (int c = 0; c < PER_THREAD; ++c) acc[c] *= alpha;
    for (int j = 0; j < nk; ++j) {
      const float p = expf(sc[j] - m_new);
      l += p;
      const __nv_bfloat16* vr = page + static_cast<int64_t>(j) * DQK;  // V = first 512 dims
      for (int c = 0; c < PER_THREAD; ++c) acc[c] += p * __bfloat162float(vr[threadIdx.x + c * THREADS]);
    }
    m = m_new;
    __syncthreads();                              // sc is rewritten by the next page
  }
  __nv_bfloat16* dst = out + (static_cast<int64_t>(i) * rows + row) * DV;
  for (int c = 0; c < PER_THREAD; ++c) dst[threadIdx.x + c * THREADS] = __float2bfloat16(acc[c] / l);
}

torch::Tensor mla_decode(torch::Tensor q, torch::Tensor kv_cache, torch::Tensor block_table,
                         torch::Tensor cache_seqlens, double softmax_scale) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == at::kBFloat16, "q must be a bf16 CUDA tensor");
  TORCH_CHECK(q.size(3) == DQK && kv_cache.size(1) == PAGE && kv_cache.size(3) == DQK, "bad shapes");
  q = q.contiguous();
  kv_cache = kv_cache.contiguous();
  block_table = block_table.to(at::kInt).contiguous();
  cache_seqlens = cache_seqlens.to(at::kInt).contiguous();
  const int64_t b = q.size(0), s_q = q.size(1), h_q = q.size(2);
  auto out = torch::empty({b, s_q, h_q, DV}, q.options());
  const dim3 grid(static_cast<unsigned>(b), static_cast<unsigned>(s_q * h_q));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  mla_decode_kernel<<<grid, THREADS, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(q.data_ptr<at::BFloat16>()),
      reinterpret_cast<const __nv_bfloat16*>(kv_cache.data_ptr<at::BFloat16>()),
      block_table.data_ptr<int>(), cache_seqlens.data_ptr<int>(),
      reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>()),
      static_cast<float>(softmax_scale), static_cast<int>(s_q), static_cast<int>(h_q),
      static_cast<int>(block_table.size(1)));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SOURCE = (
    "torch::Tensor mla_decode(torch::Tensor q, torch::Tensor kv_cache, torch::Tensor block_table,"
    " torch::Tensor cache_seqlens, double softmax_scale);"
)

ext = load_inline(
    name="mla_decode_template_cuda",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["mla_decode"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    q, kv_cache, block_table, cache_seqlens, softmax_scale = data
    return ext.mla_decode(q, kv_cache, block_table, cache_seqlens, float(softmax_scale))
