// The certified FP16 path's GEMM with its first selection stage in the epilogue (fused_filter.cuh).
//
// A block holds a tile of 128 queries' FP16 codes in shared memory and walks a range of 128-row
// base tiles, each loaded with cp.async while the tile before it is multiplied (WMMA, FP16 in,
// FP32 accumulation). Each warp computes 32 queries x 64 base vectors, then, one 16 x 16 fragment
// at a time through shared memory, turns the dot products into values and appends the few at or
// below their query's threshold to its candidate list (an atomic slot count a query). Blocks run
// query tiles fastest, so the blocks resident at once share their base tiles through L2: HBM sees
// the base about once, and nothing of size queries x base is ever written.
#include <mma.h>

#include "fused_filter.cuh"

namespace graft {
namespace {

using namespace nvcuda;

constexpr int kBQ = 128, kBN = 128;  // queries and base vectors of a block tile
constexpr int kThreads = 256;        // 8 warps: 4 along the queries x 2 along the base
constexpr int kWarpRows = 32, kWarpCols = 64;

__device__ inline void cp_async16(void* smem, const void* gmem, int bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Shared memory of a block, for rows of ld halves (dp rounded up to 16, plus 8: the 16-byte skew
// keeps the fragment loads' rows in different banks).
struct Layout {
    int64_t ld;
    size_t q, b, bn, cm, rm, th, c, bytes;
    explicit Layout(int64_t dp) {
        ld = (dp + 15) / 16 * 16 + 8;
        size_t o = 0;
        auto take = [&](size_t n) { size_t at = o; o += (n + 127) / 128 * 128; return at; };
        q = take(kBQ * ld * sizeof(__half));
        b = take(2 * kBN * ld * sizeof(__half));  // two stages
        bn = take(2 * kBN * sizeof(float));
        cm = take(2 * kBN * sizeof(float));
        rm = take(kBQ * sizeof(float));
        th = take(kBQ * sizeof(float));
        c = take((kThreads / 32) * 16 * 16 * sizeof(float));  // one fragment a warp
        bytes = o;
    }
};

// Stage s <- base tile t: its codes (rows past nb zero-filled), norms and inverse scales.
__device__ inline void load_base_tile(const FusedFilterArgs& a, const Layout& L, char* smem, int s, int64_t t) {
    const int64_t j0 = t * kBN, chunks = a.dp / 8;
    __half* B = reinterpret_cast<__half*>(smem + L.b) + (size_t)s * kBN * L.ld;
    for (int64_t c = threadIdx.x; c < kBN * chunks; c += kThreads) {
        const int64_t row = c / chunks, col = c - row * chunks, j = j0 + row;
        const bool ok = j < a.nb;
        cp_async16(B + row * L.ld + col * 8, a.b16 + (ok ? j : 0) * a.dp + col * 8, ok ? 16 : 0);
    }
    // Four floats a copy; a partial last one reads only what exists.
    const int per = kBN / 4;
    for (int c = threadIdx.x; c < 2 * per; c += kThreads) {
        const bool norms = c < per;
        if (norms && !a.bnorm) continue;
        const int64_t j = j0 + 4 * (norms ? c : c - per);
        const int64_t have = a.nb - j;
        const int bytes = have >= 4 ? 16 : have > 0 ? (int)have * 4 : 0;
        const float* src = (norms ? a.bnorm : a.colmul) + (bytes ? j : 0);
        float* dst = reinterpret_cast<float*>(smem + (norms ? L.bn : L.cm)) + s * kBN + (j - j0);
        cp_async16(dst, src, bytes);
    }
}

__global__ void __launch_bounds__(kThreads, 2)
fused_filter_kernel(FusedFilterArgs a, Layout L, int64_t tiles_per_block) {
    extern __shared__ __align__(128) char smem[];
    __half* Q = reinterpret_cast<__half*>(smem + L.q);
    float* rm = reinterpret_cast<float*>(smem + L.rm);
    float* th = reinterpret_cast<float*>(smem + L.th);
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int wr = warp >> 1, wc = warp & 1;
    float* C = reinterpret_cast<float*>(smem + L.c) + warp * 256;
    const int64_t q0 = (int64_t)blockIdx.x * kBQ;
    const int64_t ntiles = (a.nb + kBN - 1) / kBN;
    const int64_t t0 = (int64_t)blockIdx.y * tiles_per_block, t1 = min(ntiles, t0 + tiles_per_block);
    if (t0 >= t1) return;  // the whole block
    const int64_t chunks = a.dp / 8, kpad = (a.dp + 15) / 16 * 16;

    // The query tile (rows past nq zero-filled), and the pad columns of every row zeroed once:
    // cp.async never writes them, and zeros add nothing to a dot product.
    for (int64_t c = threadIdx.x; c < kBQ * chunks; c += kThreads) {
        const int64_t row = c / chunks, col = c - row * chunks, q = q0 + row;
        const bool ok = q < a.nq;
        cp_async16(Q + row * L.ld + col * 8, a.q16 + (ok ? q : 0) * a.dp + col * 8, ok ? 16 : 0);
    }
    if (kpad > a.dp) {
        __half* B = reinterpret_cast<__half*>(smem + L.b);
        for (int row = threadIdx.x; row < kBQ + 2 * kBN; row += kThreads) {
            __half* p = row < kBQ ? Q + row * L.ld : B + (row - kBQ) * L.ld;
            *reinterpret_cast<uint4*>(p + a.dp) = make_uint4(0, 0, 0, 0);
        }
    }
    if (!a.bnorm)
        for (int i = threadIdx.x; i < 2 * kBN; i += kThreads) reinterpret_cast<float*>(smem + L.bn)[i] = 0.f;
    for (int r = threadIdx.x; r < kBQ; r += kThreads) {
        const bool ok = q0 + r < a.nq;
        rm[r] = ok ? a.rowmul[q0 + r] : 0.f;
        th[r] = ok ? a.theta[q0 + r] : NAN;  // no value is <= NaN
    }
    load_base_tile(a, L, smem, 0, t0);
    cp_async_commit();

    for (int64_t t = t0; t < t1; t++) {
        const int s = (int)((t - t0) & 1);
        if (t + 1 < t1) {
            load_base_tile(a, L, smem, s ^ 1, t + 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();

        const __half* B = reinterpret_cast<const __half*>(smem + L.b) + (size_t)s * kBN * L.ld;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[i][j], 0.f);
        for (int64_t k = 0; k < kpad; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[4];
#pragma unroll
            for (int i = 0; i < 2; i++) wmma::load_matrix_sync(fa[i], Q + (wr * kWarpRows + i * 16) * L.ld + k, (unsigned)L.ld);
#pragma unroll
            for (int j = 0; j < 4; j++) wmma::load_matrix_sync(fb[j], B + (wc * kWarpCols + j * 16) * L.ld + k, (unsigned)L.ld);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }

        // Epilogue: lane owns column (lane & 15) and every other row of each fragment.
        const float* bn = reinterpret_cast<const float*>(smem + L.bn) + s * kBN;
        const float* cm = reinterpret_cast<const float*>(smem + L.cm) + s * kBN;
        const int cl = lane & 15;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int col = wc * kWarpCols + j * 16 + cl;
            const int64_t id = t * kBN + col;
            const float bnc = bn[col], cmc = cm[col];
            const bool col_ok = id < a.nb;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                wmma::store_matrix_sync(C, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const int rl = (lane >> 4) + 2 * e, row = wr * kWarpRows + i * 16 + rl;
                    const float v = bnc + (rm[row] * cmc) * C[rl * 16 + cl];
                    if (col_ok && v <= th[row]) {
                        const int64_t q = q0 + row;
                        const int slot = atomicAdd(a.count + q, 1);
                        if (slot < a.cap) a.cand[q * a.cap + slot] = make_key(v, (uint32_t)id);
                    }
                }
                __syncwarp();
            }
        }
        __syncthreads();  // the stage is refilled two tiles on
    }
}

}  // namespace

int fused_filter_fp16(graft_gpu_ctx* ctx, const FusedFilterArgs& a) {
    if (a.nq <= 0 || a.nb <= 0) return GRAFT_OK;
    if (a.dp % 8 != 0 || a.dp > kFusedMaxHalves)
        return gpu_fail(GRAFT_EINVAL, "fused_filter_fp16: rows of %lld halves", (long long)a.dp);
    const Layout L(a.dp);
    GRAFT_CUDA_TRY(cudaFuncSetAttribute(fused_filter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L.bytes));
    // Query tiles across x; the base's tiles split over y into ranges long enough to amortize a
    // block's query load, with about 16 waves of blocks in all.
    const int64_t gx = ceil_div(a.nq, kBQ), ntiles = ceil_div(a.nb, kBN);
    const int64_t want = std::max<int64_t>(1, 32 * (int64_t)ctx->sm_count / gx);
    const int64_t per = ceil_div(ntiles, std::min<int64_t>(ntiles, std::min<int64_t>(want, 65535)));
    const int64_t gy = ceil_div(ntiles, per);
    if (gx > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "fused_filter_fp16: %lld queries in one call", (long long)a.nq);
    fused_filter_kernel<<<dim3((unsigned)gx, (unsigned)gy), kThreads, L.bytes, ctx->stream>>>(a, L, per);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

}  // namespace graft
