// The device context, device buffers and small utility kernels.
#include <algorithm>
#include <cstdarg>
#include <new>
#include <cstring>

#include "common.cuh"

namespace graft {

static thread_local char g_last_error[1024];

int gpu_fail(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return status;
}

const char* cublas_status_string(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_?";
    }
}

int ctx_enter(graft_gpu_ctx* ctx) {
    GRAFT_CUDA_TRY(cudaSetDevice(ctx->device));
    return GRAFT_OK;
}

int ctx_scratch(graft_gpu_ctx* ctx, size_t bytes, void** out) {
    if (bytes > ctx->scratch_budget)
        return gpu_fail(GRAFT_EGPU_NOMEM, "needs %zu bytes of GPU scratch, over the budget of %zu",
                        bytes, ctx->scratch_budget);
    if (bytes > ctx->scratch_bytes) {
        // Grow: the old buffer may still be read by queued work, so finish that first.
        GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
        if (ctx->scratch) GRAFT_CUDA_TRY(cudaFree(ctx->scratch));
        ctx->scratch = nullptr;
        ctx->scratch_bytes = 0;
        size_t want = bytes + bytes / 8;  // a little headroom so a slightly larger batch fits
        if (want > ctx->scratch_budget) want = ctx->scratch_budget;
        GRAFT_CUDA_TRY(dev_malloc(&ctx->scratch, want));
        ctx->scratch_bytes = want;
        if (want > ctx->scratch_peak) ctx->scratch_peak = want;
    }
    *out = ctx->scratch;
    return GRAFT_OK;
}

__global__ void row_norms_kernel(const float* __restrict__ x, int64_t n, int64_t d,
                                 float* __restrict__ out) {
    // One warp per row: strided loads, shuffle reduction.
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= n) return;
    const float* p = x + row * d;
    float s = 0.f;
    for (int64_t j = lane; j < d; j += 32) s = fmaf(p[j], p[j], s);
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(kFullMask, s, o);
    if (lane == 0) out[row] = s;
}

int row_norms(const float* x, int64_t n, int64_t d, float* out, cudaStream_t stream) {
    if (n <= 0) return GRAFT_OK;
    const int warps = 8;
    row_norms_kernel<<<(unsigned)ceil_div(n, warps), warps * 32, 0, stream>>>(x, n, d, out);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

int ctx_cublas(graft_gpu_ctx* ctx) {
    if (ctx->cublas) return GRAFT_OK;
    cublasHandle_t h = nullptr;
    GRAFT_CUBLAS_TRY(cublas_create(&h));
    ctx->cublas = h;  // owned by the context from here on, destroyed with it
    GRAFT_CUBLAS_TRY(cublasSetStream(h, ctx->stream));
    // Default math is exact FP32 SGEMM; TF32 only when the caller opts in (graft_gpu_ctx_set_tf32).
    GRAFT_CUBLAS_TRY(cublasSetMathMode(h, ctx->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return GRAFT_OK;
}

// dst row i = src row idx[i], rows of d floats: one block per row (rows of the filtered search's
// passing ids, d in the hundreds: a block's threads read one row coalesced).
__global__ void gather_rows_kernel(const float* __restrict__ src, const int32_t* __restrict__ idx,
                                   int64_t n, int64_t d, float* __restrict__ dst) {
    for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
        const float* s = src + (int64_t)idx[row] * d;
        float* t = dst + row * d;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) t[j] = s[j];
    }
}

}  // namespace graft

using namespace graft;

extern "C" {

const char* graft_gpu_last_error(void) { return g_last_error; }

int graft_gpu_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

size_t graft_gpu_device_memory(int device) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return prop.totalGlobalMem;
}

int graft_gpu_ctx_create(int device, size_t scratch_budget, graft_gpu_ctx** out) {
    if (!out) return gpu_fail(GRAFT_EINVAL, "graft_gpu_ctx_create: out is NULL");
    int n = graft_gpu_device_count();
    if (n == 0) return gpu_fail(GRAFT_ENODEVICE, "no CUDA device is visible");
    if (device < 0 || device >= n)
        return gpu_fail(GRAFT_EINVAL, "CUDA device %d does not exist (%d visible)", device, n);
    graft_gpu_ctx* ctx = new (std::nothrow) graft_gpu_ctx();
    if (!ctx) return gpu_fail(GRAFT_ENOMEM, "out of host memory");
    ctx->device = device;
    ctx->scratch_budget = scratch_budget;
    int rc = [&]() -> int {
        GRAFT_CUDA_TRY(cudaSetDevice(device));
        GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
        GRAFT_CUDA_TRY(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
        return GRAFT_OK;  // cuBLAS comes with the first GEMM (ctx_cublas): a graph build needs none
    }();
    if (rc != GRAFT_OK) {
        graft_gpu_ctx_destroy(ctx);
        return rc;
    }
    *out = ctx;
    return GRAFT_OK;
}

void graft_gpu_ctx_destroy(graft_gpu_ctx* ctx) {
    if (!ctx) return;
    cudaSetDevice(ctx->device);
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    if (ctx->scratch) cudaFree(ctx->scratch);
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    (void)cudaGetLastError();
    delete ctx;
}

void graft_gpu_ctx_set_tf32(graft_gpu_ctx* ctx, int allow) {
    ctx->allow_tf32 = allow;
    if (!ctx->cublas) return;  // applied when the handle is made
    cudaSetDevice(ctx->device);
    cublasSetMathMode(ctx->cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
}

void graft_gpu_ctx_set_certified_tf32(graft_gpu_ctx* ctx, int on) { ctx->certified_tf32 = on; }
void graft_gpu_ctx_set_fused(graft_gpu_ctx* ctx, int on) { ctx->fused_fp16 = on; }
int64_t graft_gpu_ctx_last_fallbacks(const graft_gpu_ctx* ctx) { return ctx->last_fallbacks; }
int graft_gpu_ctx_last_path(const graft_gpu_ctx* ctx) { return ctx->last_path; }
void graft_gpu_ctx_last_band(const graft_gpu_ctx* ctx, int64_t* band, int64_t* second) {
    *band = ctx->last_band;
    *second = ctx->last_second;
}

size_t graft_gpu_ctx_scratch_peak(const graft_gpu_ctx* ctx) { return ctx->scratch_peak; }

int graft_gpu_malloc(graft_gpu_ctx* ctx, void** dptr, size_t bytes) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    *dptr = nullptr;
    if (bytes == 0) return GRAFT_OK;
    GRAFT_CUDA_TRY(dev_malloc(dptr, bytes));
    return GRAFT_OK;
}

void graft_gpu_free(graft_gpu_ctx* ctx, void* dptr) {
    if (!dptr) return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream);
    cudaFree(dptr);
}

static int copy(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

int graft_gpu_upload(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes) {
    return copy(ctx, dst, src, bytes, cudaMemcpyHostToDevice);
}
int graft_gpu_download(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes) {
    return copy(ctx, dst, src, bytes, cudaMemcpyDeviceToHost);
}
int graft_gpu_copy_d2d(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes) {
    return copy(ctx, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

int graft_gpu_row_norms(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, float* out) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    return row_norms(x, n, d, out, ctx->stream);
}

int graft_gpu_gather_rows(graft_gpu_ctx* ctx, const float* src, const int32_t* idx, int64_t n,
                          int64_t d, float* dst) {
    if (!ctx || (n > 0 && (!src || !idx || !dst)) || n < 0 || d < 1)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_gather_rows: bad arguments");
    if (n == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    const unsigned blocks = (unsigned)std::min<int64_t>(n, 65535);
    gather_rows_kernel<<<blocks, 128, 0, ctx->stream>>>(src, idx, n, d, dst);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

}  // extern "C"
