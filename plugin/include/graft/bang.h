/* graft: BANG search — best-first graph search on PQ (asymmetric) distances followed by exact
 * re-ranking, for data whose graph and vectors do not fit in GPU memory
 * (../shared/papers/bang-billion-scale-single-gpu.txt, Algorithm 2 and sections 4.2-4.9).
 *
 * The search of one query, as the CPU reference runs it and as both GPU modes reproduce it:
 *   1. table = graft_pq_table(q)                       (PQ distance table, M x 256)
 *   2. worklist = {entry} with its PQ distance; visited = {entry}
 *   3. repeat: u = the best unexpanded worklist entry (by (PQ distance, id)); none -> stop.
 *      Mark u expanded and record it as a re-rank candidate (the candidates sent to the CPU in
 *      BANG). For each neighbour v of u (ids outside [0, n) skipped) not yet visited: mark it
 *      visited, and insert (PQ distance of v, v) into the worklist, which keeps the best L.
 *      Stop also after max_expand expansions.
 *   4. re-rank: of the expanded vertices, the `rerank` best by PQ distance (all when rerank = 0)
 *      get exact distances from the full vectors; the k best of those (only allowed ids when a
 *      filter is given) are the results, FAISS layout.
 * The GPU's eager candidate selection (BANG 4.6) chooses the same u: the best of the new
 * neighbours that enter the worklist and of the old worklist's first unexpanded entry.
 * The GPU's visited set is a per-query Bloom filter, whose rare false positives skip a vertex
 * the CPU reference visits (the only difference besides float summation order).
 */
#ifndef GRAFT_BANG_H
#define GRAFT_BANG_H

#include "graft/graph.h"
#include "graft/pq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_bang_params {
    int L;           /* worklist width, k <= L <= 1024. Default 64 */
    int rerank;      /* re-rank depth: the best `rerank` expanded vertices (by PQ distance) get
                        exact distances; 0 = every expanded vertex (BANG). Otherwise >= k.
                        Default 0 */
    int max_expand;  /* expansions per query at most (bounds the re-rank store), L..8192;
                        0 = 2 L + 64 (sift5k and Fashion-MNIST 10k expand 1.0-1.25 L on
                        average, at most 1.75 L at L = 16). Default 0 */
    int bloom_log2;  /* GPU: Bloom filter of 2^bloom_log2 bits per query, 10..24. Default 17 */
    const uint8_t* allowed; /* optional filter, FAISS IDSelectorBitmap layout (bit i & 7 of byte
                        i >> 3), n bits: the search walks every vertex, only allowed ones are
                        re-ranked into the results. NULL = all */
    int device;      /* CUDA device of the GPU search. Default 0 */
    size_t memory_budget; /* GPU bytes for one batch's working set (queries, PQ tables,
                        worklists, Bloom filters, staged neighbour rows, re-rank vectors,
                        results); 0 = 1 GiB. Larger batches are split */
    int threads;     /* host threads gathering neighbour rows (out-of-core); 0 = OpenMP's */
    size_t vector_stream_bytes; /* out-of-core: an iteration of a half batch whose staged full
                        vectors take at least this many bytes copies them on a stream of their
                        own, off the path of the half's next steps (many live queries, large
                        d); smaller ones go on the half's stream and step B files them, two
                        queueing calls and an event wait fewer (the tail of a batch, when few
                        queries still search). 0 = 1 MiB; 1 = always their own stream;
                        SIZE_MAX = never. Results do not depend on it */
    int64_t allowed_n; /* bits of `allowed` (ids it covers); 0 = as many as the index holds. An
                        index search refuses a shorter filter (GRAFT_ESTATE): an add between
                        building it and the search made it stale */
    double filter_exact_below; /* filtered search of the index (graft/graph.h, "Filtered
                        search"): exact below this selectivity, < 0 (default) the cost model */
} graft_bang_params;

/* Defaults as documented in the struct. */
void graft_bang_params_defaults(graft_bang_params* params);

/* The effective expansion cap of params for a search (max_expand, or 2 L + 64 when 0). */
int graft_bang_max_expand(const graft_bang_params* params);

/* Checks params for k (gpu: also bloom_log2 and memory_budget's room for one query). */
int graft_bang_check_params(const graft_bang_params* params, int64_t k, int gpu, const char* fn);

/* The CPU reference (OpenMP over queries): graph (n x R over the vectors x), PQ codebooks and
 * codes (n x pq->M) of the same vectors, full vectors x (n x d) for re-ranking. Results in FAISS
 * layout (nq x k; L2 squared distances ascending, inner products descending; label -1 and
 * distance FLT_MAX / -FLT_MAX beyond the candidates found). params NULL = defaults.
 * Errors (GRAFT_EINVAL): NULL pointers, malformed graph or codebooks, d != pq->d, nq < 0,
 * k < 1, L outside [k, 1024], rerank in (0, k), max_expand outside {0} u [L, 8192], unknown
 * metric, NaN/Inf in xq. GRAFT_ENOMEM. */
int graft_bang_search_cpu(const graft_graph* graph, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params, float* D,
                          int64_t* I);

/* What a GPU BANG search measured (optional output). Times are wall seconds on the host unless
 * said otherwise; "overlapped" stages run while others do, so they need not add up to the wall. */
typedef struct graft_bang_report {
    double wall_seconds;    /* the whole call */
    double gpu_seconds;     /* the device's span per batch, tables kernel to re-rank end (events):
                               kernels, copies between them and, out-of-core, time the device
                               waits for the host */
    double gather_seconds;  /* host threads collecting neighbour rows and vectors (out-of-core;
                               the wall of their OpenMP regions, inside which the calling thread
                               also queues the steps: api_seconds counts that time too) */
    double wait_seconds;    /* host time blocked on the GPU (kernels or copies not yet done) */
    double loop_seconds;    /* host time in the iterations' loop (gather and wait included; the
                               batches' query upload, tables, re-rank and result download not) */
    double api_seconds;     /* out-of-core: host time inside the loop's queueing calls (copies,
                               kernel launches, event records; waits not) */
    int64_t h2d_bytes;      /* bytes copied host -> device during the search (rows, vectors,
                               queries) */
    int64_t d2h_bytes;      /* bytes copied device -> host (candidates, results) */
    int64_t iterations;     /* search iterations (expansions), summed over queries */
    int batches;            /* batches the queries were split into */
    int out_of_core;        /* 1: rows gathered from host memory; 0: graph and vectors on the GPU */
    size_t gpu_peak_bytes;  /* device bytes held: resident data + the largest batch's scratch */
    graft_filter_report filter; /* index searches: the filtered search's path (also on the CPU) */
} graft_bang_report;

/* Where the GPU search reads the graph rows and full vectors from. Same search, same results. */
typedef enum graft_bang_mode {
    GRAFT_BANG_AUTO = 0,        /* index only: in-memory when codes + graph + vectors fit its GPU
                                   budget, else out-of-core */
    GRAFT_BANG_IN_MEMORY = 1,   /* graph, vectors and codes on the GPU (BANG's in-memory variant) */
    GRAFT_BANG_OUT_OF_CORE = 2  /* codes on the GPU; graph and vectors in host memory, gathered by
                                   host threads into pinned buffers and copied asynchronously */
} graft_bang_mode;

/* One-shot GPU search (gpu/bang_search.cu): uploads codebooks and codes (and, in-memory, the
 * graph and vectors) to params->device, searches, frees. Same parameters, results and errors as
 * graft_bang_search_cpu, plus bloom_log2 outside 10..24, R > 256, mode not IN_MEMORY or
 * OUT_OF_CORE, GRAFT_ENODEVICE, GRAFT_EGPU_NOMEM, GRAFT_ECUDA. report may be NULL. The index
 * (graft/bang_index.h) keeps the device data between searches. */
int graft_bang_search_gpu(const graft_graph* graph, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params,
                          graft_bang_mode mode, float* D, int64_t* I, graft_bang_report* report);

#ifdef __cplusplus
}
#endif
#endif
