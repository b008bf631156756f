// Insertion into a built graph: one round of graft_graph_insert_round_cpu (plugin/graph/insert.c,
// the oracle; graft/graph.h, "A living graph") on the device, given each new vertex's candidates
// (the caller's GPU walk, graph_search.cu).
//
//   1. new_rows: one warp per new vertex v (as GRNND's warp per vertex, grnnd_build.cu): its live
//      candidates with their distances, sorted by (distance, id) as 64-bit ordered keys
//      (common.cuh), repeats dropped, then RNN-Descent's Alg. 2 test (a candidate goes when an
//      accepted closer one is closer to it than v) keeps at most R: v's row, and one offer
//      (target, distance, v) per kept neighbour;
//   2. the offers sorted by (target, distance, source): CUB's radix sort of the keys
//      target << 32 | ordered distance, stable (sources ascend in the input, vertex by vertex);
//   3. target_rows: one warp per target row: its entries with their distances and its offers
//      (at most 2R in all), sorted; a row they overflow is pruned again by the same test, two old
//      entries never compared; the R closest survivors written; new vertices kept are marked;
//   4. link_orphans: one warp, vertex by vertex: a new vertex no row kept goes into its nearest
//      neighbour's row in place of the row's last entry.
//
// Equal to the CPU, row for row, from the same candidates: distances are graft_vec_dist's, bit for
// bit (8 lanes sum the dimensions t, t + 8, ... as its 8 partial sums, the tail in lane 0, combined
// in its order, without FMA: __fadd_rn / __fmul_rn), and every order (sort keys, offers, the prune
// loop, the orphans) is the CPU's.
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

namespace graft {
namespace {

constexpr int kMaxWarps = 4;

__device__ inline bool is_live(const uint32_t* live, int64_t u) {
    return !live || ((live[u >> 5] >> (u & 31)) & 1u);
}

// graft_vec_dist(a, b) (core/vec_dist.h) computed by the 8 lanes of a group (lanes 8 g .. 8 g + 7)
// and handed to all of them. Every lane of the warp must call it (the shuffles span the warp).
__device__ inline float group_dist(const float* a, const float* b, int64_t d, bool l2) {
    const int t = threadIdx.x & 7;
    const int64_t main = d / 8 * 8;
    float s = 0.f;
    for (int64_t j = t; j < main; j += 8) {
        if (l2) {
            const float u = __fsub_rn(a[j], b[j]);
            s = __fadd_rn(s, __fmul_rn(u, u));
        } else {
            s = __fsub_rn(s, __fmul_rn(a[j], b[j]));
        }
    }
    if (t == 0)
        for (int64_t j = main; j < d; j++) {
            if (l2) {
                const float u = __fsub_rn(a[j], b[j]);
                s = __fadd_rn(s, __fmul_rn(u, u));
            } else {
                s = __fsub_rn(s, __fmul_rn(a[j], b[j]));
            }
        }
    // ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))
    const float p = __fadd_rn(s, __shfl_down_sync(kFullMask, s, 4, 8));
    const float q = __fadd_rn(p, __shfl_down_sync(kFullMask, p, 1, 8));
    const float r = __fadd_rn(q, __shfl_down_sync(kFullMask, q, 2, 8));
    return __shfl_sync(kFullMask, r, 0, 8);
}

__device__ inline float key_dist(uint64_t k) { return ordered_to_float((uint32_t)(k >> 32)); }
__device__ inline int32_t key_id(uint64_t k) { return (int32_t)(uint32_t)k; }

// in[0..c) sorted into out by value (the keys order as (distance, id)); equal keys keep their
// order. One warp; O(c^2 / 32), c <= 2R or C.
__device__ void rank_sort(const uint64_t* in, uint64_t* out, int c) {
    for (int e = threadIdx.x & 31; e < c; e += 32) {
        const uint64_t k = in[e];
        int r = 0;
        for (int f = 0; f < c; f++) {
            const uint64_t kf = in[f];
            r += kf < k || (kf == k && f < e);
        }
        out[r] = k;
    }
    __syncwarp();
}

// Alg. 2's test over keys[0..c) sorted, fresh[i] (NULL: all new) RNN-Descent's new flag: keeps an
// entry unless a kept closer one prunes it (d(a, c) < d(v, c); two old ones are not compared),
// at most R, in place. Returns the count kept.
__device__ int rng_prune(uint64_t* keys, uint8_t* fresh, int c, int R, const float* x, int64_t d,
                         bool l2) {
    const int g = (threadIdx.x & 31) >> 3;
    int kept = 0;
    for (int i = 0; i < c && kept < R; i++) {
        const uint64_t k = keys[i];
        const float dv = key_dist(k);
        const bool fi = !fresh || fresh[i];
        const float* xc = x + (int64_t)key_id(k) * d;
        bool pruned = false;
        for (int a0 = 0; a0 < kept && !pruned; a0 += 4) {
            const int a = a0 + g;
            const bool real = a < kept && (fi || !fresh || fresh[a]);
            // every group computes a distance (the shuffles need the whole warp): a stand-in pair
            // where there is no real one
            const float* xa = x + (int64_t)key_id(keys[a < kept ? a : 0]) * d;
            const float dd = group_dist(xa, xc, d, l2);
            pruned = __any_sync(kFullMask, real && dd < dv);
        }
        if (!pruned) {
            // kept <= i: nothing unread is overwritten; kept == i leaves the entry where it is.
            // The warp's reads of keys[] and fresh[] (this entry's, and keys[kept] when it was
            // read as entry kept and pruned) are done before lane 0 writes: the votes above do
            // not order memory (racecheck), __syncwarp does.
            __syncwarp();
            if ((threadIdx.x & 31) == 0 && kept != i) {
                keys[kept] = k;
                if (fresh) fresh[kept] = fi;
            }
            kept++;
            __syncwarp();
        }
    }
    return kept;
}

// The ids id_at(j) >= 0 of j in [0, count), in order, into out; returns how many. One warp.
template <class IdAt>
__device__ int gather_ids(IdAt id_at, int count, uint64_t* out) {
    const int lane = threadIdx.x & 31;
    int c = 0;
    for (int j0 = 0; j0 < count; j0 += 32) {
        const int64_t u = j0 + lane < count ? id_at(j0 + lane) : -1;
        const unsigned mask = __ballot_sync(kFullMask, u >= 0);
        if (u >= 0) out[c + __popc(mask & lanemask_lt())] = (uint64_t)u;
        c += __popc(mask);
    }
    __syncwarp();
    return c;
}

// keys[e] = (d(xv, x[ids[e]]), ids[e]) for e < c, four distances at a time. One warp.
__device__ void distance_keys(const uint64_t* ids, int c, const float* xv, const float* x, int64_t d,
                              bool l2, uint64_t* keys) {
    const int lane = threadIdx.x & 31, g = lane >> 3;
    for (int e0 = 0; e0 < c; e0 += 4) {
        const int e = e0 + g;
        const int64_t u = (int64_t)ids[e < c ? e : 0];
        const float dd = group_dist(xv, x + u * d, d, l2);
        if ((lane & 7) == 0 && e < c) keys[e] = make_key(dd, (uint32_t)u);
    }
    __syncwarp();
}

struct Args {
    const float* x;
    int64_t n, m, d;
    int32_t* graph;
    int R, C, K;
    const int64_t* cand;
    const int64_t* cand_round; // m x K: the round's own k-NN, ids in [0, m) (NULL when K = 0)
    const uint32_t* live;
    bool l2;
    uint64_t* offer_key; // m x R: target << 32 | ordered distance (kKeyNone past the kept)
    int32_t* offer_from; // m x R: the new vertex
    uint8_t* linked;     // m: a row kept the new vertex
    unsigned long long* counts; // offers, repruned, forced
};

// Step 1. Shared memory per warp: 2 (C + K) keys.
__global__ void new_rows(Args a) {
    extern __shared__ uint64_t smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t i = (int64_t)blockIdx.x * (blockDim.x >> 5) + w;
    if (i >= a.m) return;
    uint64_t* A = smem + (size_t)w * 2 * (a.C + a.K);
    uint64_t* B = A + a.C + a.K;
    const int64_t v = a.n + i;
    const float* xv = a.x + v * a.d;
    // live candidates in [0, n + m) but v, in their order (the walk's, then the round's), with
    // their distances
    const int c = gather_ids([&](int j) -> int64_t {
        int64_t u = j < a.C ? a.cand[i * a.C + j] : a.cand_round[i * a.K + j - a.C];
        if (j >= a.C && u >= 0) u += a.n;
        return u >= 0 && u < a.n + a.m && u != v && (u >= a.n || is_live(a.live, u)) ? u : -1;
    }, a.C + a.K, B);
    distance_keys(B, c, xv, a.x, a.d, a.l2, A);
    rank_sort(A, B, c);
    // repeats (equal keys) are adjacent: one of each
    int u = 0;
    for (int e0 = 0; e0 < c; e0 += 32) {
        const int e = e0 + lane;
        const bool keep = e < c && (e == 0 || B[e] != B[e - 1]);
        const unsigned mask = __ballot_sync(kFullMask, keep);
        if (keep) A[u + __popc(mask & lanemask_lt())] = B[e];
        u += __popc(mask);
    }
    __syncwarp();
    const int kept = rng_prune(A, nullptr, u, a.R, a.x, a.d, a.l2);
    // offers to the old neighbours, in the row's order (the CPU's); a new one is linked
    int offers = 0;
    for (int j0 = 0; j0 < a.R; j0 += 32) {
        const int j = j0 + lane;
        const int32_t id = j < kept ? key_id(A[j]) : -1;
        const bool old = id >= 0 && id < a.n;
        const unsigned mask = __ballot_sync(kFullMask, old);
        if (j < a.R) {
            a.graph[v * a.R + j] = id;
            a.offer_key[i * a.R + j] = kKeyNone;
            a.offer_from[i * a.R + j] = (int32_t)v;
        }
        __syncwarp();
        if (old) {
            const int o = offers + __popc(mask & lanemask_lt());
            a.offer_key[i * a.R + o] = ((uint64_t)(uint32_t)id << 32) | (A[j] >> 32);
            a.offer_from[i * a.R + o] = (int32_t)v;
        } else if (id >= a.n) {
            a.linked[id - a.n] = 1;
        }
        offers += __popc(mask);
    }
    if (lane == 0) atomicAdd(&a.counts[0], (unsigned long long)offers);
}

// Step 3, over the sorted offers (M of them, kKeyNone last). Shared memory per warp: 4 R keys and
// 2 R flags.
__global__ void target_rows(Args a, const uint64_t* key, const int32_t* from, int64_t M) {
    extern __shared__ uint64_t smem[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int R = a.R;
    uint64_t* A = smem + (size_t)w * 4 * R;
    uint64_t* B = A + 2 * R;
    uint8_t* F = reinterpret_cast<uint8_t*>(smem + (size_t)(blockDim.x >> 5) * 4 * R) + (size_t)w * 2 * R;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t p = (int64_t)blockIdx.x * (blockDim.x >> 5) + w; p < M; p += warps) {
        const uint64_t kp = key[p];
        const uint32_t u = (uint32_t)(kp >> 32);
        if (kp == kKeyNone || (p > 0 && (uint32_t)(key[p - 1] >> 32) == u)) continue; // not a head
        // the segment [p, q) of u's offers
        int64_t q = p + 1;
        for (;;) {
            const int64_t r = q + lane;
            const bool same = r < M && key[r] != kKeyNone && (uint32_t)(key[r] >> 32) == u;
            const unsigned mask = __ballot_sync(kFullMask, same);
            if (mask == kFullMask) {
                q += 32;
                continue;
            }
            q += __ffs(~mask) - 1;
            break;
        }
        int32_t* row = a.graph + (int64_t)u * R;
        const float* xu = a.x + (int64_t)u * a.d;
        // the row's entries in [0, n) (old), their distances
        int c = gather_ids([&](int j) -> int64_t { return row[j] >= 0 && row[j] < a.n ? row[j] : -1; }, R, B);
        distance_keys(B, c, xu, a.x, a.d, a.l2, A);
        const int old = c;
        // the offers, closest first, while the row holds under 2 R (the CPU's cap)
        const int64_t take = q - p < 2 * R - old ? q - p : 2 * R - old;
        for (int t = lane; t < take; t += 32)
            A[old + t] = ((key[p + t] & 0xffffffffull) << 32) | (uint32_t)from[p + t];
        c = old + (int)take;
        __syncwarp();
        rank_sort(A, B, c);
        // old or new: new vertices are the ids >= n
        for (int e = lane; e < c; e += 32) F[e] = key_id(B[e]) >= a.n;
        __syncwarp();
        int kept = c;
        if (c > R) {
            kept = rng_prune(B, F, c, R, a.x, a.d, a.l2);
            if (lane == 0) atomicAdd(&a.counts[1], 1ull);
        }
        for (int j = lane; j < R; j += 32) row[j] = j < kept ? key_id(B[j]) : -1;
        for (int j = lane; j < kept; j += 32)
            if (key_id(B[j]) >= a.n) a.linked[key_id(B[j]) - a.n] = 1;
        __syncwarp();
    }
}

// Step 4: one warp, the new vertices in order. Shared memory: R + 1 keys.
__global__ void link_orphans(Args a) {
    extern __shared__ uint64_t smem[];
    const int lane = threadIdx.x & 31;
    const int R = a.R;
    uint64_t* A = smem;
    uint64_t* B = smem + R + 1;
    for (int64_t i0 = 0; i0 < a.m; i0 += 32) {
        const int64_t il = i0 + lane;
        unsigned orphans = __ballot_sync(kFullMask, il < a.m && !a.linked[il]);
        while (orphans) {
            const int64_t i = i0 + __ffs(orphans) - 1;
            orphans &= orphans - 1;
            const int64_t v = a.n + i;
            const int32_t u = a.graph[v * R];
            if (u < 0) continue;
            int32_t* row = a.graph + (int64_t)u * R;
            const float* xu = a.x + (int64_t)u * a.d;
            // the row's entries in its order, the last one dropped when full, then v
            int c = gather_ids([&](int j) -> int64_t { return row[j] >= 0 ? row[j] : -1; }, R, B);
            if (c == R) c--;
            if (lane == 0) B[c] = (uint64_t)v;
            c++;
            __syncwarp();
            distance_keys(B, c, xu, a.x, a.d, a.l2, A);
            rank_sort(A, B, c);
            for (int j = lane; j < R; j += 32) row[j] = j < c ? key_id(B[j]) : -1;
            if (lane == 0) atomicAdd(&a.counts[2], 1ull);
            __syncwarp();
        }
    }
}

struct Layout {
    size_t linked, counts, key_in, key_out, from_in, from_out, temp, temp_bytes, end;
};

Layout layout(int64_t m, int R) {
    const size_t M = (size_t)m * R;
    size_t temp = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint64_t*)nullptr, (uint64_t*)nullptr,
                                    (const int32_t*)nullptr, (int32_t*)nullptr, (int)M);
    Layout l;
    l.linked = 0;
    l.counts = align_up(l.linked + (size_t)m, 256);
    l.key_in = align_up(l.counts + 3 * sizeof(unsigned long long), 256);
    l.key_out = align_up(l.key_in + M * 8, 256);
    l.from_in = align_up(l.key_out + M * 8, 256);
    l.from_out = align_up(l.from_in + M * 4, 256);
    l.temp = align_up(l.from_out + M * 4, 256);
    l.temp_bytes = temp;
    l.end = l.temp + temp;
    return l;
}

// Warps per block whose shared memory fits the default 48 KiB.
int warps_for(size_t per_warp) {
    int w = kMaxWarps;
    while (w > 1 && (size_t)w * per_warp > 48 * 1024) w /= 2;
    return w;
}

}  // namespace
}  // namespace graft

using namespace graft;

extern "C" size_t graft_gpu_graph_insert_scratch(int64_t m, int R, int C) {
    (void)C;
    if (m < 1 || R < 1) return 0;
    return layout(m, R).end;
}

extern "C" int graft_gpu_graph_insert(graft_gpu_ctx* ctx, const graft_gpu_insert_args* ia,
                                      graft_gpu_insert_counts* counts) {
    if (!ctx || !ia || !ia->x || !ia->graph || (ia->m > 0 && (!ia->cand || !ia->scratch)))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_insert: NULL argument");
    if (ia->n < 1 || ia->m < 0 || ia->n + ia->m > INT32_MAX || ia->d < 1 || ia->R < 1 || ia->R > 256 ||
        ia->C < 1 || ia->C > 1024 || (ia->cand_round && (ia->K < 0 || ia->K > 256)) ||
        (int64_t)ia->m * ia->R > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_insert: bad arguments (n=%lld m=%lld d=%lld "
                        "R=%d C=%d K=%d; m R < 2^31)", (long long)ia->n, (long long)ia->m,
                        (long long)ia->d, ia->R, ia->C, ia->K);
    if (ia->m == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t st = ctx->stream;
    const Layout l = layout(ia->m, ia->R);
    char* s = static_cast<char*>(ia->scratch);
    const int64_t M = ia->m * ia->R;
    Args a;
    a.x = ia->x;
    a.n = ia->n;
    a.m = ia->m;
    a.d = ia->d;
    a.graph = ia->graph;
    a.R = ia->R;
    a.C = ia->C;
    a.K = ia->cand_round ? ia->K : 0;
    a.cand = ia->cand;
    a.cand_round = ia->cand_round;
    a.live = ia->live;
    a.l2 = ia->l2 != 0;
    a.offer_key = reinterpret_cast<uint64_t*>(s + l.key_in);
    a.offer_from = reinterpret_cast<int32_t*>(s + l.from_in);
    a.linked = reinterpret_cast<uint8_t*>(s + l.linked);
    a.counts = reinterpret_cast<unsigned long long*>(s + l.counts);
    GRAFT_CUDA_TRY(cudaMemsetAsync(s, 0, l.key_in, st)); // linked and counts
    // 1. the new rows and their offers
    {
        const size_t per_warp = (size_t)2 * (ia->C + a.K) * sizeof(uint64_t);
        const int w = warps_for(per_warp);
        new_rows<<<(unsigned)ceil_div(ia->m, w), w * 32, w * per_warp, st>>>(a);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    // 2. the offers by (target, distance, source)
    size_t temp = l.temp_bytes;
    GRAFT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(s + l.temp, temp, a.offer_key,
                                                   reinterpret_cast<uint64_t*>(s + l.key_out),
                                                   a.offer_from, reinterpret_cast<int32_t*>(s + l.from_out),
                                                   (int)M, 0, 64, st));
    // 3. the target rows
    {
        const size_t per_warp = (size_t)4 * ia->R * sizeof(uint64_t) + (size_t)2 * ia->R;
        const int w = warps_for(per_warp);
        const int64_t blocks = std::min<int64_t>(ceil_div(M, w), (int64_t)ctx->sm_count * 64);
        target_rows<<<(unsigned)blocks, w * 32, w * per_warp, st>>>(
                a, reinterpret_cast<const uint64_t*>(s + l.key_out),
                reinterpret_cast<const int32_t*>(s + l.from_out), M);
        GRAFT_CUDA_LAUNCH_CHECK();
    }
    // 4. an in-edge for every new vertex
    link_orphans<<<1, 32, (size_t)2 * (ia->R + 1) * sizeof(uint64_t), st>>>(a);
    GRAFT_CUDA_LAUNCH_CHECK();
    unsigned long long c[3];
    GRAFT_CUDA_TRY(cudaMemcpyAsync(c, a.counts, sizeof c, cudaMemcpyDeviceToHost, st));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(st));
    if (counts) {
        counts->offers += (int64_t)c[0];
        counts->repruned += (int64_t)c[1];
        counts->forced += (int64_t)c[2];
    }
    return GRAFT_OK;
}
