// Quick multi-select (QMS): per-row k-smallest selection with warp ballots.
// Paper: ../shared/papers/qms-gpu-quick-multi-select-knn.txt (Algorithm 1, Figures 2-4).
#pragma once

#include <cuda_fp16.h>

#include "common.cuh"

namespace graft {

// Row sources. A source turns (row, column) into an ordered 64-bit key (common.cuh).

// Distances straight out of the GEMM: key value = dots[r*ld + j] + (bnorm ? bnorm[j] : 0), with
// the GEMM's alpha already holding -2 (L2) or -1 (inner product) so smaller is always better.
// id = id0 + j. Query r skips id self0 + r when self0 >= 0 (k-NN graph).
struct DotSource {
    const float* dots;
    int64_t ld;          // multiple of 4; dots 16-byte aligned
    const float* bnorm;  // nullable; 16-byte aligned
    uint32_t id0;
    int64_t self0;
};

// Exact integer distances (the INT8 path): key value = mul * dots[r*ld + j] + (bterm ? bterm[j] :
// 0), an int32 with smaller better (L2: mul = -2, bterm = ||b'||^2; inner product: mul = -1,
// bterm = -shift sum b'; exact_knn.cu). The INT8 GEMM runs with alpha = 1 (the only alpha cuBLAS
// takes with int32 output), so the scale is applied here. Values stay below kIntPastEnd
// (GRAFT_GPU_INT8_MAX_D bounds them), which marks columns past the row's end.
struct IntDotSource {
    const int32_t* dots;
    int64_t ld;            // multiple of 4; dots 16-byte aligned
    const int32_t* bterm;  // nullable; 16-byte aligned
    int32_t mul;
    uint32_t id0;
    int64_t self0;
};
constexpr int32_t kIntPastEnd = INT32_MAX;

// Distances from the certified FP16 path's half-precision GEMM of scaled vectors (exact_knn.cu):
// key value = (bnorm ? bnorm[j] : 0) + (rowmul[r] * colmul[j]) * dots[r*ld + j], with rowmul the
// query's -2 (L2) or -1 (inner product) times its inverse scale and colmul the base vector's
// inverse scale, all powers of two, so the product undoes the scaling exactly. id and self0 as
// DotSource.
struct HalfDotSource {
    const __half* dots;
    int64_t ld;           // multiple of 8; dots 16-byte aligned
    const float* bnorm;   // nullable; 16-byte aligned
    const float* colmul;  // 16-byte aligned
    const float* rowmul;
    uint32_t id0;
    int64_t self0;
};

// Keys already made (merging per-tile winners): keys[r*ld + j].
struct KeySource {
    const uint64_t* keys;
    int64_t ld;
};

// Sizes of one selection, fixed per (cols, k) on the host.
struct QmsPlan {
    int64_t cols;
    int64_t k;
    int samples;    // M: stratified random samples per row for the first pivot (power of 2)
    int rank;       // first pivot = the rank-th smallest sample
    int take_all;   // 1: no first pivot, every key passes (k is a large fraction of cols)
    int64_t cap;    // candidate buffer per row (keys); two of them per row (ping-pong)
};

QmsPlan qms_plan(int64_t cols, int64_t k);

// Device scratch for `rows` rows under `plan`, in bytes.
size_t qms_scratch_bytes(const QmsPlan& plan, int64_t rows);

// Writes the k smallest keys of each row, unordered, to out[r*out_ld + 0..k) (kKeyNone where a
// row has fewer than k keys). scratch: qms_scratch_bytes(plan, rows) bytes.
int qms_select_rows(graft_gpu_ctx* ctx, const DotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch);
int qms_select_rows(graft_gpu_ctx* ctx, const KeySource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch);
int qms_select_rows(graft_gpu_ctx* ctx, const IntDotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch);
int qms_select_rows(graft_gpu_ctx* ctx, const HalfDotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch);

// Sorts each row of rows x k keys ascending (CUB segmented radix sort) into `sorted`.
// temp: sort_temp_bytes(rows, k) bytes.
size_t sort_temp_bytes(int64_t rows, int64_t k);
int sort_rows(graft_gpu_ctx* ctx, const uint64_t* keys, uint64_t* sorted, int64_t rows, int64_t k,
              void* temp);

}  // namespace graft
