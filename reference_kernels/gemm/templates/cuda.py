"""CUDA starting point for ``gemm``: ``c = a @ b`` in bfloat16 with float32 accumulation.

GPU-only: not exercised on CPU CI (needs an NVIDIA GPU and nvcc).

Contract: ``custom_kernel(data)`` receives ``data = (a, b)`` with ``a`` ``[M, K]`` and ``b``
``[K, N]``, both bfloat16, contiguous (row-major), on the GPU, and returns ``c`` ``[M, N]``
bfloat16: ``c[i, j] = sum_k a[i, k] * b[k, j]`` accumulated in float32, rounded once.
M, N and K are arbitrary positive integers (K may be 1). Do not modify ``a`` or ``b``.

A textbook shared-memory tiled kernel: each 16x16 thread block computes a 16x16 tile of ``c``,
staging 16x16 tiles of ``a`` and ``b`` in shared memory (zero-filled past the edges) and
accumulating in float32. It is correct but far from cuBLAS: tensor cores (mma/wgmma), larger
tiles, vectorised loads and pipelining are where the speed is.
"""

from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <c10/cuda/CUDAStream.h>

constexpr int TILE = 16;

__global__ void gemm_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                            __nv_bfloat16* __restrict__ c, int M, int N, int K) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? __bfloat162float(a[(long)row * K + ka]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? __bfloat162float(b[(long)kb * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) c[(long)row * N + col] = __float2bfloat16(acc);
}

torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16, "bfloat16 expected");
  a = a.contiguous();
  b = b.contiguous();
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __nv_bfloat16*>(a.data_ptr<at::BFloat16>()),
      reinterpret_cast<const __nv_bfloat16*>(b.data_ptr<at::BFloat16>()),
      reinterpret_cast<__nv_bfloat16*>(c.data_ptr<at::BFloat16>()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}
"""

CPP_SOURCE = "torch::Tensor gemm(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="gemm_template_cuda",
    cpp_sources=[CPP_SOURCE],
    cuda_sources=[CUDA_SOURCE],
    functions=["gemm"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    use_pch=True,
)


def custom_kernel(data):
    a, b = data
    return _ext.gemm(a, b)
