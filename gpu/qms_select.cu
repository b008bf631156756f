// Quick multi-select (QMS) on the GPU.
//
// Paper: ../shared/papers/qms-gpu-quick-multi-select-knn.txt. A warp partitions 32 elements at a
// time: __ballot_sync gives every lane the predicate of all 32, __popc of the bits below a lane
// gives its write position, so there is no prefix sum and the input is read once per pass.
// A row is handled by one warp, or by one block of W warps when there are too few rows to fill
// the GPU (the paper's block mode; our warps reserve space with a shared-memory atomic instead of
// the paper's single-thread inter-warp prefix sum).
//
// Two departures from the paper, both to read the big distance row only once:
//  1. The first pivot is not random: it is a low order statistic of M stratified random samples,
//     chosen so that the expected number of keys below it is a small multiple of k. The first pass
//     then writes only the keys below the pivot (the only side that can hold winners), staged in
//     shared memory so that each write is a full 32-key coalesced store, into a candidate buffer
//     of `cap` keys. If fewer than k pass, a higher sample is tried; if more than cap pass, the
//     pivot becomes the k-th smallest of the first cap candidates, which removes at least cap-k
//     keys per retry, so the loop always ends. Both retries are rare (see qms_plan).
//  2. Keys are (value, id) packed in 64 bits, so all keys differ: the partition around a pivot
//     key is exact and ties follow FAISS (smaller id first).
// Later passes are the paper's quick-select on the small candidate buffer: partition a range of
// one array into the same range of the other (ping-pong), lefts from the left end, rights from
// the right end, the pivot between them; keep the side holding the k-th key. Settled winners are
// copied straight to the output, once; nothing is copied back between the two arrays, which is
// what the paper's stack of partition references avoids.
#include <cmath>

#include <cub/device/device_segmented_sort.cuh>

#include "qms_select.cuh"

namespace graft {

namespace {

constexpr int kMaxSamples = 512;
constexpr int kStage = 64;  // per-warp staging slots: < 32 pending + up to 32 new

__device__ inline uint32_t hash32(uint32_t a, uint32_t b) {
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u + (a << 6) + (a >> 2));
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

// ---- sources ----------------------------------------------------------------------------------

template <class Src>
__device__ inline uint64_t dot_key(const Src& s, int64_t r, int64_t j, float v) {
    uint32_t id = s.id0 + (uint32_t)j;
    if (s.self0 >= 0 && (int64_t)id == s.self0 + r) return kKeyNone;
    return make_key(v, id);
}

__device__ inline uint64_t key_at(const DotSource& s, int64_t r, int64_t j) {
    float v = s.dots[r * s.ld + j] + (s.bnorm ? s.bnorm[j] : 0.f);
    return dot_key(s, r, j, v);
}
// The FP16 product needs no rounding (a power of two times an 11-bit value); the addition rounds
// once, as DotSource's does (exact_knn.cu's bound counts it).
__device__ inline float half_value(const HalfDotSource& s, float rowmul, int64_t j, __half h) {
    return (s.bnorm ? s.bnorm[j] : 0.f) + (rowmul * s.colmul[j]) * __half2float(h);
}
__device__ inline uint64_t key_at(const HalfDotSource& s, int64_t r, int64_t j) {
    return dot_key(s, r, j, half_value(s, s.rowmul[r], j, s.dots[r * s.ld + j]));
}
__device__ inline uint64_t key_at(const KeySource& s, int64_t r, int64_t j) {
    return s.keys[r * s.ld + j];
}
__device__ inline uint64_t int_dot_key(const IntDotSource& s, int64_t r, int64_t j, int32_t v) {
    uint32_t id = s.id0 + (uint32_t)j;
    if (s.self0 >= 0 && (int64_t)id == s.self0 + r) return kKeyNone;
    return make_int_key(v, id);
}
__device__ inline int32_t int_value(const IntDotSource& s, int64_t r, int64_t j) {
    return s.mul * s.dots[r * s.ld + j] + (s.bterm ? s.bterm[j] : 0);
}
__device__ inline uint64_t key_at(const IntDotSource& s, int64_t r, int64_t j) {
    return int_dot_key(s, r, j, int_value(s, r, j));
}

// Loads columns 4*j4 .. 4*j4+3 (NaN past cols, which no filter passes). The distance row is read
// once, so it is loaded with the evict-first hint; the base norms are shared by every row and
// stay in L2.
__device__ inline void load4(const DotSource& s, int64_t r, int64_t j4, int64_t cols, float v[4]) {
    int64_t c0 = j4 * 4;
    if (c0 + 3 < cols) {
        float4 d = __ldcs(reinterpret_cast<const float4*>(s.dots + r * s.ld + c0));
        float4 b = s.bnorm ? __ldg(reinterpret_cast<const float4*>(s.bnorm + c0))
                           : make_float4(0.f, 0.f, 0.f, 0.f);
        v[0] = d.x + b.x;
        v[1] = d.y + b.y;
        v[2] = d.z + b.z;
        v[3] = d.w + b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = (c0 + e < cols) ? s.dots[r * s.ld + c0 + e] + (s.bnorm ? s.bnorm[c0 + e] : 0.f) : NAN;
    }
}
// Four halves (8 bytes) per lane: the FP16 row is half the bytes of the FP32 one, which is the
// point of the FP16 path.
__device__ inline void load4(const HalfDotSource& s, int64_t r, int64_t j4, int64_t cols, float v[4]) {
    int64_t c0 = j4 * 4;
    const float rm = s.rowmul[r];
    if (c0 + 3 < cols) {
        uint2 raw = __ldcs(reinterpret_cast<const uint2*>(s.dots + r * s.ld + c0));
        float2 h01 = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
        float2 h23 = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
        float4 m = __ldg(reinterpret_cast<const float4*>(s.colmul + c0));
        float4 b = s.bnorm ? __ldg(reinterpret_cast<const float4*>(s.bnorm + c0))
                           : make_float4(0.f, 0.f, 0.f, 0.f);
        v[0] = b.x + (rm * m.x) * h01.x;
        v[1] = b.y + (rm * m.y) * h01.y;
        v[2] = b.z + (rm * m.z) * h23.x;
        v[3] = b.w + (rm * m.w) * h23.y;
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = (c0 + e < cols) ? half_value(s, rm, c0 + e, s.dots[r * s.ld + c0 + e]) : NAN;
    }
}
// kIntPastEnd past cols, which no filter passes (IntDotFilter).
__device__ inline void load4(const IntDotSource& s, int64_t r, int64_t j4, int64_t cols, int32_t v[4]) {
    int64_t c0 = j4 * 4;
    if (c0 + 3 < cols) {
        int4 d = __ldcs(reinterpret_cast<const int4*>(s.dots + r * s.ld + c0));
        int4 b = s.bterm ? __ldg(reinterpret_cast<const int4*>(s.bterm + c0)) : make_int4(0, 0, 0, 0);
        v[0] = s.mul * d.x + b.x;
        v[1] = s.mul * d.y + b.y;
        v[2] = s.mul * d.z + b.z;
        v[3] = s.mul * d.w + b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++) v[e] = (c0 + e < cols) ? int_value(s, r, c0 + e) : kIntPastEnd;
    }
}
__device__ inline void load4(const KeySource& s, int64_t r, int64_t j4, int64_t cols, uint64_t key[4]) {
    int64_t c0 = j4 * 4;
#pragma unroll
    for (int e = 0; e < 4; e++) key[e] = (c0 + e < cols) ? __ldcs(s.keys + r * s.ld + c0 + e) : kKeyNone;
}

// The first filter of a pass. For distances it compares floats against the pivot's value (a
// superset of the keys below the pivot key), so the common case (nothing passes) costs one add,
// one compare and one vote per element; keys are built only for the few that pass. Src: the
// float-valued sources (DotSource, HalfDotSource).
template <class Src>
struct DotFilter {
    float pf;
    __device__ DotFilter(uint64_t pivot)
        : pf(pivot == kKeyNone ? INFINITY : ordered_to_float((uint32_t)((pivot - 1) >> 32))) {}
    __device__ bool coarse(float v) const { return v <= pf; }
    __device__ uint64_t key(const Src& s, int64_t r, int64_t j, float v) const { return dot_key(s, r, j, v); }
};
struct KeyFilter {
    uint64_t pivot;
    __device__ KeyFilter(uint64_t p) : pivot(p) {}
    __device__ bool coarse(uint64_t k) const { return k < pivot; }
    __device__ uint64_t key(const KeySource&, int64_t, int64_t, uint64_t k) const { return k; }
};
// Integer values compare exactly; the bound stays below kIntPastEnd even when every key passes.
struct IntDotFilter {
    int32_t pv;
    __device__ IntDotFilter(uint64_t pivot)
        : pv(pivot == kKeyNone ? kIntPastEnd - 1 : min(int_key_value(pivot - 1), kIntPastEnd - 1)) {}
    __device__ bool coarse(int32_t v) const { return v <= pv; }
    __device__ uint64_t key(const IntDotSource& s, int64_t r, int64_t j, int32_t v) const {
        return int_dot_key(s, r, j, v);
    }
};
template <class Src> struct SourceTraits;
template <> struct SourceTraits<DotSource> { using Elem = float; using Filter = DotFilter<DotSource>; };
template <> struct SourceTraits<HalfDotSource> { using Elem = float; using Filter = DotFilter<HalfDotSource>; };
template <> struct SourceTraits<KeySource> { using Elem = uint64_t; using Filter = KeyFilter; };
template <> struct SourceTraits<IntDotSource> { using Elem = int32_t; using Filter = IntDotFilter; };

// ---- warp helpers -------------------------------------------------------------------------------

// Ascending bitonic sort of one key per lane across the warp.
__device__ inline uint64_t warp_sort32(uint64_t x, int lane) {
#pragma unroll
    for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            uint64_t y = __shfl_xor_sync(kFullMask, x, stride);
            bool up = (lane & size) == 0;
            bool lower = (lane & stride) == 0;
            x = (lower == up) ? min(x, y) : max(x, y);
        }
    return x;
}

__device__ inline uint64_t warp_max(uint64_t x) {
    for (int o = 16; o; o >>= 1) x = max(x, __shfl_xor_sync(kFullMask, x, o));
    return x;
}

// Quick-select by one warp: copies the `need` smallest keys of a[0:n) to out (unordered) and
// returns how many it wrote (min(n, need)). a and b are the ping-pong arrays (n keys each);
// their contents are scrambled.
__device__ int64_t warp_select(uint64_t* a, uint64_t* b, int64_t n, int64_t need, uint64_t* out,
                               int lane) {
    if (n <= need) {
        for (int64_t i = lane; i < n; i += 32) out[i] = a[i];
        return n;
    }
    const int64_t total = need;
    uint64_t* cur = a;
    uint64_t* oth = b;
    int64_t s = 0, e = n, opos = 0;
    while (need > 0) {
        int64_t len = e - s;
        if (len == need) {
            for (int64_t i = lane; i < len; i += 32) out[opos + i] = cur[s + i];
            break;
        }
        if (len <= 32) {
            // Rank by all-pairs comparison across the warp; keys are distinct.
            uint64_t x = lane < len ? cur[s + lane] : kKeyNone;
            int rank = 0;
            for (int j = 0; j < 32; j++) rank += __shfl_sync(kFullMask, x, j) < x;
            if (lane < len && rank < need) out[opos + rank] = x;
            break;
        }
        // Pivot: the sample at the quantile where the need-th key should sit.
        uint64_t smp = warp_sort32(cur[s + (lane * len) / 32], lane);
        int q = (int)((need * 32) / len < 31 ? (need * 32) / len : 31);
        uint64_t p = __shfl_sync(kFullMask, smp, q);
        // Partition [s, e) of cur into the same range of oth: < p from the left end, > p from
        // the right end, p itself (exactly one key) in between.
        int64_t nl = 0, nr = 0;
        for (int64_t i0 = s; i0 < e; i0 += 32) {
            int64_t i = i0 + lane;
            bool valid = i < e;
            uint64_t x = valid ? cur[i] : 0;
            bool lt = valid && x < p, gt = valid && x > p;
            unsigned blt = __ballot_sync(kFullMask, lt), bgt = __ballot_sync(kFullMask, gt);
            unsigned below = lanemask_lt();
            if (lt) oth[s + nl + __popc(blt & below)] = x;
            if (gt) oth[e - 1 - nr - __popc(bgt & below)] = x;
            nl += __popc(blt);
            nr += __popc(bgt);
        }
        uint64_t* t = cur;
        cur = oth;
        oth = t;
        if (nl >= need) {
            e = s + nl;
        } else {
            // The whole left side and the pivot are winners.
            for (int64_t i = lane; i < nl; i += 32) out[opos + i] = cur[s + i];
            if (lane == 0) out[opos + nl] = p;
            opos += nl + 1;
            need -= nl + 1;
            s += nl + 1;
        }
    }
    __syncwarp();
    return total;
}

// ---- the kernel ------------------------------------------------------------------------------

// Appends this warp's staged keys (n of them, n <= 32) to the row's candidate buffer.
__device__ inline void flush_stage(uint64_t* stage, int n, unsigned long long* count,
                                   uint64_t* cand, int64_t cap, int lane) {
    unsigned long long base = 0;
    if (lane == 0) base = atomicAdd(count, (unsigned long long)n);
    base = __shfl_sync(kFullMask, base, 0);
    if (lane < n && (int64_t)(base + lane) < cap) cand[base + lane] = stage[lane];
}

template <int W, class Src>
__global__ void __launch_bounds__(W * 32)
    qms_select_kernel(Src src, QmsPlan plan, uint64_t* __restrict__ out, int64_t out_ld,
                      uint64_t* __restrict__ scratch) {
    __shared__ uint64_t samples[kMaxSamples];
    __shared__ uint64_t stage_all[W][kStage];
    __shared__ unsigned long long s_count;
    __shared__ uint64_t s_pivot;

    const int64_t r = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t cols = plan.cols, k = plan.k, cap = plan.cap;
    uint64_t* cand = scratch + (size_t)r * 2 * cap;
    uint64_t* aux = cand + cap;
    uint64_t* stage = stage_all[warp];
    uint64_t* out_row = out + r * out_ld;

    // First pivot from M stratified random samples, sorted by the block (bitonic).
    const int M = plan.samples;
    int rank = plan.rank;
    if (!plan.take_all) {
        int64_t stratum = cols / M;
        for (int i = threadIdx.x; i < M; i += W * 32) {
            int64_t j = i * stratum + hash32((uint32_t)r, (uint32_t)i) % (uint32_t)stratum;
            samples[i] = key_at(src, r, j);
        }
        for (int size = 2; size <= M; size <<= 1)
            for (int stride = size / 2; stride > 0; stride >>= 1) {
                __syncthreads();
                for (int i = threadIdx.x; i < M / 2; i += W * 32) {
                    int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                    bool up = (lo & size) == 0;
                    uint64_t a = samples[lo], b = samples[hi];
                    if ((a > b) == up) {
                        samples[lo] = b;
                        samples[hi] = a;
                    }
                }
            }
        __syncthreads();
    }
    // Keys strictly below `pivot` pass; kKeyNone lets every real key through.
    auto pivot_at = [&](int rk) -> uint64_t {
        if (plan.take_all || rk >= M) return kKeyNone;
        uint64_t sk = samples[rk];
        return sk == kKeyNone ? kKeyNone : sk + 1;
    };
    uint64_t pivot = pivot_at(rank);

    unsigned long long count;
    for (;;) {
        if (threadIdx.x == 0) s_count = 0;
        __syncthreads();
        // Pass over the row: ballot, stage in shared memory, flush 32 keys at a time.
        const int64_t n4 = (cols + 3) / 4;
        constexpr int U = 2;  // float4 loads in flight per lane before the first use
        using Elem = typename SourceTraits<Src>::Elem;
        const typename SourceTraits<Src>::Filter filter(pivot);
        int pending = 0;
        for (int64_t base4 = (int64_t)warp * 32; base4 < n4; base4 += (int64_t)W * 32 * U) {
            Elem v[U][4];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t j4 = base4 + (int64_t)u * W * 32 + lane;
                if (j4 < n4) load4(src, r, j4, cols, v[u]);
                else load4(src, r, 0, 0, v[u]);  // all "past the end"
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                bool any = filter.coarse(v[u][0]) | filter.coarse(v[u][1]) | filter.coarse(v[u][2]) |
                           filter.coarse(v[u][3]);
                if (!__any_sync(kFullMask, any)) continue;
                const int64_t c0 = (base4 + (int64_t)u * W * 32 + lane) * 4;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    uint64_t key = filter.coarse(v[u][e]) ? filter.key(src, r, c0 + e, v[u][e]) : kKeyNone;
                    bool pass = key < pivot;
                    unsigned bal = __ballot_sync(kFullMask, pass);
                    if (bal) {
                        if (pass) stage[pending + __popc(bal & lanemask_lt())] = key;
                        pending += __popc(bal);
                        __syncwarp();
                        if (pending >= 32) {
                            flush_stage(stage, 32, &s_count, cand, cap, lane);
                            __syncwarp();
                            if (lane < pending - 32) stage[lane] = stage[32 + lane];
                            pending -= 32;
                            __syncwarp();
                        }
                    }
                }
            }
        }
        if (pending) flush_stage(stage, pending, &s_count, cand, cap, lane);
        __syncthreads();
        count = s_count;
        if ((int64_t)count < k && pivot != kKeyNone) {
            rank = 2 * rank + 2;  // too few below the pivot: a higher sample
            pivot = pivot_at(rank);
            __syncthreads();
            continue;
        }
        if ((int64_t)count > cap) {
            // Too many: the k-th smallest of the first cap candidates is a pivot with at least
            // k keys at or below it and at least cap-k fewer than before.
            if (warp == 0) {
                warp_select(cand, aux, cap, k, out_row, lane);
                uint64_t m = 0;
                for (int64_t i = lane; i < k; i += 32) m = max(m, out_row[i]);
                m = warp_max(m);
                if (lane == 0) s_pivot = m + 1;
            }
            __syncthreads();
            pivot = s_pivot;
            __syncthreads();
            continue;
        }
        break;
    }
    if (warp != 0) return;
    int64_t got = warp_select(cand, aux, (int64_t)count, k, out_row, lane);
    for (int64_t i = got + lane; i < k; i += 32) out_row[i] = kKeyNone;
}

template <class Src>
int launch(graft_gpu_ctx* ctx, const Src& src, const QmsPlan& plan, int64_t rows, uint64_t* out,
           int64_t out_ld, void* scratch) {
    if (rows <= 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    // One warp per row when rows fill the GPU (about 32 resident warps per SM), else one block
    // of W warps per row.
    int64_t want_warps = (int64_t)ctx->sm_count * 32;
    if (rows > INT32_MAX) return gpu_fail(GRAFT_EINTERNAL, "qms_select: %lld rows in one launch", (long long)rows);
    uint64_t* sc = static_cast<uint64_t*>(scratch);
    dim3 grid((unsigned)rows);
    if (rows >= want_warps)
        qms_select_kernel<1, Src><<<grid, 32, 0, ctx->stream>>>(src, plan, out, out_ld, sc);
    else if (rows * 2 >= want_warps)
        qms_select_kernel<2, Src><<<grid, 64, 0, ctx->stream>>>(src, plan, out, out_ld, sc);
    else if (rows * 4 >= want_warps)
        qms_select_kernel<4, Src><<<grid, 128, 0, ctx->stream>>>(src, plan, out, out_ld, sc);
    else
        qms_select_kernel<8, Src><<<grid, 256, 0, ctx->stream>>>(src, plan, out, out_ld, sc);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

}  // namespace

QmsPlan qms_plan(int64_t cols, int64_t k) {
    QmsPlan p{};
    p.cols = cols;
    p.k = k;
    int M = kMaxSamples;
    while (M > 32 && (int64_t)M * 8 > cols) M >>= 1;
    p.samples = M;
    double t = (double)k * M / (double)cols;  // samples expected below the k-th key
    // rank ~ 1.5 t + 2 sqrt(t): P(fewer than k keys below the pivot) stays under ~1%.
    int rank = (int)ceil(1.5 * t + 2.0 * sqrt(t));
    if (cols <= 256 || cols <= 4 * k || rank >= M / 2) {
        p.take_all = 1;
        p.rank = M;
        p.cap = cols;
        return p;
    }
    p.rank = rank;
    int64_t expect = (int64_t)(rank + 1) * (cols / M);
    // 4x the expected count: an overflow retry (c > cap) is a few-in-a-thousand event.
    int64_t cap = std::max<int64_t>(2 * k, 4 * expect) + 64;
    p.cap = std::min<int64_t>(cols, (cap + 31) / 32 * 32);
    return p;
}

size_t qms_scratch_bytes(const QmsPlan& plan, int64_t rows) {
    return (size_t)rows * 2 * (size_t)plan.cap * sizeof(uint64_t);
}

int qms_select_rows(graft_gpu_ctx* ctx, const DotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch) {
    return launch(ctx, src, plan, rows, out, out_ld, scratch);
}
int qms_select_rows(graft_gpu_ctx* ctx, const KeySource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch) {
    return launch(ctx, src, plan, rows, out, out_ld, scratch);
}
int qms_select_rows(graft_gpu_ctx* ctx, const IntDotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch) {
    return launch(ctx, src, plan, rows, out, out_ld, scratch);
}
int qms_select_rows(graft_gpu_ctx* ctx, const HalfDotSource& src, const QmsPlan& plan, int64_t rows,
                    uint64_t* out, int64_t out_ld, void* scratch) {
    return launch(ctx, src, plan, rows, out, out_ld, scratch);
}

// ---- sort of the winners ------------------------------------------------------------------------

__global__ void row_offsets_kernel(int* off, int64_t rows, int64_t k) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= rows) off[i] = (int)(i * k);
}

size_t sort_temp_bytes(int64_t rows, int64_t k) {
    size_t temp = 0;
    cub::DeviceSegmentedSort::SortKeys(nullptr, temp, (const uint64_t*)nullptr, (uint64_t*)nullptr,
                                       (int)(rows * k), (int)rows, (const int*)nullptr,
                                       (const int*)nullptr);
    return align_up(temp, 256) + align_up((size_t)(rows + 1) * sizeof(int), 256);
}

int sort_rows(graft_gpu_ctx* ctx, const uint64_t* keys, uint64_t* sorted, int64_t rows, int64_t k,
              void* temp) {
    if (rows * k > INT32_MAX)
        return gpu_fail(GRAFT_EINTERNAL, "sort_rows: %lld keys exceed one CUB call", (long long)(rows * k));
    size_t temp_bytes = 0;
    cub::DeviceSegmentedSort::SortKeys(nullptr, temp_bytes, keys, sorted, (int)(rows * k), (int)rows,
                                       (const int*)nullptr, (const int*)nullptr);
    int* off = reinterpret_cast<int*>(static_cast<char*>(temp) + align_up(temp_bytes, 256));
    row_offsets_kernel<<<(unsigned)ceil_div(rows + 1, 256), 256, 0, ctx->stream>>>(off, rows, k);
    GRAFT_CUDA_LAUNCH_CHECK();
    GRAFT_CUDA_TRY(cub::DeviceSegmentedSort::SortKeys(temp, temp_bytes, keys, sorted, (int)(rows * k),
                                                      (int)rows, off, off + 1, ctx->stream));
    return GRAFT_OK;
}

}  // namespace graft
