// Minimal TVM-FFI solution: y = alpha * x + y0 for bf16 vectors, alpha a float32 scalar input.
// Definition order: inputs (x, y0, alpha), then outputs (y).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#define CHECK_CUDA(expr)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (expr);                                                             \
    if (err_ != cudaSuccess) TVM_FFI_THROW(RuntimeError) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

__global__ void axpy_kernel(const __nv_bfloat16* x, const __nv_bfloat16* y0, float alpha,
                            __nv_bfloat16* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(alpha * __bfloat162float(x[i]) + __bfloat162float(y0[i]));
}

// TensorView offers data_ptr(), size(i), ndim(), numel(), stride(i), dtype(), device();
// there is no shape() vector on the host side you can index like a std::vector.
void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y0, float alpha, tvm::ffi::TensorView y) {
  const int64_t n = x.numel();
  const DLDevice dev = x.device();
  CHECK_CUDA(cudaSetDevice(dev.device_id));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(dev.device_type, dev.device_id));
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  axpy_kernel<<<blocks, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x.data_ptr()),
                                              static_cast<const __nv_bfloat16*>(y0.data_ptr()), alpha,
                                              static_cast<__nv_bfloat16*>(y.data_ptr()), n);
  CHECK_CUDA(cudaGetLastError());
  // For kernels with > 48 KB dynamic shared memory call, before launching:
  // CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
