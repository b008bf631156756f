// Streams, events, page-locked host memory and asynchronous copies, as C functions: the plugin's
// host pipelines (plugin/graph/bang_gpu.c) overlap host work with device work through these and never
// include a CUDA header. A NULL stream is the context's own stream, so these mix with the
// synchronous helpers of context.cu (graft_gpu_upload, ...) in one order.
#include "common.cuh"

using namespace graft;

namespace {

cudaStream_t as_stream(graft_gpu_ctx* ctx, graft_gpu_stream s) {
    return s ? reinterpret_cast<cudaStream_t>(s) : ctx->stream;
}

}  // namespace

extern "C" {

int graft_gpu_stream_create(graft_gpu_ctx* ctx, graft_gpu_stream* out) {
    if (!ctx || !out) return gpu_fail(GRAFT_EINVAL, "graft_gpu_stream_create: NULL argument");
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t s = nullptr;
    // Non-blocking: no implicit synchronization with the legacy default stream, like the
    // context's own stream.
    GRAFT_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = reinterpret_cast<graft_gpu_stream>(s);
    return GRAFT_OK;
}

void graft_gpu_stream_destroy(graft_gpu_ctx* ctx, graft_gpu_stream s) {
    if (!ctx || !s) return;
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
    cudaStreamDestroy(reinterpret_cast<cudaStream_t>(s));
    (void)cudaGetLastError();
}

int graft_gpu_stream_sync(graft_gpu_ctx* ctx, graft_gpu_stream s) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(as_stream(ctx, s)));
    return GRAFT_OK;
}

int graft_gpu_event_create(graft_gpu_ctx* ctx, int timing, graft_gpu_event* out) {
    if (!ctx || !out) return gpu_fail(GRAFT_EINVAL, "graft_gpu_event_create: NULL argument");
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaEvent_t e = nullptr;
    // Events that only order work skip the timestamp (cheaper to record and to wait on).
    GRAFT_CUDA_TRY(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    *out = reinterpret_cast<graft_gpu_event>(e);
    return GRAFT_OK;
}

void graft_gpu_event_destroy(graft_gpu_ctx* ctx, graft_gpu_event e) {
    if (!ctx || !e) return;
    cudaSetDevice(ctx->device);
    cudaEventDestroy(reinterpret_cast<cudaEvent_t>(e));
    (void)cudaGetLastError();
}

int graft_gpu_event_record(graft_gpu_ctx* ctx, graft_gpu_event e, graft_gpu_stream s) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaEventRecord(reinterpret_cast<cudaEvent_t>(e), as_stream(ctx, s)));
    return GRAFT_OK;
}

int graft_gpu_event_sync(graft_gpu_ctx* ctx, graft_gpu_event e) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(e)));
    return GRAFT_OK;
}

int graft_gpu_stream_wait(graft_gpu_ctx* ctx, graft_gpu_stream s, graft_gpu_event e) {
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaStreamWaitEvent(as_stream(ctx, s), reinterpret_cast<cudaEvent_t>(e), 0));
    return GRAFT_OK;
}

int graft_gpu_event_elapsed_ms(graft_gpu_ctx* ctx, graft_gpu_event start, graft_gpu_event end,
                               float* ms) {
    if (!ms) return gpu_fail(GRAFT_EINVAL, "graft_gpu_event_elapsed_ms: NULL argument");
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaEventElapsedTime(ms, reinterpret_cast<cudaEvent_t>(start),
                                        reinterpret_cast<cudaEvent_t>(end)));
    return GRAFT_OK;
}

int graft_gpu_host_alloc(graft_gpu_ctx* ctx, void** out, size_t bytes) {
    if (!ctx || !out) return gpu_fail(GRAFT_EINVAL, "graft_gpu_host_alloc: NULL argument");
    *out = nullptr;
    if (bytes == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaError_t e = pinned_alloc(out, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = nullptr;
        // Page-locked memory is host memory: its shortage is GRAFT_ENOMEM, not a GPU error.
        return gpu_fail(e == cudaErrorMemoryAllocation ? GRAFT_ENOMEM : GRAFT_ECUDA,
                        "cudaHostAlloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    return GRAFT_OK;
}

int graft_gpu_host_device_ptr(graft_gpu_ctx* ctx, void* host, void** out) {
    if (!ctx || !host || !out)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_host_device_ptr: NULL argument");
    *out = nullptr;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaError_t e = cudaHostGetDevicePointer(out, host, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = nullptr;
        return gpu_fail(GRAFT_ECUDA, "cudaHostGetDevicePointer: %s", cudaGetErrorString(e));
    }
    return GRAFT_OK;
}

void graft_gpu_host_free(graft_gpu_ctx* ctx, void* p) {
    if (!ctx || !p) return;
    cudaSetDevice(ctx->device);
    cudaFreeHost(p);
    (void)cudaGetLastError();
}

int graft_gpu_copy_async(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes,
                         graft_gpu_stream s) {
    if (bytes == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    // cudaMemcpyDefault: the direction follows from the pointers (unified addressing).
    GRAFT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(ctx, s)));
    return GRAFT_OK;
}

int graft_gpu_memset_async(graft_gpu_ctx* ctx, void* dst, int value, size_t bytes,
                           graft_gpu_stream s) {
    if (bytes == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, as_stream(ctx, s)));
    return GRAFT_OK;
}

}  // extern "C"
