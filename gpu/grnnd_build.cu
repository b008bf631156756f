// GRNND: graph construction by GPU-parallel Relative NN-Descent.
//
// Paper: ../shared/papers/grnnd-gpu-relative-nn-descent.txt (Algorithms 3-6). One warp per vertex
// (Sec. 3.4). Each vertex owns two fixed pools of R slots (Sec. 3.5): the read pool holds its
// current candidates, the write pool collects the next round's. A slot is one 64-bit ordered key
// (common.cuh): the distance to the pool's owner in the high word, the neighbour id in the low
// word; an empty slot (kKeyNone) is the largest key, so "insert if closer than the farthest" is a
// compare-and-swap on the pool's maximum (Alg. 6) and no lock or allocation is ever needed.
//
// A round updates every vertex's list in parallel, read pool to write pools, in one of two orders:
//  - sorted (the default): Algorithm 2 (RNN-Descent's UPDATE_NEIGHBORS) by one warp, candidates
//    in ascending distance, each tested against the accepted closer ones, pairs of two old
//    entries skipped (NN-Descent's new/old flag). This is what the CPU reference does per round,
//    so the two build graphs of the same quality (tests/gpu/test_gpu_grnnd.c).
//  - random (GRNND's disordered propagation, Sec. 3.3, Alg. 4): `pairs` random pairs (ni, nj),
//    resolved in draw order; when d(ni, nj) < max(d(v, ni), d(v, nj)) the farther one moves to
//    the closer one's write pool (eq. 2). Measured on sift5k, Fashion-MNIST and 1M dense SIFT it
//    prunes more than Algorithm 2 (an entry can be pruned by a closer one that is pruned later),
//    giving sparser graphs with lower recall at equal L (bench/RESULTS.md), so it is the ablation,
//    not the default.
// Redirected candidates enter the target's write pool as new, accepted ones v's as old. Between
// outer iterations each vertex offers itself to its ceil(rho * |N_v|) closest neighbours
// (reverse-edge sampling, Sec. 3.6), all offers read from one snapshot.
//
// Two choices beyond the paper, both with a reason:
//  - Pair distances, two forms (`staged`): 1 = the warp stages its c <= R neighbour vectors in
//    shared memory 32 dimensions at a time and its lanes compute pair distances from there (the
//    drawn pairs in the random order; every pair that is not old-old, in 4 x 4 register blocks,
//    in the sorted order), so each vector crosses the memory system once per round. 0 = one
//    Alg. 5 warp distance per pair; in the sorted order only the pairs Algorithm 2 reads (each
//    candidate against the accepted closer entries, up to the first that prunes it), which on
//    1M dense SIFT is a few tens per vertex against 150-650 for all pairs. The plugin's default
//    takes 0 for the sorted order and 1 for the random order, the faster of each (measured in
//    bench/RESULTS.md).
//  - Give-back (as in the CPU reference, plugin/graph/rnnd.c): a redirected candidate that the closer
//    vertex's full pool refuses stays in v's list instead of being lost. Without it an outlier
//    can lose its last in-edge and become unreachable.
//
// Storages (issue 48): the kernels read the rows the index's storage keeps (graft_gpu_vectors),
// FP32, FP16 or SQ8 codes, decoded in registers as the walk decodes them, so a build of n vectors
// holds n x (4 d, 2 d or d) bytes of vectors beside its pools. The distances, and so the graph,
// are those of the decoded vectors (tests/gpu/test_gpu_grnnd.c holds them against the CPU
// reference run on the decoded vectors).
//
// Deterministic: the random draws (a hash of seed, round, vertex, pair). Not deterministic: the
// order in which concurrent warps insert into one pool, so two runs can differ in a few edges.
#include <cstdlib>

#include "common.cuh"

namespace graft {
namespace {

constexpr int kMaxR = 64;        // pool slots: two per lane
constexpr int kMaxPairs = 256;   // pairs drawn per vertex and round: at most eight per lane
constexpr int kChunk = 32;       // dimensions staged per step, one per lane
constexpr int kWarps = 4;        // warps per block: 4 x (64 x 33 floats) = 33.8 KB of tiles
constexpr int kMaxAllPairs = kMaxR * (kMaxR - 1) / 2;
constexpr int kWarpsSorted = 2;  // 2 x (tile 8.4 KB + pair sums 8.1 KB + list): 34 KB per block
constexpr uint8_t kNoPrune = 0xff;

enum InsertResult { kInserted, kPresent, kRefused };

__host__ __device__ inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Bit 31 of a pool key's id word is NN-Descent's "old" flag (the entry was already compared with
// the pool's other entries); ids are below 2^31. It sits below the distance, so it only orders
// entries of equal distance.
constexpr uint64_t kOld = 1ull << 31;
__device__ inline uint32_t key_id(uint64_t k) { return (uint32_t)k & 0x7fffffffu; }
__device__ inline bool key_old(uint64_t k) { return (k & kOld) != 0; }
__device__ inline float key_dist(uint64_t k) { return ordered_to_float((uint32_t)(k >> 32)); }
// A redirect record (target u, candidate w) in a consumed read-pool slot; never kKeyNone since
// u < 2^31 - 1.
__device__ inline uint64_t redirect_record(uint32_t u, uint32_t w) {
    return ((uint64_t)(u | 0x80000000u) << 32) | w;
}

// One term of a dissimilarity: squared L2, or minus the dot product (inner product graphs rank
// by -dot, as the CPU reference does).
template <bool L2>
__device__ inline float acc_term(float a, float b, float s) {
    if (L2) {
        const float t = a - b;
        return fmaf(t, t, s);
    }
    return fmaf(-a, b, s);
}

// The vectors a build reads (graft_gpu_vectors): rows of storage ST (kFP32, kFP16, kSQ8; the
// template parameter of every kernel that reads vectors, S being the paper's initial neighbours),
// decoded as the walk decodes them (common.cuh), SQ8 with its per-dimension code * scale + offset.
// One kernel family for every storage: the distances are those of the decoded vectors.
struct Source {
    const void* rows;
    const float* scale;   // SQ8: d floats (16-byte aligned when d % 16 == 0: decoded4's loads)
    const float* offset;  // SQ8: d floats, the same
};

// Row u as 16-byte chunks of W dimensions (d % W == 0: every row starts 16-byte aligned).
template <int ST>
__device__ inline const uint4* chunks(const Source& x, uint32_t u, int d) {
    return reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(x.rows) +
                                          (size_t)u * d * Width<ST>::bytes);
}

// Dimensions j .. j + 3 of a row from decode4's e: SQ8's affine step, nothing for the others.
template <int ST>
__device__ inline float4 decoded4(const Source& x, float4 e, int j) {
    if (ST != kSQ8) return e;
    const float4 s = __ldg(reinterpret_cast<const float4*>(x.scale + j));
    const float4 o = __ldg(reinterpret_cast<const float4*>(x.offset + j));
    return make_float4(fmaf(e.x, s.x, o.x), fmaf(e.y, s.y, o.y), fmaf(e.z, s.z, o.z),
                       fmaf(e.w, s.w, o.w));
}

// Dimension j of row u, decoded.
template <int ST>
__device__ inline float decoded1(const Source& x, uint32_t u, int d, int j) {
    const float v = load1<ST>(x.rows, u, d, j);
    return ST == kSQ8 ? fmaf(v, __ldg(x.scale + j), __ldg(x.offset + j)) : v;
}

// WARP_DISTANCE (Alg. 5) between rows a and b: lanes stride over the 16-byte chunks (over the
// dimensions when d % W != 0), shuffle reduction; every lane gets the result.
template <bool L2, int ST>
__device__ float warp_dist(const Source& x, uint32_t a, uint32_t b, int d, int lane) {
    constexpr int W = Width<ST>::W;
    float s = 0.f;
    if (d % W == 0) {
        const uint4* ra = chunks<ST>(x, a, d);
        const uint4* rb = chunks<ST>(x, b, d);
        for (int j = lane; j < d / W; j += 32) {
            const uint4 p = __ldg(ra + j), q = __ldg(rb + j);
#pragma unroll
            for (int t = 0; t < W / 4; t++) {
                const float4 u = decoded4<ST>(x, decode4<ST>(p, t), j * W + 4 * t);
                const float4 v = decoded4<ST>(x, decode4<ST>(q, t), j * W + 4 * t);
                s = acc_term<L2>(u.x, v.x, s);
                s = acc_term<L2>(u.y, v.y, s);
                s = acc_term<L2>(u.z, v.z, s);
                s = acc_term<L2>(u.w, v.w, s);
            }
        }
    } else {
        for (int j = lane; j < d; j += 32)
            s = acc_term<L2>(decoded1<ST>(x, a, d, j), decoded1<ST>(x, b, d, j), s);
    }
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(kFullMask, s, o);
    return s;
}

// WARP_INSERT (Alg. 6) into the pool of `owner`: ballot de-duplication by id, then the largest
// slot (empty slots are largest) is replaced by compare-and-swap when `key` is smaller. Pool
// reads bypass L1 (other SMs write these pools during the same launch). Returns kPresent for an
// id already there (or owner itself), kRefused when every slot holds a closer entry.
__device__ int warp_insert(uint64_t* pool, int R, uint32_t owner, uint64_t key, int lane) {
    const uint32_t id = key_id(key);
    if (id == owner) return kPresent;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint64_t mx = 0;
        int mi = -1;
        int dup = -1;  // slot holding id, if any
        uint64_t de = 0;
        if (lane < R) {
            const uint64_t e = __ldcg(reinterpret_cast<const unsigned long long*>(pool) + lane);
            if (e != kKeyNone && key_id(e) == id) dup = lane, de = e;
            mx = e;
            mi = lane;
        }
        if (lane + 32 < R) {
            const uint64_t e =
                __ldcg(reinterpret_cast<const unsigned long long*>(pool) + lane + 32);
            if (e != kKeyNone && key_id(e) == id) dup = lane + 32, de = e;
            if (e > mx) mx = e, mi = lane + 32;
        }
        if (__any_sync(kFullMask, dup >= 0)) {
            // As in the CPU reference, a copy stays old if either copy is old.
            if (dup >= 0 && key_old(key) && !key_old(de))
                atomicCAS(reinterpret_cast<unsigned long long*>(pool) + dup,
                          (unsigned long long)de, (unsigned long long)(de | kOld));
            return kPresent;
        }
        for (int o = 16; o; o >>= 1) {  // arg-max, ties to the smaller slot
            const uint64_t omx = __shfl_xor_sync(kFullMask, mx, o);
            const int omi = __shfl_xor_sync(kFullMask, mi, o);
            if (omi >= 0 && (mi < 0 || omx > mx || (omx == mx && omi < mi))) mx = omx, mi = omi;
        }
        if (key >= mx) return kRefused;
        unsigned long long old = 0;
        if (lane == 0)
            old = atomicCAS(reinterpret_cast<unsigned long long*>(pool) + mi,
                            (unsigned long long)mx, (unsigned long long)key);
        old = __shfl_sync(kFullMask, old, 0);
        if (old == mx) return kInserted;
        // another warp changed that slot between our read and the swap: look again
    }
    return kRefused;  // lost 64 races in a row: treat as full (the caller keeps the candidate)
}

// Copies v's valid pool entries, compacted, into the warp's shared list; returns their count.
__device__ int load_list(const uint64_t* __restrict__ pool, int R, uint64_t* list, int lane) {
    int c = 0;
    for (int i0 = 0; i0 < R; i0 += 32) {
        const int i = i0 + lane;
        const uint64_t e = i < R ? pool[i] : kKeyNone;
        const unsigned b = __ballot_sync(kFullMask, e != kKeyNone);
        if (e != kKeyNone) list[c + __popc(b & lanemask_lt())] = e;
        c += __popc(b);
    }
    __syncwarp();
    return c;
}

// Sorts 64 keys in shared memory ascending: bitonic network, one compare-exchange per lane and
// step (21 steps).
__device__ void warp_sort64(uint64_t* s, int lane) {
    __syncwarp();
    for (int k = 2; k <= kMaxR; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int i = (lane / j) * 2 * j + lane % j, l = i + j;
            const uint64_t a = s[i], b = s[l];
            if ((a > b) == ((i & k) == 0)) s[i] = b, s[l] = a;
            __syncwarp();
        }
}

// Pair p of vertex v in one round: two distinct list positions (c >= 2), packed i | j << 8.
__device__ inline uint32_t draw_pair(uint64_t seed, int64_t v, int p, int c) {
    const uint64_t h = mix64(seed ^ mix64((uint64_t)v * 0x2545F4914F6CDD1Dull + (uint64_t)p));
    const uint32_t i = (uint32_t)(h % (uint64_t)c);
    const uint32_t j = (i + 1u + (uint32_t)((h >> 32) % (uint64_t)(c - 1))) % (uint32_t)c;
    return i | (j << 8);
}

// Applies eq. (2) to pair (i, j) of v's list at distance dij, unless a member already left.
__device__ inline void resolve_pair(const uint64_t* list, int i, int j, float dij,
                                    uint64_t* __restrict__ pool_write, int R, uint64_t& dropped,
                                    int lane) {
    if (((dropped >> i) & 1) || ((dropped >> j) & 1)) return;
    const uint64_t ki = list[i], kj = list[j];
    if (!(dij < fmaxf(key_dist(ki), key_dist(kj)))) return;
    const bool i_close = ki < kj;
    const uint32_t close = key_id(i_close ? ki : kj), far = key_id(i_close ? kj : ki);
    const int far_pos = i_close ? j : i;
    if (close == far) {  // one id twice in a pool (an insertion race): drop the copy
        dropped |= 1ull << far_pos;
        return;
    }
    if (warp_insert(pool_write + (int64_t)close * R, R, close, make_key(dij, far), lane) != kRefused)
        dropped |= 1ull << far_pos;
}

// Survivors of v's list go to v's own write pool (Alg. 4, lines 11-15).
__device__ inline void keep_survivors(const uint64_t* list, int c, uint64_t dropped,
                                      uint64_t* __restrict__ pool_write, int64_t v, int R,
                                      int lane) {
    for (int i = 0; i < c; i++)
        if (!((dropped >> i) & 1))
            warp_insert(pool_write + v * R, R, (uint32_t)v, list[i], lane);
}

// INITIAL NEIGHBORS (Alg. 3, line 4): S random vertices other than v (every other vertex when
// n - 1 <= S). Draws may repeat; the pool de-duplicates. With `given` (n x K ids) the vertex
// starts from its row there instead (the oracle graph: the exact K nearest).
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarps * 32)
grnnd_init(Source x, int64_t n, int d, int R, int S, uint64_t seed,
           const int32_t* __restrict__ given, int K, uint64_t* __restrict__ pool) {
    const int lane = threadIdx.x & 31;
    const int64_t v = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    if (v >= n) return;
    uint64_t* p = pool + v * R;
    for (int i = lane; i < R; i += 32) p[i] = kKeyNone;
    __syncwarp();
    const bool all = !given && n - 1 <= S;
    const int draws = given ? K : all ? (int)(n - 1) : S;
    for (int s = 0; s < draws; s++) {
        int64_t u;
        if (given) {
            u = given[v * K + s];
            if (u < 0 || u == v) continue;
        } else if (all) {
            u = (v + 1 + s) % n;
        } else {
            u = (int64_t)(mix64(seed ^ mix64((uint64_t)v * 1315423911ull + (uint64_t)s)) %
                          (uint64_t)(n - 1));
            if (u >= v) u++;  // never v itself
        }
        const float dist = warp_dist<L2, ST>(x, (uint32_t)v, (uint32_t)u, d, lane);
        warp_insert(p, R, (uint32_t)v, make_key(dist, (uint32_t)u), lane);
    }
}

// Stages dimensions [j0, j0 + dj) of the c rows list[0..c), decoded, into tile (rows [c, rows)
// zeroed). With d % W == 0 each lane loads 16 bytes (W dimensions: 32 / W lanes per row slice,
// W rows per instruction) and every row of the chunk is in flight at once: the loads are
// latency-bound at the occupancy the tiles allow, so the count of dependent round trips is what
// matters.
template <int ST>
__device__ inline void stage_chunk(const Source& x, int d, int j0, int dj, const uint64_t* list,
                                   int c, int rows, float (*tile)[kChunk + 1], int lane) {
    constexpr int W = Width<ST>::W, kLanesPerRow = kChunk / W, kRowsPerLoad = 32 / kLanesPerRow;
    // Batches of 8 loads in flight per lane (32 FP32 rows; FP16's whole list in 8, SQ8's in 4):
    // half the registers of a batch of 16, which would cost the staged random-order kernel half
    // its occupancy.
    constexpr int kLoads = 8 * kRowsPerLoad <= kMaxR ? 8 : kMaxR / kRowsPerLoad;
    if (d % W == 0) {
        const int sub = lane / kLanesPerRow, c0 = (lane % kLanesPerRow) * W;
        for (int b0 = 0; b0 < rows; b0 += kLoads * kRowsPerLoad) {
            uint4 v[kLoads];
#pragma unroll
            for (int k = 0; k < kLoads; k++) {
                const int r = b0 + kRowsPerLoad * k + sub;
                if (r < c && c0 < dj)
                    v[k] = __ldg(chunks<ST>(x, key_id(list[r]), d) + (j0 + c0) / W);
            }
#pragma unroll
            for (int k = 0; k < kLoads; k++) {
                const int r = b0 + kRowsPerLoad * k + sub;
                if (r < rows && c0 < dj) {
#pragma unroll
                    for (int t = 0; t < W / 4; t++) {
                        const float4 w = r < c
                                ? decoded4<ST>(x, decode4<ST>(v[k], t), j0 + c0 + 4 * t)
                                : make_float4(0.f, 0.f, 0.f, 0.f);
                        float* o = &tile[r][c0 + 4 * t];
                        o[0] = w.x, o[1] = w.y, o[2] = w.z, o[3] = w.w;
                    }
                }
            }
        }
    } else if (lane < dj) {
#pragma unroll 8
        for (int r = 0; r < c; r++) tile[r][lane] = decoded1<ST>(x, key_id(list[r]), d, j0 + lane);
        for (int r = c; r < rows; r++) tile[r][lane] = 0.f;
    }
}

// Adds one staged chunk (dj dimensions of the c rows in tile) to the pair sums pd of every pair
// (i > j) that is not old-old, pd[i (i - 1) / 2 + j]. Each lane owns 4 x 4 blocks of the lower
// triangle: per dimension it reads 8 staged values for 16 pair terms, a quarter of the shared
// loads of one pair per lane. Blocks whose rows and columns are all old are skipped.
template <bool L2>
__device__ void pair_sums_4x4(const float (*tile)[kChunk + 1], int c, int dj, uint64_t old,
                              float* pd, int lane) {
    const int nb = (c + 3) / 4, T = nb * (nb + 1) / 2;
    for (int t = lane; t < T; t += 32) {
        int bi = (int)((sqrtf(8.f * (float)t + 1.f) - 1.f) * 0.5f);  // t = bi (bi + 1) / 2 + bj
        while (bi * (bi + 1) / 2 > t) bi--;
        while ((bi + 1) * (bi + 2) / 2 <= t) bi++;
        const int bj = t - bi * (bi + 1) / 2;
        const int i0 = 4 * bi, j0 = 4 * bj;
        if (((old >> i0) & 0xf) == 0xf && ((old >> j0) & 0xf) == 0xf) continue;
        float acc[4][4];
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int l = 0; l < 4; l++) acc[k][l] = 0.f;
#pragma unroll 4
        for (int jj = 0; jj < dj; jj++) {
            float a[4], b[4];
#pragma unroll
            for (int k = 0; k < 4; k++) a[k] = tile[i0 + k][jj], b[k] = tile[j0 + k][jj];
#pragma unroll
            for (int k = 0; k < 4; k++)
#pragma unroll
                for (int l = 0; l < 4; l++) acc[k][l] = acc_term<L2>(a[k], b[l], acc[k][l]);
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int l = 0; l < 4; l++) {
                const int i = i0 + k, j = j0 + l;
                if (i < c && j < i && !(((old >> i) & 1) && ((old >> j) & 1)))
                    pd[i * (i - 1) / 2 + j] += acc[k][l];
            }
    }
}

// UPDATE_NEIGHBORS (Alg. 2 of the paper, RNN-Descent as published) by one warp: the list sorted
// by distance; candidate i is accepted unless an accepted closer entry j has d(i, j) < d(v, i),
// in which case it is redirected to j's write pool (Alg. 2 lines 7-11). Pairs of two old
// entries were compared in an earlier round and are skipped, as in NN-Descent. All pair
// distances the decisions may need (i > j, not both old) are computed first from tiles of the
// neighbour vectors staged 32 dimensions at a time (lanes over 4 x 4 blocks of pairs), then the
// accept/redirect pass runs in order. Accepted entries go to v's write pool as old; a
// redirection that the target's full pool refuses goes back to v as old (the reference's
// give-back, done by grnnd_redirect).
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarpsSorted * 32)
grnnd_round_sorted(Source x, int64_t n, int d, int R, float alpha2,
                   uint64_t* __restrict__ pool_read, uint64_t* __restrict__ pool_write,
                   unsigned long long* __restrict__ counters) {
    __shared__ float tiles[kWarpsSorted][kMaxR][kChunk + 1];
    __shared__ float sums[kWarpsSorted][kMaxAllPairs];  // pair (i > j) at i (i - 1) / 2 + j
    __shared__ uint64_t lists[kWarpsSorted][kMaxR];
    __shared__ uint8_t prune_by[kWarpsSorted][kMaxR];    // list position that prunes i, or kNoPrune
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarpsSorted + w;
    if (v >= n) return;
    uint64_t* list = lists[w];
    float* pd = sums[w];
    float(*tile)[kChunk + 1] = tiles[w];
    const int c = load_list(pool_read + v * R, R, list, lane);
    for (int i = c + lane; i < kMaxR; i += 32) list[i] = kKeyNone;
    warp_sort64(list, lane);
    const int P = c * (c - 1) / 2;
    for (int p = lane; p < P; p += 32) pd[p] = 0.f;
    // Old entries as a bit mask (positions >= c count as old, so they are never computed).
    uint64_t old = c < kMaxR ? ~0ull << c : 0ull;
    for (int i0 = 0; i0 < c; i0 += 32) {
        const int i = i0 + lane;
        const unsigned b = __ballot_sync(kFullMask, i < c && key_old(list[i]));
        old |= (uint64_t)b << i0;
    }
    const int rows = (c + 3) & ~3;  // 4 x 4 blocks cover rows [0, rows)
    for (int j0 = 0; j0 < d && P > 0; j0 += kChunk) {
        const int dj = min(kChunk, d - j0);
        __syncwarp();
        stage_chunk<ST>(x, d, j0, dj, list, c, rows, tile, lane);
        __syncwarp();
        pair_sums_4x4<L2>(tile, c, dj, old, pd, lane);
    }
    __syncwarp();
    uint64_t accepted = 0;
    for (int i = 0; i < c; i++) {
        const uint64_t ki = list[i];
        const float di = key_dist(ki);
        const bool oi = key_old(ki);
        const float* row = pd + i * (i - 1) / 2;
        int by = -1;  // the closest accepted entry that prunes i
        for (int j0 = 0; j0 < i && by < 0; j0 += 32) {
            const int j = j0 + lane;
            const bool h = j < i && ((accepted >> j) & 1) && !(oi && key_old(list[j])) &&
                           alpha2 * row[j] < di;  // strict: identical vectors never prune each other
            const unsigned b = __ballot_sync(kFullMask, h);
            if (b) by = j0 + __ffs(b) - 1;
        }
        if (by < 0) accepted |= 1ull << i;
        if (lane == 0) prune_by[w][i] = by < 0 ? kNoPrune : (uint8_t)by;
    }
    __syncwarp();
    if (counters && lane == 0) {  // profile only: list size, pair distances, accepted, redirected
        const int n_old = __popcll(old & (c < kMaxR ? (1ull << c) - 1 : ~0ull));
        atomicAdd(counters + 0, (unsigned long long)c);
        atomicAdd(counters + 1, (unsigned long long)(P - n_old * (n_old - 1) / 2));
        atomicAdd(counters + 2, (unsigned long long)__popcll(accepted));
        atomicAdd(counters + 3, (unsigned long long)(c - __popcll(accepted)));
    }
    // No other warp writes v's write pool in this kernel: the accepted entries (old now) go there
    // with plain stores, and the redirections wait in v's consumed read slots for
    // grnnd_redirect, as (target, candidate) records.
    const int na = __popcll(accepted);
    for (int i = lane; i < kMaxR; i += 32) {
        if (i < c && ((accepted >> i) & 1))
            pool_write[v * R + __popcll(accepted & ((1ull << i) - 1))] = list[i] | kOld;
        if (i >= na && i < R) pool_write[v * R + i] = kKeyNone;
        if (i < R) {
            uint64_t rec = kKeyNone;
            if (i < c && prune_by[w][i] != kNoPrune) {
                const uint32_t u = key_id(list[prune_by[w][i]]), cand = key_id(list[i]);
                if (u != cand) rec = redirect_record(u, cand);  // else a duplicate id: drop it
            }
            pool_read[v * R + i] = rec;
        }
    }
}

// UPDATE_NEIGHBORS (Alg. 2), lazy variant (`staged = 0`): the same decisions as
// grnnd_round_sorted, but each candidate's distances are computed only to the accepted closer
// entries, in order, and only until the first that prunes it (one Alg. 5 warp distance each),
// as the CPU reference does. Measured on the H100 (GRAFT_GRNND_PROFILE) the all-pairs kernel
// computes 150-650 pair distances per vertex and round on 1M dense SIFT where Algorithm 2 needs
// a few tens. Little shared memory, so many warps per SM hide the loads.
// At least 8 blocks (32 warps) a multiprocessor: the kernel waits on its loads, and uncapped
// ptxas takes 72 registers (28 warps) where 64 fit without spills (sm_90, every storage).
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarps * 32, 8)
grnnd_round_lazy(Source x, int64_t n, int d, int R, float alpha2,
                 uint64_t* __restrict__ pool_read, uint64_t* __restrict__ pool_write,
                 unsigned long long* __restrict__ counters) {
    __shared__ uint64_t lists[kWarps][kMaxR];
    __shared__ uint8_t acc_pos[kWarps][kMaxR];  // list positions of the accepted entries, in order
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarps + w;
    if (v >= n) return;
    uint64_t* list = lists[w];
    const int c = load_list(pool_read + v * R, R, list, lane);
    for (int i = c + lane; i < kMaxR; i += 32) list[i] = kKeyNone;
    warp_sort64(list, lane);
    uint64_t accepted = 0;
    int na = 0;
    unsigned long long pairs = 0;
    uint64_t rec_lo = kKeyNone, rec_hi = kKeyNone;  // lane l holds the records of slots l, l + 32
    for (int i = 0; i < c; i++) {
        const uint64_t ki = list[i];
        const float di = key_dist(ki);
        const bool oi = key_old(ki);
        int by = -1;
        for (int a = 0; a < na && by < 0; a++) {
            const int j = acc_pos[w][a];
            if (oi && key_old(list[j])) continue;  // compared in an earlier round
            const float dij = warp_dist<L2, ST>(x, key_id(ki), key_id(list[j]), d, lane);
            pairs++;
            if (alpha2 * dij < di) by = j;  // strict: identical vectors never prune each other
        }
        if (by < 0) {
            accepted |= 1ull << i;
            if (lane == 0) acc_pos[w][na] = (uint8_t)i;
            na++;
            __syncwarp();
        } else {
            const uint32_t u = key_id(list[by]), cand = key_id(ki);
            const uint64_t rec = u != cand ? redirect_record(u, cand) : kKeyNone;  // else a duplicate
            if (lane == (i & 31)) {
                if (i < 32) rec_lo = rec;
                else rec_hi = rec;
            }
        }
    }
    if (counters && lane == 0) {
        atomicAdd(counters + 0, (unsigned long long)c);
        atomicAdd(counters + 1, pairs);
        atomicAdd(counters + 2, (unsigned long long)na);
        atomicAdd(counters + 3, (unsigned long long)(c - na));
    }
    // As in grnnd_round_sorted: accepted entries to v's write pool with plain stores, redirect
    // records to v's consumed read slots for grnnd_redirect.
    for (int i = lane; i < kMaxR; i += 32) {
        if (i < c && ((accepted >> i) & 1))
            pool_write[v * R + __popcll(accepted & ((1ull << i) - 1))] = list[i] | kOld;
        if (i >= na && i < R) pool_write[v * R + i] = kKeyNone;
        if (i < R) pool_read[v * R + i] = i < c && !((accepted >> i) & 1) ? (i < 32 ? rec_lo : rec_hi) : kKeyNone;
    }
}

// The second half of a sorted round: v's redirect records (candidate w pruned by accepted u)
// are inserted into u's write pool at distance d(u, w) (Alg. 2 lines 9-11); one that u's full
// pool refuses goes back to v's pool as an old entry (the reference's give-back). Little shared
// memory, so many warps per SM hide the latency of the atomic inserts.
// `inserted` (nullable) counts the redirections that entered their target pool: the round's new
// entries, which the convergence rule reads.
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarps * 32)
grnnd_redirect(Source x, int64_t n, int d, int R,
               const uint64_t* __restrict__ records, uint64_t* __restrict__ pool_write,
               unsigned long long* __restrict__ inserted) {
    const int lane = threadIdx.x & 31;
    const int64_t v = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    if (v >= n) return;
    unsigned long long added = 0;  // warp-uniform: warp_insert's result is the same in every lane
    for (int i0 = 0; i0 < R; i0 += 32) {
        const uint64_t e = i0 + lane < R ? records[v * R + i0 + lane] : kKeyNone;
        unsigned m = __ballot_sync(kFullMask, e != kKeyNone);
        while (m) {
            const int l = __ffs(m) - 1;
            m &= m - 1;
            const uint64_t r = __shfl_sync(kFullMask, e, l);
            const uint32_t u = (uint32_t)(r >> 32) & 0x7fffffffu, cand = (uint32_t)r;
            const float duw = warp_dist<L2, ST>(x, u, cand, d, lane);
            const int res = warp_insert(pool_write + (int64_t)u * R, R, u, make_key(duw, cand), lane);
            added += res == kInserted;
            if (res == kRefused) {
                const float dvw = warp_dist<L2, ST>(x, (uint32_t)v, cand, d, lane);
                warp_insert(pool_write + v * R, R, (uint32_t)v, make_key(dvw, cand) | kOld, lane);
            }
        }
    }
    if (inserted && lane == 0 && added) atomicAdd(inserted, added);
}

// UPDATE_NEIGHBORS_PARALLEL (Alg. 4), staged variant: pair distances from shared-memory tiles.
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarps * 32)
grnnd_round_staged(Source x, int64_t n, int d, int R, int P, uint64_t seed,
                   const uint64_t* __restrict__ pool_read, uint64_t* __restrict__ pool_write) {
    __shared__ float tiles[kWarps][kMaxR][kChunk + 1];  // +1: rows fall in different banks
    __shared__ uint64_t lists[kWarps][kMaxR];
    __shared__ uint16_t pairs[kWarps][kMaxPairs];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarps + w;
    if (v >= n) return;  // whole warps leave; the kernel has no block-wide barrier
    uint64_t* list = lists[w];
    const int c = load_list(pool_read + v * R, R, list, lane);
    uint64_t dropped = 0;  // bit i: list[i] was redirected away from v
    if (c >= 2 && P > 0) {
        for (int p = lane; p < P; p += 32) pairs[w][p] = (uint16_t)draw_pair(seed, v, p, c);
        float acc[kMaxPairs / 32];
#pragma unroll
        for (int t = 0; t < kMaxPairs / 32; t++) acc[t] = 0.f;
        float(*tile)[kChunk + 1] = tiles[w];
        for (int j0 = 0; j0 < d; j0 += kChunk) {
            const int dj = min(kChunk, d - j0);
            __syncwarp();  // the previous chunk is consumed (and the pairs are visible)
            stage_chunk<ST>(x, d, j0, dj, list, c, c, tile, lane);
            __syncwarp();
#pragma unroll
            for (int t = 0; t < kMaxPairs / 32; t++) {
                const int p = t * 32 + lane;
                if (p < P) {
                    const uint32_t pr = pairs[w][p];
                    const float* a = tile[pr & 255];
                    const float* b = tile[pr >> 8];
                    float s = acc[t];
                    if (dj == kChunk) {
#pragma unroll 8
                        for (int jj = 0; jj < kChunk; jj++) s = acc_term<L2>(a[jj], b[jj], s);
                    } else {
                        for (int jj = 0; jj < dj; jj++) s = acc_term<L2>(a[jj], b[jj], s);
                    }
                    acc[t] = s;
                }
            }
        }
        // Resolve in draw order; only pairs that pass the RNG test need the warp.
#pragma unroll
        for (int t = 0; t < kMaxPairs / 32; t++) {
            if (t * 32 >= P) break;
            const int p = t * 32 + lane;
            bool hit = false;
            if (p < P) {
                const uint32_t pr = pairs[w][p];
                hit = acc[t] < fmaxf(key_dist(list[pr & 255]), key_dist(list[pr >> 8]));
            }
            unsigned m = __ballot_sync(kFullMask, hit);
            while (m) {
                const int l = __ffs(m) - 1;
                m &= m - 1;
                const float dij = __shfl_sync(kFullMask, acc[t], l);
                const uint32_t pr = pairs[w][t * 32 + l];
                resolve_pair(list, pr & 255, pr >> 8, dij, pool_write, R, dropped, lane);
            }
        }
    }
    keep_survivors(list, c, dropped, pool_write, v, R, lane);
}

// UPDATE_NEIGHBORS_PARALLEL (Alg. 4) as published: one warp distance (Alg. 5) per pair, pairs
// whose member already left are skipped before their distance is computed.
template <bool L2, int ST>
__global__ void __launch_bounds__(kWarps * 32)
grnnd_round_warp(Source x, int64_t n, int d, int R, int P, uint64_t seed,
                 const uint64_t* __restrict__ pool_read, uint64_t* __restrict__ pool_write) {
    __shared__ uint64_t lists[kWarps][kMaxR];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarps + w;
    if (v >= n) return;
    uint64_t* list = lists[w];
    const int c = load_list(pool_read + v * R, R, list, lane);
    uint64_t dropped = 0;
    if (c >= 2)
        for (int p = 0; p < P; p++) {
            const uint32_t pr = draw_pair(seed, v, p, c);
            const int i = pr & 255, j = pr >> 8;
            if (((dropped >> i) & 1) || ((dropped >> j) & 1)) continue;
            const float dij = warp_dist<L2, ST>(x, key_id(list[i]), key_id(list[j]), d, lane);
            resolve_pair(list, i, j, dij, pool_write, R, dropped, lane);
        }
    keep_survivors(list, c, dropped, pool_write, v, R, lane);
}

// REVERSE EDGE SAMPLING (Sec. 3.6): v joins the pools (in dst, a copy of src) of its closest
// ceil(rho * |N_v|) neighbours in src.
__global__ void __launch_bounds__(kWarps * 32)
grnnd_reverse(int64_t n, int R, float rho, const uint64_t* __restrict__ src,
              uint64_t* __restrict__ dst) {
    __shared__ uint64_t lists[kWarps][kMaxR];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarps + w;
    if (v >= n) return;
    uint64_t* list = lists[w];
    const int c = load_list(src + v * R, R, list, lane);
    const int take = min(c, (int)ceilf(rho * (float)c));
    for (int i0 = 0; i0 < c; i0 += 32) {
        const int i = i0 + lane;
        int rank = 0;
        if (i < c)
            for (int j = 0; j < c; j++) rank += list[j] < list[i];
        unsigned sel = __ballot_sync(kFullMask, i < c && rank < take);
        while (sel) {
            const int src_lane = __ffs(sel) - 1;
            sel &= sel - 1;
            const uint64_t k = list[i0 + src_lane];
            const uint32_t u = key_id(k);
            warp_insert(dst + (int64_t)u * R, R, u, make_key(key_dist(k), (uint32_t)v), lane);
        }
    }
}

// Final graph: each pool sorted by (distance, id) with a warp bitonic sort, ids that occur twice
// (insertion races) kept once, -1 padding. graph may not alias pool.
__global__ void __launch_bounds__(kWarps * 32)
grnnd_extract(const uint64_t* __restrict__ pool, int64_t n, int R, int32_t* __restrict__ graph) {
    __shared__ uint64_t rows[kWarps][kMaxR];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    const int64_t v = (int64_t)blockIdx.x * kWarps + w;
    if (v >= n) return;
    uint64_t* s = rows[w];
    const uint64_t e0 = lane < R ? pool[v * R + lane] : kKeyNone;
    const uint64_t e1 = lane + 32 < R ? pool[v * R + lane + 32] : kKeyNone;
    s[lane] = e0 == kKeyNone ? e0 : e0 & ~kOld;  // ties by id alone, as in the reference
    s[lane + 32] = e1 == kKeyNone ? e1 : e1 & ~kOld;
    warp_sort64(s, lane);
    int out = 0;
    for (int i0 = 0; i0 < kMaxR; i0 += 32) {
        const int i = i0 + lane;
        const uint64_t e = s[i];
        bool keep = e != kKeyNone;
        for (int j = 0; keep && j < i; j++) keep = key_id(s[j]) != key_id(e);
        const unsigned b = __ballot_sync(kFullMask, keep);
        if (keep) graph[v * R + out + __popc(b & lanemask_lt())] = (int32_t)key_id(e);
        out += __popc(b);
    }
    for (int i = out + lane; i < R; i += 32) graph[v * R + i] = -1;
}

// GRAFT_GRNND_PROFILE=1 in the environment: device time per kernel kind, summed over the build,
// and per sorted round the mean list size, pair distances, accepted and redirected entries per
// vertex, printed to stderr (a diagnostic for bench/RESULTS.md; off by default, and it
// synchronizes after every launch, so its build times are not the benchmark's).
struct Profile {
    static constexpr int kKinds = 5;
    const char* names[kKinds] = {"init", "round (decide)", "round (redirect)", "reverse", "extract"};
    bool on = false;
    cudaStream_t st = nullptr;
    cudaEvent_t last = nullptr;
    double ms[kKinds] = {0, 0, 0, 0, 0};
    unsigned long long* counters = nullptr;  // device: the sorted rounds' per-vertex sums
    int64_t n = 0;
    explicit Profile(cudaStream_t s, int64_t nv) : on(getenv("GRAFT_GRNND_PROFILE") != nullptr), st(s), n(nv) {
        if (on && (cudaEventCreate(&last) != cudaSuccess || cudaEventRecord(last, st) != cudaSuccess))
            on = false;
        if (on && dev_malloc((void**)&counters, 4 * sizeof(unsigned long long)) != cudaSuccess) counters = nullptr;
        if (counters) cudaMemsetAsync(counters, 0, 4 * sizeof(unsigned long long), st);
    }
    // After a sorted round: prints per-vertex means of list size, pair distances computed,
    // accepted and redirected entries, and clears the sums.
    void round_counts(int round) {
        if (!counters) return;
        unsigned long long h[4] = {0, 0, 0, 0};
        if (cudaMemcpyAsync(h, counters, sizeof h, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
            cudaStreamSynchronize(st) != cudaSuccess)
            return;
        fprintf(stderr, "GRNND round %2d: per vertex c %.1f, pair distances %.1f, accepted %.1f, redirected %.1f\n",
                round, h[0] / (double)n, h[1] / (double)n, h[2] / (double)n, h[3] / (double)n);
        cudaMemsetAsync(counters, 0, sizeof h, st);
    }
    void mark(int kind) {  // the time since the previous mark goes to `kind`
        if (!on) return;
        cudaEvent_t e;
        if (cudaEventCreate(&e) != cudaSuccess) return;
        float t = 0;
        if (cudaEventRecord(e, st) == cudaSuccess && cudaEventSynchronize(e) == cudaSuccess &&
            cudaEventElapsedTime(&t, last, e) == cudaSuccess)
            ms[kind] += t;
        cudaEventDestroy(last);
        last = e;
    }
    ~Profile() {
        if (!on) return;
        fprintf(stderr, "GRNND profile (ms):");
        for (int k = 0; k < kKinds; k++) fprintf(stderr, " %s %.2f;", names[k], ms[k]);
        fprintf(stderr, "\n");
        cudaEventDestroy(last);
        if (counters) cudaFree(counters);
    }
};

// The convergence rule (graft/graph.h, delta): after each sorted round the count of inserted
// redirections comes back to the host (one 8-byte copy and a stream sync a round, a few
// microseconds against a round's milliseconds); a round at or under p->converged_below ends the
// outer iteration. The outer iterations end after one that ended in its first round, or whose
// first round (the reverse edges' effect) added at least p->churn_floor times what the previous
// outer iteration's first round added: the reverse edges then only churn.
template <bool L2, int ST>
int run_build(graft_gpu_ctx* ctx, Source x, int64_t n, int d, const graft_gpu_grnnd_params* p,
              uint64_t* pool[2], unsigned long long* inserted, int32_t** graph_dev) {
    const int R = p->R;
    const unsigned blocks = (unsigned)ceil_div(n, kWarps), threads = kWarps * 32;
    const size_t pool_bytes = (size_t)n * R * sizeof(uint64_t);
    cudaStream_t st = ctx->stream;
    Profile prof(st, n);
    grnnd_init<L2, ST><<<blocks, threads, 0, st>>>(x, n, d, R, p->S, p->seed, p->init, p->init_k,
                                                   pool[0]);
    GRAFT_CUDA_LAUNCH_CHECK();
    prof.mark(0);
    int cur = 0;
    uint64_t round = 0;
    const bool converge = p->sorted && p->converged_below >= 0;
    bool done = false, last_outer = false;
    unsigned long long first_added = 0;  // the previous outer iteration's first round's
    for (int t1 = 0; t1 < p->T1 && !done; t1++) {
        for (int t2 = 0; t2 < p->T2; t2++, round++) {
            const uint64_t seed = mix64(p->seed + 0x51ED27ull * (round + 1));
            if (p->sorted) {
                // Fills every write slot itself, leaves redirect records in the read pool.
                if (p->staged)
                    grnnd_round_sorted<L2, ST><<<(unsigned)ceil_div(n, kWarpsSorted), kWarpsSorted * 32,
                                                 0, st>>>(x, n, d, R, p->alpha2, pool[cur], pool[cur ^ 1],
                                                          prof.counters);
                else
                    grnnd_round_lazy<L2, ST><<<blocks, threads, 0, st>>>(x, n, d, R, p->alpha2, pool[cur],
                                                                         pool[cur ^ 1], prof.counters);
                GRAFT_CUDA_LAUNCH_CHECK();
                prof.mark(1);
                prof.round_counts((int)round);
                if (converge) GRAFT_CUDA_TRY(cudaMemsetAsync(inserted, 0, sizeof *inserted, st));
                grnnd_redirect<L2, ST><<<blocks, threads, 0, st>>>(x, n, d, R, pool[cur], pool[cur ^ 1],
                                                                   converge ? inserted : nullptr);
                GRAFT_CUDA_LAUNCH_CHECK();
                prof.mark(2);
                cur ^= 1;
                if (!converge) continue;
                unsigned long long added = 0;
                GRAFT_CUDA_TRY(cudaMemcpyAsync(&added, inserted, sizeof added, cudaMemcpyDeviceToHost, st));
                GRAFT_CUDA_TRY(cudaStreamSynchronize(st));
                if (prof.on || p->verbose || getenv("GRAFT_GRNND_ROUNDS")) {  // the rule's input
                    fprintf(p->verbose ? stdout : stderr, "GRNND round %d.%d: %llu new entries (%.5f of n R)\n",
                            t1, t2, added, added / ((double)n * R));
                    fflush(p->verbose ? stdout : stderr);
                }
                if (t2 == 0) {
                    last_outer = t1 > 0 && (double)added >= (double)p->churn_floor * (double)first_added;
                    first_added = added;
                }
                if ((int64_t)added <= p->converged_below) {
                    round++;
                    done = t1 > 0 && t2 == 0;
                    break;
                }
                continue;
            }
            // Clear the write pool, run the round, swap (Alg. 4, lines 17-18).
            GRAFT_CUDA_TRY(cudaMemsetAsync(pool[cur ^ 1], 0xff, pool_bytes, st));
            if (p->staged)
                grnnd_round_staged<L2, ST><<<blocks, threads, 0, st>>>(x, n, d, R, p->pairs, seed,
                                                                       pool[cur], pool[cur ^ 1]);
            else
                grnnd_round_warp<L2, ST><<<blocks, threads, 0, st>>>(x, n, d, R, p->pairs, seed,
                                                                     pool[cur], pool[cur ^ 1]);
            GRAFT_CUDA_LAUNCH_CHECK();
            prof.mark(1);
            cur ^= 1;
        }
        done = done || last_outer;
        if (t1 + 1 < p->T1 && !done && p->rho > 0.f) {
            GRAFT_CUDA_TRY(cudaMemcpyAsync(pool[cur ^ 1], pool[cur], pool_bytes,
                                           cudaMemcpyDeviceToDevice, st));
            grnnd_reverse<<<blocks, threads, 0, st>>>(n, R, p->rho, pool[cur], pool[cur ^ 1]);
            GRAFT_CUDA_LAUNCH_CHECK();
            prof.mark(3);
            cur ^= 1;
        }
    }
    if (p->rounds) *p->rounds = (int)round;
    // The other pool's memory holds the int32 graph (half its size): no extra device memory.
    *graph_dev = reinterpret_cast<int32_t*>(pool[cur ^ 1]);
    grnnd_extract<<<blocks, threads, 0, st>>>(pool[cur], n, R, *graph_dev);
    GRAFT_CUDA_LAUNCH_CHECK();
    prof.mark(4);
    return GRAFT_OK;
}

// run_build for the metric and the storage.
template <bool L2>
int run_build_of(graft_gpu_ctx* ctx, int storage, Source x, int64_t n, int d,
                 const graft_gpu_grnnd_params* p, uint64_t* pool[2], unsigned long long* inserted,
                 int32_t** g) {
    switch (storage) {
    case kFP16: return run_build<L2, kFP16>(ctx, x, n, d, p, pool, inserted, g);
    case kSQ8: return run_build<L2, kSQ8>(ctx, x, n, d, p, pool, inserted, g);
    default: return run_build<L2, kFP32>(ctx, x, n, d, p, pool, inserted, g);
    }
}

// The build between two events, then the graph to `graph` (host or device memory).
int build_timed(graft_gpu_ctx* ctx, const graft_gpu_vectors* v, int64_t n, int d,
                const graft_gpu_grnnd_params* p, uint64_t* pool[2], unsigned long long* inserted,
                int32_t* graph, cudaEvent_t ev[2], float* gpu_ms) {
    cudaStream_t st = ctx->stream;
    int32_t* g = nullptr;
    const Source x{v->rows, v->sq_scale, v->sq_offset};
    GRAFT_CUDA_TRY(cudaEventRecord(ev[0], st));
    GRAFT_GPU_TRY(p->l2 ? run_build_of<true>(ctx, v->storage, x, n, d, p, pool, inserted, &g)
                        : run_build_of<false>(ctx, v->storage, x, n, d, p, pool, inserted, &g));
    GRAFT_CUDA_TRY(cudaEventRecord(ev[1], st));
    GRAFT_CUDA_TRY(cudaMemcpyAsync(graph, g, (size_t)n * p->R * sizeof(int32_t), cudaMemcpyDefault, st));
    GRAFT_CUDA_TRY(cudaStreamSynchronize(st));
    if (gpu_ms) GRAFT_CUDA_TRY(cudaEventElapsedTime(gpu_ms, ev[0], ev[1]));
    return GRAFT_OK;
}

}  // namespace
}  // namespace graft

using namespace graft;

extern "C" int graft_gpu_grnnd_build(graft_gpu_ctx* ctx, const graft_gpu_vectors* x, int64_t n,
                                     int64_t d, const graft_gpu_grnnd_params* p, int32_t* graph,
                                     float* gpu_ms) {
    if (!ctx || !x || !x->rows || !p || !graph || n < 1 || d < 1 || d > INT32_MAX)
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_grnnd_build: bad arguments");
    // SQ8's 16-byte loads of the scales and offsets (d % 16 == 0) need them aligned.
    auto usable = [d](const float* q) {
        return q && (d % 16 || reinterpret_cast<uintptr_t>(q) % 16 == 0);
    };
    if (x->storage < kFP32 || x->storage > kSQ8 ||
        (x->storage == kSQ8 && (!usable(x->sq_scale) || !usable(x->sq_offset))))
        return gpu_fail(GRAFT_EINVAL, "graft_gpu_grnnd_build: storage %d (0 FP32, 1 FP16, 2 SQ8; "
                        "SQ8 needs its scales and offsets, 16-byte aligned when d %% 16 == 0)",
                        x->storage);
    if (p->R < 1 || p->R > kMaxR || p->S < 0 || p->T1 < 0 || p->T2 < 0 || p->pairs < 0 ||
        p->pairs > kMaxPairs || !(p->rho >= 0.f && p->rho <= 1.f))
        return gpu_fail(GRAFT_EINVAL,
                        "graft_gpu_grnnd_build: need R in [1, %d], pairs in [0, %d], S, T1, T2 >= 0, "
                        "rho in [0, 1] (got R=%d pairs=%d S=%d T1=%d T2=%d rho=%g)",
                        kMaxR, kMaxPairs, p->R, p->pairs, p->S, p->T1, p->T2, (double)p->rho);
    if (n > INT32_MAX)
        return gpu_fail(GRAFT_EUNSUPPORTED, "graft_gpu_grnnd_build: at most 2^31 - 1 vectors");
    GRAFT_GPU_TRY(ctx_enter(ctx));
    const size_t pool_bytes = align_up((size_t)n * p->R * sizeof(uint64_t), 256);
    void* scratch;
    // The two pools, then the convergence rule's counter.
    GRAFT_GPU_TRY(ctx_scratch(ctx, 2 * pool_bytes + 256, &scratch));
    uint64_t* pool[2] = {static_cast<uint64_t*>(scratch),
                         reinterpret_cast<uint64_t*>(static_cast<char*>(scratch) + pool_bytes)};
    auto* inserted = reinterpret_cast<unsigned long long*>(static_cast<char*>(scratch) + 2 * pool_bytes);
    cudaEvent_t ev[2] = {nullptr, nullptr};
    GRAFT_CUDA_TRY(cudaEventCreate(&ev[0]));
    int rc = cudaEventCreate(&ev[1]) == cudaSuccess
                 ? build_timed(ctx, x, n, (int)d, p, pool, inserted, graph, ev, gpu_ms)
                 : gpu_fail(GRAFT_ECUDA, "graft_gpu_grnnd_build: cudaEventCreate failed");
    cudaEventDestroy(ev[0]);
    if (ev[1]) cudaEventDestroy(ev[1]);
    return rc;
}
