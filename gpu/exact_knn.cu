// Exact k-NN: cuBLAS distance GEMM + quick multi-select, tiled under the context's budget.
//
// For L2, ||q - b||^2 = ||q||^2 + ||b||^2 - 2 q.b. The GEMM computes -2 q.b (alpha = -2) into a
// tile of queries x base; the selection adds ||b||^2 as it reads the tile, so ranking needs no
// query norm; ||q||^2 is added back (and the result clamped at 0, as FAISS does) only for the k
// returned distances. For inner product alpha = -1 makes "smaller is better" for both metrics.
// No nq x nb matrix is ever allocated: queries go in tiles of qt rows and, when a row of nb
// distances does not fit the budget, the base goes in tiles whose per-tile winners are merged by
// a second selection over the concatenated winners.
//
// Certified TF32 (ctx->certified_tf32): the GEMM runs on TF32 tensor cores (about 8x FP32 SIMT on
// an H100), the selection keeps k' = k + max(margin, k/2) candidates per query (margin 32, raised
// per index while over 1% of queries fail, up to 1024), and a rigorous bound E
// on every approximate distance's error (input rounding to TF32 and FP32 accumulation, below)
// decides whether those hold the exact k nearest: with t the k-th smallest approximate value and
// m the k'-th, every true top-k vector has an approximate value <= t + 2E, so m > t + 2E proves
// that none was left out. The k' candidates are then re-ranked with FP32 distances computed
// directly (sum of squared differences); a query whose certificate fails (ties, crowded
// neighbourhoods) is searched again by the FP32 path. Results equal the FP32 path's but for ties
// within FP32 rounding.
//
// Certified FP16 (graft_gpu_knn_args.xb16): the same certificate over an FP16 GEMM of vectors
// scaled by powers of two (graft_gpu.h), FP32 accumulation, FP16 output: the distance matrix,
// whose write and read dominate the TF32 path at k = 10, is half the bytes, and the GEMM runs at
// twice TF32's tensor-core rate. The bound (fp16_bound) follows the scaling back exactly.
//
// Fused certified FP16 (ctx->fused_fp16, path 5): the same certificate with no distance matrix.
// A threshold a query from a sample of the base, then graft's own tensor-core GEMM kernel
// (fused_filter.cu) keeps only the vectors at or below it; see "certified FP16 with the first
// selection fused into the GEMM" below for why the candidates it keeps are the ones needed.
#include <cfloat>
#include <cmath>
#include <vector>
#include <initializer_list>

#include "fused_filter.cuh"
#include "qms_select.cuh"

namespace graft {
namespace {

enum DecodeMode { kDecodeRaw = 0, kDecodeL2 = 1, kDecodeIP = 2 };

// Row r of the keys goes to output row out_rows[r] (NULL: r).
__global__ void decode_kernel(const uint64_t* __restrict__ sorted, int64_t rows, int64_t ksel,
                              int64_t k, const float* __restrict__ qnorm, int mode,
                              float* __restrict__ D, int64_t* __restrict__ I,
                              const int64_t* __restrict__ out_rows) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * k) return;
    int64_t r = i / k, c = i % k;
    uint64_t key = c < ksel ? sorted[r * ksel + c] : kKeyNone;
    if (out_rows) i = out_rows[r] * k + c;
    float missing = mode == kDecodeIP ? -FLT_MAX : FLT_MAX;
    if (key == kKeyNone) {
        D[i] = missing;
        I[i] = -1;
        return;
    }
    float v = ordered_to_float((uint32_t)(key >> 32));
    if (mode == kDecodeL2) v = fmaxf(v + qnorm[r], 0.f);
    else if (mode == kDecodeIP) v = -v;
    D[i] = v;
    I[i] = (int64_t)(uint32_t)key;
}

int decode(graft_gpu_ctx* ctx, const uint64_t* sorted, int64_t rows, int64_t ksel, int64_t k,
           const float* qnorm, int mode, float* D, int64_t* I, const int64_t* out_rows = nullptr) {
    int64_t n = rows * k;
    if (n == 0) return GRAFT_OK;
    decode_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, ctx->stream>>>(sorted, rows, ksel, k, qnorm,
                                                                      mode, D, I, out_rows);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

// Carves consecutive 256-byte aligned pieces out of one scratch buffer.
struct Carver {
    char* base;
    size_t used = 0;
    template <class T>
    T* take(size_t count) {
        T* p = reinterpret_cast<T*>(base ? base + used : nullptr);
        used += align_up(count * sizeof(T), 256);
        return p;
    }
};

// Scratch layout of one (query tile, base tile) configuration. With base == nullptr it only
// counts bytes, so the same code sizes and carves.
struct KnnTiles {
    int64_t qt, nbt, ldc, ntiles, ksel;
    QmsPlan tile_plan, last_plan, merge_plan;  // full base tiles, the last (shorter) one, the merge
    float* dots;        // qt x ldc: float, int32 (INT8) or half (FP16: dp16 > 0)
    float* qnorm;
    uint64_t* merged;   // qt x ntiles*ksel (ntiles > 1)
    uint64_t* winners;  // qt x ksel
    uint64_t* sorted;   // qt x ksel
    void* qms;          // tile select scratch, then merge select scratch
    void* sort_temp;
    int* fail;          // qt certificate failures (certified paths)
    float* bmax2;       // largest ||b||^2 (certified paths)
    float* bscale_max;  // largest inverse scale of the base (certified FP16)
    int64_t dp8;        // INT8 path: bytes of a query's int8 codes (0: another path)
    int8_t* q8;         // qt x dp8 query codes (INT8)
    int64_t* qterm;     // qt per-query terms of the exact distance (INT8)
    int64_t dp16;       // FP16 path: halves of a query's codes (0: another path)
    __half* q16;        // qt x dp16 scaled query codes (FP16)
    float* qmul;        // qt: -2 (L2) or -1 (inner product) times the query's inverse scale (FP16)
    // Fused FP16 (cap > 0): the "base" is the sample of nbt vectors that sets the thresholds.
    int64_t cap;        // candidate slots a query
    __half* s16;        // nbt x dp16 sample codes, their norms and inverse scales
    float* snorm;
    float* sscale;
    float* theta;       // qt thresholds
    int* count;         // qt candidates found
    uint64_t* cand;     // qt x cap candidate keys
    QmsPlan cand_plan;  // the selection over a candidate list
    // The ambiguous band (cap > 0; "the ambiguous band" below): queries' rows gathered together.
    float* limit;       // qt band limits U
    uint64_t* cand2;    // qt x cap keys: band rows' lists, or second-pass lists of up to kSecondCap
    int64_t* rows;      // qt tile rows of the gathered queries
    float* limit2;      // qt their U
    __half* q16b;       // qt x dp16 their codes (second pass)
    float* qmul2;       // qt their query factors (second pass)
    size_t qms_bytes;   // of qms
    size_t bytes;

    void layout(char* base) {
        Carver c{base};
        // INT8: the GEMM's n is rounded up to a multiple of 4 too (knn_rows_int8), so the dot
        // products and query codes hold up to 3 more rows (never selected).
        const int64_t qr = dp8 ? (qt + 3) / 4 * 4 : qt;
        dots = reinterpret_cast<float*>(c.take<char>((size_t)qr * ldc * (dp16 ? sizeof(__half) : 4)));
        qnorm = c.take<float>(qt);
        merged = ntiles > 1 ? c.take<uint64_t>((size_t)qt * ntiles * ksel) : nullptr;
        winners = c.take<uint64_t>((size_t)qt * ksel);
        sorted = c.take<uint64_t>((size_t)qt * ksel);
        // A shorter last tile can need a larger candidate buffer than a full one (its plan
        // may take every key), so the scratch fits the largest of the three plans.
        size_t q1 = qms_scratch_bytes(tile_plan, qt), q2 = qms_scratch_bytes(last_plan, qt);
        size_t q3 = ntiles > 1 ? qms_scratch_bytes(merge_plan, qt) : 0;
        size_t q4 = cap ? qms_scratch_bytes(cand_plan, qt) : 0;
        qms_bytes = std::max({q1, q2, q3, q4});
        qms = c.take<char>(qms_bytes);
        sort_temp = c.take<char>(sort_temp_bytes(qt, ksel));
        fail = c.take<int>(qt);
        bmax2 = c.take<float>(1);
        bscale_max = c.take<float>(1);
        q8 = dp8 ? c.take<int8_t>((size_t)qr * dp8) : nullptr;
        qterm = dp8 ? c.take<int64_t>(qt) : nullptr;
        q16 = dp16 ? c.take<__half>((size_t)qt * dp16) : nullptr;
        qmul = dp16 ? c.take<float>(qt) : nullptr;
        s16 = cap ? c.take<__half>((size_t)nbt * dp16) : nullptr;
        snorm = cap ? c.take<float>(nbt) : nullptr;
        sscale = cap ? c.take<float>(nbt) : nullptr;
        theta = cap ? c.take<float>(qt) : nullptr;
        count = cap ? c.take<int>(qt) : nullptr;
        cand = cap ? c.take<uint64_t>((size_t)qt * cap) : nullptr;
        limit = cap ? c.take<float>(qt) : nullptr;
        cand2 = cap ? c.take<uint64_t>((size_t)qt * cap) : nullptr;
        rows = cap ? c.take<int64_t>(qt) : nullptr;
        limit2 = cap ? c.take<float>(qt) : nullptr;
        q16b = cap ? c.take<__half>((size_t)qt * dp16) : nullptr;
        qmul2 = cap ? c.take<float>(qt) : nullptr;
        bytes = c.used;
    }
};

KnnTiles plan_tiles(int64_t nq, int64_t nb, int64_t ksel, int64_t qt, int64_t nbt, int64_t dp8,
                    int64_t dp16, int64_t cap) {
    KnnTiles t{};
    t.qt = qt;
    t.dp8 = dp8;
    t.dp16 = dp16;
    t.cap = cap;
    if (cap) t.cand_plan = qms_plan(cap, ksel);
    t.nbt = nbt;
    t.ldc = dp16 ? (nbt + 7) / 8 * 8 : (nbt + 3) / 4 * 4;  // 16-byte rows for the vector loads
    t.ntiles = ceil_div(nb, nbt);
    t.ksel = ksel;
    t.tile_plan = qms_plan(nbt, ksel);
    t.last_plan = qms_plan(nb - (t.ntiles - 1) * nbt, ksel);
    t.merge_plan = qms_plan(t.ntiles * ksel, ksel);
    t.layout(nullptr);
    return t;
}

// Picks tile sizes that fit the budget: the whole base per row when at least `min_rows` query
// rows fit, else base tiles (multiples of 32 columns) until they do.
int choose_tiles(graft_gpu_ctx* ctx, int64_t nq, int64_t nb, int64_t ksel, KnnTiles* out,
                 int64_t dp8 = 0, int64_t dp16 = 0, int64_t cap = 0) {
    const size_t budget = ctx->scratch_budget;
    const int64_t min_rows = std::min<int64_t>(nq, 256);
    int64_t nbt = nb;
    for (;;) {
        KnnTiles one = plan_tiles(nq, nb, ksel, 1, nbt, dp8, dp16, cap);
        KnnTiles two = plan_tiles(nq, nb, ksel, 2, nbt, dp8, dp16, cap);
        size_t per_row = two.bytes - one.bytes;
        size_t fixed = one.bytes > per_row ? one.bytes - per_row : 0;
        int64_t qt = budget > fixed ? (int64_t)((budget - fixed) / std::max<size_t>(per_row, 1)) : 0;
        // CUB's segmented sort counts items in int.
        qt = std::min<int64_t>({qt, nq, INT32_MAX / std::max<int64_t>(ksel * std::max<int64_t>(one.ntiles, 1), 1)});
        if (qt >= min_rows || nbt <= 4096) {
            if (qt < 1)
                return gpu_fail(GRAFT_EGPU_NOMEM,
                                "exact k-NN with k=%lld over %lld vectors needs more GPU scratch than "
                                "the budget of %zu bytes; raise the memory budget or lower k",
                                (long long)ksel, (long long)nb, budget);
            *out = plan_tiles(nq, nb, ksel, qt, nbt, dp8, dp16, cap);
            while (out->bytes > budget && out->qt > 1) *out = plan_tiles(nq, nb, ksel, out->qt - 1, nbt, dp8, dp16, cap);
            return GRAFT_OK;
        }
        nbt = std::max<int64_t>(4096, (nbt / 2 + 31) / 32 * 32);
    }
}


// ---- certified TF32 ---------------------------------------------------------------------------

// Candidates kept per query beyond k: enough that the certificate holds for most queries on real
// data (a few extra neighbours fall within the bound), few enough that selection stays cheap. The
// margin starts at 32 and adapts per index (graft_gpu_exact_knn): data whose distances crowd
// within the bound (uniform random vectors) certify once more candidates are kept.
constexpr int64_t kCertMargin = 32, kCertMarginMax = 1024;
int64_t certified_ksel(int64_t k, int64_t nb, int64_t margin) {
    return std::min(nb, k + std::max<int64_t>(margin > 0 ? margin : kCertMargin, k / 2));
}

// *out = max of x[0..n) (non-negative floats: their bits order as unsigned ints).
__global__ void max_nonneg_kernel(const float* __restrict__ x, int64_t n, float* out) {
    float m = 0.f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        m = fmaxf(m, x[i]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned*>(out), __float_as_uint(m));
}

// A certified path's bound on the error of an approximate dot product of q and b:
//   |approx - q.b| <= rel ||q|| ||b|| + mixed (||q|| B + ||b|| Q) + abs Q B
// with Q, B the vectors' inverse scales (FP16; TF32 has neither: mixed = abs = 0), plus eps_sum
// (||b||^2 + 2 ||q|| ||b||) for the FP32 norm and the final addition. A query or base vector
// whose ||x||^2 exceeds max_norm2 fails the certificate.
struct DotBound {
    double rel, mixed, abs, eps_sum;
    float max_norm2;
};

constexpr double kUnit32 = 0x1p-24;  // FP32 unit roundoff

// TF32 inputs: |q.b~ - q.b| <= rel ||q|| ||b|| (inputs rounded or truncated to 10 mantissa
// bits: 2^-10 each; FP32 accumulation over d terms, allowing truncation: 2 d 2^-24; a 1.25
// margin).
DotBound tf32_bound(int64_t d) {
    return {1.25 * (2 * 0x1p-10 + 0x1p-20 + 2.0 * d * kUnit32), 0, 0, 1.25 * 2.0 * (d + 2) * kUnit32,
            INFINITY};
}

// FP16 of scaled vectors q' = q / Q, b' = b / B, ||q'||, ||b'|| <= 1 (fp16_rows; the double
// norm's rounding, 2^-50 relative, is inside the 1.25 margin). In scaled units:
//  inputs: round to nearest FP16, |q~_i - q'_i| <= 2^-11 |q'_i| + 2^-25 (half the subnormal
//    step below 2^-14; no overflow, |q'_i| <= 1). With sum |x_i| <= sqrt(d) ||x||:
//    |q~.b~ - q'.b'| <= (2^-10 + 2^-22) q'b' + (2^-25 + 2^-36) sqrt(d) (q' + b') + d 2^-50
//    (q', b' for the norms).
//  accumulation: FP16 products are exact in FP32 (22 bits); a sum of d of them in FP32, any
//    order, truncation allowed: 2 d 2^-24 ||q~|| ||b~||, and ||q~|| <= a q' + c with
//    a = 1 + 2^-11, c = 2^-25 sqrt(d).
//  output to FP16, rounded or truncated: 2^-10 |r| + 2^-24, |r| <= (1 + 2 d 2^-24) ||q~|| ||b~||.
// So with w = 2 d 2^-24 + 2^-10 (1 + 2 d 2^-24) and ||q~|| ||b~|| <= a^2 q'b' + a c (q' + b') + c^2:
//    error <= [2^-10 + 2^-22 + w a^2] q'b' + sqrt(d) [2^-25 + 2^-36 + w a 2^-25] (q' + b')
//           + [d 2^-50 (1 + w) + 2^-24],
// and times Q B (exact: powers of two, kept normal by kFp16MaxExp) in original units, where
// q' Q = ||q||. The selection's product (rowmul colmul) h is exact (a power of two times an FP16
// value) and its addition to ||b||^2 rounds once, inside eps_sum; a 1.25 margin on all of it.
// fp16_output false: the fused path (fused_filter.cuh) keeps the FP32 accumulator, so the output
// terms drop out: w = 2 d 2^-24 and no 2^-24. Its product with the FP32 r is exact as well (a
// power of two). That halves the bound (2^-10 of the 2 2^-10 q'b'), and with it the band of
// values the certificate cannot separate.
DotBound fp16_bound(int64_t d, bool fp16_output = true) {
    const double out_rel = fp16_output ? 0x1p-10 : 0.0, out_abs = fp16_output ? 0x1p-24 : 0.0;
    const double w = 2.0 * d * kUnit32 + out_rel * (1 + 2.0 * d * kUnit32), a = 1 + 0x1p-11;
    return {1.25 * (0x1p-10 + 0x1p-22 + w * a * a), 1.25 * std::sqrt((double)d) * (0x1p-25 + 0x1p-36 + w * a * 0x1p-25),
            1.25 * (d * 0x1p-50 * (1 + w) + out_abs), 1.25 * 2.0 * (d + 2) * kUnit32,
            // ||x||^2 <= 2^120 in FP32 (within d 2^-24 <= 1/16 of the truth) keeps X <= 2^61.
            0x1p120f};
}

// The exact value of a candidate as every certified path re-ranks it: ||q - b||^2 summed in FP32
// (L2) or -q.b (inner product), lanes over d, then the warp's butterfly, so every lane gets the
// same bits and a candidate gets the same key whichever kernel re-ranks it.
__device__ inline float exact_value(const float* __restrict__ q, const float* __restrict__ b, int64_t d, int l2,
                                    int lane) {
    float acc = 0.f;
    for (int64_t i = lane; i < d; i += 32) {
        float x = q[i], y = b[i];
        acc = l2 ? fmaf(x - y, x - y, acc) : fmaf(x, y, acc);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(kFullMask, acc, o);
    return l2 ? acc : -acc;
}

// E, the bound on the error of a query's approximate values (v = fl(||b||^2 - 2 q.b~) (L2) or
// fl(-q.b~) (IP)) against their exact values, from the query's ||q||^2, the base's largest
// ||b||^2 and, for FP16, the query's factor qmul (-2 or -1 times Q, whose magnitude gives Q) and
// the base's largest inverse scale (both 0 for TF32).
__device__ inline double value_error(const DotBound& bound, float qnorm, float bmax2, float qmul, float bscale_max,
                                     int64_t d, int l2) {
    const double qn = sqrt((double)qnorm), bn = sqrt((double)bmax2);
    const double Q = fabs((double)qmul) / (l2 ? 2.0 : 1.0), B = bscale_max;
    // The last term: inputs and products under FP32's smallest normal may be flushed to zero.
    const double dot = bound.rel * qn * bn + bound.mixed * (qn * B + bn * Q) + bound.abs * Q * B +
                       d * 0x1p-126 * (1.0 + qn + bn);
    return (l2 ? 2.0 : 1.0) * dot + bound.eps_sum * (bn * bn + 2.0 * qn * bn);
}

// One block per query: the certificate from the sorted approximate keys, then the exact FP32
// distance of every candidate (one warp a candidate, lanes over d), as keys to sort again.
// Approximate value v = fl(||b||^2 - 2 q.b~) (L2) or fl(-q.b~) (IP), its error bounded by
// `bound`. qmul (FP16: -2 or -1 times Q, whose magnitude gives Q) and bscale_max (the largest B)
// are NULL for TF32. band_limit (fused path; else NULL) gets U = t + 2E rounded up, the limit of
// the ambiguous band (fused_classify_kernel), or NaN where the bound does not hold or no k-th
// candidate exists.
__global__ void certify_rerank_kernel(const uint64_t* __restrict__ sorted, int64_t ksel, int64_t k,
                                      const float* __restrict__ xq, const float* __restrict__ xb,
                                      int64_t d, int l2, const float* __restrict__ qnorm,
                                      const float* __restrict__ bmax2, const float* __restrict__ qmul,
                                      const float* __restrict__ bscale_max, int all_in, DotBound bound,
                                      uint64_t* __restrict__ exact, int* __restrict__ fail,
                                      float* __restrict__ band_limit) {
    const int64_t r = blockIdx.x;
    const uint64_t* row = sorted + r * ksel;
    const float* q = xq + r * d;
    if (threadIdx.x == 0) {
        const double e = value_error(bound, qnorm[r], *bmax2, qmul ? qmul[r] : 0.f, bscale_max ? *bscale_max : 0.f,
                                     d, l2);
        uint64_t kth = row[k - 1], last = row[ksel - 1];
        // Out of range, the approximate values may be NaN and missing from the candidates, so
        // even a full candidate list proves nothing.
        bool in_range = qnorm[r] <= bound.max_norm2 && *bmax2 <= bound.max_norm2;
        bool ok = all_in || kth == kKeyNone || last == kKeyNone;
        double t = kth == kKeyNone ? NAN : ordered_to_float((uint32_t)(kth >> 32));
        if (!ok) {
            double m = ordered_to_float((uint32_t)(last >> 32));
            ok = m > t + 2.0 * e;
        }
        fail[r] = ok && in_range ? 0 : 1;
        if (band_limit) band_limit[r] = in_range ? __double2float_ru(t + 2.0 * e) : NAN;
    }
    const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
    for (int64_t c = threadIdx.x / 32; c < ksel; c += warps) {
        uint64_t key = row[c];
        if (key == kKeyNone) {
            if (lane == 0) exact[r * ksel + c] = kKeyNone;
            continue;
        }
        uint32_t id = (uint32_t)key;
        const float v = exact_value(q, xb + (int64_t)id * d, d, l2, lane);
        if (lane == 0) exact[r * ksel + c] = make_key(v, id);
    }
}

// dst row i = src row idx[i] (rows of `width` elements of T).
template <class T>
__global__ void gather_rows_kernel(const T* __restrict__ src, const int64_t* __restrict__ idx,
                                   int64_t n, int64_t width, T* __restrict__ dst) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * width) return;
    dst[i] = src[idx[i / width] * width + i % width];
}
// dst row idx[i] = src row i.
template <class T>
__global__ void scatter_rows_kernel(const T* __restrict__ src, const int64_t* __restrict__ idx,
                                    int64_t n, int64_t width, T* __restrict__ dst) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * width) return;
    dst[idx[i / width] * width + i % width] = src[i];
}

// FP16 codes: inverse scales X = 2^e are kept within 2^+-kFp16MaxExp so that 2 X_q X_b, the
// selection's factor, is a normal float. A tinier vector is scaled less (its codes lose bits to
// FP16's subnormals: fp16_bound's absolute terms, which scale with Q B, count them).
constexpr int kFp16MaxExp = 62;

// One warp per row: e from the norm (in double, so no overflow), codes of x / 2^e rounded to
// nearest (zero padded to dp), and mul * 2^e (1: the base's inverse scale; -2 or -1: a query's
// factor in HalfDotSource).
__global__ void fp16_rows_kernel(const float* __restrict__ x, int64_t n, int64_t d, int64_t dp, float mul,
                                 __half* __restrict__ out, float* __restrict__ scale) {
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= n) return;  // the whole warp
    const float* xr = x + row * d;
    double ss = 0;
    for (int64_t i = lane; i < d; i += 32) ss += (double)xr[i] * xr[i];
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(kFullMask, ss, off);
    ss = __shfl_sync(kFullMask, ss, 0);  // one value for all lanes (their sums may round apart)
    int e = 0;
    frexp(sqrt(ss), &e);  // ||x|| < 2^e <= 2 ||x||; 0 for a zero vector
    e = max(-kFp16MaxExp, min(kFp16MaxExp, e));
    __half* o = out + row * dp;
    for (int64_t i = lane; i < dp; i += 32) o[i] = __float2half_rn(i < d ? scalbnf(xr[i], -e) : 0.f);
    if (lane == 0) scale[row] = mul * scalbnf(1.f, e);
}

int fp16_rows(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, float mul, __half* out, float* scale) {
    if (n <= 0) return GRAFT_OK;
    fp16_rows_kernel<<<(unsigned)ceil_div(n, 8), 256, 0, ctx->stream>>>(x, n, d, graft_gpu_fp16_row_halves(d),
                                                                         mul, out, scale);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

// ---- certified FP16 with the first selection fused into the GEMM -----------------------------
// No distance matrix (fused_filter.cu): each query gets a threshold theta, and the GEMM's
// epilogue keeps the base vectors whose value is <= theta. theta is the ksel-th smallest value
// over an evenly spaced sample of S = ksel nb / target base vectors (plus the slack below), so
// about `target` vectors pass whatever the data (a question of ranks), and the ksel sample
// vectors themselves do. When at least ksel and at most cap pass, the list holds every vector
// with value <= theta, so its ksel smallest are the ksel smallest overall, which is all the
// certificate asks (certify_rerank_kernel).
//
// The ambiguous band. Data with many equal or near-duplicate vectors (dense SIFT of smooth
// images) crowd the k-th value: the certificate fails wherever the k'-th value lies within 2E of
// the k-th, and a list overflows wherever more than cap vectors lie at or below theta. Neither
// needs a search in FP32. With v_j the fused value of base vector j, x_j its exact value and
// |v_j - x_j| <= E for every j (fp16_bound without output rounding), let t be the k-th smallest
// value among ANY k base vectors that the list holds. Those k have exact values <= t + E, so the
// exact k-th smallest value is <= t + E, and every vector of the exact top k has
// v_j <= x_j + E <= t + 2E = U. So the band {j : v_j <= U} holds the exact top k, and its k
// smallest by the FP32 re-rank's keys (value, id) are the FP32 path's answer (but for ties within
// FP32 rounding, as for every certified query). fused_classify_kernel sends a query
//  - whose list is complete (at most cap passed) and U <= theta to the band re-rank: the list
//    holds the whole band (every vector outside it has v > theta >= U); its candidates with
//    v <= U are re-ranked in FP32 (band_rerank_kernel), however many of the list's cap they are;
//  - whose list overflowed, or U > theta (which fused_theta_kernel's theta leaves to rounding),
//    to a second fused pass over the whole base with the threshold U (t from the stored
//    candidates: a subset's k-th smallest is an upper bound of the whole's), into a list of up to
//    kSecondCap slots, then the same re-rank. Only a band wider
//    than that (tens of thousands of equal vectors) or a query out of the bound's range is
//    searched in FP32.
// The work a query adds is its band: |band| FP32 distances, and for the second pass its share of
// one more fused GEMM (a 128-query tile per 128 such queries).
constexpr int64_t kFusedTarget = 1024, kFusedCap = 4 * kFusedTarget, kSecondCap = 16 * kFusedCap;

// A fused query after its certificate (fused_classify_kernel).
enum FusedVerdict {
    kVerdictCertified = 0,  // its k' candidates hold the band: re-ranked with the rest
    kVerdictFp32 = 1,       // searched again in FP32 (fewer than k candidates, out of range)
    kVerdictOverflow = 2,   // list overflowed: second pass
    kVerdictBand = 3,       // the band lies in its list: band re-rank
    kVerdictWide = 4,       // the band reaches past theta: second pass
};

// The fused path keeps the default margin: its band re-rank and second pass take the queries
// whose certificate fails, so a wider margin would only enlarge the sample.
int64_t fused_ksel(int64_t k, int64_t nb) { return certified_ksel(k, nb, 0); }

// S for ksel and the context's target, or 0 where the fused path does not apply: rows over
// kFusedMaxHalves halves, or a sample over a quarter of the base (the matrix path is as cheap).
int64_t fused_sample(int64_t ksel, int64_t nb, int64_t d, int64_t target) {
    if (graft_gpu_fp16_row_halves(d) > kFusedMaxHalves || target < 1) return 0;
    const int64_t s = std::max(ksel, ceil_div(ksel * nb, target));
    return 4 * s <= nb ? s : 0;
}

// Sample row i = base row floor(i nb / S): codes, norm (norms may be NULL) and inverse scale.
__global__ void fused_sample_kernel(const __half* __restrict__ b16, const float* __restrict__ bnorm,
                                    const float* __restrict__ bscale, int64_t nb, int64_t dp, int64_t S,
                                    __half* __restrict__ s16, float* __restrict__ snorm, float* __restrict__ sscale) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * dp) return;
    const int64_t row = i / dp, col = i - row * dp, j = row * nb / S;
    s16[i] = b16[j * dp + col];
    if (col == 0) {
        snorm[row] = bnorm ? bnorm[j] : 0.f;
        sscale[row] = bscale[j];
    }
}

// theta = the largest of a row's ksel sample winners (unordered), plus a slack over what sets
// the sample's values apart from the fused ones: the FP16 output rounding (2^-10 of |rowmul
// colmul dot| <= 2 ||q|| ||b||, allowing truncation) and another FP32 summation order (4 d 2^-24
// of it, d <= 256), taken about 1.6x: 2^-8 ||q|| ||b||; and FP16's subnormal step, 2^-24 Q B, 4x.
// Where the sample's k-th winner plus 2E (the fused path's bound) lies above the largest, theta
// is that plus the slack: k sample vectors have fused values at most their k-th plus the slack,
// so the band's edge U = t + 2E (t the k-th fused value overall, "the ambiguous band" below) is
// at most theta, and a complete list holds the band. Only crowded queries get the higher theta:
// elsewhere the k'-th winner lies far past the k-th.
__global__ void fused_theta_kernel(const uint64_t* __restrict__ winners, int64_t rows, int64_t ksel, int64_t k,
                                   const float* __restrict__ qnorm, const float* __restrict__ bmax2,
                                   const float* __restrict__ qmul, const float* __restrict__ bscale_max,
                                   DotBound bound, int64_t d, int l2, float* __restrict__ theta) {
    const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // the whole warp
    const uint64_t* w = winners + r * ksel;
    uint64_t m = 0, kth = kKeyNone;
    for (int64_t c = lane; c < ksel; c += 32) {
        const uint64_t key = w[c];
        m = max(m, key);
        int64_t below = 0;  // keys are distinct (ids), so exactly one has k - 1 below it
        for (int64_t j = 0; j < ksel; j++) below += w[j] < key;
        if (below == k - 1) kth = key;
    }
    for (int o = 16; o > 0; o >>= 1) {
        m = max(m, __shfl_xor_sync(kFullMask, m, o));
        kth = min(kth, __shfl_xor_sync(kFullMask, kth, o));
    }
    if (lane != 0) return;
    const float slack = 0x1p-8f * sqrtf(qnorm[r]) * sqrtf(*bmax2) + 0x1p-22f * fabsf(qmul[r]) * *bscale_max;
    if (m == kKeyNone) {
        theta[r] = NAN;
        return;
    }
    double th = ordered_to_float((uint32_t)(m >> 32));
    if (kth != kKeyNone)
        th = fmax(th, ordered_to_float((uint32_t)(kth >> 32)) +
                          2.0 * value_error(bound, qnorm[r], *bmax2, qmul[r], *bscale_max, d, l2));
    theta[r] = __double2float_ru(th + slack);
}

// After the certificate (fail[r] 0 or 1, band_limit[r] = U), the verdict of each fused query;
// see "the ambiguous band" above.
__global__ void fused_classify_kernel(const int* __restrict__ count, const float* __restrict__ theta,
                                      const float* __restrict__ band_limit, int64_t rows, int64_t k,
                                      int64_t ksel, int64_t cap, int* __restrict__ verdict) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const int64_t c = count[r];
    const float U = band_limit[r];
    int v;
    if (c < k || !(U < INFINITY)) v = kVerdictFp32;  // NaN: no k-th candidate, or out of range
    else if (c > cap) v = kVerdictOverflow;
    else if (c >= ksel && verdict[r] == 0) v = kVerdictCertified;  // k'-th value > U
    else if (U <= theta[r]) v = c >= ksel ? kVerdictBand : kVerdictCertified;  // fewer: all re-ranked
    else v = kVerdictWide;
    verdict[r] = v;
}

// In place over rows of w candidate keys (row i for the query at tile row rows[i]): a candidate
// of the band (value <= limit[i]) becomes its exact key (exact_value, id), any other none.
// One block a row; a warp reads 32 slots at once and re-ranks the band's among them together.
__global__ void band_rerank_kernel(uint64_t* __restrict__ keys, int64_t w, const float* __restrict__ limit,
                                   const int64_t* __restrict__ rows, const float* __restrict__ xq,
                                   const float* __restrict__ xb, int64_t d, int l2) {
    const int64_t i = blockIdx.x;
    const float U = limit[i];
    const float* q = xq + rows[i] * d;
    uint64_t* row = keys + i * w;
    const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
    for (int64_t c0 = (int64_t)(threadIdx.x / 32) * 32; c0 < w; c0 += (int64_t)warps * 32) {
        const int64_t c = c0 + lane;
        const uint64_t key = c < w ? row[c] : kKeyNone;
        const bool in = key != kKeyNone && ordered_to_float((uint32_t)(key >> 32)) <= U;
        if (!in && key != kKeyNone) row[c] = kKeyNone;
        for (unsigned m = __ballot_sync(kFullMask, in); m; m &= m - 1) {
            const int src = __ffs(m) - 1;
            const uint32_t id = (uint32_t)__shfl_sync(kFullMask, key, src);
            const float v = exact_value(q, xb + (int64_t)id * d, d, l2, lane);
            if (lane == src) row[c] = make_key(v, id);
        }
    }
}

}  // namespace
}  // namespace graft

using namespace graft;

namespace graft {
namespace {

// GRAFT_EXACT_PROFILE=1: the GPU time between marks of one knn_rows call, summed by the name of
// the mark that ends it, printed to stderr as the call returns (events on the context's stream).
struct StageTimer {
    cudaStream_t stream;
    const char* path;
    std::vector<std::pair<const char*, cudaEvent_t>> marks;
    StageTimer(cudaStream_t s, const char* p) : stream(s), path(getenv("GRAFT_EXACT_PROFILE") ? p : nullptr) { mark("start"); }
    void mark(const char* name) {
        cudaEvent_t e;
        if (!path || cudaEventCreate(&e) != cudaSuccess) return;
        cudaEventRecord(e, stream);
        marks.push_back({name, e});
    }
    ~StageTimer() {
        if (marks.empty()) return;
        cudaEventSynchronize(marks.back().second);
        std::vector<std::pair<const char*, float>> sums;
        for (size_t i = 1; i < marks.size(); i++) {
            float ms = 0;
            cudaEventElapsedTime(&ms, marks[i - 1].second, marks[i].second);
            auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& s) { return !strcmp(s.first, marks[i].first); });
            if (it == sums.end()) sums.push_back({marks[i].first, ms});
            else it->second += ms;
        }
        fprintf(stderr, "exact profile (%s):", path);
        for (const auto& s : sums) fprintf(stderr, " %s %.3f ms,", s.first, s.second);
        fprintf(stderr, "\n");
        for (auto& m : marks) cudaEventDestroy(m.second);
    }
};

// The paths of knn_rows, numbered as graft_gpu_ctx_last_path reports them.
enum KnnPath { kPathFp32 = 1, kPathTf32Certified = 2, kPathFp16Certified = 4, kPathFp16Fused = 5 };

// Sets the cuBLAS math mode of a path; the context's own mode comes back on every way out.
struct MathMode {
    graft_gpu_ctx* ctx;
    ~MathMode() { cublasSetMathMode(ctx->cublas, ctx->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH); }
    int set(int path) {
        // FP16: cuBLAS may otherwise reduce split-K partial sums in FP16, which the bound
        // (FP32 accumulation) does not allow.
        cublasMath_t m = path == kPathTf32Certified ? CUBLAS_TF32_TENSOR_OP_MATH
                         : path == kPathFp16Certified || path == kPathFp16Fused
                             ? (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                         : ctx->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                           : CUBLAS_DEFAULT_MATH;
        GRAFT_CUBLAS_TRY(cublasSetMathMode(ctx->cublas, m));
        return GRAFT_OK;
    }
};

// What a certified search did with its queries; graft_gpu_exact_knn adapts to it.
struct CertReport {
    std::vector<int64_t> failed;  // rows whose results must be replaced by an FP32 search
    int64_t switched = 0;         // rows past the point where the call went over to FP32
    int64_t overflows = 0;        // fused: lists that overflowed (second pass)
    int64_t band = 0;             // fused: queries whose band was re-ranked from their list
    int64_t second = 0;           // fused: queries given a second pass
    bool unsupported = false;     // cuBLAS refused the FP16 GEMM (an error was returned)
};

template <class T>
int gather_rows(graft_gpu_ctx* ctx, const T* src, const int64_t* idx, int64_t n, int64_t width, T* dst) {
    if (n * width == 0) return GRAFT_OK;
    gather_rows_kernel<T><<<(unsigned)ceil_div(n * width, 256), 256, 0, ctx->stream>>>(src, idx, n, width, dst);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

// The k' smallest exact keys of n gathered rows of w keys (t.cand2, after band_rerank_kernel),
// decoded into the results of the tile rows t.rows of the tile starting at q0.
int finish_band_rows(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, const KnnTiles& t, int64_t q0,
                     int64_t n, int64_t w, const QmsPlan& plan) {
    KeySource keys{t.cand2, w};
    GRAFT_GPU_TRY(qms_select_rows(ctx, keys, plan, n, t.winners, t.ksel, t.qms));
    GRAFT_GPU_TRY(sort_rows(ctx, t.winners, t.sorted, n, t.ksel, t.sort_temp));
    return decode(ctx, t.sorted, n, t.ksel, a->k, nullptr, a->metric == GRAFT_METRIC_L2 ? kDecodeRaw : kDecodeIP,
                  a->D + q0 * a->k, a->I + q0 * a->k, t.rows);
}

// The band re-rank of the tile rows `rows` (kVerdictBand): each list holds its whole band.
int fused_band(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, const KnnTiles& t, int64_t q0, const float* xq,
               const std::vector<int64_t>& rows) {
    const int64_t n = (int64_t)rows.size();
    GRAFT_CUDA_TRY(cudaMemcpyAsync(t.rows, rows.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, ctx->stream));
    GRAFT_GPU_TRY(gather_rows(ctx, t.cand, t.rows, n, t.cap, t.cand2));
    GRAFT_GPU_TRY(gather_rows(ctx, t.limit, t.rows, n, 1, t.limit2));
    band_rerank_kernel<<<(unsigned)n, 256, 0, ctx->stream>>>(t.cand2, t.cap, t.limit2, t.rows, xq, a->xb, a->d,
                                                             a->metric == GRAFT_METRIC_L2);
    GRAFT_CUDA_LAUNCH_CHECK();
    return finish_band_rows(ctx, a, t, q0, n, t.cap, t.cand_plan);
}

// The second fused pass of the tile rows `rows` (kVerdictOverflow, kVerdictWide): threshold U
// over the whole base, in groups that share cand2 (lists of up to kSecondCap keys each), then the
// band re-rank. A list that overflows again goes to rep->failed.
int fused_second(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, const KnnTiles& t, int64_t q0, const float* xq,
                 const std::vector<int64_t>& rows, CertReport* rep) {
    const int64_t n = (int64_t)rows.size(), slots = t.qt * t.cap;
    // The widest lists that cand2 and the selection's scratch hold, for at least one row.
    int64_t cap2 = std::min(kSecondCap, slots), per = 0;
    QmsPlan plan2{};
    for (;; cap2 = std::max<int64_t>(t.cap, cap2 / 2)) {
        plan2 = qms_plan(cap2, t.ksel);
        per = std::min<int64_t>({n, slots / cap2, (int64_t)(t.qms_bytes / qms_scratch_bytes(plan2, 1))});
        if (per >= 1 || cap2 == t.cap) break;
    }
    if (per < 1) return gpu_fail(GRAFT_EINTERNAL, "exact k-NN: no room for a second fused pass");
    std::vector<int> count(per);
    const __half* b16 = reinterpret_cast<const __half*>(a->xb16);
    const bool l2 = a->metric == GRAFT_METRIC_L2;
    for (int64_t r0 = 0; r0 < n; r0 += per) {
        const int64_t m = std::min(per, n - r0);
        GRAFT_CUDA_TRY(cudaMemcpyAsync(t.rows, rows.data() + r0, m * sizeof(int64_t), cudaMemcpyHostToDevice,
                                       ctx->stream));
        GRAFT_GPU_TRY(gather_rows(ctx, t.q16, t.rows, m, t.dp16, t.q16b));
        GRAFT_GPU_TRY(gather_rows(ctx, t.qmul, t.rows, m, 1, t.qmul2));
        GRAFT_GPU_TRY(gather_rows(ctx, t.limit, t.rows, m, 1, t.limit2));
        GRAFT_CUDA_TRY(cudaMemsetAsync(t.count, 0, m * sizeof(int), ctx->stream));
        GRAFT_CUDA_TRY(cudaMemsetAsync(t.cand2, 0xff, (size_t)m * cap2 * sizeof(uint64_t), ctx->stream));
        FusedFilterArgs f{t.q16b, t.qmul2, t.limit2, m, b16, l2 ? a->xb_norms : nullptr, a->xb16_scale, a->nb,
                          t.dp16, t.cand2, cap2, t.count};
        GRAFT_GPU_TRY(fused_filter_fp16(ctx, f));
        band_rerank_kernel<<<(unsigned)m, 256, 0, ctx->stream>>>(t.cand2, cap2, t.limit2, t.rows, xq, a->xb, a->d, l2);
        GRAFT_CUDA_LAUNCH_CHECK();
        GRAFT_GPU_TRY(finish_band_rows(ctx, a, t, q0, m, cap2, plan2));
        GRAFT_CUDA_TRY(cudaMemcpyAsync(count.data(), t.count, m * sizeof(int), cudaMemcpyDeviceToHost, ctx->stream));
        GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
        // Fewer than k cannot happen while the fused values repeat (the k candidates that gave U
        // pass again); checked all the same, as an overflow is.
        for (int64_t i = 0; i < m; i++)
            if (count[i] > cap2 || count[i] < std::min(a->k, t.ksel)) rep->failed.push_back(q0 + rows[r0 + i]);
    }
    return GRAFT_OK;
}

// The search of a->nq queries on `path`, results in a->D / a->I. On a certified path `rep`
// (required there) gets the rows whose results must be replaced by an FP32 search, the rows sent
// to FP32 directly, and what the fused path did; rep->unsupported: cuBLAS refused the FP16 GEMM
// (an error is returned and the caller may take another path; D and I are then not all written).
int knn_rows(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, int path, CertReport* rep = nullptr) {
    const bool certify = path != kPathFp32, fused = path == kPathFp16Fused;
    const bool fp16 = path == kPathFp16Certified || fused;
    const bool l2 = a->metric == GRAFT_METRIC_L2;
    const int mode = l2 ? kDecodeL2 : kDecodeIP;
    const int64_t ksel = fused     ? fused_ksel(a->k, a->nb)
                         : certify ? certified_ksel(a->k, a->nb, ctx->cert_margin)
                                   : std::max<int64_t>(1, std::min(a->k, a->nb));
    const int64_t dp16 = fp16 ? graft_gpu_fp16_row_halves(a->d) : 0;
    // Fused: the tiles' "base" is the sample (one tile of it, or the matrix path after all).
    const int64_t S = fused ? fused_sample(ksel, a->nb, a->d, ctx->fused_target) : 0;
    if (fused && S == 0) return knn_rows(ctx, a, kPathFp16Certified, rep);
    KnnTiles t;
    GRAFT_GPU_TRY(choose_tiles(ctx, a->nq, fused ? S : a->nb, ksel, &t, 0, dp16,
                               fused ? kFusedCap : 0));
    if (fused && t.ntiles > 1) {  // a budget too small for the whole sample in one tile
        ctx->last_path = kPathFp16Certified;
        return knn_rows(ctx, a, kPathFp16Certified, rep);
    }
    void* scratch = nullptr;
    GRAFT_GPU_TRY(ctx_scratch(ctx, t.bytes, &scratch));
    t.layout(static_cast<char*>(scratch));
    GRAFT_GPU_TRY(ctx_cublas(ctx));
    MathMode math{ctx};
    GRAFT_GPU_TRY(math.set(path));
    const DotBound bound = fp16 ? fp16_bound(a->d, !fused) : tf32_bound(a->d);
    const unsigned max_blocks = (unsigned)std::min<int64_t>(ceil_div(a->nb, 256), 4 * ctx->sm_count);
    if (certify) {
        GRAFT_CUDA_TRY(cudaMemsetAsync(t.bmax2, 0, sizeof(float), ctx->stream));
        max_nonneg_kernel<<<max_blocks, 256, 0, ctx->stream>>>(a->xb_norms, a->nb, t.bmax2);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    if (fp16) {
        GRAFT_CUDA_TRY(cudaMemsetAsync(t.bscale_max, 0, sizeof(float), ctx->stream));
        max_nonneg_kernel<<<max_blocks, 256, 0, ctx->stream>>>(a->xb16_scale, a->nb, t.bscale_max);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    if (fused) {
        fused_sample_kernel<<<(unsigned)ceil_div(S * dp16, 256), 256, 0, ctx->stream>>>(
            reinterpret_cast<const __half*>(a->xb16), a->xb_norms, a->xb16_scale, a->nb, dp16, S, t.s16,
            t.snorm, t.sscale);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    std::vector<int> fail(certify ? t.qt : 0);
    StageTimer clock(ctx->stream, fused ? "fused fp16" : fp16 ? "fp16" : certify ? "tf32" : "fp32");
    clock.mark("setup");

    const float alpha = l2 ? -2.f : -1.f, beta = 0.f, one = 1.f;
    for (int64_t q0 = 0; q0 < a->nq; q0 += t.qt) {
        // Data whose certificates mostly fail (distances crowded within the bound, e.g. uniform
        // random vectors at k >= 100) would pay the certified pass and then FP32 again: once the
        // first tile sends more than 40% of its queries back (the break-even measured on an H100
        // at k = 10 for TF32: its pass 0.52 of the FP32 one, FP32 again 1.05 of it per failed
        // query), the rest go straight to FP32.
        if (certify && q0 > 0 && (double)rep->failed.size() > 0.4 * (double)q0) {
            graft_gpu_knn_args rest = *a;
            rest.xq += q0 * a->d;
            rest.nq -= q0;
            rest.D += q0 * a->k;
            rest.I += q0 * a->k;
            rep->switched = rest.nq;
            return knn_rows(ctx, &rest, kPathFp32);
        }
        const int64_t qt = std::min(t.qt, a->nq - q0);
        const float* xq = a->xq + q0 * a->d;
        if (l2 || certify) GRAFT_GPU_TRY(row_norms(xq, qt, a->d, t.qnorm, ctx->stream));
        if (fp16) GRAFT_GPU_TRY(fp16_rows(ctx, xq, qt, a->d, alpha, t.q16, t.qmul));
        clock.mark("query codes");
        for (int64_t ti = 0; ti < t.ntiles; ti++) {
            const int64_t j0 = ti * t.nbt, nbt = std::min(t.nbt, a->nb - j0);
            const QmsPlan& plan = nbt == t.nbt ? t.tile_plan : t.last_plan;
            uint64_t* out = t.ntiles > 1 ? t.merged + ti * ksel : t.winners;
            int64_t out_ld = t.ntiles > 1 ? t.ntiles * ksel : ksel;
            // Column-major view: C^T (nbt x qt) = B_tile (nbt x d) * Q^T (d x qt), which is the
            // row-major qt x ldc tile the selection reads.
            if (fp16) {
                __half* dots = reinterpret_cast<__half*>(t.dots);
                const void* b16 = fused ? (const void*)t.s16 : (const void*)(a->xb16 + j0 * dp16);
                cublasStatus_t st = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nbt, (int)qt, (int)dp16,
                                                 &one, b16, CUDA_R_16F, (int)dp16, t.q16,
                                                 CUDA_R_16F, (int)dp16, &beta, dots, CUDA_R_16F, (int)t.ldc,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
                    rep->unsupported = true;
                    return gpu_fail(GRAFT_EUNSUPPORTED, "exact k-NN: cuBLAS has no FP16 GEMM with FP32 "
                                    "accumulation for %lld x %lld x %lld here (%s)", (long long)nbt,
                                    (long long)qt, (long long)dp16, cublas_status_string(st));
                }
                GRAFT_CUBLAS_TRY(st);
                clock.mark("gemm");
                HalfDotSource src{dots, t.ldc, l2 ? (fused ? t.snorm : a->xb_norms + j0) : nullptr,
                                  fused ? t.sscale : a->xb16_scale + j0, t.qmul, (uint32_t)j0, -1};
                GRAFT_GPU_TRY(qms_select_rows(ctx, src, plan, qt, out, out_ld, t.qms));
                clock.mark("select");
                if (fused) {
                    // The sample's winners set the thresholds; the candidates over the whole
                    // base replace them.
                    fused_theta_kernel<<<(unsigned)ceil_div(qt, 8), 256, 0, ctx->stream>>>(
                        t.winners, qt, ksel, std::min(a->k, ksel), t.qnorm, t.bmax2, t.qmul, t.bscale_max, bound,
                        a->d, l2, t.theta);
                    GRAFT_CUDA_LAUNCH_CHECK();
                    GRAFT_CUDA_TRY(cudaMemsetAsync(t.count, 0, qt * sizeof(int), ctx->stream));
                    GRAFT_CUDA_TRY(cudaMemsetAsync(t.cand, 0xff, (size_t)qt * t.cap * sizeof(uint64_t), ctx->stream));
                    clock.mark("theta");
                    FusedFilterArgs f{t.q16, t.qmul, t.theta, qt, reinterpret_cast<const __half*>(a->xb16),
                                      l2 ? a->xb_norms : nullptr, a->xb16_scale, a->nb, dp16, t.cand, t.cap, t.count};
                    GRAFT_GPU_TRY(fused_filter_fp16(ctx, f));
                    clock.mark("fused gemm+filter");
                    KeySource keys{t.cand, t.cap};
                    GRAFT_GPU_TRY(qms_select_rows(ctx, keys, t.cand_plan, qt, t.winners, ksel, t.qms));
                    clock.mark("candidate select");
                }
            } else {
                GRAFT_CUBLAS_TRY(cublasSgemm(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nbt, (int)qt,
                                             (int)a->d, &alpha, a->xb + j0 * a->d, (int)a->d, xq,
                                             (int)a->d, &beta, t.dots, (int)t.ldc));
                clock.mark("gemm");
                DotSource src{t.dots, t.ldc, l2 ? a->xb_norms + j0 : nullptr, (uint32_t)j0,
                              a->exclude_self >= 0 ? a->exclude_self + q0 : -1};
                GRAFT_GPU_TRY(qms_select_rows(ctx, src, plan, qt, out, out_ld, t.qms));
                clock.mark("select");
            }
        }
        if (t.ntiles > 1) {
            KeySource src{t.merged, t.ntiles * ksel};
            GRAFT_GPU_TRY(qms_select_rows(ctx, src, t.merge_plan, qt, t.winners, ksel, t.qms));
        }
        GRAFT_GPU_TRY(sort_rows(ctx, t.winners, t.sorted, qt, ksel, t.sort_temp));
        clock.mark("sort");
        if (!certify) {
            GRAFT_GPU_TRY(decode(ctx, t.sorted, qt, ksel, a->k, t.qnorm, mode, a->D + q0 * a->k,
                                 a->I + q0 * a->k));
            continue;
        }
        certify_rerank_kernel<<<(unsigned)qt, 128, 0, ctx->stream>>>(
            t.sorted, ksel, std::min(a->k, ksel), xq, a->xb, a->d, l2, t.qnorm, t.bmax2,
            fp16 ? t.qmul : nullptr, fp16 ? t.bscale_max : nullptr, ksel >= a->nb, bound, t.winners, t.fail,
            fused ? t.limit : nullptr);
        GRAFT_CUDA_LAUNCH_CHECK();
        if (fused) {
            fused_classify_kernel<<<(unsigned)ceil_div(qt, 256), 256, 0, ctx->stream>>>(
                t.count, t.theta, t.limit, qt, std::min(a->k, ksel), ksel, t.cap, t.fail);
            GRAFT_CUDA_LAUNCH_CHECK();
        }
        clock.mark("certify+rerank");
        GRAFT_GPU_TRY(sort_rows(ctx, t.winners, t.sorted, qt, ksel, t.sort_temp));
        GRAFT_GPU_TRY(decode(ctx, t.sorted, qt, ksel, a->k, nullptr, l2 ? kDecodeRaw : kDecodeIP,
                             a->D + q0 * a->k, a->I + q0 * a->k));
        clock.mark("sort+decode");
        GRAFT_CUDA_TRY(cudaMemcpyAsync(fail.data(), t.fail, qt * sizeof(int), cudaMemcpyDeviceToHost, ctx->stream));
        GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
        std::vector<int64_t> band, second;
        for (int64_t i = 0; i < qt; i++) {
            switch (fail[i]) {
                case kVerdictCertified: break;
                case kVerdictBand: band.push_back(i); break;
                case kVerdictOverflow: rep->overflows++; second.push_back(i); break;
                case kVerdictWide: second.push_back(i); break;
                default: rep->failed.push_back(q0 + i);
            }
        }
        if (!band.empty()) {
            GRAFT_GPU_TRY(fused_band(ctx, a, t, q0, xq, band));
            clock.mark("band re-rank");
        }
        if (!second.empty()) {
            GRAFT_GPU_TRY(fused_second(ctx, a, t, q0, xq, second, rep));
            clock.mark("second pass");
        }
        rep->band += (int64_t)band.size();
        rep->second += (int64_t)second.size();
    }
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

// Device memory of one call, freed on every way out.
struct DeviceBuffer {
    void* p = nullptr;
    ~DeviceBuffer() { if (p) cudaFree(p); }
};

// The queries whose certificate failed, searched again in FP32 and written over their rows.
int fp32_again(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, const std::vector<int64_t>& rows) {
    const int64_t nf = (int64_t)rows.size(), k = a->k, d = a->d;
    DeviceBuffer idx, xq, D, I;
    GRAFT_CUDA_TRY(dev_malloc(&idx.p, nf * sizeof(int64_t)));
    GRAFT_CUDA_TRY(dev_malloc(&xq.p, nf * d * sizeof(float)));
    GRAFT_CUDA_TRY(dev_malloc(&D.p, nf * k * sizeof(float)));
    GRAFT_CUDA_TRY(dev_malloc(&I.p, nf * k * sizeof(int64_t)));
    GRAFT_CUDA_TRY(cudaMemcpyAsync(idx.p, rows.data(), nf * sizeof(int64_t), cudaMemcpyHostToDevice, ctx->stream));
    auto* ids = static_cast<const int64_t*>(idx.p);
    gather_rows_kernel<float><<<(unsigned)ceil_div(nf * d, 256), 256, 0, ctx->stream>>>(
        a->xq, ids, nf, d, static_cast<float*>(xq.p));
    GRAFT_CUDA_LAUNCH_CHECK();
    graft_gpu_knn_args b = *a;
    b.xq = static_cast<float*>(xq.p);
    b.nq = nf;
    b.D = static_cast<float*>(D.p);
    b.I = static_cast<int64_t*>(I.p);
    GRAFT_GPU_TRY(knn_rows(ctx, &b, kPathFp32));
    scatter_rows_kernel<float><<<(unsigned)ceil_div(nf * k, 256), 256, 0, ctx->stream>>>(b.D, ids, nf, k, a->D);
    GRAFT_CUDA_LAUNCH_CHECK();
    scatter_rows_kernel<int64_t><<<(unsigned)ceil_div(nf * k, 256), 256, 0, ctx->stream>>>(b.I, ids, nf, k, a->I);
    GRAFT_CUDA_LAUNCH_CHECK();
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

// ---- exact INT8 -------------------------------------------------------------------------------
// Integer data (graft_gpu.h, "the exact INT8 path"): codes x' = x - shift, an int8 GEMM with
// int32 accumulation (IMMA tensor cores) gives q'.b' exactly, and every ranked value is an exact
// integer: v = ||b'||^2 - 2 q'.b' (L2; the query's ||q'||^2 is the same for its whole row) or
// v = -q'.b' - shift sum b' (inner product; shift sum q' + shift^2 d is the row's). The keys
// (make_int_key) rank exactly, ties by the smaller id, so no certificate and no re-ranking are
// needed; the distances returned are qterm + v (L2) or qterm - v (IP), rounded once to float.

enum Int8Term { kTermBaseL2 = 0, kTermBaseIP = 1, kTermQueryL2 = 2, kTermQueryIP = 3 };

// One warp per row: the codes (zero padded to dp) and the row's term, into term32 (base: below
// 2^29 in magnitude for d <= GRAFT_GPU_INT8_MAX_D) or term64 (queries).
__global__ void int8_rows_kernel(const float* __restrict__ x, int64_t n, int64_t d, int64_t dp,
                                 int shift, int mode, int8_t* __restrict__ out,
                                 int32_t* __restrict__ term32, int64_t* __restrict__ term64) {
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= n) return;  // the whole warp
    const float* xr = x + row * d;
    int8_t* o = out + row * dp;
    long long sum = 0, sq = 0;
    for (int64_t i = lane; i < dp; i += 32) {
        const int v = i < d ? __float2int_rn(xr[i]) - shift : 0;
        o[i] = (int8_t)v;
        sum += v;
        sq += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) {
        sum += __shfl_xor_sync(kFullMask, sum, off);
        sq += __shfl_xor_sync(kFullMask, sq, off);
    }
    if (lane != 0) return;
    const long long s = shift;
    switch (mode) {
        case kTermBaseL2: term32[row] = (int32_t)sq; break;
        case kTermBaseIP: term32[row] = (int32_t)(-s * sum); break;
        case kTermQueryL2: term64[row] = sq; break;
        default: term64[row] = s * sum + s * s * d; break;
    }
}

int int8_rows(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, int shift, int mode,
              int8_t* out, int32_t* term32, int64_t* term64) {
    if (n <= 0) return GRAFT_OK;
    int8_rows_kernel<<<(unsigned)ceil_div(n, 8), 256, 0, ctx->stream>>>(
        x, n, d, graft_gpu_int8_row_bytes(d), shift, mode, out, term32, term64);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

// Sorted integer keys to FAISS's layout: qterm + v (L2) or qterm - v (inner product), exact in
// int64 and rounded once to float (round to nearest even, as a double reference's cast does).
__global__ void decode_int_kernel(const uint64_t* __restrict__ sorted, int64_t rows, int64_t ksel,
                                  int64_t k, const int64_t* __restrict__ qterm, int l2,
                                  float* __restrict__ D, int64_t* __restrict__ I) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * k) return;
    int64_t r = i / k, c = i % k;
    uint64_t key = c < ksel ? sorted[r * ksel + c] : kKeyNone;
    if (key == kKeyNone) {
        D[i] = l2 ? FLT_MAX : -FLT_MAX;
        I[i] = -1;
        return;
    }
    const long long v = int_key_value(key);
    D[i] = __ll2float_rn(l2 ? qterm[r] + v : qterm[r] - v);
    I[i] = (int64_t)(uint32_t)key;
}

// The INT8 path over a->nq queries. *unsupported: cuBLAS refused the INT8 GEMM (an error is
// returned and the caller may take another path; D and I are then unwritten).
int knn_rows_int8(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a, bool* unsupported) {
    *unsupported = false;
    const bool l2 = a->metric == GRAFT_METRIC_L2;
    const int64_t ksel = std::max<int64_t>(1, std::min(a->k, a->nb));
    const int64_t dp = graft_gpu_int8_row_bytes(a->d);
    KnnTiles t;
    GRAFT_GPU_TRY(choose_tiles(ctx, a->nq, a->nb, ksel, &t, dp));
    void* scratch = nullptr;
    GRAFT_GPU_TRY(ctx_scratch(ctx, t.bytes, &scratch));
    t.layout(static_cast<char*>(scratch));
    GRAFT_GPU_TRY(ctx_cublas(ctx));
    // cuBLAS's int32-output INT8 GEMM (IMMA) takes alpha and beta of 1 or 0 only, 4-byte aligned
    // operands, leading dimensions and m, k that are multiples of 4, and the TN layout: dp is a
    // multiple of 16, tiles start at multiples of 32 rows, ldc is a multiple of 4, and a last
    // tile of nbt rows is computed as round_up(nbt, 4) rows (xb8 holds them: graft_gpu.h; the
    // selection reads the first nbt columns only). n is rounded up as well, in case a cuBLAS
    // wants that too: the extra query rows (zeros) are computed and never selected.
    const int32_t one = 1, zero = 0;
    int32_t* dots = reinterpret_cast<int32_t*>(t.dots);
    for (int64_t q0 = 0; q0 < a->nq; q0 += t.qt) {
        const int64_t qt = std::min(t.qt, a->nq - q0);
        GRAFT_GPU_TRY(int8_rows(ctx, a->xq + q0 * a->d, qt, a->d, a->shift8,
                                l2 ? kTermQueryL2 : kTermQueryIP, t.q8, nullptr, t.qterm));
        const int64_t n4 = (qt + 3) / 4 * 4;
        // The rounded-up query rows are never selected; zeroed, so that no read is uninitialized.
        if (n4 > qt) GRAFT_CUDA_TRY(cudaMemsetAsync(t.q8 + qt * dp, 0, (size_t)(n4 - qt) * dp, ctx->stream));
        for (int64_t ti = 0; ti < t.ntiles; ti++) {
            const int64_t j0 = ti * t.nbt, nbt = std::min(t.nbt, a->nb - j0);
            // Column-major view as in knn_rows: C^T (nbt x qt) = B8_tile (nbt x dp) * Q8^T.
            const int64_t m4 = (nbt + 3) / 4 * 4;
            cublasStatus_t st = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m4, (int)n4,
                                             (int)dp, &one, a->xb8 + j0 * dp, CUDA_R_8I, (int)dp, t.q8,
                                             CUDA_R_8I, (int)dp, &zero, dots, CUDA_R_32I, (int)t.ldc,
                                             CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
            // A cuBLAS without this GEMM for the shape: the caller takes the certified TF32 path
            // (the tests require INT8 where it applies, so this cannot pass unnoticed there).
            if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
                *unsupported = true;
                return gpu_fail(GRAFT_EUNSUPPORTED, "exact k-NN: cuBLAS has no INT8 GEMM for %lld x %lld x %lld "
                                "here (%s)", (long long)nbt, (long long)qt, (long long)dp,
                                cublas_status_string(st));
            }
            GRAFT_CUBLAS_TRY(st);
            IntDotSource src{dots, t.ldc, a->xb8_term + j0, l2 ? -2 : -1, (uint32_t)j0,
                             a->exclude_self >= 0 ? a->exclude_self + q0 : -1};
            const QmsPlan& plan = nbt == t.nbt ? t.tile_plan : t.last_plan;
            uint64_t* out = t.ntiles > 1 ? t.merged + ti * ksel : t.winners;
            int64_t out_ld = t.ntiles > 1 ? t.ntiles * ksel : ksel;
            GRAFT_GPU_TRY(qms_select_rows(ctx, src, plan, qt, out, out_ld, t.qms));
        }
        if (t.ntiles > 1) {
            KeySource src{t.merged, t.ntiles * ksel};
            GRAFT_GPU_TRY(qms_select_rows(ctx, src, t.merge_plan, qt, t.winners, ksel, t.qms));
        }
        GRAFT_GPU_TRY(sort_rows(ctx, t.winners, t.sorted, qt, ksel, t.sort_temp));
        const int64_t n = qt * a->k;
        decode_int_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, ctx->stream>>>(
            t.sorted, qt, ksel, a->k, t.qterm, l2, a->D + q0 * a->k, a->I + q0 * a->k);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

}  // namespace
}  // namespace graft

extern "C" int graft_gpu_int8_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, int shift,
                                     int metric, int8_t* x8, int32_t* term) {
    if (!ctx || (n > 0 && (!x || !x8 || !term)))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_int8_encode: NULL argument");
    if (n < 0 || d < 1 || d > GRAFT_GPU_INT8_MAX_D || (shift != 0 && shift != 128))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_int8_encode: bad arguments n=%lld d=%lld shift=%d",
                        (long long)n, (long long)d, shift);
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_GPU_TRY(int8_rows(ctx, x, n, d, shift, metric == GRAFT_METRIC_L2 ? kTermBaseL2 : kTermBaseIP,
                            x8, term, nullptr));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

extern "C" int graft_gpu_fp16_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, uint16_t* x16,
                                     float* scale) {
    if (!ctx || (n > 0 && (!x || !x16 || !scale)))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_fp16_encode: NULL argument");
    if (n < 0 || d < 1)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_fp16_encode: bad sizes n=%lld d=%lld", (long long)n, (long long)d);
    GRAFT_GPU_TRY(ctx_enter(ctx));
    GRAFT_GPU_TRY(fp16_rows(ctx, x, n, d, 1.f, reinterpret_cast<__half*>(x16), scale));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}

extern "C" int graft_gpu_exact_knn(graft_gpu_ctx* ctx, const graft_gpu_knn_args* a) {
    if (!ctx || !a) return gpu_fail(GRAFT_EINVAL, "graft_gpu_exact_knn: NULL argument");
    if (a->k < 1 || a->d < 1 || a->nb < 0 || a->nq < 0)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_exact_knn: bad sizes k=%lld d=%lld nb=%lld nq=%lld",
                        (long long)a->k, (long long)a->d, (long long)a->nb, (long long)a->nq);
    if (a->nb >= (int64_t)UINT32_MAX)
        return gpu_fail(GRAFT_EUNSUPPORTED, "graft_gpu_exact_knn: %lld base vectors; ids are 32-bit "
                        "inside the selection (at most %u)", (long long)a->nb, UINT32_MAX - 1);
    if (a->metric != GRAFT_METRIC_L2 && a->metric != GRAFT_METRIC_INNER_PRODUCT)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_exact_knn: unknown metric %d", a->metric);
    if (a->xb8 && (!a->xb8_term || a->d > GRAFT_GPU_INT8_MAX_D || (a->shift8 != 0 && a->shift8 != 128)))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_exact_knn: bad INT8 arguments (term %p, d=%lld, shift %d)",
                        (const void*)a->xb8_term, (long long)a->d, a->shift8);
    if (a->xb16 && !a->xb16_scale)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_exact_knn: FP16 codes without their scales");
    ctx->last_fallbacks = ctx->last_band = ctx->last_second = 0;
    if (a->nq == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    if (a->xb8 && a->nb > 0 && !ctx->int8_unsupported) {
        bool unsupported = false;
        int rc = knn_rows_int8(ctx, a, &unsupported);
        if (rc == GRAFT_OK) ctx->last_path = 3;
        if (!unsupported) return rc;
        // No INT8 GEMM on this device or library: the certified TF32 path from now on.
        ctx->int8_unsupported = 1;
    }
    if (a->nb == 0) {
        ctx->last_path = a->xb8 ? 3 : 1;
        // Nothing to find: every result is missing. decode reads key c < ksel only, so ksel = 0
        // needs no keys.
        return decode(ctx, nullptr, a->nq, 0, a->k, nullptr,
                      a->metric == GRAFT_METRIC_L2 ? kDecodeL2 : kDecodeIP, a->D, a->I);
    }
    // The k-NN graph (exclude_self) keeps the FP32 path: its rows' exclusions are not contiguous
    // once failed rows are gathered.
    bool certify = ctx->certified_tf32 && !ctx->allow_tf32 && a->xb_norms && a->exclude_self < 0;
    int path = !certify ? kPathFp32 : a->xb16 && !ctx->fp16_unsupported ? kPathFp16Certified : kPathTf32Certified;
    if (ctx->fused_target == 0) ctx->fused_target = kFusedTarget;
    if (path == kPathFp16Certified && ctx->fused_fp16 &&
        fused_sample(fused_ksel(a->k, a->nb), a->nb, a->d, ctx->fused_target) > 0)
        path = kPathFp16Fused;
    ctx->last_path = path;
    // After a call on data whose certificates mostly failed, the next 7 calls go to FP32 directly
    // and the 8th tries the certified path again: at most 1/8 of one tile's certified work lost
    // on such data.
    if (certify && ctx->fp32_calls_left > 0) {
        ctx->fp32_calls_left--;
        ctx->last_fallbacks = a->nq;
        return knn_rows(ctx, a, kPathFp32);
    }
    CertReport rep;
    int rc = knn_rows(ctx, a, path, &rep);
    if (rep.unsupported) {
        // No FP16 GEMM on this device or library: the certified TF32 path from now on.
        ctx->fp16_unsupported = 1;
        ctx->last_path = path = kPathTf32Certified;
        rep = CertReport{};
        rc = knn_rows(ctx, a, path, &rep);
    }
    GRAFT_GPU_TRY(rc);
    if (!rep.failed.empty()) GRAFT_GPU_TRY(fp32_again(ctx, a, rep.failed));
    ctx->last_fallbacks = (int64_t)rep.failed.size() + rep.switched;
    ctx->last_band = rep.band;
    ctx->last_second = rep.second;
    if (ctx->last_path == kPathFp16Fused) {
        // Over 10% of the lists overflowed: the next call samples twice as many vectors, so half
        // as many pass into the same room, while the sample stays within an eighth of the base.
        // A second pass costs an overflowed query about 1 / nq of one more fused GEMM and the
        // doubled sample about a tenth of it (the 1715bba profile: 1.7 of 16 ms), so at 10% they
        // break even; where duplicates overflow the lists no sample helps, and the second pass
        // takes them whatever the target.
        const int64_t half = ctx->fused_target / 2;
        if (rep.overflows > 0.1 * (double)a->nq && half >= 1 &&
            8 * ceil_div(fused_ksel(a->k, a->nb) * a->nb, half) <= a->nb)
            ctx->fused_target = half;
        // The band takes the queries whose certificate fails, so a wider margin (a larger
        // sample) would buy nothing; a call whose queries mostly went to FP32 all the same (out
        // of the bound's range, bands past kSecondCap) sends the next 7 to FP32.
        if (ctx->last_fallbacks > 0.4 * (double)a->nq) ctx->fp32_calls_left = 7;
    } else if (certify && ctx->last_fallbacks > 0.01 * (double)a->nq) {
        // Over 1% of the queries failed: the next call keeps 4x the margin of candidates beyond
        // k (their k'-th distance then lies further out, past the bound), up to 1024; only at
        // that cap does a mostly failed call send the next 7 to FP32.
        const int64_t margin = std::max(ctx->cert_margin > 0 ? ctx->cert_margin : kCertMargin, a->k / 2);
        if (margin < kCertMarginMax) ctx->cert_margin = std::min(kCertMarginMax, 4 * margin);
        else if (ctx->last_fallbacks > 0.4 * (double)a->nq) ctx->fp32_calls_left = 7;
    }
    return GRAFT_OK;
}

extern "C" int graft_gpu_select_k(graft_gpu_ctx* ctx, const float* vals, int64_t rows, int64_t cols,
                                  int64_t ld, int64_t k, float* out_vals, int64_t* out_idx) {
    if (!ctx || !vals || !out_vals || !out_idx || rows < 0 || cols < 1 || k < 1 || ld < cols ||
        ld % 4 != 0 || cols >= (int64_t)UINT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_select_k: bad arguments (rows=%lld cols=%lld ld=%lld k=%lld)",
                        (long long)rows, (long long)cols, (long long)ld, (long long)k);
    GRAFT_GPU_TRY(ctx_enter(ctx));
    const int64_t ksel = std::min(k, cols);
    QmsPlan plan = qms_plan(cols, ksel);
    size_t per_row = qms_scratch_bytes(plan, 1) + 2 * align_up(ksel * sizeof(uint64_t), 8);
    int64_t chunk = std::min<int64_t>(rows, std::max<size_t>(1, ctx->scratch_budget / 2 / per_row));
    chunk = std::min<int64_t>(chunk, INT32_MAX / ksel);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t nr = std::min(chunk, rows - r0);
        Carver c{nullptr};
        c.take<uint64_t>(nr * ksel);
        c.take<uint64_t>(nr * ksel);
        c.take<char>(qms_scratch_bytes(plan, nr));
        c.take<char>(sort_temp_bytes(nr, ksel));
        void* scratch = nullptr;
        GRAFT_GPU_TRY(ctx_scratch(ctx, c.used, &scratch));
        Carver d{static_cast<char*>(scratch)};
        uint64_t* winners = d.take<uint64_t>(nr * ksel);
        uint64_t* sorted = d.take<uint64_t>(nr * ksel);
        void* qms = d.take<char>(qms_scratch_bytes(plan, nr));
        void* temp = d.take<char>(sort_temp_bytes(nr, ksel));
        DotSource src{vals + r0 * ld, ld, nullptr, 0, -1};
        GRAFT_GPU_TRY(qms_select_rows(ctx, src, plan, nr, winners, ksel, qms));
        GRAFT_GPU_TRY(sort_rows(ctx, winners, sorted, nr, ksel, temp));
        GRAFT_GPU_TRY(decode(ctx, sorted, nr, ksel, k, nullptr, kDecodeRaw, out_vals + r0 * k,
                             out_idx + r0 * k));
    }
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}
