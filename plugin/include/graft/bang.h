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

/* BANG's parameters are the graph index's search parameters (graft/graph.h): L, rerank,
 * max_expand, bloom_log2, allowed / allowed_n, device, memory_budget, threads,
 * vector_stream_bytes, filter_exact_below; the walk's probes / visited / merge are ignored. One
 * struct, so that one index searches every storage with one set of parameters. */
typedef graft_search_params graft_bang_params;

/* graft_search_params_defaults (L 64, rerank 0, max_expand 0, bloom_log2 17, ...). */
void graft_bang_params_defaults(graft_bang_params* params);

/* The effective expansion cap of params for a search (max_expand, or 2 L + 64 when 0). */
int graft_bang_max_expand(const graft_bang_params* params);

/* Checks params for a search of k (gpu: also bloom_log2 and memory_budget's room for one query).
 * k itself (>= 1) is the search's to check: the search functions do. */
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

/* What a GPU BANG search measured: graft_search_report's BANG fields (graft/graph.h). */
typedef graft_search_report graft_bang_report;

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
 * (graft/graph_index.h, the PQ storage) keeps the device data between searches. */
int graft_bang_search_gpu(const graft_graph* graph, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params,
                          graft_bang_mode mode, float* D, int64_t* I, graft_bang_report* report);

#ifdef __cplusplus
}
#endif
#endif
