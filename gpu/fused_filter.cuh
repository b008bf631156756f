// The certified FP16 path's first selection stage fused into its GEMM (exact_knn.cu): no
// distance matrix. Each block multiplies a tile of queries by tiles of base vectors on the tensor
// cores and keeps, per query, every base vector whose approximate value is at most the query's
// threshold, as a key in the query's candidate list.
#pragma once

#include <cuda_fp16.h>

#include "common.cuh"

namespace graft {

struct FusedFilterArgs {
    const __half* q16;     // nq x dp scaled query codes (exact_knn.cu's fp16_rows)
    const float* rowmul;   // nq: -2 (L2) or -1 (inner product) times the query's inverse scale
    const float* theta;    // nq: keep base vectors whose value is <= theta (NaN: keep none)
    int64_t nq;
    const __half* b16;     // nb x dp scaled base codes
    const float* bnorm;    // nb ||b||^2 (L2) or NULL (inner product)
    const float* colmul;   // nb inverse scales of the base vectors
    int64_t nb;
    int64_t dp;            // halves a row: a multiple of 8, at most kFusedMaxHalves
    uint64_t* cand;        // nq x cap keys (value, id), in no order
    int64_t cap;
    int* count;            // nq, zeroed: how many passed (more than cap: the list is incomplete)
};

// Rows longer than this are not fused: the query tile must stay in shared memory.
constexpr int64_t kFusedMaxHalves = 256;

// value = (bnorm ? bnorm[j] : 0) + (rowmul[r] * colmul[j]) * q.b, with q.b accumulated in FP32:
// HalfDotSource's value without its FP16 rounding of the dot product, inside the same bound.
int fused_filter_fp16(graft_gpu_ctx* ctx, const FusedFilterArgs& a);

}  // namespace graft
