// The certified FP16 path's GEMM with its first selection stage in the epilogue (fused_filter.cuh).
//
// A block holds a tile of 128 queries' FP16 codes in shared memory and walks a range of 128-row
// base tiles, each loaded with cp.async while the tile before it is multiplied (mma.sync
// m16n8k16: FP16 in, FP32 accumulation, fed by ldmatrix). Each warp computes 32 queries x 64 base
// vectors and, straight from its accumulator registers (the PTX ISA fixes their layout), turns
// the dot products into values and appends the few at or below their query's threshold to its
// candidate list (an atomic slot count a query). Blocks run query tiles fastest, so the blocks
// resident at once share their base tiles through L2: HBM sees the base about once, and nothing of
// size queries x base is ever written.
#include "fused_filter.cuh"

namespace graft {
namespace {

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

// Four 8 x 8 matrices of halves from shared memory; lane l gives the address of row l % 8 of
// matrix l / 8, and gets (row l / 4, columns 2 (l % 4) and + 1) of each.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], const __half* p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}
// d += a (16 x 16, row-major) b (16 x 8, column-major), FP32 accumulation.
__device__ inline void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared memory of a block, for rows of ld halves (dp rounded up to 16, plus 8: the 16-byte skew
// keeps the fragment loads' rows in different banks).
struct Layout {
    int64_t ld;
    size_t q, b, bn, cm, rm, th, bytes;
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
    float* rm_s = reinterpret_cast<float*>(smem + L.rm);
    float* th_s = reinterpret_cast<float*>(smem + L.th);
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int wr = warp >> 1, wc = warp & 1;
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
        rm_s[r] = ok ? a.rowmul[q0 + r] : 0.f;
        th_s[r] = ok ? a.theta[q0 + r] : NAN;  // no value is <= NaN
    }
    load_base_tile(a, L, smem, 0, t0);
    cp_async_commit();
    __syncthreads();

    // The accumulator layout of mma m16n8k16 (PTX ISA): lane holds rows g and g + 8 (g = lane / 4)
    // and columns 2 (lane % 4) and + 1 of each 16 x 8 tile. A warp has 2 x 8 such tiles, so a
    // lane sees 4 rows (their multipliers and thresholds stay in registers) and 16 columns.
    const int g = lane >> 2, tq = lane & 3;
    float rm[2][2], th[2][2];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = wr * kWarpRows + mi * 16 + g + 8 * h;
            rm[mi][h] = rm_s[row];
            th[mi][h] = th_s[row];
        }
    // ldmatrix addresses: A (queries) rows lane % 16, columns 8 (lane / 16); B (base, k-major rows)
    // rows (lane % 8) + 8 (lane / 16), columns 8 ((lane / 8) % 2).
    const __half* a_base = Q + (wr * kWarpRows + (lane & 15)) * L.ld + (lane >> 4) * 8;
    const int64_t b_off = (wc * kWarpCols + (lane & 7) + (lane >> 4) * 8) * L.ld + ((lane >> 3) & 1) * 8;

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

        const __half* b_base = reinterpret_cast<const __half*>(smem + L.b) + (size_t)s * kBN * L.ld + b_off;
        float acc[2][8][4];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int nj = 0; nj < 8; nj++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[mi][nj][e] = 0.f;
        for (int64_t k = 0; k < kpad; k += 16) {
            unsigned fa[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) ldmatrix_x4(fa[mi], a_base + mi * 16 * L.ld + k);
#pragma unroll
            for (int p = 0; p < 4; p++) {  // base columns 16 p .. 16 p + 15: two n-tiles
                unsigned fb[4];
                ldmatrix_x4(fb, b_base + p * 16 * L.ld + k);
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    mma_16816(acc[mi][2 * p], fa[mi], fb[0], fb[1]);
                    mma_16816(acc[mi][2 * p + 1], fa[mi], fb[2], fb[3]);
                }
            }
        }

        // Epilogue, from the registers.
        const float* bn = reinterpret_cast<const float*>(smem + L.bn) + s * kBN;
        const float* cm = reinterpret_cast<const float*>(smem + L.cm) + s * kBN;
#pragma unroll
        for (int nj = 0; nj < 8; nj++) {
            const int col = wc * kWarpCols + nj * 8 + 2 * tq;
            const float2 bn2 = *reinterpret_cast<const float2*>(bn + col);
            const float2 cm2 = *reinterpret_cast<const float2*>(cm + col);
            const int64_t id = t * kBN + col;
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int h = e >> 1, c = e & 1;
                    const float v = (c ? bn2.y : bn2.x) + (rm[mi][h] * (c ? cm2.y : cm2.x)) * acc[mi][nj][e];
                    if (v <= th[mi][h] && id + c < a.nb) {
                        const int64_t q = q0 + wr * kWarpRows + mi * 16 + g + 8 * h;
                        const int slot = atomicAdd(a.count + q, 1);
                        if (slot < a.cap) a.cand[q * a.cap + slot] = make_key(v, (uint32_t)(id + c));
                    }
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
