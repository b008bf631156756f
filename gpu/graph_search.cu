// Graph search on the GPU, SONG-style (../shared/papers/song-gpu-graph-search.zh.txt; DESIGN.md
// summarises it): one warp per query, the query and its worklist in shared memory, each
// iteration in SONG's three stages:
//   1. candidate locating: the best `probes` unexpanded worklist entries (ballot over the sorted
//      worklist) are marked expanded; their graph rows are read by the whole warp (coalesced),
//      and every neighbour is tested against the visited set (test-and-set, so one warp never
//      computes a vertex twice in an iteration); the fresh ones are packed into a candidate list;
//   2. bulk distances: on sm_90, the candidates' rows are first copied into a shared-memory
//      buffer of the warp by the bulk copy engine (cp.async.bulk, one lane a row, completing on
//      an mbarrier: one memory round trip for the buffer, stage_rows), else read into registers
//      (each lane with up to kInFlight candidates' 16-byte loads in flight, a round trip for
//      every 2 G chunks of a row); a team of G lanes a candidate (G chosen per call by an
//      instruction count, lanes_for), the query from shared memory, G-lane shuffle reductions;
//   3. maintenance: the candidates that beat the worst entry of a full worklist (SONG's selected
//      insertion) are merged into it in place: each survivor's place is its rank among the
//      survivors plus its rank in the list (each lane its own binary search), and each place
//      above the lowest survivor's takes its entry from below, counted by one warp OR of the
//      survivors' places a chunk (no sort, no pass over the list a survivor); with a filter,
//      allowed candidates are merged the same way into a separate top-k of allowed ids.
// The search ends when every worklist entry is expanded, exactly like the CPU reference
// (graft_graph_search_cpu_ex in plugin/graph/graph.c), whose results it reproduces up to float
// rounding of the distances (and, with the Bloom filter, up to its false positives).
//
// Instruction budget (bench/RESULTS.md, "The walk as an instruction budget"): Nsight Compute on
// the H100 counted 93k warp instructions a query at dense-SIFT's L = 48 for the walk before
// this one, 47% of them in the distance loop (per-load bounds tests, pointer arithmetic, idle
// lanes of 16-lane teams), 20% in a rank sort and binary-search merge, 8% in a division by R.
// Hence: teams sized by an instruction count, a distance pass of exactly as many candidates as
// remain (no idle load slots, no per-load tests), the merge above, rows read without division.
//
// Visited sets: (0) an open-addressing hash (double hashing) in shared memory, rebuilt from the
// worklist once it could pass 3/4 full in the next iteration (SONG's visited deletion, every few
// iterations: at least 2 (L + probes R) slots, 4 (L + probes R) up to 1024); a vertex that left
// the worklist may be computed again but cannot re-enter it, because the worklist's worst entry
// only improves.
// (1) BANG's per-query Bloom filter in global memory (2 hash functions, 2^bloom_log2 bits),
// cleared when the query starts and never during it; two lanes inserting the same id at once
// may both see it as new, so the merge drops equal survivors.
//
// Modes (issue 47; graft_gpu_search_args::walks): one walk a query (a warp, or a block of four
// warps for batches whose blocks all fit resident), or W walks a query for batches under a wave
// (the multi mode): walk 0 is the single walk, walk w > 0 starts from up to 32 vertices drawn
// from the query's hash (graft_walk_seed, graft_gpu.h), each walk with its own visited set and
// worklist; merge_walks_kernel merges their k best. Walks share nothing, so the results are
// deterministic and equal the CPU reference's multi mode (graph.c) as the single walk's do.
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
// CPU reference's graft_graph_search_cpu_store), read from the FP32 vectors on the device (none
// when the index keeps only the codes, keep_fp32 = 0: x is NULL and the codes' distances stand): at
// batch 10k the walk reads ~1-2k vectors a query, the re-rank L, so the FP32 copy costs memory,
// not bandwidth (bench/RESULTS.md, Storages).
#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "common.cuh"

namespace graft {
namespace {

constexpr uint64_t kExpanded = 1ull << 31;
// A multi-mode walk's results for a query holding NaN or Inf (no real key reaches it: its
// distance word is a NaN's and its id over INT32_MAX).
constexpr uint64_t kKeyBad = ~0ull - 1;
constexpr int kMaxWalks = 64, kMaxWalkKeys = 4096;  // walks a query; walks x k (the merge's)
// A multi-mode walk's start: up to GRAFT_WALK_SEEDS vertices from the query's hash (graft_gpu.h),
// one distance pass.
__device__ inline uint64_t plain(uint64_t k) { return k & ~kExpanded; }
constexpr int kMaxProbes = 8;
constexpr int kWarpsPerBlock = 4;
// At least 5 blocks (20 warps) a multiprocessor: at most 96 registers a thread (ptxas spills a
// few dozen bytes in the G = 8..32 variants). Uncapped, ptxas takes up to 128 for a few more
// loads in flight and cuts the resident warps that hide their latency. GRAFT_WALK_MIN_BLOCKS (a
// CUDA flag) builds another value, for the walk-ab job's GRAFT_AB_VARIANT (scripts/device/).
#ifndef GRAFT_WALK_MIN_BLOCKS
#define GRAFT_WALK_MIN_BLOCKS 5
#endif
constexpr int kBlocksPerSM = GRAFT_WALK_MIN_BLOCKS;
// Candidates a lane's team has in flight in one distance pass: one memory round trip serves
// up to 4 candidates (the walk waits on memory latency, not bandwidth: bench/RESULTS.md).
constexpr int kInFlight = 4;

// Per-warp shared-memory layout, in bytes from the warp's base (16-byte aligned).
struct Layout {
    int scale, list, cand, res, sv, hash, expand, ctl, stride;
    int C;          // candidates per iteration at most: probes x R
    int hash_bits;  // hash table of 2^hash_bits slots (0 with the Bloom filter)
};

struct Params {
    graft_gpu_search_args a;
    Layout lay;
    int64_t bloom_words;  // per walk
    int wpb;  // warps a block
    int qw;   // warps a walk: 1, or kWarpsPerBlock (the Shared kernels: small batches, search_on)
    // Walks a query (the multi mode: graft_gpu_search_args::walks), walks in the launch (nq
    // walks), and the multi mode's per-walk k best keys (nwalks x k, kKeyBad for a bad query).
    int walks;
    int64_t nwalks;
    uint64_t* walk_keys;
    int dw, dw_fp32;  // 16-byte chunks of a row of the walk's storage / of a vector (0: d % W != 0)
    // Staged rows (sm_90's bulk copies, see stage_rows; 0 rows: the register path): each warp's
    // buffer of stage_bytes at stage_off + warp (stage_bytes + 128), its mbarrier in the last 128;
    // rows of the walk's storage / of the vectors it holds, and their stride in it.
    int stage_off, stage_bytes, rows, ss, rows_fp32, ss_fp32;
};

// acc plus one dimension's contribution: q is the staged query (SQ8: folded, see the file
// comment), v the loaded value, s the SQ8 scale. One subtraction and one FMA (L2), one FMA
// (inner product).
template <bool L2, int S>
__device__ inline float dim_acc(float acc, float q, float v, float s) {
    if (!L2) return fmaf(q, v, acc);
    const float t = S == kSQ8 ? fmaf(-v, s, q) : q - v;
    return fmaf(t, t, acc);
}

// The staged query (and SQ8's scales) in chunk order: float4 number t * dw + j holds dimensions
// 4t .. 4t + 3 of chunk j (W dimensions, one 16-byte load of the row), so the lanes of a team,
// reading consecutive chunks, read consecutive float4s (no bank conflicts). FP32 (W = 4): the
// plain order. Used when d % W == 0 (the vector path), else the plain order.
template <int S>
__device__ inline int staged_index(int i, int64_t d) {
    constexpr int W = Width<S>::W;
    if (W == 4 || d % W != 0) return i;
    const int j = i / W, t = i % W / 4;
    return (t * (int)(d / W) + j) * 4 + i % 4;
}

// The staged query a query's distance passes read (the rest comes from the kernel's parameters).
struct Query {
    const float* q;   // staged query (SQ8: folded); float4s in chunk order on the vector path
    const float* sc;  // SQ8 L2's staged scales, same order
    float qc;         // SQ8 inner product: q . offset
};

// Chunk j (16 bytes of each of NV rows, loaded into r) into the NV accumulators; dw: chunks a row.
template <int NV, bool L2, int S>
__device__ inline void accumulate(const Query& x, int dw, float (&acc)[NV], const uint4 (&r)[NV],
                                  int j) {
    constexpr int T = Width<S>::W / 4;
    const float4* q4 = reinterpret_cast<const float4*>(x.q);
    const float4* s4 = reinterpret_cast<const float4*>(x.sc);
#pragma unroll
    for (int t = 0; t < T; t++) {
        const float4 w = q4[t * dw + j];
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        if (S == kSQ8 && L2) s = s4[t * dw + j];
#pragma unroll
        for (int v = 0; v < NV; v++) {
            const float4 e = decode4<S>(r[v], t);
            acc[v] = dim_acc<L2, S>(acc[v], w.x, e.x, s.x);
            acc[v] = dim_acc<L2, S>(acc[v], w.y, e.y, s.y);
            acc[v] = dim_acc<L2, S>(acc[v], w.z, e.z, s.z);
            acc[v] = dim_acc<L2, S>(acc[v], w.w, e.w, s.w);
        }
    }
}

// The end of a distance pass: each team's partial sums reduced over its G lanes, and slot v of
// team g written to out[v 32/G + g] as a key when under `left` (slots past it were padding).
template <int G, int NV, bool L2, int S>
__device__ inline void write_keys(const Query& x, float (&acc)[NV], const uint32_t (&id)[NV],
                                  uint64_t* out, int left, int lane) {
    constexpr int NG = 32 / G;
    const int g = lane / G, gl = lane % G;
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2)
#pragma unroll
        for (int v = 0; v < NV; v++) acc[v] += __shfl_xor_sync(kFullMask, acc[v], o);
    __syncwarp();  // every team read its ids from cand[] before any key replaces one
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int i = v * NG + g;
        const float val = S == kSQ8 && !L2 ? acc[v] + x.qc : acc[v];
        if (i < left && gl == 0) out[i] = make_key(L2 ? val : -val, id[v]);
    }
}

// One distance pass: NV candidates a team (G lanes), cand[c0 + v 32/G + g] for
// team g; a slot past m reads the row of `dummy` (a valid id) so that no load needs a test, and
// its result is dropped. Each lane keeps two chunks of each of its NV rows in flight: one memory
// round trip per 2 G chunks of a row. The keys replace the ids in cand[]. S = kFP32 reads the
// vectors (the FP32 walk, and the compressed walks' re-ranking), else the codes.
template <int G, int NV, bool L2, int S>
__device__ void distance_pass(const Params& P, const Query& x, uint64_t* cand, int c0, int m,
                              uint32_t dummy, int lane) {
    constexpr int NG = 32 / G;
    const int g = lane / G, gl = lane % G;
    const int d = (int)P.a.d, dw = S == kFP32 ? P.dw_fp32 : P.dw;
    const unsigned char* base = static_cast<const unsigned char*>(
            S == kFP32 ? static_cast<const void*>(P.a.x) : P.a.codes);
    const uint32_t row_bytes = (uint32_t)d * Width<S>::bytes;
    const uint4* row[NV];
    uint32_t id[NV];
    float acc[NV];
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int c = c0 + v * NG + g;
        id[v] = c < m ? (uint32_t)cand[c] : dummy;
        row[v] = reinterpret_cast<const uint4*>(base + (size_t)id[v] * row_bytes);
        acc[v] = 0.f;
    }
    if (dw) {
        for (int j = gl; j < dw; j += 2 * G) {
            // The second chunk: j + G, or chunk j again past the row's end (a load that needs no
            // test and hits L1; its terms are not added).
            const bool two = j + G < dw;
            const int j2 = two ? j + G : j;
            uint4 r0[NV], r1[NV];
#pragma unroll
            for (int v = 0; v < NV; v++) {
                r0[v] = __ldg(row[v] + j);
                r1[v] = __ldg(row[v] + j2);
            }
            accumulate<NV, L2, S>(x, dw, acc, r0, j);
            if (two) accumulate<NV, L2, S>(x, dw, acc, r1, j2);
        }
    } else {
        for (int j = gl; j < d; j += G) {
            const float qj = x.q[j], sj = S == kSQ8 && L2 ? x.sc[j] : 0.f;
#pragma unroll
            for (int v = 0; v < NV; v++)
                acc[v] = dim_acc<L2, S>(acc[v], qj, load1<S>(base, id[v], d, j), sj);
        }
    }
    write_keys<G, NV, L2, S>(x, acc, id, cand + c0, m - c0, lane);
}

// A warp's staging buffer (pointer, and its shared-memory address for the copies), its
// mbarrier's shared-memory address and the barrier's phase.
struct Stage {
    const unsigned char* ptr;
    uint32_t buf, bar, phase;
};

// Rows c0 .. c0 + n - 1 of cand[] (n <= 32) copied into st.buf, row i at i ss, by the bulk copy
// engine: one lane a row, one memory round trip for all of them, no registers held while they
// fly. The register path needs a round trip for every 2 G chunks of a row a lane holds (4 KB a
// warp); here a trip carries the whole buffer. Warp-wide.
__device__ inline void stage_rows(const unsigned char* base, uint32_t row_bytes, const uint64_t* cand,
                                  int c0, int n, int ss, Stage& st, int lane) {
#if __CUDA_ARCH__ >= 900
    __syncwarp();  // the buffer's last rows were read (their values used) before it is refilled
    if (lane == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(st.bar),
                     "r"((uint32_t)n * row_bytes)
                     : "memory");
    __syncwarp();
    if (lane < n) {
        const unsigned char* src = base + (size_t)(uint32_t)cand[c0 + lane] * row_bytes;
        asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                        st.buf + (uint32_t)(lane * ss)),
                "l"(src), "r"(row_bytes), "r"(st.bar)
                : "memory");
    }
    // The wait's suspend-time hint (try_wait may sleep until the rows land or this long). A hint
    // only: with staging ncu counts about 15k more instructions a query, most likely these polls
    // (bench/RESULTS.md, "Staged rows").
    constexpr uint32_t kStageWaitNs = 1000000;
    uint32_t done = 0;
    do {
        asm volatile(
                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; selp.u32 %0, 1, 0, p; }"
                : "=r"(done)
                : "r"(st.bar), "r"(st.phase), "r"(kStageWaitNs)
                : "memory");
    } while (!done);
    st.phase ^= 1;
#endif
}

// One distance pass over staged rows: NV candidates a team (G lanes), staged rows s0 + v 32/G + g
// of the n in the buffer (a slot past n reads row n - 1 and drops its result). The keys replace
// the ids in cand[c0 + s].
template <int G, int NV, bool L2, int S>
__device__ void staged_pass(const Query& x, int dw, const unsigned char* buf, int ss, uint64_t* cand,
                            int c0, int s0, int n, int lane) {
    constexpr int NG = 32 / G;
    const int g = lane / G, gl = lane % G;
    const uint4* row[NV];
    uint32_t id[NV];
    float acc[NV];
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const int i = s0 + v * NG + g, r = i < n ? i : n - 1;
        id[v] = (uint32_t)cand[c0 + r];
        row[v] = reinterpret_cast<const uint4*>(buf + r * ss);
        acc[v] = 0.f;
    }
    for (int j = gl; j < dw; j += G) {
        uint4 r[NV];
#pragma unroll
        for (int v = 0; v < NV; v++) r[v] = row[v][j];
        accumulate<NV, L2, S>(x, dw, acc, r, j);
    }
    write_keys<G, NV, L2, S>(x, acc, id, cand + c0 + s0, n - s0, lane);
}

// Distances of the m candidates whose ids sit in the low words of cand[] (written by the whole
// warp before the call). Staged (st, on sm_90, rows of 16-byte chunks): buffers of rows, each
// in passes of up to kInFlight candidates a team. Else from registers: passes of up to
// kInFlight candidates a team, the last one exactly as wide as what is left, so a pass issues
// no loads for empty slots of a whole team.
template <int G, bool L2, int S>
__device__ void warp_distances(const Params& P, const Query& x, uint64_t* cand, int m, int lane,
                               Stage* st) {
    if (m <= 0) return;
    constexpr int NG = 32 / G;  // candidates a pass slot
    const int rows = S == kFP32 ? P.rows_fp32 : P.rows;
    if (st && rows > 0) {
        const int dw = S == kFP32 ? P.dw_fp32 : P.dw, ss = S == kFP32 ? P.ss_fp32 : P.ss;
        const unsigned char* base = static_cast<const unsigned char*>(
                S == kFP32 ? static_cast<const void*>(P.a.x) : P.a.codes);
        const unsigned char* buf = st->ptr;
        for (int c0 = 0; c0 < m; c0 += rows) {
            const int n = m - c0 < rows ? m - c0 : rows;
            stage_rows(base, (uint32_t)dw * 16, cand, c0, n, ss, *st, lane);
            for (int s0 = 0; s0 < n; s0 += kInFlight * NG) {
                const int nv = (n - s0 + NG - 1) / NG;
                if (nv >= 4) staged_pass<G, 4, L2, S>(x, dw, buf, ss, cand, c0, s0, n, lane);
                else if (nv == 3) staged_pass<G, 3, L2, S>(x, dw, buf, ss, cand, c0, s0, n, lane);
                else if (nv == 2) staged_pass<G, 2, L2, S>(x, dw, buf, ss, cand, c0, s0, n, lane);
                else staged_pass<G, 1, L2, S>(x, dw, buf, ss, cand, c0, s0, n, lane);
            }
        }
        return;
    }
    const uint32_t dummy = (uint32_t)cand[0];
    for (int c0 = 0; c0 < m; c0 += kInFlight * NG) {
        const int nv = (m - c0 + NG - 1) / NG;
        if (nv >= 4) distance_pass<G, 4, L2, S>(P, x, cand, c0, m, dummy, lane);
        else if (nv == 3) distance_pass<G, 3, L2, S>(P, x, cand, c0, m, dummy, lane);
        else if (nv == 2) distance_pass<G, 2, L2, S>(P, x, cand, c0, m, dummy, lane);
        else distance_pass<G, 1, L2, S>(P, x, cand, c0, m, dummy, lane);
    }
}
static_assert(kInFlight == 4, "warp_distances dispatches passes of 1..4 candidates a team");

// Double hashing: the slot from the product's high bits, an odd step from its low ones. Linear
// probing's clusters made the slowest of 32 lanes probe about 5 times at the table's 3/4 load
// (Nsight Compute, bench/RESULTS.md); the warp waits for that lane.
__device__ inline bool hash_insert(int32_t* table, int bits, int32_t u) {
    const uint32_t mask = (1u << bits) - 1, h = (uint32_t)u * 2654435761u;
    const uint32_t step = (h | 1u) & mask;
    uint32_t s = h >> (32 - bits);
    for (;;) {
        const int32_t old = atomicCAS(&table[s], -1, u);
        if (old == -1) return true;
        if (old == u) return false;
        s = (s + step) & mask;
    }
}

// What merge_into must look for: survivors equal to each other (Bloom races: two lanes inserting
// one id) or to entries of the list (the filtered results with the hash visited set, which
// forgets vertices that left the worklist: such a vertex is computed again and, allowed, may come
// back for a place it already holds).
enum { kRepeatsInSurvivors = 1, kRepeatsOfEntries = 2 };

// Merges the survivors (one key a lane, lanes with `has`; never carrying the expanded bit) into
// the sorted list a[0..*size) of capacity cap, in place. A survivor's place is its rank among the
// survivors plus the entries below it (a binary search of the list, each lane its own: a few
// steps whatever the number of survivors). Then each place from the top down to the lowest a
// survivor takes is filled: a survivor's place by it, any other place p by the entry p - s, s the
// survivors placed below p (a bit a place, one warp OR a chunk of 32). Entries pushed past cap
// drop out; places below the lowest survivor keep their entries. Chunks go top-down and an entry
// only moves up, so each chunk reads entries not yet overwritten. sv: 32 keys of scratch.
// Repeats (see above) enter once. Returns the lowest place a survivor took (cap when none
// entered). Warp-wide, uniform arguments but key and has.
__device__ int merge_into(uint64_t* a, int* size, int cap, uint64_t key, bool has, int repeats,
                          uint64_t* sv, int lane) {
    unsigned live = __ballot_sync(kFullMask, has);
    if (!live) return cap;
    const int n = *size;
    if (repeats) {
        bool dup = false;
        if (repeats & kRepeatsInSurvivors)
            for (unsigned r = live; r; r &= r - 1) {
                const int j = __ffs(r) - 1;
                dup |= __shfl_sync(kFullMask, key, j) == key && j < lane;
            }
        if (repeats & kRepeatsOfEntries)
            for (int b = 0; b < n; b += 32) {
                const int i = b + lane;
                const uint64_t pe = i < n ? plain(a[i]) : kKeyNone;
                for (unsigned r = live; r; r &= r - 1) {
                    const int j = __ffs(r) - 1;
                    const bool eq = __ballot_sync(kFullMask, pe == __shfl_sync(kFullMask, key, j)) != 0;
                    if (lane == j) dup |= eq;
                }
            }
        has = has && !dup;
        live = __ballot_sync(kFullMask, has);
        if (!live) return cap;
    }
    const int ns = __popc(live);
    if (has) sv[__popc(live & lanemask_lt())] = key;
    __syncwarp();
    int pos = INT_MAX;  // this survivor's place (none: above every chunk)
    if (has) {
        int below = 0;  // survivors below this one (never equal: repeats are gone)
        for (int j = 0; j < ns; j++) below += sv[j] < key;
        int lo = 0;  // entries below it: the list is sorted by plain key
        for (int step = n ? 1 << (31 - __clz(n)) : 0; step; step >>= 1)
            if (lo + step <= n && plain(a[lo + step - 1]) < key) lo += step;
        pos = below + lo;
    }
    const int low = (int)__reduce_min_sync(kFullMask, (unsigned)pos);
    const int nn = n + ns < cap ? n + ns : cap;
    for (int b = (nn - 1) >> 5; b >= low >> 5; b--) {
        const int p = (b << 5) + lane;
        const unsigned mine = __reduce_or_sync(kFullMask, (pos >> 5) == b ? 1u << (pos & 31) : 0u);
        const int s = __popc(__ballot_sync(kFullMask, pos < (b << 5))) +
                      __popc(mine & lanemask_lt());
        const bool move = p < nn && p >= low && !(mine >> lane & 1u);
        uint64_t e = 0;
        if (move) e = a[p - s];
        __syncwarp();  // the chunk's sources are read before any of it is written
        if (move) a[p] = e;
    }
    __syncwarp();
    if (pos < cap) a[pos] = key;
    *size = nn;
    __syncwarp();
    return low < cap ? low : cap;
}

// The barrier of a query's warps when a block walks one query (Params::qw > 1): bar.sync by
// thread count, which the lead and its helpers reach from different places in the code.
__device__ inline void query_sync() { asm volatile("bar.sync 1, %0;" ::"r"(blockDim.x) : "memory"); }

template <int G, bool L2, int S, bool Shared>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kBlocksPerSM)
graph_search_kernel(Params P) {
    extern __shared__ __align__(16) unsigned char smem[];
    const graft_gpu_search_args& a = P.a;
    const Layout& lay = P.lay;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // A walk's warps: the lead walks; Shared (a block a walk, small batches) the others only
    // share each iteration's distances, between two block barriers. Walk wi is walk `part` of
    // query qi (the multi mode: P.walks of them; else wi = qi).
    const int qw = Shared ? kWarpsPerBlock : 1, slot = warp / qw;
    const bool lead = warp % qw == 0;
    const int64_t wi = (int64_t)blockIdx.x * (P.wpb / qw) + slot;
    if (wi >= P.nwalks) return;  // whole warps only (!Shared); Shared: a walk a block, never past
    const int64_t qi = wi / P.walks;
    const int part = (int)(wi % P.walks);
    const bool multi = P.walks > 1;
    unsigned char* base = smem + (size_t)slot * lay.stride;
    float* q = reinterpret_cast<float*>(base);
    float* sc = reinterpret_cast<float*>(base + lay.scale);  // SQ8 L2 only
    uint64_t* list = reinterpret_cast<uint64_t*>(base + lay.list);
    uint64_t* cand = reinterpret_cast<uint64_t*>(base + lay.cand);
    uint64_t* res = reinterpret_cast<uint64_t*>(base + lay.res);
    uint64_t* sv = reinterpret_cast<uint64_t*>(base + lay.sv);
    int32_t* table = reinterpret_cast<int32_t*>(base + lay.hash);
    int32_t* expand = reinterpret_cast<int32_t*>(base + lay.expand);
    int* ctl = reinterpret_cast<int*>(base + lay.ctl);  // Shared: the iteration's candidates, qc
    const bool use_hash = a.visited == 0;
    const int repeats = use_hash ? 0 : kRepeatsInSurvivors;
    const int res_repeats = use_hash ? kRepeatsOfEntries : kRepeatsInSurvivors;
    const int L = a.L, R = a.R, k = (int)a.k;
    // This warp's staging buffer and mbarrier (P.rows == P.rows_fp32 == 0: none).
    Stage stage{};
    Stage* st = nullptr;
    if (P.stage_bytes) {
        unsigned char* w = smem + P.stage_off + (size_t)warp * (P.stage_bytes + 128);
        stage.ptr = w;
        stage.buf = (uint32_t)__cvta_generic_to_shared(w);
        stage.bar = stage.buf + (uint32_t)P.stage_bytes;
#if __CUDA_ARCH__ >= 900
        if (lane == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(stage.bar) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
#endif
        __syncwarp();
        st = &stage;
    }

    const float* gq = a.xq + qi * a.d;
    if (Shared && !lead) {
        // A helper warp: each iteration, its share of the lead's candidates (the lead staged the
        // query before the first barrier).
        const int part = warp % qw;
        query_sync();
        for (;;) {
            query_sync();  // the lead published the iteration's candidates, or -1: done
            const int m = *ctl;
            if (m < 0) return;
            const int per = (m + qw - 1) / qw, lo = part * per;
            warp_distances<G, L2, S>(P, Query{q, sc, *reinterpret_cast<float*>(ctl + 1)},
                                     cand + lo, m - lo < per ? m - lo : per, lane, st);
            query_sync();  // the distances are in cand[]
        }
    }
    const int dpad = (int)((a.d + 3) & ~3ll);
    float qc = 0.f;  // SQ8 inner product: q . offset
    bool bad = false;  // the query holds NaN or Inf: checked where it is read, not on the host
    uint64_t qhash = 0;  // the multi mode's (graft_walk_seed): this lane's part of the sum
    for (int j = lane; j < dpad; j += 32) {
        float v = j < a.d ? gq[j] : 0.f;
        bad |= (~__float_as_uint(v) & 0x7f800000u) == 0;
        if (multi && j < a.d) qhash += graft_mix64((uint64_t)j << 32 | __float_as_uint(v));
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
    if (__any_sync(kFullMask, bad)) {
        for (int j = lane; j < k; j += 32) {
            if (multi) {
                P.walk_keys[wi * k + j] = kKeyBad;
                continue;
            }
            a.D[qi * a.k + j] = __int_as_float(0x7fc00000);
            a.I[qi * a.k + j] = GRAFT_GPU_BAD_QUERY;
        }
        if (Shared) {  // the helpers wait at the staged query's barrier, then read -1: done
            if (lane == 0) *ctl = -1;
            query_sync();
            query_sync();
        }
        return;
    }
    if (S == kSQ8 && !L2)
        for (int o = 16; o > 0; o >>= 1) qc += __shfl_xor_sync(kFullMask, qc, o);
    const Query query{q, sc, qc};
    if (Shared && lane == 0) *reinterpret_cast<float*>(ctl + 1) = qc;
    uint32_t* bf = nullptr;
    const uint32_t bloom_mask = (1u << a.bloom_log2) - 1;
    if (use_hash) {
        for (int j = lane; j < (1 << lay.hash_bits); j += 32) table[j] = -1;
    } else {
        bf = a.bloom + wi * P.bloom_words;  // the walk's own
        uint4* b4 = reinterpret_cast<uint4*>(bf);
        for (int64_t j = lane; j < P.bloom_words / 4; j += 32) b4[j] = make_uint4(0, 0, 0, 0);
    }
    __syncwarp();

    int size = 0, nres = 0;
    uint64_t worst = kKeyNone, res_worst = kKeyNone;
    int scan = 0;  // every worklist entry before `scan` is expanded
    // Step 3 of an iteration (maintenance), 32 of the m candidates at a time: the allowed ones
    // into the filtered results, those below the worst entry into the worklist.
    auto maintain = [&](int m) {
        for (int c0 = 0; c0 < m; c0 += 32) {
            const int c = c0 + lane;
            const uint64_t key = c < m ? cand[c] : kKeyNone;
            if (a.allowed) {
                const uint32_t u = (uint32_t)key;
                const bool ok = c < m && key < res_worst && (a.allowed[u >> 5] >> (u & 31) & 1u);
                merge_into(res, &nres, k, key, ok, res_repeats, sv, lane);
                res_worst = nres == k ? res[k - 1] : kKeyNone;
            }
            const int low = merge_into(list, &size, L, key, key < worst, repeats, sv, lane);
            if (low < scan) scan = low;
            worst = size == L ? plain(list[L - 1]) : kKeyNone;
        }
    };
    int m0 = 1;  // the start's distances
    if (part == 0) {
        // The entry vertex starts the worklist (and the results, when allowed).
        const int32_t e = (int32_t)a.entry;
        if (lane == 0) {
            if (use_hash) hash_insert(table, lay.hash_bits, e);
            else bloom_insert(bf, bloom_mask, e);
            cand[0] = (uint32_t)e;
        }
        __syncwarp();
        warp_distances<G, L2, S>(P, query, cand, 1, lane, st);
        __syncwarp();
        size = 1;
        if (lane == 0) list[0] = cand[0];
        if (a.allowed && (a.allowed[e >> 5] >> (e & 31) & 1u)) {
            if (lane == 0) res[0] = cand[0];
            nres = 1;
        }
        __syncwarp();
        worst = size == L ? plain(list[L - 1]) : kKeyNone;
        res_worst = nres == k ? res[k - 1] : kKeyNone;
    } else {
        // Another walk of the query (the multi mode): its starts from the query's hash
        // (graft_walk_seed; repeats dropped), sorted into its worklist.
        for (int o = 16; o > 0; o >>= 1) qhash += __shfl_xor_sync(kFullMask, qhash, o);
        const int ns = L < GRAFT_WALK_SEEDS ? L : GRAFT_WALK_SEEDS;
        const uint32_t u = graft_walk_seed(qhash, part, lane, a.n);
        const bool fresh = lane < ns && (use_hash ? hash_insert(table, lay.hash_bits, (int32_t)u)
                                                  : bloom_insert(bf, bloom_mask, (int32_t)u));
        const unsigned bal = __ballot_sync(kFullMask, fresh);
        if (fresh) cand[__popc(bal & lanemask_lt())] = u;
        m0 = __popc(bal);
        __syncwarp();
        warp_distances<G, L2, S>(P, query, cand, m0, lane, st);
        __syncwarp();
        maintain(m0);
        __syncwarp();
    }

    int hashed = m0;  // entries in the visited hash (the start)
    int ndist = m0, niter = 0;  // a walk's, for the counters
    if (Shared) query_sync();  // the staged query, for the helpers
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
        if (nsel == 0) {
            if (Shared) {
                if (lane == 0) *ctl = -1;
                query_sync();
            }
            break;
        }
        scan = first;
        niter++;
        // The expanded rows, 64 entries a round (two words a lane loaded before either is
        // tested: one round trip), the fresh neighbours packed into cand[].
        int m = 0;
        for (int p = 0; p < nsel; p++) {
            const int32_t* row = a.graph + (int64_t)expand[p] * R;
            for (int t0 = 0; t0 < R; t0 += 64) {
                int32_t u2[2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int t = t0 + 32 * h + lane;
                    u2[h] = t < R ? __ldg(row + t) : -1;
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
        }
        hashed += m;
        __syncwarp();
        // 2. bulk distances (with helpers: the first of qw shares, the helpers the others)
        if (Shared) {
            if (lane == 0) *ctl = m;
            query_sync();
            warp_distances<G, L2, S>(P, query, cand, m < (m + qw - 1) / qw ? m : (m + qw - 1) / qw, lane, st);
            query_sync();
        } else {
            warp_distances<G, L2, S>(P, query, cand, m, lane, st);
        }
        __syncwarp();
        ndist += m;
        // 3. maintenance
        maintain(m);
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
    }

    uint64_t* out = a.allowed ? res : list;
    const int found = a.allowed ? nres : size;
    if (S != kFP32 && a.x && found > 0) {  // no x (keep_fp32 = 0): the codes' distances stand
        // Exact re-ranking: FP32 distances of the first nr entries (query from global memory,
        // since the staged one is folded), rank-sorted back into place by (distance, id).
        const int nr = a.allowed || a.rerank == 0 || a.rerank > found ? found : a.rerank;
        for (int i = lane; i < nr; i += 32) cand[i] = (uint32_t)plain(out[i]);
        __syncwarp();
        warp_distances<G, L2, kFP32>(P, Query{gq, nullptr, 0.f}, cand, nr, lane, st);
        __syncwarp();
        for (int i = lane; i < nr; i += 32) {
            const uint64_t key = cand[i];
            int r = 0;
            for (int j = 0; j < nr; j++) r += cand[j] < key;  // ids differ: keys are distinct
            out[r] = key;
        }
        __syncwarp();
    }
    for (int j = lane; j < k; j += 32) {
        if (multi) {  // the walk's k best, for merge_walks
            P.walk_keys[wi * k + j] = j < found ? plain(out[j]) : kKeyNone;
            continue;
        }
        float dist_j = L2 ? FLT_MAX : -FLT_MAX;
        int64_t id = -1;
        if (j < found) {
            const uint64_t key = plain(out[j]);
            const float v = ordered_to_float((uint32_t)(key >> 32));
            dist_j = L2 ? v : -v;
            id = (int64_t)(uint32_t)key;
        }
        a.D[qi * a.k + j] = dist_j;
        a.I[qi * a.k + j] = id;
    }
    if (a.counters && lane == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters), (unsigned long long)ndist);
        atomicAdd(reinterpret_cast<unsigned long long*>(a.counters + 1), (unsigned long long)niter);
    }
}

// The multi mode's last step: each query's W walks' k best (sorted keys, kKeyNone padded) merged
// into its k best, a warp a query: the W lists in shared memory, then k rounds of a warp minimum
// over the lists' heads (two lists a lane), the lists holding the minimum advancing; an id
// already taken is skipped (the walks do not share visited sets: several may find a vertex).
__global__ void __launch_bounds__(32) merge_walks_kernel(const uint64_t* __restrict__ keys, int W,
                                                         int k, bool l2, float* D, int64_t* I) {
    extern __shared__ __align__(16) unsigned char smem[];
    uint64_t* lists = reinterpret_cast<uint64_t*>(smem);
    uint32_t* taken = reinterpret_cast<uint32_t*>(lists + W * k);
    const int64_t qi = blockIdx.x;
    const int lane = threadIdx.x;
    for (int i = lane; i < W * k; i += 32) lists[i] = keys[qi * W * k + i];
    __syncwarp();
    float* d = D + qi * k;
    int64_t* ids = I + qi * k;
    if (lists[0] == kKeyBad) {
        for (int j = lane; j < k; j += 32) {
            d[j] = __int_as_float(0x7fc00000);
            ids[j] = GRAFT_GPU_BAD_QUERY;
        }
        return;
    }
    int pos[2] = {0, 0}, n = 0;
    while (n < k) {
        uint64_t best = kKeyNone;
        int bt = 0;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int c = lane + 32 * t;
            const uint64_t key = c < W && pos[t] < k ? lists[c * k + pos[t]] : kKeyNone;
            if (key < best) best = key, bt = t;
        }
        uint64_t low = best;
        for (int o = 16; o > 0; o >>= 1) {
            const uint64_t other = __shfl_xor_sync(kFullMask, low, o);
            low = other < low ? other : low;
        }
        if (low == kKeyNone) break;
        if (best == low) pos[bt]++;
        const uint32_t id = (uint32_t)low;
        bool seen = false;
        for (int j = lane; j < n; j += 32) seen |= taken[j] == id;
        if (!__any_sync(kFullMask, seen)) {
            if (lane == 0) {
                taken[n] = id;
                const float v = ordered_to_float((uint32_t)(low >> 32));
                d[n] = l2 ? v : -v;
                ids[n] = (int64_t)id;
            }
            n++;
        }
        __syncwarp();
    }
    for (int j = n + lane; j < k; j += 32) {
        d[j] = l2 ? FLT_MAX : -FLT_MAX;
        ids[j] = -1;
    }
}

// Lanes a distance (G), by a cost in two parts for an iteration's fresh candidates, m = 20 of
// them (the mean of an iteration at R = 64 on dense-SIFT and Fashion-MNIST: 18-21; fewer when
// probes x R is smaller): memory round trips, ceil(m / (kInFlight 32 / G)) passes of
// ceil(dw / (2 G)) loads each (dw: the row's 16-byte chunks; each lane keeps two chunks of each
// of its candidates in flight), and instructions, a slot's ceil(dw / G) chunk steps plus its
// log2(G) reduction steps. A round trip weighs 28 slot-steps: the fit to the H100's team-size
// sweep (GRAFT_SEARCH_LANES = 4..32) on dense-SIFT (d = 128: 4), KDE-patches (192: 4-8) and
// Fashion-MNIST (784: 16-32), each within 3% of its best team (bench/RESULTS.md). Ties go to
// more lanes. Staged rows (stage_rows) make the round trips the buffers', whatever G: then
// instructions alone choose. GRAFT_SEARCH_LANES overrides it (benchmarks).
int lanes_for(int64_t d, int W, int C, bool staged) {
    if (const char* s = getenv("GRAFT_SEARCH_LANES")) {
        const int g = atoi(s);
        if (g == 4 || g == 8 || g == 16 || g == 32) return g;
    }
    const int64_t dw = d % W == 0 ? d / W : d, m = C < 20 ? C : 20;
    int best = 32;
    int64_t best_cost = INT64_MAX;
    for (int lg = 5; lg >= 2; lg--) {  // teams of 4 to 32 lanes (each its own kernel)
        const int g = 1 << lg;
        const int64_t slots = ceil_div(m, 32 / g);
        const int64_t trips = ceil_div(slots, kInFlight) * ceil_div(dw, 2 * g);
        const int64_t cost = (staged ? 0 : 28 * trips) + slots * (ceil_div(dw, g) + lg);
        if (cost < best_cost) best = g, best_cost = cost;
    }
    return best;
}

template <int G, bool L2, int S>
int launch(const Params& P, int blocks, size_t smem, cudaStream_t s) {
    auto kern = P.qw > 1 ? graph_search_kernel<G, L2, S, true> : graph_search_kernel<G, L2, S, false>;
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
    l.list = take(&off, a->L * 8);
    // Candidates of an iteration; at the end, the ids the re-ranking reads (up to L).
    l.cand = take(&off, (l.C > a->L ? l.C : a->L) * 8);
    l.res = take(&off, a->allowed ? (int)a->k * 8 : 0);
    l.sv = take(&off, 32 * 8);
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
    l.ctl = take(&off, 8);  // Shared: m, then qc
    l.stride = off;
    return l;
}
}  // namespace
}  // namespace graft

using namespace graft;

namespace {
int walks_of(const graft_gpu_search_args* a) { return a->walks > 1 ? a->walks : 1; }
// The Bloom filters of nq queries' walks (one a walk), 16-byte aligned.
size_t bloom_bytes(const graft_gpu_search_args* a) {
    if (a->visited != 1 || a->bloom_log2 < 10 || a->bloom_log2 > 24) return 0;
    return align_up((size_t)a->nq * walks_of(a) * ((size_t)1 << a->bloom_log2) / 8, 16);
}
}  // namespace

extern "C" size_t graft_gpu_graph_search_scratch(const graft_gpu_search_args* a) {
    if (!a || a->nq < 1) return 0;
    const int W = walks_of(a);
    return bloom_bytes(a) + (W > 1 ? (size_t)a->nq * W * (size_t)a->k * sizeof(uint64_t) : 0);
}

namespace {
// The shared memory a launch may use, from the device's attributes.
struct Smem {
    int optin, per_sm, reserved, major;
};
int smem_limits(int device, Smem* m) {
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&m->optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&m->per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&m->reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&m->major, cudaDevAttrComputeCapabilityMajor, device));
    return GRAFT_OK;
}

constexpr int kStageMinRows = 8;

// A row's stride in a staging buffer: 64 bytes past a multiple of 128, so that two 4-lane teams
// reading their rows' chunks side by side hit different banks.
int stage_stride(int row_bytes) { return (row_bytes + 127) / 128 * 128 + 64; }

// Where a launch's warps stage rows (Params' stage fields) and its shared memory a block. The
// buffers take what kBlocksPerSM blocks (the register bound) leave of a multiprocessor's shared
// memory, up to 32 rows (sm_90 and rows of 16-byte chunks only); staged when a buffer holds at
// least kStageMinRows rows, or all of an iteration's candidates. Measured on the H100, batch
// 10k, staged against registers (bench/RESULTS.md, "Staged rows"): 8 to 32 rows 1.10-1.51x on
// dense-SIFT and KDE-patches, every storage; 7 rows (dense-SIFT, L = 128) 0.99x, 5 (KDE, L = 96)
// 1.06x, 1 (Fashion-MNIST's 3 KB rows) 0.79x: a round trip of a few rows does not pay for its
// wait. GRAFT_SEARCH_STAGE=0 turns staging off, =N stages N rows where they fit (benchmarks).
size_t plan_stage(Params* P, const Smem& m) {
    const int slots = P->wpb / P->qw;
    const size_t base = (size_t)slots * P->lay.stride;
    P->stage_off = (int)((base + 127) / 128 * 128);
    P->stage_bytes = P->rows = P->ss = P->rows_fp32 = P->ss_fp32 = 0;
    const char* e = getenv("GRAFT_SEARCH_STAGE");
    const int cap = e ? atoi(e) : 32;
    if (m.major < 9 || !P->dw || cap <= 0) return base;
    const int row_bytes = P->dw * 16, ss = stage_stride(row_bytes);
    const int64_t per_block = (int64_t)m.per_sm / kBlocksPerSM - m.reserved;
    const int64_t room = per_block < m.optin ? per_block : m.optin;
    int64_t rows = (room - P->stage_off) / P->wpb - 128;
    rows = rows > 0 ? rows / ss : 0;
    const int want = std::min({P->lay.C, cap, 32});  // rows a buffer could use
    if (rows > want) rows = want;
    if (rows < kStageMinRows && rows < want) return base;
    P->rows = (int)rows;
    P->ss = ss;
    P->stage_bytes = (int)(rows * ss);
    if (P->dw_fp32) {  // the compressed walks' FP32 re-ranking, in the same buffer
        P->ss_fp32 = stage_stride(P->dw_fp32 * 16);
        P->rows_fp32 = P->stage_bytes / P->ss_fp32 < 32 ? P->stage_bytes / P->ss_fp32 : 32;
    }
    return (size_t)P->stage_off + (size_t)P->wpb * (P->stage_bytes + 128);
}

// The launch's shape: warps a block, warps a query, staging, shared memory a block (and the
// device's limits it was fitted to, in *m).
int plan_launch(graft_gpu_ctx* ctx, const graft_gpu_search_args* a, Params* P, size_t* smem, Smem* m_out) {
    Smem& m = *m_out;
    GRAFT_GPU_TRY(smem_limits(ctx->device, &m));
    P->lay = make_layout(a);
    P->wpb = kWarpsPerBlock;
    while (P->wpb > 1 && (size_t)P->wpb * P->lay.stride > (size_t)m.optin) P->wpb /= 2;
    if ((size_t)P->lay.stride > (size_t)m.optin)
        return gpu_fail(GRAFT_EINVAL,
                        "graft_gpu_graph_search: one query needs %d bytes of shared memory (d=%lld, "
                        "L=%d, probes x R=%d), over the device's %d; lower L or probes",
                        P->lay.stride, (long long)a->d, a->L, P->lay.C, m.optin);
    // Small batches (every query can have a block of its own resident at once): a block a
    // query, the lead warp walking and all four computing each iteration's distances, which
    // shortens a query's latency (batch 1); larger ones, a warp a query (throughput).
    P->qw = 1;
    if (P->wpb == kWarpsPerBlock && a->nq * walks_of(a) <= (int64_t)ctx->sm_count * kBlocksPerSM)
        P->qw = P->wpb;
    const int W = a->storage == kSQ8 ? 16 : a->storage == kFP16 ? 8 : 4;
    P->dw = a->d % W == 0 ? (int)(a->d / W) : 0;
    P->dw_fp32 = a->d % 4 == 0 ? (int)(a->d / 4) : 0;
    *smem = plan_stage(P, m);
    // GRAFT_SEARCH_BLOCKS_PER_SM=B (benchmarks only): pads each block's shared memory so that at
    // most B blocks share a multiprocessor, to measure how the walk's speed follows the number of
    // resident warps (latency-bound: in proportion; issue- or bandwidth-bound: less).
    if (const char* e = getenv("GRAFT_SEARCH_BLOCKS_PER_SM")) {
        const int b = atoi(e);
        if (b > 0 && m.per_sm / b - m.reserved > (int)*smem && m.per_sm / b - m.reserved <= m.optin)
            *smem = (size_t)(m.per_sm / b - m.reserved);
    }
    return GRAFT_OK;
}
}  // namespace

extern "C" int64_t graft_gpu_graph_search_resident(graft_gpu_ctx* ctx, const graft_gpu_search_args* a) {
    if (!ctx || !a) return 0;
    Smem m{};
    Params P{};
    size_t smem = 0;
    graft_gpu_search_args big = *a;  // a large batch: a warp a query
    big.nq = INT64_MAX;
    big.walks = 1;
    if (plan_launch(ctx, &big, &P, &smem, &m) != GRAFT_OK) return 0;
    int64_t blocks = m.per_sm / ((int64_t)smem + m.reserved);
    if (blocks > kBlocksPerSM) blocks = kBlocksPerSM;
    if (blocks < 1) blocks = 1;
    return (int64_t)ctx->sm_count * blocks * P.wpb;
}

extern "C" int graft_gpu_graph_search_walks(int64_t wave, int64_t nq, int64_t k) {
    if (nq < 1 || k < 1 || wave < 1 || 2 * nq >= wave) return 1;
    // Blocks of four warps while two or more a query fit resident, else one-warp walks.
    const int64_t blocks = wave / kWarpsPerBlock;
    int64_t W = 2 * nq <= blocks ? blocks / nq : wave / nq;
    if (W > 32) W = 32;
    if (W * k > kMaxWalkKeys) W = kMaxWalkKeys / k;
    return W < 2 ? 1 : (int)W;
}

namespace {
// The search on stream st; with sync, timed (gpu_ms, nullable) and waited for.
int search_on(graft_gpu_ctx* ctx, const graft_gpu_search_args* a, cudaStream_t st, float* gpu_ms,
              bool sync) {
    if (!ctx || !a || (!a->x && a->storage == kFP32) || !a->graph || !a->D || !a->I ||
        (a->nq > 0 && !a->xq))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: NULL argument");
    if (a->n < 1 || a->n > INT32_MAX || a->d < 1 || a->d >= (1 << 24) || a->R < 1 || a->R > 256 || a->entry < 0 ||
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
    const int W = walks_of(a);
    if (a->walks < 0 || a->walks > kMaxWalks || (W > 1 && W * a->k > kMaxWalkKeys))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: walks=%d must be in 0..%d, and "
                        "walks x k = %lld at most %d", a->walks, kMaxWalks,
                        (long long)W * a->k, kMaxWalkKeys);
    if (gpu_ms) *gpu_ms = 0;
    if (a->nq == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    Params P{};
    P.a = *a;
    P.walks = W;
    P.nwalks = a->nq * W;
    size_t smem = 0;
    Smem m{};
    GRAFT_GPU_TRY(plan_launch(ctx, a, &P, &smem, &m));
    if (a->visited == 1 || W > 1) {
        if (!a->bloom || ((uintptr_t)a->bloom & 15))
            return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: the Bloom filter%s needs a "
                            "16-byte aligned scratch buffer (graft_gpu_graph_search_scratch)",
                            W > 1 ? " or the multi mode" : "");
        P.bloom_words = ((int64_t)1 << a->bloom_log2) / 32;
    }
    if (W > 1) P.walk_keys = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(a->bloom) + bloom_bytes(a));
    const int64_t blocks = ceil_div(P.nwalks, P.wpb / P.qw);
    if (blocks > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_graph_search: nq=%lld is too many for one launch",
                        (long long)a->nq);
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    if (gpu_ms) {
        GRAFT_CUDA_TRY(cudaEventCreate(&t0));
        GRAFT_CUDA_TRY(cudaEventCreate(&t1));
        GRAFT_CUDA_TRY(cudaEventRecord(t0, st));
    }
    const int dims = a->storage == kSQ8 ? 16 : a->storage == kFP16 ? 8 : 4;  // a 16-byte load's
    const int g = lanes_for(a->d, dims, P.lay.C, P.rows > 0);
    int rc = a->l2 ? launch_s<true>(g, P, (int)blocks, smem, st)
                   : launch_s<false>(g, P, (int)blocks, smem, st);
    if (rc == GRAFT_OK && W > 1) {
        merge_walks_kernel<<<(unsigned)a->nq, 32, (size_t)W * a->k * 12, st>>>(
                P.walk_keys, W, (int)a->k, a->l2 != 0, a->D, a->I);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            rc = gpu_fail(GRAFT_ECUDA, "graft_gpu_graph_search: merge_walks_kernel: %s", cudaGetErrorString(e));
    }
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
