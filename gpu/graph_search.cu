// Graph search on the GPU, SONG-style (../shared/papers/song-gpu-graph-search.zh.txt; DESIGN.md
// summarises it): one warp per query, the query and its worklist in shared memory, each
// iteration in SONG's three stages:
//   1. candidate locating: the best `probes` unexpanded worklist entries (ballot over the sorted
//      worklist) are marked expanded; their graph rows are read by the whole warp (coalesced),
//      and every neighbour is tested against the visited set (test-and-set, so one warp never
//      computes a vertex twice in an iteration);
//   2. bulk distances: lane groups of G lanes each take one candidate (float4 loads of the base
//      vector, the query from shared memory, a G-lane shuffle reduction);
//   3. maintenance: the candidates that beat the worst entry of a full worklist (SONG's selected
//      insertion) enter the worklist, either sorted in the warp and merged by rank (BANG's
//      merge path) or inserted one by one (SONG); with a filter, allowed candidates also enter a
//      separate top-k of allowed ids.
// The search ends when every worklist entry is expanded, exactly like the CPU reference
// (graft_graph_search_cpu_ex in plugin/graph/graph.c), whose results it reproduces up to float rounding
// of the distances (and, with the Bloom filter, up to its false positives).
//
// Visited sets: (0) an open-addressing hash in shared memory rebuilt from the worklist after each
// iteration (SONG's visited deletion: the set is the worklist plus the iteration's candidates,
// at most L + probes R entries in 2 (L + probes R) slots); a vertex that left the worklist may
// be computed again but cannot re-enter it, because the worklist's worst entry only improves.
// (1) BANG's per-query Bloom filter in global memory (2 hash functions, 2^bloom_log2 bits),
// cleared when the query starts and never during it.
//
// Worklist keys are the ordered keys of common.cuh (distance bits | id) with bit 31 of the id
// word marking "expanded"; comparisons mask that bit, so the order is (distance, id) as on the
// CPU.
#include <cfloat>
#include <cstdlib>

#include "common.cuh"

namespace graft {
namespace {

constexpr uint64_t kExpanded = 1ull << 31;
__device__ inline uint64_t plain(uint64_t k) { return k & ~kExpanded; }
constexpr int kMaxProbes = 8;
constexpr int kWarpsPerBlock = 4;

// Per-warp shared-memory layout, in bytes from the warp's base (16-byte aligned).
struct Layout {
    int list_a, list_b, cand, sorted, res, hash, expand, stride;
    int C;          // candidates per iteration at most: probes x R
    int hash_bits;  // hash table of 2^hash_bits slots (0 with the Bloom filter)
};

struct Params {
    graft_gpu_search_args a;
    Layout lay;
    int64_t bloom_words;  // per query
    int wpb;
};

template <bool L2>
__device__ inline float term(float a, float b) {
    if (L2) {
        const float t = a - b;
        return t * t;
    }
    return a * b;
}

// Distances of the m candidates whose ids sit in the low words of cand[]: lane group g of G lanes
// takes candidates g, g + 32/G, ...; cand[c] becomes the candidate's key.
template <int G, bool L2>
__device__ void warp_distances(const float* __restrict__ x, int64_t d, const float* q,
                               uint64_t* cand, int m, int lane) {
    constexpr int NG = 32 / G;
    const int g = lane / G, gl = lane % G;
    const bool vec4 = (d & 3) == 0;
    for (int c0 = 0; c0 < m; c0 += NG) {
        const int c = c0 + g;
        float acc = 0.f;
        uint32_t u = 0;
        if (c < m) {
            u = (uint32_t)cand[c];
            const float* xr = x + (int64_t)u * d;
            if (vec4) {
                const float4* x4 = reinterpret_cast<const float4*>(xr);
                const float4* q4 = reinterpret_cast<const float4*>(q);
                const int d4 = (int)(d >> 2);
#pragma unroll 4
                for (int j = gl; j < d4; j += G) {
                    const float4 v = __ldg(x4 + j), w = q4[j];
                    acc += term<L2>(w.x, v.x) + term<L2>(w.y, v.y) + term<L2>(w.z, v.z) +
                           term<L2>(w.w, v.w);
                }
            } else {
                for (int j = gl; j < d; j += G) acc += term<L2>(q[j], __ldg(xr + j));
            }
        }
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(kFullMask, acc, o);
        __syncwarp();  // the group's lanes read cand[c] above; a shuffle orders no memory
        if (c < m && gl == 0) cand[c] = make_key(L2 ? acc : -acc, u);
    }
}

__device__ inline bool hash_insert(int32_t* table, int bits, int32_t u) {
    const uint32_t mask = (1u << bits) - 1;
    uint32_t s = ((uint32_t)u * 2654435761u) >> (32 - bits);
    for (;;) {
        const int32_t old = atomicCAS(&table[s], -1, u);
        if (old == -1) return true;
        if (old == u) return false;
        s = (s + 1) & mask;
    }
}

// Number of entries of the sorted list a[0..n) whose plain key is below key.
__device__ inline int lower_bound(const uint64_t* a, int n, uint64_t key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (plain(a[mid]) < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// SONG's insertion of one key into the sorted list a[0..*size) of capacity cap (warp-wide,
// uniform arguments): position by ballot, then the tail moves up one slot, chunks from the top.
// Returns the position, or cap when the key is not better than a full list's worst or is
// already there.
__device__ int warp_insert_one(uint64_t* a, int* size, int cap, uint64_t key, int lane) {
    const int n = *size;
    if (n == cap && key >= plain(a[cap - 1])) return cap;
    int pos = 0;
    for (int b = 0; b < n; b += 32) {
        const int i = b + lane;
        pos += __popc(__ballot_sync(kFullMask, i < n && plain(a[i]) < key));
    }
    if (pos < n && plain(a[pos]) == key) return cap;
    const int hi = n < cap ? n : cap - 1;  // a[pos..hi) moves to a[pos+1..hi]
    for (int top = hi; top > pos; top -= 32) {
        const int i = top - 1 - lane;
        const bool mv = i >= pos;
        uint64_t v = 0;
        if (mv) v = a[i];
        __syncwarp();
        if (mv) a[i + 1] = v;
        __syncwarp();
    }
    __syncwarp();  // every lane read a[pos] above, also when nothing moved
    if (lane == 0) a[pos] = key;
    __syncwarp();
    if (n < cap) *size = n + 1;
    return pos;
}

template <int G, bool L2>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
graph_search_kernel(Params P) {
    extern __shared__ __align__(16) unsigned char smem[];
    const graft_gpu_search_args& a = P.a;
    const Layout& lay = P.lay;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t qi = (int64_t)blockIdx.x * P.wpb + warp;
    if (qi >= a.nq) return;  // whole warps only; no block-wide barrier below
    unsigned char* base = smem + (size_t)warp * lay.stride;
    float* q = reinterpret_cast<float*>(base);
    uint64_t* list = reinterpret_cast<uint64_t*>(base + lay.list_a);
    uint64_t* spare = reinterpret_cast<uint64_t*>(base + lay.list_b);
    uint64_t* cand = reinterpret_cast<uint64_t*>(base + lay.cand);
    uint64_t* sorted = reinterpret_cast<uint64_t*>(base + lay.sorted);
    uint64_t* res = reinterpret_cast<uint64_t*>(base + lay.res);
    int32_t* table = reinterpret_cast<int32_t*>(base + lay.hash);
    int32_t* expand = reinterpret_cast<int32_t*>(base + lay.expand);
    const bool use_hash = a.visited == 0, sort_merge = a.merge == 0;
    const int L = a.L, R = a.R, k = (int)a.k;

    const float* gq = a.xq + qi * a.d;
    const int dpad = (int)((a.d + 3) & ~3ll);
    for (int j = lane; j < dpad; j += 32) q[j] = j < a.d ? gq[j] : 0.f;
    uint32_t* bf = nullptr;
    const uint32_t bloom_mask = (1u << a.bloom_log2) - 1;
    if (use_hash) {
        for (int j = lane; j < (1 << lay.hash_bits); j += 32) table[j] = -1;
    } else {
        bf = a.bloom + qi * P.bloom_words;
        uint4* b4 = reinterpret_cast<uint4*>(bf);
        for (int64_t j = lane; j < P.bloom_words / 4; j += 32) b4[j] = make_uint4(0, 0, 0, 0);
    }
    __syncwarp();

    // The entry vertex starts the worklist (and the results, when allowed).
    const int32_t e = (int32_t)a.entry;
    if (lane == 0) {
        if (use_hash) hash_insert(table, lay.hash_bits, e);
        else bloom_insert(bf, bloom_mask, e);
        cand[0] = (uint32_t)e;
    }
    __syncwarp();
    warp_distances<G, L2>(a.x, a.d, q, cand, 1, lane);
    __syncwarp();
    int size = 1, nres = 0;
    if (lane == 0) list[0] = cand[0];
    if (a.allowed && (a.allowed[e >> 5] >> (e & 31) & 1u)) {
        if (lane == 0) res[0] = cand[0];
        nres = 1;
    }
    __syncwarp();

    int scan = 0;  // every worklist entry before `scan` is expanded
    int64_t ndist = 1, niter = 0;
    for (;;) {
        // 1. candidate locating
        int nsel = 0, first = -1;
        for (int b = scan; b < size && nsel < a.probes; b += 32) {
            const int i = b + lane;
            unsigned bal = __ballot_sync(kFullMask, i < size && !(list[i] & kExpanded));
            while (bal && nsel < a.probes) {
                const int j = __ffs(bal) - 1;
                bal &= bal - 1;
                if (first < 0) first = b + j;
                if (lane == j) {
                    expand[nsel] = (int32_t)(uint32_t)plain(list[i]);
                    list[i] |= kExpanded;
                }
                nsel++;
            }
        }
        __syncwarp();
        if (nsel == 0) break;
        scan = first;
        niter++;
        const int C = nsel * R;
        int m = 0;
        for (int t0 = 0; t0 < C; t0 += 32) {
            const int t = t0 + lane;
            int32_t u = -1;
            if (t < C) {
                const int p = t / R;
                u = __ldg(a.graph + (int64_t)expand[p] * R + (t - p * R));
                if (u >= a.n) u = -1;
            }
            const bool fresh =
                    u >= 0 && (use_hash ? hash_insert(table, lay.hash_bits, u)
                                        : bloom_insert(bf, bloom_mask, u));
            const unsigned bal = __ballot_sync(kFullMask, fresh);
            if (fresh) cand[m + __popc(bal & lanemask_lt())] = (uint32_t)u;
            m += __popc(bal);
        }
        __syncwarp();
        // 2. bulk distances
        warp_distances<G, L2>(a.x, a.d, q, cand, m, lane);
        __syncwarp();
        ndist += m;
        // 3. maintenance. Filtered results first: every allowed candidate, one by one.
        if (a.allowed) {
            for (int c = 0; c < m; c++) {
                const uint64_t key = cand[c];
                const uint32_t u = (uint32_t)key;
                if (a.allowed[u >> 5] >> (u & 31) & 1u) warp_insert_one(res, &nres, k, key, lane);
            }
        }
        const uint64_t worst = size == L ? plain(list[L - 1]) : kKeyNone;
        int lowest = L;
        if (sort_merge) {
            // Rank sort of the candidates below `worst` (ties between equal keys, possible only
            // from Bloom races with several probes, by index; the copies are dropped below).
            int m2 = 0;
            for (int c0 = 0; c0 < m; c0 += 32) {
                const int c = c0 + lane;
                const uint64_t key = c < m ? cand[c] : kKeyNone;
                const bool keep = key < worst;
                if (keep) {
                    int r = 0;
                    for (int j = 0; j < m; j++) {
                        const uint64_t o = cand[j];
                        r += o < key || (o == key && j < c);
                    }
                    sorted[r] = key;
                }
                m2 += __popc(__ballot_sync(kFullMask, keep));
            }
            __syncwarp();
            if (m2 > 0) {
                // Merge path: every element's place is its index plus its rank in the other list.
                for (int i = lane; i < size; i += 32) {
                    const uint64_t v = list[i];
                    const int pos = i + lower_bound(sorted, m2, plain(v));
                    if (pos < L) spare[pos] = v;
                }
                for (int j = lane; j < m2; j += 32) {
                    const uint64_t v = sorted[j];
                    const int pos = j + lower_bound(list, size, v);
                    if (pos < L) spare[pos] = v;
                }
                lowest = lower_bound(list, size, sorted[0]);
                size = size + m2 < L ? size + m2 : L;
                __syncwarp();
                uint64_t* t = list;
                list = spare;
                spare = t;
                if (!use_hash && nsel > 1) {
                    // Drop the copies a Bloom race let in (adjacent, equal plain keys).
                    int n2 = 0;
                    for (int b = 0; b < size; b += 32) {
                        const int i = b + lane;
                        const uint64_t v = i < size ? list[i] : 0;
                        const bool keep = i < size && (i == 0 || plain(list[i - 1]) != plain(v));
                        const unsigned bal = __ballot_sync(kFullMask, keep);
                        if (keep) spare[n2 + __popc(bal & lanemask_lt())] = v;
                        n2 += __popc(bal);
                    }
                    __syncwarp();
                    size = n2;
                    t = list;
                    list = spare;
                    spare = t;
                }
            }
        } else {
            for (int c = 0; c < m; c++) {
                const int pos = warp_insert_one(list, &size, L, cand[c], lane);
                if (pos < lowest) lowest = pos;
            }
        }
        if (lowest < scan) scan = lowest;
        if (use_hash) {
            // Visited deletion: the set becomes the worklist again.
            __syncwarp();
            for (int j = lane; j < (1 << lay.hash_bits); j += 32) table[j] = -1;
            __syncwarp();
            for (int i = lane; i < size; i += 32)
                hash_insert(table, lay.hash_bits, (int32_t)(uint32_t)plain(list[i]));
        }
        __syncwarp();
    }

    const uint64_t* out = a.allowed ? res : list;
    const int found = a.allowed ? nres : size;
    for (int j = lane; j < k; j += 32) {
        float dist = L2 ? FLT_MAX : -FLT_MAX;
        int64_t id = -1;
        if (j < found) {
            const uint64_t key = plain(out[j]);
            const float v = ordered_to_float((uint32_t)(key >> 32));
            dist = L2 ? v : -v;
            id = (int64_t)(uint32_t)key;
        }
        a.D[qi * a.k + j] = dist;
        a.I[qi * a.k + j] = id;
    }
    if (a.counters && lane == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters), (unsigned long long)ndist);
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters + 1), (unsigned long long)niter);
    }
}

// Lanes per distance: about 16 dimensions per lane (d = 128: 8 lanes, 4 candidates at once;
// d >= 512: the whole warp), a power of two. GRAFT_SEARCH_LANES overrides it (benchmarks).
int lanes_for(int64_t d) {
    if (const char* s = getenv("GRAFT_SEARCH_LANES")) {
        const int g = atoi(s);
        if (g == 1 || g == 2 || g == 4 || g == 8 || g == 16 || g == 32) return g;
    }
    int g = 1;
    while (g < 32 && (int64_t)g * 2 * 16 <= d) g *= 2;
    return g;
}

template <int G, bool L2>
int launch(const Params& P, int blocks, size_t smem, cudaStream_t s) {
    auto kern = graph_search_kernel<G, L2>;
    if (smem > 48 * 1024)
        GRAFT_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
    kern<<<blocks, P.wpb * 32, smem, s>>>(P);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

template <bool L2>
int launch_g(int g, const Params& P, int blocks, size_t smem, cudaStream_t s) {
    switch (g) {
    case 1: return launch<1, L2>(P, blocks, smem, s);
    case 2: return launch<2, L2>(P, blocks, smem, s);
    case 4: return launch<4, L2>(P, blocks, smem, s);
    case 8: return launch<8, L2>(P, blocks, smem, s);
    case 16: return launch<16, L2>(P, blocks, smem, s);
    default: return launch<32, L2>(P, blocks, smem, s);
    }
}

Layout make_layout(const graft_gpu_search_args* a) {
    Layout l{};
    auto take = [](int* off, int bytes) {
        const int at = *off;
        *off += (bytes + 15) & ~15;
        return at;
    };
    int off = 0;
    take(&off, (int)(((a->d + 3) & ~3ll) * 4));  // the query, at offset 0
    l.C = a->probes * a->R;
    l.list_a = take(&off, a->L * 8);
    l.list_b = take(&off, a->L * 8);
    l.cand = take(&off, l.C * 8);
    l.sorted = take(&off, l.C * 8);
    l.res = take(&off, a->allowed ? (int)a->k * 8 : 0);
    l.hash_bits = 0;
    if (a->visited == 0) {
        while ((1 << l.hash_bits) < 2 * (a->L + l.C)) l.hash_bits++;
        if (l.hash_bits < 5) l.hash_bits = 5;
    }
    l.hash = take(&off, a->visited == 0 ? (4 << l.hash_bits) : 0);
    l.expand = take(&off, kMaxProbes * 4);
    l.stride = off;
    return l;
}

}  // namespace
}  // namespace graft

using namespace graft;

extern "C" size_t graft_gpu_graph_search_scratch(int visited, int bloom_log2, int64_t nq) {
    if (visited != 1 || bloom_log2 < 10 || bloom_log2 > 24 || nq < 1) return 0;
    return (size_t)nq * ((size_t)1 << bloom_log2) / 8;
}

extern "C" int graft_gpu_graph_search(graft_gpu_ctx* ctx, const graft_gpu_search_args* a,
                                      float* gpu_ms) {
    if (!ctx || !a || !a->x || !a->graph || !a->D || !a->I || (a->nq > 0 && !a->xq))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: NULL argument");
    if (a->n < 1 || a->n > INT32_MAX || a->d < 1 || a->R < 1 || a->R > 256 || a->entry < 0 ||
        a->entry >= a->n || a->nq < 0 || a->k < 1 || a->L < a->k || a->L > 1024 ||
        a->probes < 1 || a->probes > kMaxProbes || (a->visited != 0 && a->visited != 1) ||
        (a->merge != 0 && a->merge != 1) || a->bloom_log2 < 10 || a->bloom_log2 > 24)
        return gpu_fail(GRAFT_EINVAL,
                        "graft_gpu_graph_search: bad arguments (n=%lld d=%lld R=%d entry=%lld "
                        "nq=%lld k=%lld L=%d probes=%d visited=%d merge=%d bloom_log2=%d)",
                        (long long)a->n, (long long)a->d, a->R, (long long)a->entry,
                        (long long)a->nq, (long long)a->k, a->L, a->probes, a->visited,
                        a->merge, a->bloom_log2);
    if (gpu_ms) *gpu_ms = 0;
    if (a->nq == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    Params P{};
    P.a = *a;
    P.lay = make_layout(a);
    int optin = 0;
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          ctx->device));
    P.wpb = kWarpsPerBlock;
    while (P.wpb > 1 && (size_t)P.wpb * P.lay.stride > (size_t)optin) P.wpb /= 2;
    if ((size_t)P.lay.stride > (size_t)optin)
        return gpu_fail(GRAFT_EINVAL,
                        "graft_gpu_graph_search: one query needs %d bytes of shared memory (d=%lld, "
                        "L=%d, probes x R=%d), over the device's %d; lower L or probes",
                        P.lay.stride, (long long)a->d, a->L, P.lay.C, optin);
    if (a->visited == 1) {
        if (!a->bloom || ((uintptr_t)a->bloom & 15))
            return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: the Bloom filter needs a "
                            "16-byte aligned scratch buffer");
        P.bloom_words = ((int64_t)1 << a->bloom_log2) / 32;
    }
    const int64_t blocks = ceil_div(a->nq, P.wpb);
    if (blocks > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: nq=%lld is too many for one launch",
                        (long long)a->nq);
    const size_t smem = (size_t)P.wpb * P.lay.stride;
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    if (gpu_ms) {
        GRAFT_CUDA_TRY(cudaEventCreate(&t0));
        GRAFT_CUDA_TRY(cudaEventCreate(&t1));
        GRAFT_CUDA_TRY(cudaEventRecord(t0, ctx->stream));
    }
    const int g = lanes_for(a->d);
    int rc = a->l2 ? launch_g<true>(g, P, (int)blocks, smem, ctx->stream)
                   : launch_g<false>(g, P, (int)blocks, smem, ctx->stream);
    if (rc == GRAFT_OK && gpu_ms) {
        cudaError_t e = cudaEventRecord(t1, ctx->stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(t1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(gpu_ms, t0, t1);
        if (e != cudaSuccess)
            rc = gpu_fail(GRAFT_ECUDA, "graft_gpu_graph_search: %s", cudaGetErrorString(e));
    }
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    if (rc != GRAFT_OK) return rc;
    GRAFT_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return GRAFT_OK;
}
