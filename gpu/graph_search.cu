// Graph search on the GPU, SONG-style (../shared/papers/song-gpu-graph-search.zh.txt; DESIGN.md
// summarises it): one warp per query, the query and its worklist in shared memory, each
// iteration in SONG's three stages:
//   1. candidate locating: the best `probes` unexpanded worklist entries (ballot over the sorted
//      worklist) are marked expanded; their graph rows are read by the whole warp (coalesced),
//      and every neighbour is tested against the visited set (test-and-set, so one warp never
//      computes a vertex twice in an iteration);
//   2. bulk distances: lane groups of G lanes each take kInFlight candidates at once (16-byte
//      loads of the rows, two chunks of each in flight, the query from shared memory, G-lane
//      shuffle reductions);
//   3. maintenance: the candidates that beat the worst entry of a full worklist (SONG's selected
//      insertion) enter the worklist, either sorted in the warp and merged by rank (BANG's
//      merge path) or inserted one by one (SONG); with a filter, allowed candidates also enter a
//      separate top-k of allowed ids.
// The search ends when every worklist entry is expanded, exactly like the CPU reference
// (graft_graph_search_cpu_ex in plugin/graph/graph.c), whose results it reproduces up to float rounding
// of the distances (and, with the Bloom filter, up to its false positives).
//
// Visited sets: (0) an open-addressing hash in shared memory rebuilt from the worklist once it
// could pass 3/4 full in the next iteration (SONG's visited deletion, every few iterations: at
// least 2 (L + probes R) slots, 4 (L + probes R) up to 1024); a vertex that left the worklist
// may be computed again but cannot re-enter it, because the worklist's worst entry only improves.
// (1) BANG's per-query Bloom filter in global memory (2 hash functions, 2^bloom_log2 bits),
// cleared when the query starts and never during it.
//
// Worklist keys are the ordered keys of common.cuh (distance bits | id) with bit 31 of the id
// word marking "expanded"; comparisons mask that bit, so the order is (distance, id) as on the
// CPU.
//
// Storages (graft/storage.h): one kernel templated on what the walk reads, S = FP32 (the
// vectors), FP16 (half2 pairs) or SQ8 (bytes with a per-dimension affine decode, code * scale +
// offset, scale and offset folded into the query staged in shared memory: L2 keeps q - offset
// and subtracts code * scale, inner product keeps q * scale and adds q . offset once). A
// compressed walk ends with FP32 re-ranking of the final worklist's first `rerank` entries (the
// CPU reference's graft_graph_search_cpu_store), read from the FP32 vectors on the device: at
// batch 10k the walk reads ~1-2k vectors a query, the re-rank L, so the FP32 copy costs memory,
// not bandwidth (README, Storages).
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>

#include "common.cuh"

namespace graft {
namespace {

constexpr uint64_t kExpanded = 1ull << 31;
__device__ inline uint64_t plain(uint64_t k) { return k & ~kExpanded; }
constexpr int kMaxProbes = 8;
constexpr int kWarpsPerBlock = 4;
enum { kFP32 = 0, kFP16 = 1, kSQ8 = 2 };  // graft_storage_kind

// Per-warp shared-memory layout, in bytes from the warp's base (16-byte aligned).
struct Layout {
    int scale, list_a, list_b, cand, sorted, res, hash, expand, clocks, stride;
    int C;          // candidates per iteration at most: probes x R
    int hash_bits;  // hash table of 2^hash_bits slots (0 with the Bloom filter)
};

struct Params {
    graft_gpu_search_args a;
    Layout lay;
    int64_t bloom_words;  // per query
    int wpb;
    unsigned long long* stage_cycles;  // GRAFT_SEARCH_PROFILE: kStages sums, else NULL
};

// Where a warp's time goes (GRAFT_SEARCH_PROFILE=N, calls of N queries or more): SM clock cycles between marks, summed over
// the warps, including the cycles a warp waits for memory or for the scheduler.
enum { kStageInit, kStageLocate, kStageRows, kStageDistances, kStageMaintain, kStageVisited,
       kStageRerank, kStages };
struct StageClock {
    unsigned long long* out;
    long long* acc;  // kStages sums of this warp, in its shared memory
    long long last = 0;
    __device__ StageClock(unsigned long long* o, long long* a, int lane) : out(o), acc(a) {
        if (!out) return;
        if (lane < kStages) acc[lane] = 0;
        __syncwarp();
        last = clock64();
    }
    __device__ void mark(int stage) {
        if (!out) return;
        const long long t = clock64();
        if ((threadIdx.x & 31) == 0) acc[stage] += t - last;
        last = t;
    }
    // Then the walk's iterations and distances, out[kStages] and out[kStages + 1].
    __device__ void flush(int lane, int64_t niter, int64_t ndist) {
        if (!out) return;
        __syncwarp();
        if (lane < kStages) atomicAdd(out + lane, (unsigned long long)acc[lane]);
        if (lane == 0) {
            atomicAdd(out + kStages, (unsigned long long)niter);
            atomicAdd(out + kStages + 1, (unsigned long long)ndist);
        }
    }
};

template <bool L2>
__device__ inline float term(float a, float b) {
    if (L2) {
        const float t = a - b;
        return t * t;
    }
    return a * b;
}

// One 16-byte load holds W dimensions of a row: 4 (FP32), 8 (FP16) or 16 (SQ8) — the same
// load count per byte for every storage, so a compressed row takes 2-4x fewer loads.
template <int S>
struct Width {
    static constexpr int W = S == kFP32 ? 4 : S == kFP16 ? 8 : 16;
    static constexpr int bytes = 16 / W;  // per dimension
};

__device__ inline uint32_t word(const uint4& r, int i) {
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
        const uint32_t a = word(r, 2 * t), b = word(r, 2 * t + 1);
        return make_float4(__half2float(__ushort_as_half((unsigned short)(a & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(a >> 16))),
                           __half2float(__ushort_as_half((unsigned short)(b & 0xffffu))),
                           __half2float(__ushort_as_half((unsigned short)(b >> 16))));
    } else {
        const uint32_t c = word(r, t);
        constexpr float k23 = 8388608.f;
        return make_float4(__uint_as_float(__byte_perm(c, 0x4b000000u, 0x7540)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7541)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7542)) - k23,
                           __uint_as_float(__byte_perm(c, 0x4b000000u, 0x7543)) - k23);
    }
}

template <int S>
__device__ inline float load1(const void* __restrict__ base, uint32_t u, int64_t d, int j) {
    if (S == kFP32) return __ldg(static_cast<const float*>(base) + (int64_t)u * d + j);
    if (S == kFP16)
        return __half2float(__ushort_as_half(
                __ldg(static_cast<const unsigned short*>(base) + (int64_t)u * d + j)));
    return (float)__ldg(static_cast<const uint8_t*>(base) + (int64_t)u * d + j);
}

// One dimension's contribution: q is the staged query (SQ8: folded, see the file comment), v
// the loaded value, s the SQ8 scale.
template <bool L2, int S>
__device__ inline float dim_term(float q, float v, float s) {
    if (S == kSQ8 && L2) {
        const float t = fmaf(-v, s, q);
        return t * t;
    }
    return term<L2>(q, v);
}

// Candidates whose rows a lane group loads at once: each lane keeps 2 x kInFlight 16-byte loads
// in flight (two chunks of each), so that one memory round trip serves several candidates. The
// walk is latency-bound (GRAFT_SEARCH_PROFILE on the H100: a candidate at a time, the distances
// took 50-90% of a warp's cycles at 0.6-2 TB/s), and round trips, not bytes, set its pace: a
// compressed row takes 2-4x fewer of them.
// 4 x 2 kept: 2 or 4 candidates x 1 or 2 chunks measured within noise of each other host to host
// (bench/logs/profile-637c0ef-h100.log).
constexpr int kInFlight = 4, kChunks = 2;

// The staged query (and SQ8's scales) in chunk order: float4 number t * dw + j holds dimensions
// 4t .. 4t + 3 of chunk j (W dimensions, one 16-byte load of the row), so the lanes of a group,
// reading consecutive chunks, read consecutive float4s (no bank conflicts). FP32 (W = 4): the
// plain order. Used when d % W == 0 (the vector path), else the plain order.
template <int S>
__device__ inline int staged_index(int i, int64_t d) {
    constexpr int W = Width<S>::W;
    if (W == 4 || d % W != 0) return i;
    const int j = i / W, t = i % W / 4;
    return (t * (int)(d / W) + j) * 4 + i % 4;
}

// Distances of the m candidates whose ids sit in the low words of cand[]: lane group g of G lanes
// takes candidates g, g + 32/G, ..., kInFlight of them at once; cand[c] becomes the candidate's
// key. base: the storage's rows (S); q: the staged query; sc: SQ8 L2's staged scales (same
// order); qc: SQ8 inner product's q . offset.
template <int G, bool L2, int S>
__device__ void warp_distances(const void* __restrict__ base, const float* sc, int64_t d,
                               const float* q, float qc, uint64_t* cand, int m, int lane) {
    constexpr int NG = 32 / G, W = Width<S>::W, T = W / 4, U = kInFlight;
    const int g = lane / G, gl = lane % G;
    const int64_t row_bytes = d * Width<S>::bytes;
    const bool vec = d % W == 0;  // rows 16-byte aligned, whole chunks
    const int dw = (int)(d / W);
    const float4* q4 = reinterpret_cast<const float4*>(q);
    const float4* s4 = reinterpret_cast<const float4*>(sc);
    for (int c0 = 0; c0 < m; c0 += NG * U) {
        const uint4* row[U];
        uint32_t id[U];
        float acc[U];
#pragma unroll
        for (int v = 0; v < U; v++) {
            const int c = c0 + v * NG + g;
            id[v] = c < m ? (uint32_t)cand[c] : 0u;
            row[v] = c < m ? reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(base) +
                                                             (int64_t)id[v] * row_bytes)
                           : nullptr;
            acc[v] = 0.f;
        }
        if (vec) {
            for (int j = gl; j < dw; j += kChunks * G) {
                uint4 r[kChunks][U];
#pragma unroll
                for (int h = 0; h < kChunks; h++)
#pragma unroll
                    for (int v = 0; v < U; v++)
                        r[h][v] = row[v] && j + h * G < dw ? __ldg(row[v] + j + h * G)
                                                           : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int h = 0; h < kChunks; h++) {
                    const int jj = j + h * G;
                    if (jj >= dw) break;
#pragma unroll
                    for (int t = 0; t < T; t++) {
                        const float4 w = q4[t * dw + jj];
                        float4 k4 = make_float4(0.f, 0.f, 0.f, 0.f);
                        if (S == kSQ8 && L2) k4 = s4[t * dw + jj];
#pragma unroll
                        for (int v = 0; v < U; v++) {
                            const float4 x = decode4<S>(r[h][v], t);
                            acc[v] += dim_term<L2, S>(w.x, x.x, k4.x) + dim_term<L2, S>(w.y, x.y, k4.y) +
                                      dim_term<L2, S>(w.z, x.z, k4.z) + dim_term<L2, S>(w.w, x.w, k4.w);
                        }
                    }
                }
            }
        } else {
#pragma unroll
            for (int v = 0; v < U; v++)
                if (row[v])
                    for (int j = gl; j < d; j += G)
                        acc[v] += dim_term<L2, S>(q[j], load1<S>(base, id[v], d, j),
                                                  S == kSQ8 && L2 ? sc[j] : 0.f);
        }
#pragma unroll
        for (int v = 0; v < U; v++)
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) acc[v] += __shfl_xor_sync(kFullMask, acc[v], o);
        __syncwarp();  // the group's lanes read cand[c] above; a shuffle orders no memory
#pragma unroll
        for (int v = 0; v < U; v++) {
            const int c = c0 + v * NG + g;
            if (S == kSQ8 && !L2) acc[v] += qc;
            if (c < m && gl == 0) cand[c] = make_key(L2 ? acc[v] : -acc[v], id[v]);
        }
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

template <int G, bool L2, int S>
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
    float* sc = reinterpret_cast<float*>(base + lay.scale);  // SQ8 L2 only
    uint64_t* list = reinterpret_cast<uint64_t*>(base + lay.list_a);
    uint64_t* spare = reinterpret_cast<uint64_t*>(base + lay.list_b);
    uint64_t* cand = reinterpret_cast<uint64_t*>(base + lay.cand);
    uint64_t* sorted = reinterpret_cast<uint64_t*>(base + lay.sorted);
    uint64_t* res = reinterpret_cast<uint64_t*>(base + lay.res);
    int32_t* table = reinterpret_cast<int32_t*>(base + lay.hash);
    int32_t* expand = reinterpret_cast<int32_t*>(base + lay.expand);
    const bool use_hash = a.visited == 0, sort_merge = a.merge == 0;
    const int L = a.L, R = a.R, k = (int)a.k;
    StageClock clock(P.stage_cycles, reinterpret_cast<long long*>(base + lay.clocks), lane);

    const float* gq = a.xq + qi * a.d;
    const int dpad = (int)((a.d + 3) & ~3ll);
    const void* walk = S == kFP32 ? static_cast<const void*>(a.x) : a.codes;
    float qc = 0.f;  // SQ8 inner product: q . offset
    for (int j = lane; j < dpad; j += 32) {
        float v = j < a.d ? gq[j] : 0.f;
        const int at = staged_index<S>(j, a.d);
        if (S == kSQ8 && j < a.d) {
            if (L2) {
                v -= __ldg(a.sq_offset + j);
                sc[at] = __ldg(a.sq_scale + j);
            } else {
                qc = fmaf(v, __ldg(a.sq_offset + j), qc);
                v *= __ldg(a.sq_scale + j);
            }
        }
        q[at] = v;
    }
    if (S == kSQ8 && !L2)
        for (int o = 16; o > 0; o >>= 1) qc += __shfl_xor_sync(kFullMask, qc, o);
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
    warp_distances<G, L2, S>(walk, sc, a.d, q, qc, cand, 1, lane);
    __syncwarp();
    int size = 1, nres = 0;
    if (lane == 0) list[0] = cand[0];
    if (a.allowed && (a.allowed[e >> 5] >> (e & 31) & 1u)) {
        if (lane == 0) res[0] = cand[0];
        nres = 1;
    }
    __syncwarp();

    int scan = 0;    // every worklist entry before `scan` is expanded
    int hashed = 1;  // entries in the visited hash (the entry vertex)
    int64_t ndist = 1, niter = 0;
    clock.mark(kStageInit);
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
        clock.mark(kStageLocate);
        if (nsel == 0) break;
        scan = first;
        niter++;
        const int C = nsel * R;
        int m = 0;
        for (int t0 = 0; t0 < C; t0 += 64) {
            // Two words a lane loaded before either is tested: one round trip for 64 entries.
            int32_t u2[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int t = t0 + 32 * h + lane;
                u2[h] = -1;
                if (t < C) {
                    const int p = t / R;
                    u2[h] = __ldg(a.graph + (int64_t)expand[p] * R + (t - p * R));
                }
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int32_t u = u2[h] < a.n ? u2[h] : -1;
                const bool fresh =
                        u >= 0 && (use_hash ? hash_insert(table, lay.hash_bits, u)
                                            : bloom_insert(bf, bloom_mask, u));
                const unsigned bal = __ballot_sync(kFullMask, fresh);
                if (fresh) cand[m + __popc(bal & lanemask_lt())] = (uint32_t)u;
                m += __popc(bal);
            }
        }
        hashed += m;
        __syncwarp();
        clock.mark(kStageRows);
        // 2. bulk distances
        warp_distances<G, L2, S>(walk, sc, a.d, q, qc, cand, m, lane);
        __syncwarp();
        clock.mark(kStageDistances);
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
        clock.mark(kStageMaintain);
        if (use_hash && hashed + lay.C > (3 << lay.hash_bits) / 4) {
            // Visited deletion, once the table is 3/4 full after the next iteration's worst
            // case: the set becomes the worklist again. (Entries that left the worklist may
            // stay until then: they could not re-enter it, whose worst entry only improves.)
            hashed = size;
            __syncwarp();
            for (int j = lane; j < (1 << lay.hash_bits); j += 32) table[j] = -1;
            __syncwarp();
            for (int i = lane; i < size; i += 32)
                hash_insert(table, lay.hash_bits, (int32_t)(uint32_t)plain(list[i]));
        }
        __syncwarp();
        clock.mark(kStageVisited);
    }

    uint64_t* out = a.allowed ? res : list;
    const int found = a.allowed ? nres : size;
    if (S != kFP32 && found > 0) {
        // Exact re-ranking: FP32 distances of the first nr entries (query from global memory,
        // since the staged one is folded), rank-sorted back into place by (distance, id).
        const int nr = a.allowed || a.rerank == 0 || a.rerank > found ? found : a.rerank;
        for (int i = lane; i < nr; i += 32) spare[i] = (uint32_t)plain(out[i]);
        __syncwarp();
        warp_distances<G, L2, kFP32>(a.x, nullptr, a.d, gq, 0.f, spare, nr, lane);
        __syncwarp();
        for (int i = lane; i < nr; i += 32) {
            const uint64_t key = spare[i];
            int r = 0;
            for (int j = 0; j < nr; j++) r += spare[j] < key;  // ids differ: keys are distinct
            out[r] = key;
        }
        __syncwarp();
    }
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
    clock.mark(kStageRerank);
    clock.flush(lane, niter, ndist);
    if (a.counters && lane == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters), (unsigned long long)ndist);
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters + 1), (unsigned long long)niter);
    }
}

// Lanes per distance: the G that makes the fewest memory round trips for an iteration's fresh
// candidates, ceil(m / (kInFlight 32 / G)) passes of ceil(dw / (kChunks G)) loads each (dw: the
// row's 16-byte chunks), for m = 20 candidates (the mean of an iteration at R = 64 on dense-SIFT
// and Fashion-MNIST: 18-19; fewer when probes x R is smaller); ties go to more lanes (fewer idle
// ones on a short iteration). GRAFT_SEARCH_LANES overrides it (benchmarks).
int lanes_for(int64_t d, int W, int C) {
    if (const char* s = getenv("GRAFT_SEARCH_LANES")) {
        const int g = atoi(s);
        if (g == 1 || g == 2 || g == 4 || g == 8 || g == 16 || g == 32) return g;
    }
    const int64_t dw = d % W == 0 ? d / W : d, m = C < 20 ? C : 20;
    int best = 32;
    int64_t best_trips = INT64_MAX;
    for (int g = 32; g >= 1; g /= 2) {
        const int64_t trips = ceil_div(m, (int64_t)kInFlight * (32 / g)) * ceil_div(dw, (int64_t)kChunks * g);
        if (trips < best_trips) best = g, best_trips = trips;
    }
    return best;
}

template <int G, bool L2, int S>
int launch(const Params& P, int blocks, size_t smem, cudaStream_t s) {
    auto kern = graph_search_kernel<G, L2, S>;
    if (smem > 48 * 1024)
        GRAFT_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
    kern<<<blocks, P.wpb * 32, smem, s>>>(P);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

template <bool L2, int S>
int launch_g(int g, const Params& P, int blocks, size_t smem, cudaStream_t s) {
    switch (g) {
    case 1: return launch<1, L2, S>(P, blocks, smem, s);
    case 2: return launch<2, L2, S>(P, blocks, smem, s);
    case 4: return launch<4, L2, S>(P, blocks, smem, s);
    case 8: return launch<8, L2, S>(P, blocks, smem, s);
    case 16: return launch<16, L2, S>(P, blocks, smem, s);
    default: return launch<32, L2, S>(P, blocks, smem, s);
    }
}

template <bool L2>
int launch_s(int g, const Params& P, int blocks, size_t smem, cudaStream_t s) {
    switch (P.a.storage) {
    case kFP16: return launch_g<L2, kFP16>(g, P, blocks, smem, s);
    case kSQ8: return launch_g<L2, kSQ8>(g, P, blocks, smem, s);
    default: return launch_g<L2, kFP32>(g, P, blocks, smem, s);
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
    const int qbytes = (int)(((a->d + 3) & ~3ll) * 4);
    take(&off, qbytes);  // the query, at offset 0
    l.scale = take(&off, a->storage == kSQ8 && a->l2 ? qbytes : 0);
    l.C = a->probes * a->R;
    l.list_a = take(&off, a->L * 8);
    l.list_b = take(&off, a->L * 8);
    l.cand = take(&off, l.C * 8);
    l.sorted = take(&off, l.C * 8);
    l.res = take(&off, a->allowed ? (int)a->k * 8 : 0);
    l.hash_bits = 0;
    if (a->visited == 0) {
        // At least twice the worklist and one iteration's candidates; twice that again while
        // it stays within 4 KB, so that the set is rebuilt only every few iterations.
        while ((1 << l.hash_bits) < 2 * (a->L + l.C)) l.hash_bits++;
        if (l.hash_bits < 10) l.hash_bits++;
        if (l.hash_bits < 5) l.hash_bits = 5;
    }
    l.hash = take(&off, a->visited == 0 ? (4 << l.hash_bits) : 0);
    l.expand = take(&off, kMaxProbes * 4);
    l.clocks = take(&off, kStages * 8);
    l.stride = off;
    return l;
}

// GRAFT_SEARCH_PROFILE=N: each call of N queries or more prints where its warps' cycles went
// (StageClock) to stderr. Benchmarks only: the clocks and this copy slow the call.
struct Profile {
    unsigned long long* d = nullptr;
    unsigned long long* start(graft_gpu_ctx* ctx, int64_t nq) {
        const char* e = getenv("GRAFT_SEARCH_PROFILE");
        if (!e || nq < atoll(e)) return nullptr;
        if (cudaMalloc(&d, (kStages + 2) * sizeof *d) != cudaSuccess ||
            cudaMemsetAsync(d, 0, (kStages + 2) * sizeof *d, ctx->stream) != cudaSuccess) {
            if (d) cudaFree(d);
            d = nullptr;
        }
        return d;
    }
    void print(graft_gpu_ctx* ctx, const graft_gpu_search_args* a, int g, int wpb) const {
        unsigned long long h[kStages + 2] = {};
        if (!d || cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, ctx->stream) != cudaSuccess ||
            cudaStreamSynchronize(ctx->stream) != cudaSuccess)
            return;
        static const char* names[kStages] = {"init", "locate", "rows+visited-test", "distances",
                                             "maintain", "visited-rebuild", "rerank+out"};
        double total = 0;
        for (int s = 0; s < kStages; s++) total += (double)h[s];
        fprintf(stderr, "graph search profile: storage %d, d %lld, L %d, %d lanes, %d warps a block, "
                "nq %lld: %.0f cycles a query, %.1f iterations, %.1f distances;", a->storage,
                (long long)a->d, a->L, g, wpb, (long long)a->nq, total / a->nq,
                (double)h[kStages] / a->nq, (double)h[kStages + 1] / a->nq);
        for (int s = 0; s < kStages; s++)
            fprintf(stderr, " %s %.1f%%", names[s], total > 0 ? 100.0 * h[s] / total : 0.0);
        fprintf(stderr, "\n");
    }
    ~Profile() {
        if (d) cudaFree(d);
    }
};

}  // namespace
}  // namespace graft

using namespace graft;

extern "C" size_t graft_gpu_graph_search_scratch(int visited, int bloom_log2, int64_t nq) {
    if (visited != 1 || bloom_log2 < 10 || bloom_log2 > 24 || nq < 1) return 0;
    return (size_t)nq * ((size_t)1 << bloom_log2) / 8;
}

namespace {
// The search on stream st; with sync, timed (gpu_ms, nullable), waited for and profiled.
int search_on(graft_gpu_ctx* ctx, const graft_gpu_search_args* a, cudaStream_t st, float* gpu_ms,
              bool sync) {
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
    if (a->storage < kFP32 || a->storage > kSQ8 || (a->storage != kFP32 && !a->codes) ||
        (a->storage == kSQ8 && (!a->sq_scale || !a->sq_offset)) || a->rerank < 0)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: storage %d without its codes or "
                        "SQ8 parameters, or rerank %d < 0", a->storage, a->rerank);
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
    size_t smem = (size_t)P.wpb * P.lay.stride;
    // GRAFT_SEARCH_BLOCKS_PER_SM=B (benchmarks only): pads each block's shared memory so that at
    // most B blocks share a multiprocessor, to measure how the walk's speed follows the number of
    // resident warps (latency-bound: in proportion; issue- or bandwidth-bound: less).
    if (const char* e = getenv("GRAFT_SEARCH_BLOCKS_PER_SM")) {
        int per_sm = 0, reserved = 0;
        GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                              ctx->device));
        GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock,
                                              ctx->device));
        const int b = atoi(e);
        if (b > 0 && per_sm / b - reserved > (int)smem && per_sm / b - reserved <= optin)
            smem = (size_t)(per_sm / b - reserved);
    }
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    if (gpu_ms) {
        GRAFT_CUDA_TRY(cudaEventCreate(&t0));
        GRAFT_CUDA_TRY(cudaEventCreate(&t1));
        GRAFT_CUDA_TRY(cudaEventRecord(t0, st));
    }
    const int W = a->storage == kSQ8 ? Width<kSQ8>::W : a->storage == kFP16 ? Width<kFP16>::W
                                                                             : Width<kFP32>::W;
    const int g = lanes_for(a->d, W, P.lay.C);
    Profile prof;
    P.stage_cycles = sync ? prof.start(ctx, a->nq) : nullptr;
    int rc = a->l2 ? launch_s<true>(g, P, (int)blocks, smem, st)
                   : launch_s<false>(g, P, (int)blocks, smem, st);
    if (rc == GRAFT_OK && gpu_ms) {
        cudaError_t e = cudaEventRecord(t1, st);
        if (e == cudaSuccess) e = cudaEventSynchronize(t1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(gpu_ms, t0, t1);
        if (e != cudaSuccess)
            rc = gpu_fail(GRAFT_ECUDA, "graft_gpu_graph_search: %s", cudaGetErrorString(e));
    }
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    if (rc != GRAFT_OK || !sync) return rc;
    GRAFT_CUDA_TRY(cudaStreamSynchronize(st));
    prof.print(ctx, a, g, P.wpb);
    return GRAFT_OK;
}
}  // namespace

extern "C" int graft_gpu_graph_search(graft_gpu_ctx* ctx, const graft_gpu_search_args* a,
                                      float* gpu_ms) {
    return search_on(ctx, a, ctx ? ctx->stream : nullptr, gpu_ms, true);
}

extern "C" int graft_gpu_graph_search_async(graft_gpu_ctx* ctx, const graft_gpu_search_args* a,
                                            graft_gpu_stream s) {
    return search_on(ctx, a, s ? reinterpret_cast<cudaStream_t>(s) : ctx ? ctx->stream : nullptr,
                     nullptr, false);
}
