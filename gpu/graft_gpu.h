/* graft GPU layer: the only header the core includes from gpu/.
 *
 * C-callable launchers over device pointers. Knows neither FAISS nor the plugin's objects; returns
 * graft status codes (graft/graft.h) and keeps the message of the last failure on the calling
 * thread in graft_gpu_last_error(). Every CUDA and cuBLAS call is checked.
 *
 * Memory and streams belong to a context (one per index and device), like FAISS's GpuResources:
 * a stream, a cuBLAS handle and a grow-only scratch arena capped by a memory budget, so hot paths
 * never call cudaMalloc once the arena has grown to the working size.
 */
#ifndef GRAFT_GPU_H
#define GRAFT_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_gpu_ctx graft_gpu_ctx;

const char* graft_gpu_last_error(void);

/* Number of visible CUDA devices (0 when the driver or a device is missing; never an error). */
int graft_gpu_device_count(void);

/* Total memory of `device` in bytes (0 when unknown). */
size_t graft_gpu_device_memory(int device);

/* Creates a context on `device` whose scratch arena may grow to `scratch_budget` bytes. */
int graft_gpu_ctx_create(int device, size_t scratch_budget, graft_gpu_ctx** out);
void graft_gpu_ctx_destroy(graft_gpu_ctx* ctx);
/* Allow TF32 tensor cores in the distance GEMM (off by default: exact FP32). */
void graft_gpu_ctx_set_tf32(graft_gpu_ctx* ctx, int allow);
/* Exact k-NN through TF32 tensor cores, still exact (off by default): candidates from a TF32
 * distance GEMM, a rigorous bound on each distance's error certifies that they hold the exact k
 * nearest, and those are re-ranked with FP32 distances; a query whose certificate fails is
 * searched again in FP32. Ignored while allow_tf32 is on (that one is approximate). A search
 * given FP16 codes (graft_gpu_knn_args.xb16) takes the certified FP16 path the same way. */
void graft_gpu_ctx_set_certified_tf32(graft_gpu_ctx* ctx, int on);
/* With `on`, the certified FP16 path fuses its first selection stage into its GEMM where that
 * applies (exact_knn.cu: rows of up to 256 halves, k small against the base), so no distance
 * matrix is written; graft_gpu_ctx_last_path then says 5. There a query whose certificate fails
 * is re-ranked over the ambiguous band of its candidates (graft_gpu_ctx_last_band), and only a
 * band too wide for that goes to FP32. */
void graft_gpu_ctx_set_fused(graft_gpu_ctx* ctx, int on);
/* Queries of the last graft_gpu_exact_knn call that the certificate sent back to FP32, or that
 * went to FP32 directly once most of the first tile's certificates had failed. */
int64_t graft_gpu_ctx_last_fallbacks(const graft_gpu_ctx* ctx);
/* The path of the last graft_gpu_exact_knn call: 1 FP32 GEMM, 2 certified TF32 (its failed
 * queries searched again in FP32: graft_gpu_ctx_last_fallbacks), 3 INT8, 4 certified FP16 (as
 * 2), 5 fused certified FP16; 0 before the first. */
int graft_gpu_ctx_last_path(const graft_gpu_ctx* ctx);
/* Of the last call's queries on the fused path (5), those whose certificate failed and that were
 * answered exactly all the same, by re-ranking the ambiguous band in FP32 (exact_knn.cu, "the
 * ambiguous band"): from their candidate list (*band) or after a second fused pass (*second; those
 * whose band overflowed that too are also counted by graft_gpu_ctx_last_fallbacks). */
void graft_gpu_ctx_last_band(const graft_gpu_ctx* ctx, int64_t* band, int64_t* second);
/* Largest device scratch the context has held so far, in bytes (for benchmarks). */
size_t graft_gpu_ctx_scratch_peak(const graft_gpu_ctx* ctx);

/* Device buffers, owned by the caller, made on the context's device. */
/* Tests only: the allocation fault injector. Every cudaMalloc, cudaHostAlloc and cublasCreate
 * (the handle's workspace) of gpu/ is counted from the last call; the nth (1-based) fails as
 * out of memory, 0 fails none. Process-wide. graft_gpu_fault_count: allocations counted since.
 * graft_gpu_mem_free: cudaMemGetInfo's free bytes on `device`, after a device synchronize. */
void graft_gpu_fault_inject(long long nth);
long long graft_gpu_fault_count(void);
int graft_gpu_mem_free(int device, size_t* free_bytes);

int graft_gpu_malloc(graft_gpu_ctx* ctx, void** dptr, size_t bytes);
void graft_gpu_free(graft_gpu_ctx* ctx, void* dptr);
/* Copies on the context's stream; they return when the copy is done. */
int graft_gpu_upload(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);
int graft_gpu_download(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);
int graft_gpu_copy_d2d(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);

/* out[i] = ||x_i||^2 for n rows of d floats (device pointers). */
int graft_gpu_row_norms(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, float* out);

/* dst row i = src row idx[i] for i < n, rows of d floats (device pointers; idx in src's rows).
 * Queued on the context's stream: later copies and launches on it see the rows. */
int graft_gpu_gather_rows(graft_gpu_ctx* ctx, const float* src, const int32_t* idx, int64_t n,
                          int64_t d, float* dst);

/* Exact k-NN: for each of the nq queries, the k nearest of the nb base vectors.
 * metric: 1 = L2 (squared distances, ascending; needs xb_norms), 0 = inner product (descending).
 * Distances come from a cuBLAS GEMM, selection from the quick multi-select (qms_select.cu).
 * Results follow FAISS: row-major nq x k, ties broken by smaller id; when fewer than k
 * candidates exist, the rest is label -1 with distance FLT_MAX (L2) or -FLT_MAX (IP).
 * exclude_self >= 0 makes query i skip base id exclude_self + i (the k-NN graph).
 * All pointers are device pointers; D and I are written on return. */
typedef struct graft_gpu_knn_args {
    const float* xb;        /* nb x d */
    const float* xb_norms;  /* nb, L2 only */
    int64_t nb;
    const float* xq;        /* nq x d */
    int64_t nq;
    int64_t d;
    int64_t k;
    int metric;
    int64_t exclude_self;
    float* D;               /* nq x k */
    int64_t* I;             /* nq x k */
    /* The exact INT8 path, taken when xb8 is set: every value of xb and xq is an integer in
     * [shift8 - 128, shift8 + 127] (the caller has checked; shift8 is 0 or 128), d <=
     * GRAFT_GPU_INT8_MAX_D, and xb8 (nb x graft_gpu_int8_row_bytes(d)) and xb8_term (nb) are
     * graft_gpu_int8_encode's of xb with that shift and this metric. xb8's allocation must hold
     * round_up(nb, 4) rows: the GEMM's m must be a multiple of 4, so it reads up to 3 rows past
     * nb (any contents; they are never ranked). The int8 GEMM's int32 dot
     * products and the integer norms give every distance exactly; returned distances are those
     * exact values rounded once to float. NULL: the FP32 or certified TF32 path. */
    const int8_t* xb8;
    const int32_t* xb8_term;
    int shift8;
    /* The certified FP16 path, taken when xb16 is set (and xb8 is not) under the certified
     * paths' conditions (graft_gpu_ctx_set_certified_tf32; L2 needs xb_norms; no exclude_self):
     * xb16 (nb x graft_gpu_fp16_row_halves(d) FP16 values) and xb16_scale (nb) are
     * graft_gpu_fp16_encode's of xb. Candidates come from an FP16 GEMM with FP32 accumulation
     * and FP16 output (half the distance matrix's bytes), are certified against a bound on its
     * error and re-ranked in FP32, as on the certified TF32 path. A cuBLAS that refuses the GEMM
     * sends this and later calls of the context to certified TF32. NULL: another path. */
    const uint16_t* xb16;
    const float* xb16_scale;
} graft_gpu_knn_args;
int graft_gpu_exact_knn(graft_gpu_ctx* ctx, const graft_gpu_knn_args* args);

/* ---- the exact INT8 path ---------------------------------------------------------------------
 * Integer data in [0, 255] (uint8 sets: SIFT, bvecs, u8bin, image pixels) or [-128, 127] is
 * stored once more as int8 codes x - shift (shift 128 or 0): ||q - b||^2 = ||q' - b'||^2 for
 * q' = q - s, b' = b - s, and q.b = q'.b' + s (sum q' + sum b') + s^2 d, all exact in integers.
 * Codes are rows of graft_gpu_int8_row_bytes(d) bytes (d rounded up to 16, zero padded: the
 * GEMM's inner dimension must be a multiple of 4, and 16-byte rows keep its loads aligned;
 * zeros add nothing to a dot product). int32 accumulation bounds d: |q'.b'| <= 2^14 d, and the
 * ranked values (below) stay under 1.5 * 2^15 d < 2^31. */
#define GRAFT_GPU_INT8_MAX_D 32768
static inline int64_t graft_gpu_int8_row_bytes(int64_t d) { return (d + 15) / 16 * 16; }

/* Codes of n device rows x (n x d floats, each an integer in [shift - 128, shift + 127]; the
 * caller has checked) into x8 (n x graft_gpu_int8_row_bytes(d) bytes, device) and each row's rank
 * term into term (n int32, device): metric 1 (L2) ||x'||^2, 0 (inner product) -shift * sum x'. */
int graft_gpu_int8_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, int shift, int metric,
                          int8_t* x8, int32_t* term);

/* ---- the certified FP16 path -----------------------------------------------------------------
 * Each vector x is stored as FP16 values of x / X, its inverse scale X a power of two with
 * ||x|| < X <= 2 ||x||, so no component overflows FP16 and no dot product of two coded vectors
 * exceeds 1 in magnitude; X restores the scale exactly. X stays within [2^-62, 2^62] (exact_knn.cu:
 * tinier vectors are scaled less, and a search with a vector over 2^60 in norm fails every
 * certificate, so it runs in FP32). Zero vectors have X = 1. Rows of
 * graft_gpu_fp16_row_halves(d) values (d rounded up to 8, zero padded: 16-byte rows for the
 * tensor-core GEMM's loads; zeros add nothing to a dot product). */
static inline int64_t graft_gpu_fp16_row_halves(int64_t d) { return (d + 7) / 8 * 8; }

/* Codes of n device rows x (n x d floats) into x16 (n x graft_gpu_fp16_row_halves(d) FP16 values,
 * device) and their inverse scales X into scale (n floats, device). */
int graft_gpu_fp16_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, uint16_t* x16,
                          float* scale);

/* Quick multi-select on its own (tests, benchmarks): for each of `rows` rows of `cols` floats
 * (row stride ld >= cols, ld % 4 == 0, 16-byte aligned), the k smallest values with their column
 * indices, sorted ascending (ties by smaller index). Missing entries (k > cols): index -1,
 * value FLT_MAX. Device pointers. */
int graft_gpu_select_k(graft_gpu_ctx* ctx, const float* vals, int64_t rows, int64_t cols,
                       int64_t ld, int64_t k, float* out_vals, int64_t* out_idx);

/* GRNND graph construction (paper: ../shared/papers/grnnd-gpu-relative-nn-descent.txt,
 * Algorithms 3-6; gpu/grnnd_build.cu). Names as in the paper. */
typedef struct graft_gpu_grnnd_params {
    int S;       /* random initial neighbours per vertex (Alg. 3, line 4) */
    int R;       /* pool capacity = maximum out-degree, 1..64 (Sec. 3.5) */
    int T1;      /* outer iterations (Alg. 3, line 6) */
    int T2;      /* inner rounds per outer iteration (Alg. 3, line 7) */
    float rho;   /* reverse-edge sampling ratio in [0, 1] (Sec. 3.6) */
    int sorted;  /* 1: Alg. 2 order (sorted candidates, new/old pairs); 0: random pairs (Sec. 3.3) */
    int pairs;   /* random order: pairs drawn per vertex and round, 0..256 */
    int staged;  /* 1 = pair distances from shared-memory tiles (sorted: all not-old-old pairs);
                    0 = Alg. 5 warp distances (sorted: only the pairs Algorithm 2 reads) */
    int l2;      /* 1: squared L2; 0: inner product (ranks by -dot) */
    uint64_t seed;
    int64_t converged_below; /* sorted order: an outer iteration's inner rounds stop after a round
                                that inserts at most this many redirections, and the outer
                                iterations after one that stopped in its first round; -1 = run
                                T1 x T2 rounds (no per-round read-back) */
    float churn_floor; /* with converged_below >= 0: the outer iterations also stop after one whose
                          first round inserted at least churn_floor x the previous one's first */
    int* rounds; /* nullable host pointer: gets the inner rounds run */
    const int32_t* init; /* nullable device pointer, n x init_k ids in [-1, n): each vertex's initial
                            neighbours instead of S random ones (-1 and the vertex itself skipped) */
    int init_k;
    float alpha2; /* sorted order: the pruning's slack squared (graft_rnnd_params.alpha); 1 = RNG */
    int verbose;  /* 1: a line a round on stdout (graft_rnnd_params.verbose) */
} graft_gpu_grnnd_params;

/* The vectors a GRNND build reads, as a storage keeps them (graft/storage.h's kinds; device
 * pointers): the graph is the one of the decoded vectors, decoded as the walk decodes them. */
typedef struct graft_gpu_vectors {
    int storage;            /* 0 FP32 (n x d floats), 1 FP16 (n x d halves), 2 SQ8 (n x d codes) */
    const void* rows;
    const float* sq_scale;  /* SQ8: d floats, vdiff / 255 (16-byte aligned when d % 16 == 0) */
    const float* sq_offset; /* SQ8: d floats, vmin + 0.5 vdiff / 255 (decoded = code scale +
                               offset; 16-byte aligned when d % 16 == 0) */
} graft_gpu_vectors;

/* Builds the graph of the n vectors x and copies it to graph (n x R int32, rows sorted by
 * distance, -1 padded; host or device memory). Device scratch: two pools of n x R 64-bit keys
 * from the context's arena, nothing else. gpu_ms (nullable) gets the device time of the build
 * itself (events around the kernels, copy of the graph excluded). */
int graft_gpu_grnnd_build(graft_gpu_ctx* ctx, const graft_gpu_vectors* x, int64_t n, int64_t d,
                          const graft_gpu_grnnd_params* params, int32_t* graph, float* gpu_ms);

/* Graph search (SONG-style, gpu/graph_search.cu): one warp per query, the query and its worklist
 * in shared memory. Device pointers throughout. */
typedef struct graft_gpu_search_args {
    const float* x;        /* n x d base vectors; NULL for a compressed storage whose codes are
                              the only copy (keep_fp32 = 0): no re-rank */
    int64_t n, d;
    const int32_t* graph;  /* n x R neighbour ids, -1 padded */
    int R;                 /* 1..256 */
    int64_t entry;         /* start vertex */
    const float* xq;       /* nq x d queries; a query holding NaN or Inf is not walked: its row of
                              I reads GRAFT_GPU_BAD_QUERY, of D NaN (the caller reports it) */
    int64_t nq;
    int64_t k;             /* 1 <= k <= L */
    int L;                 /* worklist size, 1..1024 */
    int probes;            /* vertices expanded per iteration, 1..8 */
    int visited;           /* 0 = shared-memory hash, 1 = Bloom filter (global, scratch) */
    int merge;             /* 0 = sort + merge path, 1 = one-by-one insertion */
    int bloom_log2;        /* Bloom bits per query = 2^bloom_log2, 10..24 */
    int l2;                /* 1 = squared L2, 0 = inner product (results: dot, descending) */
    const uint32_t* allowed; /* NULL or n-bit filter bitmap (bit i of word i/32) */
    uint32_t* bloom;       /* scratch (Bloom filters, one a walk; the multi mode's walk results):
                              graft_gpu_graph_search_scratch bytes, 16-byte aligned; NULL when
                              that is 0 */
    float* D;              /* nq x k */
    int64_t* I;            /* nq x k */
    int64_t* counters;     /* NULL or 2 int64 (zeroed by the caller): distances, iterations */
    /* What the walk reads (graft/storage.h's kinds): 0 FP32 (x), 1 FP16 or 2 SQ8 (codes, n rows
     * of 2 d or d bytes). A compressed walk ends with exact re-ranking from x of the final
     * worklist's first `rerank` entries (0 = all; with a filter, of the k allowed results);
     * without x, with none. */
    int storage;
    const void* codes;
    const float* sq_scale;  /* SQ8: d floats, vdiff / 255 */
    const float* sq_offset; /* SQ8: d floats, vmin + 0.5 vdiff / 255 (decoded = code scale + offset) */
    int rerank;
    /* Walks a query (the mode; issue 47): 0 or 1, one walk a query, a block of four warps when
     * every walk of the launch can hold a block resident at once, else a warp (the single mode);
     * W in 2..64, W walks a query (the multi mode, for batches under a wave): walk 0 is the
     * single walk from `entry`, walk w > 0 starts from up to 32 vertices of the query's hash
     * (graft_walk_seed); each has its own visited set and worklist of L, and their k best are
     * merged (repeats dropped): deterministic, never worse than walk 0 alone, equal to the CPU
     * reference's multi mode (plugin/graph/graph.c). Needs W k <= 4096 and the scratch buffer
     * (graft_gpu_graph_search_scratch). */
    int walks;
} graft_gpu_search_args;

/* The ids of a query that holds NaN or Inf (the walk checks each query as it reads it). */
#define GRAFT_GPU_BAD_QUERY (-2)

/* The multi mode's starts, one definition for the GPU walk and its CPU reference (graph.c):
 * walk w > 0 of a query starts from graft_walk_seed(h, w, j, n), j < min(L, 32), h the query's
 * hash: the sum over its dimensions j of graft_mix64(j << 32 | the float's bits), a sum so
 * that any order of adding gives it. A query's starts follow from the query alone, whatever its
 * place in a batch, so a query gets the same results in any batch of the same walks a query. */
#ifdef __CUDACC__
#define GRAFT_HOST_DEVICE __host__ __device__
#else
#define GRAFT_HOST_DEVICE
#endif
/* splitmix64's finalizer of h + the golden ratio (also the Bloom filter's hash, common.cuh) */
static inline GRAFT_HOST_DEVICE uint64_t graft_mix64(uint64_t h) {
    h += 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}
#define GRAFT_WALK_SEEDS 32 /* starts of a walk > 0, at most */
static inline GRAFT_HOST_DEVICE uint32_t graft_walk_seed(uint64_t query_hash, int walk, int j, int64_t n) {
    const uint64_t h = graft_mix64(query_hash + (uint64_t)(walk * GRAFT_WALK_SEEDS + j));
    return (uint32_t)(((h >> 32) * (uint64_t)n) >> 32); /* n <= INT32_MAX */
}

/* Bytes of the `bloom` scratch buffer for args->nq queries: the Bloom filters (visited = 1, or
 * walks >= 2) and the multi mode's per-walk results; 0 for one walk a query with the hash. */
size_t graft_gpu_graph_search_scratch(const graft_gpu_search_args* args);

/* The multi mode's walks a query for nq queries of k results (the auto rule), given the wave
 * (graft_gpu_graph_search_resident: one-warp walks resident at once): 1 when the batch fills
 * half a wave or more, else enough walks to fill a wave, of blocks of four warps while two or
 * more a query fit resident, at most 32 and at most 4096 / k. 1 when the wave is unknown (0). */
int graft_gpu_graph_search_walks(int64_t wave, int64_t nq, int64_t k);

/* Queries the device holds resident at once (a wave) in a search with these arguments: its
 * multiprocessors x the blocks each holds (the walk's register bound, or its shared memory at
 * large L) x queries a block. Callers size their kernels in waves; 0 when the device is unknown. */
int64_t graft_gpu_graph_search_resident(graft_gpu_ctx* ctx, const graft_gpu_search_args* args);

/* Runs the search; returns when D and I are written. gpu_ms (nullable): kernel time. */
int graft_gpu_graph_search(graft_gpu_ctx* ctx, const graft_gpu_search_args* args, float* gpu_ms);

/* ---- insertion into a graph (gpu/graph_insert.cu) ---------------------------------------------
 * One round of graft_graph_insert_round_cpu (graft/graph.h, "A living graph") on the device, equal
 * to it given the same candidates (distances summed in graft_vec_dist's order, without FMA):
 * the rows of the m new vertices from their candidates (RNG prune; one warp a vertex), their
 * offers sorted by (target, distance, source) (CUB radix sort), each target row updated by one
 * warp (re-pruned when the offers overflow it), then the in-edge of the new vertices no row took
 * (one warp, in vertex order). Device pointers throughout; on the context's stream. */
typedef struct graft_gpu_insert_args {
    const float* x;         /* (n + m) x d vectors: the graph's, then the new ones */
    int64_t n, m, d;
    int32_t* graph;         /* (n + m) x R rows: [0, n) the graph (target rows change), [n, n + m)
                               written */
    int R;                  /* 1..256 */
    const int64_t* cand;    /* m x C candidate ids (ids outside [0, n + m), the vertex itself,
                               removed ones and repeats are skipped) */
    int C;                  /* 1..1024 */
    const int64_t* cand_round; /* NULL, or m x K more: the round's own k-NN, ids j in [0, m) standing
                               for n + j (graft_gpu_exact_knn's over the new vectors) */
    int K;                  /* 0..256 */
    const uint32_t* live;   /* NULL, or an (n + m)-bit bitmap of the vertices that may gain edges */
    int l2;                 /* 1 squared L2, 0 inner product (ranked by -dot) */
    void* scratch;          /* graft_gpu_graph_insert_scratch(m, R, C) bytes, 256-byte aligned */
} graft_gpu_insert_args;
/* Counters, added to: offers made, rows re-pruned, new vertices linked from their nearest. */
typedef struct graft_gpu_insert_counts {
    int64_t offers, repruned, forced;
} graft_gpu_insert_counts;
size_t graft_gpu_graph_insert_scratch(int64_t m, int R, int C);
/* Returns when the rows are written (and counts added). */
int graft_gpu_graph_insert(graft_gpu_ctx* ctx, const graft_gpu_insert_args* args,
                           graft_gpu_insert_counts* counts);

/* ---- streams, events, page-locked host memory (gpu/streams.cu) ------------------------------
 * C handles for the host pipelines that overlap host work with device work (plugin/graph/bang_gpu.c).
 * A NULL stream is the context's own stream (the one graft_gpu_upload & co. use). Each call
 * makes the context's device current on the calling thread. */
typedef struct graft_gpu_stream_handle* graft_gpu_stream; /* a cudaStream_t */
typedef struct graft_gpu_event_handle* graft_gpu_event;   /* a cudaEvent_t */

/* A new non-blocking stream on ctx's device; destroy waits for its work first. */
int graft_gpu_stream_create(graft_gpu_ctx* ctx, graft_gpu_stream* out);
void graft_gpu_stream_destroy(graft_gpu_ctx* ctx, graft_gpu_stream s);
int graft_gpu_stream_sync(graft_gpu_ctx* ctx, graft_gpu_stream s);
/* timing != 0: the event can be timed (graft_gpu_event_elapsed_ms); 0: ordering only. */
int graft_gpu_event_create(graft_gpu_ctx* ctx, int timing, graft_gpu_event* out);
void graft_gpu_event_destroy(graft_gpu_ctx* ctx, graft_gpu_event e);
int graft_gpu_event_record(graft_gpu_ctx* ctx, graft_gpu_event e, graft_gpu_stream s);
/* Blocks the calling host thread until the work before the event's last record is done. */
int graft_gpu_event_sync(graft_gpu_ctx* ctx, graft_gpu_event e);
/* Work queued on s after this call waits for e (no host blocking). */
int graft_gpu_stream_wait(graft_gpu_ctx* ctx, graft_gpu_stream s, graft_gpu_event e);
int graft_gpu_event_elapsed_ms(graft_gpu_ctx* ctx, graft_gpu_event start, graft_gpu_event end,
                               float* ms);
/* Page-locked host memory (cudaHostAlloc, portable, mapped): copies from and to it are
 * asynchronous, and kernels may read and write it through graft_gpu_host_device_ptr (each access
 * crosses PCIe: for small results the host reads at once). Shortage is GRAFT_ENOMEM (host memory). */
int graft_gpu_host_alloc(graft_gpu_ctx* ctx, void** out, size_t bytes);
/* The device's address of page-locked memory from graft_gpu_host_alloc (the same value under
 * unified addressing). Kernel writes to it are visible to the host once an event recorded after
 * the kernel has completed. */
int graft_gpu_host_device_ptr(graft_gpu_ctx* ctx, void* host, void** out);
void graft_gpu_host_free(graft_gpu_ctx* ctx, void* p);
/* Queues a copy in any direction (unified addressing) or a memset on s and returns; host memory
 * must be page-locked for the copy to be asynchronous, and must stay untouched until an event
 * recorded after the copy has completed. */
int graft_gpu_copy_async(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes,
                         graft_gpu_stream s);
int graft_gpu_memset_async(graft_gpu_ctx* ctx, void* dst, int value, size_t bytes,
                           graft_gpu_stream s);
/* graft_gpu_graph_search queued on s, untimed: returns once the kernel is queued (D and I are
 * written when s reaches it). The caller keeps args' buffers alive and untouched until then. */
int graft_gpu_graph_search_async(graft_gpu_ctx* ctx, const graft_gpu_search_args* args,
                                 graft_gpu_stream s);

/* ---- BANG search (gpu/bang_search.cu) --------------------------------------------------------
 * ../shared/papers/bang-billion-scale-single-gpu.txt, Algorithm 2 with the kernels of sections
 * 4.2-4.9: best-first search on PQ (asymmetric) distances, one warp per query, the per-query
 * state (PQ table, worklist, Bloom filter, candidates, re-rank store) in a device scratch buffer
 * that lives across launches, then exact re-ranking. The semantics are graft/bang.h's. The host
 * drives the iterations (plugin/graph/bang_gpu.c):
 *
 *   graft_gpu_bang_init                       PQ tables, Bloom filters, worklists = {entry},
 *                                             the entry expanded (slot 0)
 *   for iteration t = 0, 1, ...:              until no query has a node to expand
 *       [out-of-core: host gathers the rows and vectors of the queries' current nodes]
 *       graft_gpu_bang_step_a                 filter + PQ distances of the current node's row;
 *                                             eager choice of the next node (BANG 4.6)
 *       [out-of-core: next nodes to the host]
 *       graft_gpu_bang_step_b                 sort the new candidates, merge-path them into the
 *                                             worklist (BANG 4.7-4.8)
 *       [out-of-core: graft_gpu_bang_store    the current nodes' vectors, staged by the host, to
 *                                             the re-rank store, on another stream]
 *   graft_gpu_bang_rerank                     exact distances of the best expanded nodes, top k
 *
 * Every query expands one node per iteration, so in iteration t every query still searching
 * expands its node of slot t (the entry is slot 0): the store of expanded nodes and the staged
 * vectors need no per-query counters from the host. Launchers only queue work on `stream` (NULL
 * = the context's stream) and return; all pointers are device pointers. */
typedef struct graft_gpu_bang_args {
    /* resident data */
    const float* centroids;  /* M x 256 x dsub PQ codebooks (graft/pq.h layout) */
    const uint8_t* codes;    /* n x M PQ codes */
    const int32_t* graph;    /* in-memory mode: n x R neighbour ids (-1 padded); NULL out-of-core
                                (the host stages rows each step) */
    const float* x;          /* in-memory mode: n x d base vectors; NULL out-of-core (the host
                                stages the vectors of expanded nodes each step) */
    int64_t n, d, entry;     /* n <= 2^31 - 1, entry in [0, n) */
    int R;                   /* graph degree, 1..256 */
    int M;                   /* sub-quantizers, dividing d */
    int l2;                  /* 1: squared L2; 0: inner product (ranks by -dot) */
    /* search parameters (graft_bang_params) */
    int L;                   /* worklist width, 1..1024 */
    int max_expand;          /* expansions per query at most, L..8192 */
    int bloom_log2;          /* Bloom filter bits per query = 2^bloom_log2, 10..24 */
    /* the batch */
    int64_t nq;              /* queries; their state lives in scratch */
    const float* xq;         /* nq x d queries */
    void* scratch;           /* graft_gpu_bang_scratch_size bytes, 256-byte aligned */
} graft_gpu_bang_args;

/* Scratch bytes of a batch: *fixed + nq x *per_query (an upper bound, alignment included).
 * Per query: PQ table M x 256 x 4, worklist L x 8, Bloom filter 2^bloom_log2 / 8, candidates
 * R x 8, re-rank store max_expand x 8, 32 bytes of state, and out-of-core the re-rank vectors
 * max_expand x d x 4 (BANG 4.3: copied with each step, read once by the re-rank). */
void graft_gpu_bang_scratch_size(const graft_gpu_bang_args* a, size_t* per_query, size_t* fixed);

/* Device counters of the batch (max_expand int32, zeroed by init): counters[t] = queries whose
 * step A of iteration t chose a node to expand, i.e. 0 once every query of the launched range
 * has finished. The in-memory driver polls them instead of the per-query next nodes. */
int32_t* graft_gpu_bang_counters(const graft_gpu_bang_args* a);

/* One step of the queries [q0, q0 + nq) of the batch (a half batch on its own stream). */
typedef struct graft_gpu_bang_step {
    int64_t q0, nq;          /* in-memory: every query of the range still searching takes part */
    int iteration;           /* t: the step expands each live query's node of slot t */
    /* out-of-core only (args->graph NULL); all device addresses (next may be mapped pinned
       host memory: graft_gpu_host_device_ptr) */
    const int32_t* live;     /* nlive batch query indices in [q0, q0 + nq): the queries still
                                searching */
    int64_t nlive;
    const int32_t* rows;     /* nlive x R: row w = the neighbours of live[w]'s node of slot t
                                (unread and may be NULL when t + 1 == max_expand: nothing is
                                expanded after slot t) */
    const float* vecs;       /* graft_gpu_bang_store's, and step B's when not NULL (step A
                                ignores it): nlive x d, 16-byte aligned: the full vector of that
                                node, for the query's re-rank store (slot t) */
    int32_t* next;           /* steps A and B's: nlive, written by step A: live[w]'s node of slot
                                t + 1, or -1 when the query has finished */
} graft_gpu_bang_step;

/* PQ tables (one block per query, BANG 4.2), cleared Bloom filters and counters, worklists
 * holding the expanded entry, which is slot 0 of every query. */
int graft_gpu_bang_init(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a, graft_gpu_stream stream);
/* Step A: Bloom filter test-and-set and PQ distances of the current node's neighbours (BANG
 * 4.4-4.5), the ones that enter the worklist kept as candidates, and the eager choice of the
 * next node (4.6), recorded in the re-rank store. */
int graft_gpu_bang_step_a(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                          const graft_gpu_bang_step* s, graft_gpu_stream stream);
/* Step B: sorts the candidates and merges them into the worklist (BANG 4.7-4.8), marking the
 * chosen next node expanded. Queued after step A of the same iteration on the same stream.
 * Out-of-core with s->vecs set, it also does graft_gpu_bang_store's filing (one launch fewer,
 * for vectors that came on the step's own stream). */
int graft_gpu_bang_step_b(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                          const graft_gpu_bang_step* s, graft_gpu_stream stream);
/* Out-of-core: files the staged vectors (s->live, s->vecs, s->nlive of iteration t) in the live
 * queries' re-rank store, slot t (BANG 4.3). Touches nothing the steps read, so it may run on any
 * stream that starts after graft_gpu_bang_init and ends before graft_gpu_bang_rerank. */
int graft_gpu_bang_store(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                         const graft_gpu_bang_step* s, graft_gpu_stream stream);

/* Re-ranking (BANG 4.9): of each query's expanded nodes the `rerank` best by PQ distance (all
 * when 0) get exact distances (base vectors in-memory, the stored staged vectors out-of-core),
 * then the k best allowed ones are written in FAISS layout (L2: squared distances ascending;
 * IP: dot products descending; missing: label -1 and FLT_MAX / -FLT_MAX). */
typedef struct graft_gpu_bang_rerank_args {
    int64_t k;               /* 1..1024 */
    int rerank;              /* 0 = every expanded node, else >= k */
    const uint32_t* allowed; /* NULL or n-bit filter (bit i of word i / 32) */
    float* D;                /* nq x k */
    int64_t* I;              /* nq x k */
} graft_gpu_bang_rerank_args;
int graft_gpu_bang_rerank(graft_gpu_ctx* ctx, const graft_gpu_bang_args* a,
                          const graft_gpu_bang_rerank_args* r, graft_gpu_stream stream);

/* PQ codes of n device vectors x (n x d) with the device codebooks (M x 256 x d/M, graft_pq's
 * layout) into codes (device, n x M): per sub-vector the first nearest centroid by squared L2
 * summed in graft_pq_encode's order without FMA, so the codes equal the CPU's bit for bit. */
int graft_gpu_pq_encode(graft_gpu_ctx* ctx, const float* x, int64_t n, int d, int M,
                        const float* centroids, uint8_t* codes, graft_gpu_stream stream);

#ifdef __cplusplus
}
#endif
#endif
