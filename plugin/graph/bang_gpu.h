/* Plugin-internal: the BANG search on the GPU, host side (../shared/papers/
 * bang-billion-scale-single-gpu.txt, Algorithm 2; kernels in gpu/bang_search.cu). The device
 * copies of the codebooks and codes (in-memory mode also of the graph and vectors), batches that
 * fit the search memory budget, and the out-of-core pipeline in which host threads gather
 * neighbour rows and vectors while the GPU works. Used by the one-shot graft_bang_search_gpu and
 * by the graph index's PQ storage (plugin/graph/graph_index.c), which keeps a graft_bang_dev between searches.
 * Not thread-safe: the owner serializes calls on one graft_bang_dev. */
#ifndef GRAFT_BANG_GPU_H
#define GRAFT_BANG_GPU_H

#include "graft/bang.h"
#include "graft_gpu.h"

/* Pinned buffers of staged vectors per half batch, used in turn by its iterations. */
#define GRAFT_BANG_STAGED 3

typedef struct graft_bang_dev {
    graft_gpu_ctx* ctx;      /* not owned */
    int64_t n, d, entry;
    int R, M;
    graft_metric metric;
    int in_memory;           /* 1: graph and vectors on the device; 0: out-of-core */
    /* resident device data (owned) */
    float* centroids;        /* M x 256 x dsub */
    uint8_t* codes;          /* n x M */
    int32_t* nbrs;           /* n x R, in-memory only */
    float* x;                /* n x d, in-memory only */
    size_t resident_bytes;
    /* the host arrays out-of-core gathering reads (not owned), those of the current search:
     * graft_bang_dev_search's arguments, so that their owner may move them between searches */
    const int32_t* host_nbrs; /* n x R */
    const float* host_x;      /* n x d */
    /* pipeline objects (owned): half batch 0 runs on the context's stream, half 1 on stream1,
     * the staged vectors of both go to the re-rank store on stream2 */
    graft_gpu_stream stream1, stream2;
    graft_gpu_event ev_next[2];      /* a half's next nodes are on the host */
    graft_gpu_event ev_staged[2][GRAFT_BANG_STAGED]; /* a half's staged vectors of an
                                        iteration (mod GRAFT_BANG_STAGED) were copied (pinned
                                        buffer free) */
    graft_gpu_event ev_init, ev_join, ev_join2, ev_t0, ev_t1;
    /* grow-only batch buffers (owned) */
    void* scratch;           /* device: BANG state, queries, results, staged rows and vectors */
    size_t scratch_bytes;
    void* pinned;            /* page-locked host: staged rows, vectors, next nodes, counters */
    size_t pinned_bytes;
    uint32_t* allowed;       /* device copy of the current search's filter */
    size_t allowed_bytes;
} graft_bang_dev;

/* graft_pq_encode on the GPU of ctx (graft_pq_encode_gpu's work; fn names the caller in
 * messages). */
int graft_bang_encode_ctx(graft_gpu_ctx* ctx, const graft_pq* pq, int64_t n, const float* x,
                          uint8_t* codes, const char* fn);

/* Every check of a BANG search's arguments, CPU (gpu = 0) or GPU (gpu = 1: also the GPU-only
 * parameters): graph, pointers, codebooks against d, sizes, parameters, metric; the message names
 * fn. The queries' values are checked where the searches read them. */
int graft_bang_check_args(const graft_graph* graph, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params, const float* D,
                          const int64_t* I, int gpu, const char* fn);

/* graft_bang_search_cpu after its argument checks: the graph index's CPU walk of the PQ storage,
 * whose arguments graft_gindex_search checked. params not NULL. Checks the queries' values (it
 * reads them). */
int graft_bang_search_cpu_unchecked(const graft_graph* graph, const graft_pq* pq, const uint8_t* codes,
                                    const float* x, int64_t d, graft_metric metric, const float* xq,
                                    int64_t nq, int64_t k, const graft_bang_params* params, float* D,
                                    int64_t* I);

/* Device bytes graft_bang_dev_upload keeps for n vectors of dimension d, degree R and M code
 * bytes: codebooks (256 d floats) and codes (n M), plus in-memory the graph (n R int32) and the
 * vectors (n d floats). SIZE_MAX when the size overflows. */
size_t graft_bang_dev_resident_bytes(int64_t n, int64_t d, int R, int M, int in_memory);

/* Copies pq's codebooks and the codes (graph->n x pq->M) to ctx's device into *out (zeroed
 * first); in_memory also the graph and x (n x d). Out-of-core uploads neither: each search names
 * the host arrays it gathers from. Errors: GRAFT_EINVAL (NULL, malformed graph or codebooks,
 * d != pq->d, R > 256, unknown metric), GRAFT_EGPU_NOMEM, GRAFT_ECUDA. On failure nothing is
 * held. */
int graft_bang_dev_upload(graft_gpu_ctx* ctx, const graft_graph* graph, const graft_pq* pq,
                          const uint8_t* codes, const float* x, int64_t d, graft_metric metric,
                          int in_memory, graft_bang_dev* out);
/* Only the pipeline objects (streams, events) into *out (zeroed first): an owner that keeps the
 * resident arrays itself (the graph index's snapshots) sets them before each search and clears
 * them after. On failure nothing is held. */
int graft_bang_dev_open(graft_gpu_ctx* ctx, graft_bang_dev* out);
/* Frees everything the struct owns and zeroes it; NULL and a released struct are fine. */
void graft_bang_dev_release(graft_bang_dev* dev);

/* Host queries (nq x d) in, host results out (FAISS layout, graft_bang_search_cpu's), in batches
 * under p->memory_budget. host_nbrs (n x R) and host_x (n x d) are the graph rows and vectors
 * the out-of-core pipeline gathers from (ignored in-memory). params NULL = defaults
 * (graft_bang_params_defaults). Trusts its arguments (graft_bang_search_gpu and
 * graft_gindex_search checked them); checks the device data it was given and the queries' values
 * (GRAFT_EINVAL), and a budget below one query's working set (GRAFT_EGPU_NOMEM, naming the
 * bytes). report may be NULL. A failed call leaves the struct usable. */
int graft_bang_dev_search(graft_bang_dev* dev, const int32_t* host_nbrs, const float* host_x,
                          const float* xq, int64_t nq, int64_t k,
                          const graft_bang_params* params, float* D, int64_t* I,
                          graft_bang_report* report);

#endif
