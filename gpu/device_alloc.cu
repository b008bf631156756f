// Every device, pinned-host and cuBLAS-handle allocation of gpu/ goes through these three, so
// that the allocation fault injector (graft_gpu_fault_inject in graft_gpu.h, for tests) sees each
// one. Off, it costs one relaxed atomic increment per allocation; gpu/ never allocates inside
// iteration loops, so that is a handful per add or search.
#include <atomic>

#include "common.cuh"

namespace graft {
namespace {
std::atomic<long long> g_seen{0};     // allocations since the last graft_gpu_fault_inject
std::atomic<long long> g_fail_at{0};  // the one to fail (1-based), 0 = none

bool inject_now() {
    long long n = g_seen.fetch_add(1, std::memory_order_relaxed) + 1;
    return n == g_fail_at.load(std::memory_order_relaxed);
}
}  // namespace

cudaError_t dev_malloc(void** p, size_t bytes) {
    if (inject_now()) {
        *p = nullptr;
        return cudaErrorMemoryAllocation;
    }
    return cudaMalloc(p, bytes);
}

cudaError_t pinned_alloc(void** p, size_t bytes, unsigned flags) {
    if (inject_now()) {
        *p = nullptr;
        return cudaErrorMemoryAllocation;
    }
    return cudaHostAlloc(p, bytes, flags);
}

// cublasCreate allocates the handle's default workspace on the device: its failure stands for
// the cuBLAS workspace's.
cublasStatus_t cublas_create(cublasHandle_t* h) {
    if (inject_now()) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasCreate(h);
}
}  // namespace graft

extern "C" {
void graft_gpu_fault_inject(long long nth) {
    graft::g_fail_at.store(nth, std::memory_order_relaxed);
    graft::g_seen.store(0, std::memory_order_relaxed);
}

long long graft_gpu_fault_count(void) { return graft::g_seen.load(std::memory_order_relaxed); }

int graft_gpu_mem_free(int device, size_t* free_bytes) {
    if (!free_bytes) return graft::gpu_fail(GRAFT_EINVAL, "graft_gpu_mem_free: NULL argument");
    size_t total = 0;
    GRAFT_CUDA_TRY(cudaSetDevice(device));
    GRAFT_CUDA_TRY(cudaDeviceSynchronize());
    GRAFT_CUDA_TRY(cudaMemGetInfo(free_bytes, &total));
    return GRAFT_OK;
}
}
