// Shared helpers of graft's CUDA layer: error checks, the context, warp helpers, ordered keys,
// the storages' decodes.
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cstdio>

#include "graft/graft.h"
#include "graft_gpu.h"

namespace graft {

// Records the message for graft_gpu_last_error() and returns `status`.
int gpu_fail(int status, const char* fmt, ...);

const char* cublas_status_string(cublasStatus_t s);

}  // namespace graft

// Checks a CUDA call; on failure records "file:line: call: error" and returns a graft status
// (GRAFT_EGPU_NOMEM for cudaErrorMemoryAllocation, GRAFT_ECUDA otherwise) from the caller.
#define GRAFT_CUDA_TRY(call)                                                                   \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            (void)cudaGetLastError(); /* clear a sticky-free error so later calls can work */  \
            return ::graft::gpu_fail(e_ == cudaErrorMemoryAllocation ? GRAFT_EGPU_NOMEM        \
                                                                     : GRAFT_ECUDA,            \
                                     "%s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                                     cudaGetErrorString(e_));                                  \
        }                                                                                      \
    } while (0)

// A kernel launch is followed by this: catches bad configurations at once.
#define GRAFT_CUDA_LAUNCH_CHECK() GRAFT_CUDA_TRY(cudaGetLastError())

#define GRAFT_CUBLAS_TRY(call)                                                                 \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            return ::graft::gpu_fail(s_ == CUBLAS_STATUS_ALLOC_FAILED ? GRAFT_EGPU_NOMEM       \
                                                                      : GRAFT_ECUDA,           \
                                     "%s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                                     ::graft::cublas_status_string(s_));                       \
    } while (0)

#define GRAFT_GPU_TRY(expr)                \
    do {                                   \
        int rc_ = (expr);                  \
        if (rc_ != GRAFT_OK) return rc_;   \
    } while (0)

// The per-index device context (graft_gpu.h): stream, cuBLAS handle, scratch arena.
struct graft_gpu_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    int sm_count;
    size_t scratch_budget;
    void* scratch;          // grow-only, never shrinks while the context lives
    size_t scratch_bytes;
    size_t scratch_peak;
    int allow_tf32;
    int certified_tf32;     // exact k-NN: TF32 (or FP16, given codes) distances, certified, re-ranked (exact_knn.cu)
    int64_t last_fallbacks; // queries the last certified search sent back to FP32
    int64_t last_band;      // fused: queries of the last search whose band was re-ranked from their list
    int64_t last_second;    // fused: queries of the last search given a second pass
    int fp32_calls_left;    // calls that skip certification after one whose certificates failed
    int64_t cert_margin;    // candidates kept beyond k by the certified path (0: the default)
    int last_path;          // path of the last exact k-NN call: 1 FP32, 2 certified TF32, 3 INT8, 4 certified FP16, 5 fused FP16
    int int8_unsupported;   // cuBLAS refused the INT8 GEMM once: the INT8 path is off for this context
    int fp16_unsupported;   // cuBLAS refused the FP16 GEMM once: certified TF32 instead for this context
    int fused_fp16;         // certified FP16 may fuse its first selection into the GEMM (path 5)
    int64_t fused_target;   // candidates a fused query aims at (0: the default; adapts, exact_knn.cu)
};

namespace graft {

constexpr unsigned kFullMask = 0xffffffffu;

// Makes the context's device current for the calling thread.
int ctx_enter(graft_gpu_ctx* ctx);

// out[i] = ||x_i||^2 on `stream`.
int row_norms(const float* x, int64_t n, int64_t d, float* out, cudaStream_t stream);

// The context's cuBLAS handle, made on first use (callers hold the context alone, as for every
// other context call).
int ctx_cublas(graft_gpu_ctx* ctx);

// The only allocation calls of gpu/ (device_alloc.cu): cudaMalloc, cudaHostAlloc, cublasCreate,
// seen by the test-only fault injector (graft_gpu_fault_inject).
cudaError_t dev_malloc(void** p, size_t bytes);
cudaError_t pinned_alloc(void** p, size_t bytes, unsigned flags);
cublasStatus_t cublas_create(cublasHandle_t* h);

// Returns a device scratch buffer of at least `bytes` (grown within the budget).
int ctx_scratch(graft_gpu_ctx* ctx, size_t bytes, void** out);

// ---- ordered keys -------------------------------------------------------------------------
// A candidate travels as one 64-bit key: the float's order-preserving bits in the high word and
// the id in the low word. Keys compare like (value, id), so selection and sort are total orders
// with FAISS's tie rule (smaller id first) and need no separate index array.
constexpr uint64_t kKeyNone = ~0ull;  // empty slot; larger than every real key

__host__ __device__ inline uint32_t float_to_ordered(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__host__ __device__ inline float ordered_to_float(uint32_t u) {
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
__host__ __device__ inline uint64_t make_key(float v, uint32_t id) {
    return ((uint64_t)float_to_ordered(v) << 32) | id;
}
// Integer keys (the exact INT8 path): the int32 value with its sign bit flipped orders as an
// unsigned word, so (value, id) compares exactly like the float keys do.
__host__ __device__ inline uint64_t make_int_key(int32_t v, uint32_t id) {
    return ((uint64_t)((uint32_t)v ^ 0x80000000u) << 32) | id;
}
__host__ __device__ inline int32_t int_key_value(uint64_t key) {
    return (int32_t)((uint32_t)(key >> 32) ^ 0x80000000u);
}

__device__ inline unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// ---- Bloom filter (BANG 4.4) -----------------------------------------------------------------
// The visited set of the graph searches (graph_search.cu, bang_search.cu): 2 hashes, the two
// 32-bit halves of splitmix64's finalizer of the id, over a filter of mask + 1 bits (a power of
// two). Test-and-set: true when u was not in the filter (one of its bits was clear), and u is
// in it afterwards. Two threads inserting the same id at once may both see it as new.
__device__ inline bool bloom_insert(uint32_t* bf, uint32_t mask, int32_t u) {
    const uint64_t h = graft_mix64((uint32_t)u);
    const uint32_t b1 = (uint32_t)h & mask, b2 = (uint32_t)(h >> 32) & mask;
    const uint32_t o1 = atomicOr(&bf[b1 >> 5], 1u << (b1 & 31));
    const uint32_t o2 = atomicOr(&bf[b2 >> 5], 1u << (b2 & 31));
    return !((o1 >> (b1 & 31)) & 1u) || !((o2 >> (b2 & 31)) & 1u);
}

// ---- storages (graft/storage.h) ------------------------------------------------------------
// How the kernels that read a storage's rows (the walk: graph_search.cu; GRNND: grnnd_build.cu)
// decode them. SQ8's affine step (code * scale + offset) is the caller's: the walk folds it into
// the staged query, GRNND applies it to both rows.
enum { kFP32 = 0, kFP16 = 1, kSQ8 = 2 };  // graft_storage_kind

// One 16-byte load holds W dimensions of a row: 4 (FP32), 8 (FP16) or 16 (SQ8) — the same
// load count per byte for every storage, so a compressed row takes 2-4x fewer loads.
template <int S>
struct Width {
    static constexpr int W = S == kFP32 ? 4 : S == kFP16 ? 8 : 16;
    static constexpr int bytes = 16 / W;  // per dimension
};

__device__ inline uint32_t uint4_word(const uint4& r, int i) {
    return i == 0 ? r.x : i == 1 ? r.y : i == 2 ? r.z : r.w;
}

// Dimensions 4t .. 4t + 3 of a 16-byte chunk as floats: the vector (FP32), the halves (FP16) or
// the raw codes 0..255 (SQ8; PRMT into 2^23 + c, minus 2^23: exact, no I2F). t is a
// compile-time constant after unrolling.
template <int S>
__device__ inline float4 decode4(const uint4& r, int t) {
    if (S == kFP32) {
        return make_float4(__uint_as_float(r.x), __uint_as_float(r.y), __uint_as_float(r.z),
                           __uint_as_float(r.w));
    } else if (S == kFP16) {
        const uint32_t a = uint4_word(r, 2 * t), b = uint4_word(r, 2 * t + 1);
        return make_float4(__half2float(__ushort_as_half((unsigned short)(a & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(a >> 16))),
                           __half2float(__ushort_as_half((unsigned short)(b & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(b >> 16))));
    } else {
        const uint32_t c = uint4_word(r, t);
        constexpr float k23 = 8388608.f;
        return make_float4(__uint_as_float(__byte_perm(c, 0x4b000000u, 0x7540)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7541)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7542)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7543)) - k23);
    }
}

// Dimension j of row u read alone: the vector's value, the half as a float, or the raw code.
template <int S>
__device__ inline float load1(const void* __restrict__ base, uint32_t u, int64_t d, int j) {
    if (S == kFP32) return __ldg(static_cast<const float*>(base) + (int64_t)u * d + j);
    if (S == kFP16)
        return __half2float(__ushort_as_half(
                __ldg(static_cast<const unsigned short*>(base) + (int64_t)u * d + j)));
    return (float)__ldg(static_cast<const uint8_t*>(base) + (int64_t)u * d + j);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace graft
