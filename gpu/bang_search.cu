// BANG search on the GPU (../shared/papers/bang-billion-scale-single-gpu.txt, Algorithm 2 and
// sections 4.2-4.9): best-first graph search on PQ (asymmetric) distances, then exact
// re-ranking. The semantics are graft/bang.h's, which the CPU reference graft_bang_search_cpu
// (plugin/graph/bang.c) runs; the host driver is plugin/graph/bang_gpu.c.
//
// Kernels, in the paper's split (4.1: "separate GPU kernels for" each step):
//   bang_init_kernel     PQ distance tables (4.2, one block per query, thread j = centroid j,
//                        sub-spaces in sequence), Bloom filter cleared (4.4), worklist = {entry}
//                        with the entry expanded (slot 0 of the re-rank store).
//   bang_step_a_kernel   the current node's row: Bloom test-and-set, asymmetric distances (4.5),
//                        the candidates that enter the worklist kept, and the eager choice of the
//                        next node (4.6), which goes to the host at once.
//   bang_step_b_kernel   rank sort of the candidates (4.7) and merge path into the worklist
//                        (4.8), the chosen node marked expanded.
//   bang_store_kernel    out-of-core: files the staged full vectors of the current nodes for the
//                        re-rank (4.3), on a stream of their own, off the steps' path; or step B
//                        files them itself, when they came on its stream (the tail of a batch).
//   bang_rerank_kernel   exact distances of the best expanded nodes, top k (4.9).
//
// One warp per query in the step kernels (BANG uses a block per query): a step touches one row
// of R <= 256 neighbours and a worklist of L <= 1024 entries, so a warp covers a row in R / 32
// rounds and merges with __syncwarp only, with no block barrier to hold finished queries back;
// batches hold thousands of queries, so a block per query would add no occupancy, and the warp
// layout is the SONG kernel's (graph_search.cu), whose key encoding, Bloom hashing and merge path
// this file shares. The table and re-rank kernels, which run once per query, use a block.
//
// Exactness: the worklist order is (PQ distance, id) through the ordered keys of common.cuh, bit
// 31 of the id word marking "expanded" (ids < 2^31). Each asymmetric distance is summed by one
// lane in the CPU's order (m = 0..M-1), the table entries and the exact distances with the CPU's
// operations in its order (__fmul_rn / __fadd_rn: no FMA contraction), so distances are bitwise
// those of graft_pq_table + graft_vec_dist; the GPU differs from the reference only through Bloom
// false positives. In-memory and out-of-core run the same kernels on the same numbers, so their
// results are identical.
//
// Eager selection (4.6) equals "the best unexpanded entry after the merge". Let W be the old
// worklist (L slots, empty slots = +inf keys), w its worst key, N the new candidates (distinct,
// none in W: the Bloom filter admitted each id once), N' = {c in N : c < w} the ones that enter,
// c* = min N', e = W's first unexpanded entry, and W' = the best L of W u N (the merge).
//  (1) c* is in W': a new key below c* would be below w, so in N', contradicting minimality;
//      the old keys below c* are below w, so at most L - 1 of them precede c*.
//  (2) if e < c* (or N' is empty), e is in W': a new key x below e would satisfy x < e <= w, so
//      x would be in N' and below c*, a contradiction; no new key precedes e, which keeps its
//      old rank (< L).
//  (3) every other unexpanded entry of W' is an old one after e (so above e) or a member of N'
//      (so at least c*); new candidates outside N' are at least w and cannot enter.
// Hence min(c*, e) is the best unexpanded entry of W' (none when both are missing), which is
// what the CPU reference expands next. Step A computes it from W and N before step B merges.
#include <cfloat>

#include "common.cuh"

namespace graft {
namespace {

constexpr uint64_t kExpanded = 1ull << 31;
__device__ inline uint64_t plain(uint64_t k) { return k & ~kExpanded; }

constexpr int kWarps = 4;             // queries per block of the step kernels
constexpr int kMaxR = 256;
constexpr int kKsub = 256;            // centroids per sub-space (GRAFT_PQ_KSUB)
constexpr int kRerankThreads = 256;

// Per-query state besides the arrays (32 bytes).
struct State {
    uint64_t next_key;  // key of the node chosen by the last step A; kKeyNone = finished
    int32_t node;       // the node whose row the next step reads (in-memory); -1 = finished
    int32_t nexp;       // expanded nodes so far = filled slots of the re-rank store
    int32_t ncand;      // candidates step A left for step B
    int32_t pad[3];
};

// The batch's scratch, carved by make_layout.
struct Layout {
    int64_t table_stride, list_stride, bloom_words, cand_stride, store_stride, vec_stride;
    size_t off_table, off_list, off_bloom, off_cand, off_store, off_vec, off_state, end;
    size_t per_query, fixed;
};

// Everything a kernel needs, by value.
struct Dev {
    const float* centroids;
    const uint8_t* codes;
    const int32_t* graph;  // NULL: out-of-core (rows and vectors staged by the host)
    const float* x;
    const float* xq;
    int64_t n, d, entry, nq;
    int R, M, dsub, l2, L, max_expand;
    uint32_t bloom_mask;
    float* table;
    uint64_t* list;
    uint32_t* bloom;
    uint64_t* cand;
    uint64_t* store;
    float* vec;
    State* state;
    int32_t* counters;
    int64_t table_stride, list_stride, bloom_words, cand_stride, store_stride, vec_stride;
};

struct Step {
    int64_t q0, nq, nlive;
    int iteration;
    const int32_t* live;
    const int32_t* rows;
    const float* vecs;
    int32_t* next;
};

struct Rerank {
    int64_t k;
    int rerank;
    const uint32_t* allowed;
    float* D;
    int64_t* I;
};

// ---- device helpers ---------------------------------------------------------------------------

// The asymmetric distance of one code: sum_m table[m * 256 + code[m]], in order m = 0..M-1 as
// graft/pq.h specifies (one lane per candidate keeps the CPU's order; the lookups, not the adds,
// are the cost). Codes are read 16 (or 4) bytes at a time when the row length allows it.
__device__ inline float pq_distance(const float* __restrict__ table,
                                    const uint8_t* __restrict__ code, int M) {
    float s = 0.f;
    if ((M & 15) == 0) {
        const uint4* c4 = reinterpret_cast<const uint4*>(code);
        for (int b = 0; b < (M >> 4); b++) {
            const uint4 v = __ldg(c4 + b);
            const float* t = table + (size_t)b * 16 * kKsub;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint32_t w = i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s += __ldg(t + (i * 4 + j) * kKsub + ((w >> (8 * j)) & 255u));
            }
        }
    } else if ((M & 3) == 0) {
        const uint32_t* c4 = reinterpret_cast<const uint32_t*>(code);
        for (int b = 0; b < (M >> 2); b++) {
            const uint32_t w = __ldg(c4 + b);
            const float* t = table + (size_t)b * 4 * kKsub;
#pragma unroll
            for (int j = 0; j < 4; j++) s += __ldg(t + j * kKsub + ((w >> (8 * j)) & 255u));
        }
    } else {
        for (int m = 0; m < M; m++) s += __ldg(table + m * kKsub + __ldg(code + m));
    }
    return s;
}

__device__ inline uint64_t warp_min(uint64_t v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const uint64_t w = __shfl_xor_sync(kFullMask, v, o);
        v = w < v ? w : v;
    }
    return v;
}

// Entries of the sorted a[0..n) whose key is below `key` / whose plain key is at most `key`.
__device__ inline int count_below(const uint64_t* a, int n, uint64_t key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
__device__ inline int count_plain_le(const uint64_t* a, int n, uint64_t key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (plain(a[mid]) <= key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Block-wide bitonic sort of keys[0..n), n a power of two, ascending; with PAYLOAD the int32
// payload moves along. Every thread of the block calls it (barriers inside).
template <bool PAYLOAD>
__device__ void block_bitonic_sort(uint64_t* keys, int32_t* payload, int n) {
    for (int size = 2; size <= n; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < (n >> 1); i += blockDim.x) {
                const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                const bool up = (lo & size) == 0;
                const uint64_t a = keys[lo], b = keys[hi];
                if ((a > b) == up && a != b) {
                    keys[lo] = b;
                    keys[hi] = a;
                    if (PAYLOAD) {
                        const int32_t t = payload[lo];
                        payload[lo] = payload[hi];
                        payload[hi] = t;
                    }
                }
            }
            __syncthreads();
        }
}

// ---- kernels ------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kKsub) bang_init_kernel(Dev P) {
    const int64_t qi = blockIdx.x;
    const int tid = threadIdx.x;
    const float* q = P.xq + qi * P.d;
    float* table = P.table + qi * P.table_stride;
    // Table entry (m, j) by thread j, as graft_pq_table: squared L2 of the sub-vectors summed in
    // order, or minus their dot product. The query is read by every thread at the same address
    // (a broadcast from L1).
    const int ds = P.dsub;
    for (int m = 0; m < P.M; m++) {
        const float* qm = q + (int64_t)m * ds;
        const float* c = P.centroids + ((size_t)m * kKsub + tid) * ds;
        float s = 0.f;
        if (P.l2) {
            for (int t = 0; t < ds; t++) {
                const float u = __fsub_rn(__ldg(qm + t), __ldg(c + t));
                s = __fadd_rn(s, __fmul_rn(u, u));
            }
        } else {
            for (int t = 0; t < ds; t++) s = __fsub_rn(s, __fmul_rn(__ldg(qm + t), __ldg(c + t)));
        }
        table[m * kKsub + tid] = s;
    }
    uint32_t* bf = P.bloom + qi * P.bloom_words;
    uint4* b4 = reinterpret_cast<uint4*>(bf);
    for (int64_t j = tid; j < P.bloom_words / 4; j += blockDim.x) b4[j] = make_uint4(0, 0, 0, 0);
    uint64_t* list = P.list + qi * P.list_stride;
    for (int j = tid; j < P.L; j += blockDim.x) list[j] = kKeyNone;  // empty slots: worst keys,
                                                                    // "expanded" bit set
    if (qi == 0)
        for (int j = tid; j < P.max_expand; j += blockDim.x) P.counters[j] = 0;
    __syncthreads();  // the table and the cleared filter, to thread 0
    if (tid == 0) {
        const int32_t e = (int32_t)P.entry;
        const uint8_t* code = P.codes + (int64_t)e * P.M;
        float s = 0.f;
        for (int m = 0; m < P.M; m++) s += table[m * kKsub + code[m]];
        const uint64_t key = make_key(s, (uint32_t)e);
        bloom_insert(bf, P.bloom_mask, e);
        list[0] = key | kExpanded;
        P.store[qi * P.store_stride] = key;
        State st{};
        st.next_key = kKeyNone;
        st.node = e;
        st.nexp = 1;
        P.state[qi] = st;
    }
}

// The minimum of 8 blocks per SM lets ptxas use up to 64 registers (it picked 32 from the
// thread count alone and spilled).
__global__ void __launch_bounds__(kWarps * 32, 8) bang_step_a_kernel(Dev P, Step S) {
    __shared__ int32_t fresh_ids[kWarps][kMaxR];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t w = (int64_t)blockIdx.x * kWarps + warp;
    const bool staged = P.graph == nullptr;
    if (w >= (staged ? S.nlive : S.nq)) return;  // whole warps only; no block barrier below
    const int64_t q = staged ? (int64_t)S.live[w] : S.q0 + w;
    State* st = P.state + q;
    int32_t u = 0;
    if (!staged) {
        u = st->node;
        if (u < 0) return;  // finished in an earlier step
    }
    const int nexp = st->nexp;
    uint64_t next = kKeyNone;
    int kept = 0;
    if (nexp < P.max_expand) {  // else this node is the last expansion: its row cannot matter
        const int R = P.R;
        const int32_t* row = staged ? S.rows + w * R : P.graph + (int64_t)u * R;
        uint32_t* bf = P.bloom + q * P.bloom_words;
        int32_t* ids = fresh_ids[warp];
        // 1. Visited filter (4.4). The CPU reference marks every valid neighbour visited, also
        // those that will not enter the worklist; so does the filter. A row listing an id twice
        // in one 32-lane round could see both copies admitted by racing test-and-sets, so only
        // the lowest lane of equal ids tries.
        int m = 0;
        for (int t0 = 0; t0 < R; t0 += 32) {
            const int t = t0 + lane;
            int32_t v = t < R ? __ldg(row + t) : -1;
            if (v < 0 || v >= P.n) v = -1;
            const unsigned same =
                    __match_any_sync(kFullMask, v >= 0 ? (uint32_t)v : 0x80000000u | (uint32_t)lane);
            const bool fresh = v >= 0 && __ffs(same) - 1 == lane && bloom_insert(bf, P.bloom_mask, v);
            const unsigned bal = __ballot_sync(kFullMask, fresh);
            if (fresh) ids[m + __popc(bal & lanemask_lt())] = v;
            m += __popc(bal);
        }
        __syncwarp();
        // 2. Asymmetric distances (4.5), one candidate per lane; the ones below the worst
        // worklist entry (empty slots are worst) enter the worklist and are kept for step B.
        const uint64_t* list = P.list + q * P.list_stride;
        const uint64_t worst = plain(list[P.L - 1]);
        const float* table = P.table + q * P.table_stride;
        uint64_t* cand = P.cand + q * P.cand_stride;
        uint64_t best = kKeyNone;
        for (int c0 = 0; c0 < m; c0 += 32) {
            const int c = c0 + lane;
            uint64_t key = kKeyNone;
            if (c < m) {
                const int32_t v = ids[c];
                key = make_key(pq_distance(table, P.codes + (int64_t)v * P.M, P.M), (uint32_t)v);
            }
            const bool keep = key < worst;
            const unsigned bal = __ballot_sync(kFullMask, keep);
            if (keep) {
                cand[kept + __popc(bal & lanemask_lt())] = key;
                best = key < best ? key : best;
            }
            kept += __popc(bal);
        }
        best = warp_min(best);
        // 3. The old worklist's first unexpanded entry (empty slots carry the expanded bit).
        uint64_t first = kKeyNone;
        for (int b = 0; b < P.L; b += 32) {
            const int i = b + lane;
            const uint64_t v = i < P.L ? list[i] : kKeyNone;
            const unsigned bal = __ballot_sync(kFullMask, !(v & kExpanded));
            if (bal) {
                first = __shfl_sync(kFullMask, v, __ffs(bal) - 1);
                break;
            }
        }
        // 4. Eager selection (4.6): see the proof at the top of the file.
        next = best < first ? best : first;
    }
    if (lane == 0) {
        int32_t node = -1;
        if (next != kKeyNone) {
            node = (int32_t)(uint32_t)next;
            P.store[q * P.store_stride + nexp] = next;
            st->nexp = nexp + 1;
            atomicAdd(P.counters + S.iteration, 1);
        }
        st->node = node;
        st->next_key = next;
        st->ncand = kept;
        if (staged) S.next[w] = node;
    }
}

// 4.3, out-of-core: warp w files the staged full vector of live query q's node of slot t in the
// query's re-rank slot t. Every live query files one, also the ones whose search ended in step A
// of iteration t (their last expanded node). Only the re-rank reads the slots.
__device__ inline void file_vector(const Dev& P, const Step& S, int64_t w, int64_t q, int lane) {
    const float* src = S.vecs + w * P.d;
    float* dst = P.vec + q * P.vec_stride + (int64_t)S.iteration * P.d;
    if ((P.d & 3) == 0) {
        const float4* s4 = reinterpret_cast<const float4*>(src);
        float4* d4 = reinterpret_cast<float4*>(dst);
        for (int64_t j = lane; j < P.d / 4; j += 32) d4[j] = s4[j];
    } else {
        for (int64_t j = lane; j < P.d; j += 32) dst[j] = src[j];
    }
}

// The staged vectors on a stream of their own (graft_gpu_bang_store): one warp per vector.
__global__ void __launch_bounds__(kWarps * 32) bang_store_kernel(Dev P, Step S) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t w = (int64_t)blockIdx.x * kWarps + warp;
    if (w >= S.nlive) return;
    file_vector(P, S, w, S.live[w], lane);
}

__global__ void __launch_bounds__(kWarps * 32) bang_step_b_kernel(Dev P, Step S, int smem_stride) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t w = (int64_t)blockIdx.x * kWarps + warp;
    const bool staged = P.graph == nullptr;
    if (w >= (staged ? S.nlive : S.nq)) return;
    const int64_t q = staged ? (int64_t)S.live[w] : S.q0 + w;
    if (staged && S.vecs) file_vector(P, S, w, q, lane);  // the store fused in (few live queries)
    const State* st = P.state + q;
    const uint64_t next = st->next_key;
    if (next == kKeyNone) return;  // finished: its worklist no longer matters
    const int m = st->ncand, L = P.L;
    uint64_t* lst = reinterpret_cast<uint64_t*>(smem + (size_t)warp * smem_stride);
    uint64_t* cnd = lst + L;
    uint64_t* srt = cnd + P.R;
    uint64_t* list = P.list + q * P.list_stride;
    const uint64_t* cand = P.cand + q * P.cand_stride;
    for (int i = lane; i < L; i += 32) lst[i] = list[i];
    for (int i = lane; i < m; i += 32) cnd[i] = cand[i];
    __syncwarp();
    // 4.7: the candidates' keys are distinct (one admission per id), so a key's place in sorted
    // order is the number of smaller keys: m <= R compares per lane and candidate, no barriers
    // between rounds (BANG merges runs of doubling length; at R <= 256 a rank sort is as fast
    // and simpler).
    for (int i = lane; i < m; i += 32) {
        const uint64_t key = cnd[i];
        int r = 0;
        for (int j = 0; j < m; j++) r += cnd[j] < key;
        srt[r] = key;
    }
    __syncwarp();
    // 4.8 merge path: an element's place in the merged list is its index plus its rank in the
    // other list (old entries first among equal plain keys, which cannot occur but keeps places
    // distinct); only the first L places are kept. The chosen next node is marked expanded
    // where it lands (it survives the merge: proof at the top).
    for (int i = lane; i < L; i += 32) {
        const uint64_t v = lst[i];
        const int pos = i + count_below(srt, m, plain(v));
        if (pos < L) list[pos] = plain(v) == next ? (v | kExpanded) : v;
    }
    for (int j = lane; j < m; j += 32) {
        const uint64_t v = srt[j];
        const int pos = j + count_plain_le(lst, L, v);
        if (pos < L) list[pos] = v == next ? (v | kExpanded) : v;
    }
}

// Exact distance by a group of 8 lanes in graft_vec_dist's order (plugin/core/vec_dist.h): lane t
// sums dimensions t, t + 8, ... below the last multiple of 8, lane 0 the tail, then
// ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)). Squared L2, or minus the dot product.
// Every lane of the warp calls it; inactive groups pass active = false.
__device__ inline float exact_distance8(const float* __restrict__ q, const float* __restrict__ v,
                                        int64_t d, int gl, bool l2, bool active) {
    float s = 0.f;
    if (active) {
        const int64_t d8 = d & ~(int64_t)7;
        if (l2) {
            for (int64_t j = gl; j < d8; j += 8) {
                const float u = __fsub_rn(__ldg(q + j), __ldg(v + j));
                s = __fadd_rn(s, __fmul_rn(u, u));
            }
            if (gl == 0)
                for (int64_t j = d8; j < d; j++) {
                    const float u = __fsub_rn(__ldg(q + j), __ldg(v + j));
                    s = __fadd_rn(s, __fmul_rn(u, u));
                }
        } else {
            for (int64_t j = gl; j < d8; j += 8) s = __fsub_rn(s, __fmul_rn(__ldg(q + j), __ldg(v + j)));
            if (gl == 0)
                for (int64_t j = d8; j < d; j++) s = __fsub_rn(s, __fmul_rn(__ldg(q + j), __ldg(v + j)));
        }
    }
    // Float addition commutes bit for bit, so both lanes of a pair hold the same sum.
    s = __fadd_rn(s, __shfl_xor_sync(kFullMask, s, 4));  // lane t: s_t + s_{t+4}
    s = __fadd_rn(s, __shfl_xor_sync(kFullMask, s, 1));  // lane 0: a0 + a1, lane 2: a2 + a3
    s = __fadd_rn(s, __shfl_xor_sync(kFullMask, s, 2));  // lane 0: (a0 + a1) + (a2 + a3)
    return s;
}

__device__ inline int pow2_at_least(int n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

// One block per query. Shared memory: keys and slots of pow2(max_expand) entries.
__global__ void __launch_bounds__(kRerankThreads) bang_rerank_kernel(Dev P, Rerank r) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int64_t qi = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cap = pow2_at_least(P.max_expand);
    uint64_t* keys = reinterpret_cast<uint64_t*>(smem);
    int32_t* slots = reinterpret_cast<int32_t*>(keys + cap);
    const int nexp = P.state[qi].nexp;
    const int take = (r.rerank == 0 || r.rerank >= nexp) ? nexp : r.rerank;
    const uint64_t* store = P.store + qi * P.store_stride;
    const int n1 = pow2_at_least(nexp);
    for (int i = tid; i < n1; i += blockDim.x) {
        keys[i] = i < nexp ? store[i] : kKeyNone;
        slots[i] = i;
    }
    __syncthreads();
    // The `rerank` best by (PQ distance, id); the store is in expansion order.
    if (take < nexp) block_bitonic_sort<true>(keys, slots, n1);
    // Exact distances, 8 lanes per candidate (4 per warp, 32 per block at once).
    const float* q = P.xq + qi * P.d;
    const bool staged = P.graph == nullptr;
    const int gl = lane & 7;
    for (int c0 = warp * 4; c0 < take; c0 += (kRerankThreads / 32) * 4) {
        const int c = c0 + (lane >> 3);
        const bool active = c < take;
        uint32_t id = 0;
        const float* v = nullptr;
        if (active) {
            id = (uint32_t)keys[c];
            v = staged ? P.vec + qi * P.vec_stride + (int64_t)slots[c] * P.d
                       : P.x + (int64_t)id * P.d;
        }
        const float s = exact_distance8(q, v, P.d, gl, P.l2 != 0, active);
        __syncwarp();  // every lane of the group read keys[c] above; lane 0 overwrites it
        if (active && gl == 0) {
            const bool ok = !r.allowed || (r.allowed[id >> 5] >> (id & 31) & 1u);
            keys[c] = ok ? make_key(s, id) : kKeyNone;
        }
    }
    const int n2 = pow2_at_least(take);
    for (int i = take + tid; i < n2; i += blockDim.x) keys[i] = kKeyNone;
    __syncthreads();
    block_bitonic_sort<false>(keys, nullptr, n2);
    for (int64_t j = tid; j < r.k; j += blockDim.x) {
        float dist = P.l2 ? FLT_MAX : -FLT_MAX;
        int64_t id = -1;
        if (j < take && keys[j] != kKeyNone) {
            const float v = ordered_to_float((uint32_t)(keys[j] >> 32));
            dist = P.l2 ? v : -v;
            id = (int64_t)(uint32_t)keys[j];
        }
        r.D[qi * r.k + j] = dist;
        r.I[qi * r.k + j] = id;
    }
}

// ---- host side -----------------------------------------------------------------------------------

size_t round16(size_t b) { return (b + 15) & ~(size_t)15; }

bool out_of_core(const graft_gpu_bang_args* a) { return a->graph == nullptr; }

Layout make_layout(const graft_gpu_bang_args* a) {
    Layout l{};
    const size_t table_b = (size_t)a->M * kKsub * sizeof(float);
    const size_t list_b = round16((size_t)a->L * 8);
    const size_t bloom_b = ((size_t)1 << a->bloom_log2) / 8;
    const size_t cand_b = round16((size_t)a->R * 8);
    const size_t store_b = round16((size_t)a->max_expand * 8);
    const size_t vec_b = out_of_core(a) ? round16((size_t)a->max_expand * a->d * sizeof(float)) : 0;
    const size_t state_b = sizeof(State);
    l.table_stride = (int64_t)(table_b / sizeof(float));
    l.list_stride = (int64_t)(list_b / 8);
    l.bloom_words = (int64_t)(bloom_b / 4);
    l.cand_stride = (int64_t)(cand_b / 8);
    l.store_stride = (int64_t)(store_b / 8);
    l.vec_stride = (int64_t)(vec_b / sizeof(float));
    l.per_query = table_b + list_b + bloom_b + cand_b + store_b + vec_b + state_b;
    // Counters first, then each array; every piece starts 256-byte aligned.
    const size_t counters_b = align_up((size_t)a->max_expand * 4, 256);
    l.fixed = counters_b + 7 * 256;
    const size_t nq = (size_t)(a->nq > 0 ? a->nq : 0);
    size_t off = counters_b;
    auto take = [&](size_t per) {
        const size_t at = off;
        off = align_up(off + nq * per, 256);
        return at;
    };
    l.off_table = take(table_b);
    l.off_list = take(list_b);
    l.off_bloom = take(bloom_b);
    l.off_cand = take(cand_b);
    l.off_store = take(store_b);
    l.off_vec = take(vec_b);
    l.off_state = take(state_b);
    l.end = off;
    return l;
}

int check_args(const graft_gpu_bang_args* a, const char* fn) {
    if (!a || !a->centroids || !a->codes || !a->scratch || (a->nq > 0 && !a->xq))
        return gpu_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if ((a->graph == nullptr) != (a->x == nullptr))
        return gpu_fail(GRAFT_EINVAL, "%s: graph and x are both set (in-memory) or both NULL "
                        "(out-of-core)", fn);
    if (a->n < 1 || a->n > INT32_MAX || a->d < 1 || a->entry < 0 || a->entry >= a->n || a->R < 1 ||
        a->R > kMaxR || a->M < 1 || a->d % a->M || a->L < 1 || a->L > 1024 ||
        a->max_expand < a->L || a->max_expand > 8192 || a->bloom_log2 < 10 ||
        a->bloom_log2 > 24 || a->nq < 0 || a->nq > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL,
                        "%s: bad arguments (n=%lld d=%lld entry=%lld R=%d M=%d L=%d "
                        "max_expand=%d bloom_log2=%d nq=%lld)",
                        fn, (long long)a->n, (long long)a->d, (long long)a->entry, a->R, a->M, a->L,
                        a->max_expand, a->bloom_log2, (long long)a->nq);
    if ((uintptr_t)a->scratch & 255)
        return gpu_fail(GRAFT_EINVAL, "%s: scratch must be 256-byte aligned", fn);
    return GRAFT_OK;
}

int make_dev(const graft_gpu_bang_args* a, Dev* P, const char* fn) {
    GRAFT_GPU_TRY(check_args(a, fn));
    const Layout l = make_layout(a);
    char* base = static_cast<char*>(a->scratch);
    Dev p{};
    p.centroids = a->centroids;
    p.codes = a->codes;
    p.graph = a->graph;
    p.x = a->x;
    p.xq = a->xq;
    p.n = a->n;
    p.d = a->d;
    p.entry = a->entry;
    p.nq = a->nq;
    p.R = a->R;
    p.M = a->M;
    p.dsub = (int)(a->d / a->M);
    p.l2 = a->l2 != 0;
    p.L = a->L;
    p.max_expand = a->max_expand;
    p.bloom_mask = (1u << a->bloom_log2) - 1;
    p.counters = reinterpret_cast<int32_t*>(base);
    p.table = reinterpret_cast<float*>(base + l.off_table);
    p.list = reinterpret_cast<uint64_t*>(base + l.off_list);
    p.bloom = reinterpret_cast<uint32_t*>(base + l.off_bloom);
    p.cand = reinterpret_cast<uint64_t*>(base + l.off_cand);
    p.store = reinterpret_cast<uint64_t*>(base + l.off_store);
    p.vec = out_of_core(a) ? reinterpret_cast<float*>(base + l.off_vec) : nullptr;
    p.state = reinterpret_cast<State*>(base + l.off_state);
    p.table_stride = l.table_stride;
    p.list_stride = l.list_stride;
    p.bloom_words = l.bloom_words;
    p.cand_stride = l.cand_stride;
    p.store_stride = l.store_stride;
    p.vec_stride = l.vec_stride;
    *P = p;
    return GRAFT_OK;
}

// store: the step files staged vectors (graft_gpu_bang_store: live and vecs) instead of
// expanding (steps A and B, out-of-core: live, rows and next; step B files vecs too when set).
int make_step(const graft_gpu_bang_args* a, const graft_gpu_bang_step* s, Step* S, const char* fn,
              bool store = false) {
    if (!s) return gpu_fail(GRAFT_EINVAL, "%s: NULL step", fn);
    if (store && !out_of_core(a))
        return gpu_fail(GRAFT_EINVAL, "%s: in-memory mode stages no vectors", fn);
    if (s->q0 < 0 || s->nq < 0 || s->q0 + s->nq > a->nq || s->iteration < 0 ||
        s->iteration >= a->max_expand)
        return gpu_fail(GRAFT_EINVAL, "%s: bad step (q0=%lld nq=%lld of %lld, iteration=%d of %d)",
                        fn, (long long)s->q0, (long long)s->nq, (long long)a->nq, s->iteration,
                        a->max_expand);
    if (out_of_core(a) && (s->nlive < 0 || s->nlive > s->nq))
        return gpu_fail(GRAFT_EINVAL, "%s: %lld live queries of %lld", fn, (long long)s->nlive,
                        (long long)s->nq);
    if (out_of_core(a) && s->nlive > 0 &&
        (store ? !s->live || !s->vecs
               : !s->live || !s->next || (!s->rows && s->iteration + 1 < a->max_expand)))
        return gpu_fail(GRAFT_EINVAL, "%s: out-of-core step without its staged live list, %s "
                        "(nlive=%lld)", fn, store ? "vectors" : "rows or next array",
                        (long long)s->nlive);
    if (s->vecs && !out_of_core(a))
        return gpu_fail(GRAFT_EINVAL, "%s: in-memory mode stages no vectors", fn);
    if (s->vecs && ((uintptr_t)s->vecs & 15))
        return gpu_fail(GRAFT_EINVAL, "%s: staged vectors must be 16-byte aligned", fn);
    Step t{};
    t.q0 = s->q0;
    t.nq = s->nq;
    t.nlive = out_of_core(a) ? s->nlive : 0;
    t.iteration = s->iteration;
    t.live = s->live;
    t.rows = s->rows;
    t.vecs = s->vecs;
    t.next = s->next;
    *S = t;
    return GRAFT_OK;
}

int64_t step_warps(const graft_gpu_bang_args* a, const Step& S) {
    return out_of_core(a) ? S.nlive : S.nq;
}

int b_smem_stride(const graft_gpu_bang_args* a) { return (a->L + 2 * a->R) * 8; }

size_t rerank_smem(const graft_gpu_bang_args* a) {
    int cap = 1;
    while (cap < a->max_expand) cap <<= 1;
    return (size_t)cap * (sizeof(uint64_t) + sizeof(int32_t));
}

// Opts a kernel into more than 48 KiB of dynamic shared memory when it needs it.
template <typename K>
int smem_opt_in(K kern, size_t smem, int device, const char* fn, const char* what) {
    if (smem <= 48 * 1024) return GRAFT_OK;
    int optin = 0;
    GRAFT_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (smem > (size_t)optin)
        return gpu_fail(GRAFT_EINVAL, "%s: %s needs %zu bytes of shared memory per block, over the "
                        "device's %d", fn, what, smem, optin);
    GRAFT_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    return GRAFT_OK;
}

}  // namespace
}  // namespace graft

using namespace graft;

extern "C" void graft_gpu_bang_scratch_size(const graft_gpu_bang_args* a, size_t* per_query,
                                            size_t* fixed) {
    size_t pq = 0, fx = 0;
    if (a && a->L >= 1 && a->R >= 1 && a->M >= 1 && a->d >= 1 && a->max_expand >= 1 &&
        a->bloom_log2 >= 10 && a->bloom_log2 <= 24) {
        graft_gpu_bang_args b = *a;
        b.nq = 0;
        const Layout l = make_layout(&b);
        pq = l.per_query;
        fx = l.fixed;
    }
    if (per_query) *per_query = pq;
    if (fixed) *fixed = fx;
}

extern "C" int32_t* graft_gpu_bang_counters(const graft_gpu_bang_args* a) {
    return a ? static_cast<int32_t*>(a->scratch) : nullptr;
}

extern "C" int graft_gpu_bang_init(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                                   graft_gpu_stream stream) {
    const char* fn = "graft_gpu_bang_init";
    if (!ctx) return gpu_fail(GRAFT_EINVAL, "%s: NULL context", fn);
    Dev P;
    GRAFT_GPU_TRY(make_dev(a, &P, fn));
    if (a->nq == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    bang_init_kernel<<<(unsigned)a->nq, kKsub, 0, s>>>(P);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

extern "C" int graft_gpu_bang_step_a(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                                     const graft_gpu_bang_step* step, graft_gpu_stream stream) {
    const char* fn = "graft_gpu_bang_step_a";
    if (!ctx) return gpu_fail(GRAFT_EINVAL, "%s: NULL context", fn);
    Dev P;
    Step S;
    GRAFT_GPU_TRY(make_dev(a, &P, fn));
    GRAFT_GPU_TRY(make_step(a, step, &S, fn));
    const int64_t warps = step_warps(a, S);
    if (warps == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    bang_step_a_kernel<<<(unsigned)ceil_div(warps, kWarps), kWarps * 32, 0, s>>>(P, S);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

extern "C" int graft_gpu_bang_step_b(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                                     const graft_gpu_bang_step* step, graft_gpu_stream stream) {
    const char* fn = "graft_gpu_bang_step_b";
    if (!ctx) return gpu_fail(GRAFT_EINVAL, "%s: NULL context", fn);
    Dev P;
    Step S;
    GRAFT_GPU_TRY(make_dev(a, &P, fn));
    GRAFT_GPU_TRY(make_step(a, step, &S, fn));
    const int64_t warps = step_warps(a, S);
    if (warps == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    const int stride = b_smem_stride(a);
    const size_t smem = (size_t)kWarps * stride;  // at most 4 x (1024 + 512) x 8 = 48 KiB
    GRAFT_GPU_TRY(smem_opt_in(bang_step_b_kernel, smem, ctx->device, fn, "the merge"));
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    bang_step_b_kernel<<<(unsigned)ceil_div(warps, kWarps), kWarps * 32, smem, s>>>(P, S, stride);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

extern "C" int graft_gpu_bang_store(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                                    const graft_gpu_bang_step* step, graft_gpu_stream stream) {
    const char* fn = "graft_gpu_bang_store";
    if (!ctx) return gpu_fail(GRAFT_EINVAL, "%s: NULL context", fn);
    Dev P;
    Step S;
    GRAFT_GPU_TRY(make_dev(a, &P, fn));
    GRAFT_GPU_TRY(make_step(a, step, &S, fn, true));
    if (S.nlive == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    bang_store_kernel<<<(unsigned)ceil_div(S.nlive, kWarps), kWarps * 32, 0, s>>>(P, S);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

extern "C" int graft_gpu_bang_rerank(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                                     const graft_gpu_bang_rerank_args* r, graft_gpu_stream stream) {
    const char* fn = "graft_gpu_bang_rerank";
    if (!ctx || !r || !r->D || !r->I) return gpu_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    Dev P;
    GRAFT_GPU_TRY(make_dev(a, &P, fn));
    if (r->k < 1 || r->k > 1024 || r->rerank < 0 || (r->rerank > 0 && r->rerank < r->k))
        return gpu_fail(GRAFT_EINVAL, "%s: bad k=%lld or rerank=%d", fn, (long long)r->k,
                        r->rerank);
    if (a->nq == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    const size_t smem = rerank_smem(a);  // 96 KiB at max_expand = 8192
    GRAFT_GPU_TRY(smem_opt_in(bang_rerank_kernel, smem, ctx->device, fn, "the re-rank"));
    Rerank R{r->k, r->rerank, r->allowed, r->D, r->I};
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    bang_rerank_kernel<<<(unsigned)a->nq, kRerankThreads, smem, s>>>(P, R);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}

// ---- PQ encoding ----------------------------------------------------------------------------

namespace graft {

// Thread = (vector i, sub-space blockIdx.y): the first nearest of the sub-space's 256 centroids,
// squared L2 summed over the sub-vector in graft_pq_encode's order without FMA contraction, so the
// codes equal the CPU's bit for bit.
__global__ void pq_encode_kernel(const float* __restrict__ x, int64_t n, int d, int M, int ds,
                                 const float* __restrict__ cent, uint8_t* __restrict__ codes) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y;
    if (i >= n) return;
    const float* v = x + i * d + (int64_t)m * ds;
    const float* c = cent + (size_t)m * 256 * ds;
    int best = 0;
    float bd = 0;
    for (int j = 0; j < 256; j++) {
        float s = 0;
        for (int t = 0; t < ds; t++) {
            const float e = __fsub_rn(__ldg(v + t), __ldg(c + (size_t)j * ds + t));
            s = __fadd_rn(s, __fmul_rn(e, e));
        }
        if (j == 0 || s < bd) bd = s, best = j;
    }
    codes[i * M + m] = (uint8_t)best;
}

}  // namespace graft

extern "C" int graft_gpu_pq_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int d, int M,
                                   const float* centroids, uint8_t* codes, graft_gpu_stream stream) {
    const char* fn = "graft_gpu_pq_encode";
    if (!ctx || (n > 0 && (!x || !centroids || !codes)))
        return gpu_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (n < 0 || M < 1 || M > 65535 || d < 1 || d % M)
        return gpu_fail(GRAFT_EINVAL, "%s: n=%lld d=%d M=%d", fn, (long long)n, d, M);
    if (n == 0) return GRAFT_OK;
    GRAFT_GPU_TRY(ctx_enter(ctx));
    cudaStream_t s = stream ? reinterpret_cast<cudaStream_t>(stream) : ctx->stream;
    const int threads = 128;
    const dim3 grid((unsigned)((n + threads - 1) / threads), (unsigned)M);
    pq_encode_kernel<<<grid, threads, 0, s>>>(x, n, d, M, d / M, centroids, codes);
    GRAFT_CUDA_LAUNCH_CHECK();
    return GRAFT_OK;
}
