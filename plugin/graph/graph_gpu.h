/* Plugin-internal: a graph and its vectors on the GPU, searched by gpu/graph_search.cu in batches
 * that fit the search memory budget. Used by graft_graph_search_gpu (one shot) and the graph
 * index (kept across searches). Not thread-safe: the owner serializes calls. */
#ifndef GRAFT_GRAPH_GPU_H
#define GRAFT_GRAPH_GPU_H

#include "graft/graph.h"
#include "graft/storage.h"
#include "graft_gpu.h"

typedef struct graft_graph_dev {
    graft_gpu_ctx* ctx; /* not owned */
    float* x;           /* n x d; NULL for a compressed storage without FP32 (no re-rank) */
    int32_t* nbrs;      /* n x R */
    int64_t n, d, entry;
    int R;
    void* io;           /* grow-only batch buffer: queries, results */
    graft_gpu_stream streams[2]; /* the pipeline's streams (created on first use) */
    size_t io_bytes;
    void* host_io;      /* grow-only page-locked staging of io's queries and results */
    size_t host_io_bytes;
    uint32_t* allowed;  /* filter bitmap of the current search */
    size_t allowed_bytes;
    int storage;        /* graft_storage_kind the walk reads */
    void* codes;        /* compressed storages: n codes */
    float* sq;          /* SQ8: d scales, then d offsets */
    size_t bytes;       /* x + nbrs + codes + sq */
} graft_graph_dev;

/* Validates search parameters for k (gpu: also the GPU-only fields). k itself is not checked:
 * the caller checked it where the search entered the core (graft_check_search_call,
 * graft_check_search_args). */
int graft_check_search_params(const graft_search_params* p, int64_t k, int gpu, const char* fn);
/* Every check of a graph search's arguments but the queries' values (graph, pointers, sizes,
 * parameters, metric); the message names fn. The one-shot searches' boundary
 * (graft_graph_search_cpu_ex, graft_graph_search_gpu): the walks below trust what it passed. Each
 * search checks that its queries are finite where it reads them: the CPU walk before it starts,
 * the GPU's kernel as it stages each query (GRAFT_GPU_BAD_QUERY), so that a GPU search's only pass
 * over its queries on the host is their copy into pinned memory. */
int graft_check_search_args(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                            const float* xq, int64_t nq, int64_t k, const graft_search_params* p,
                            const float* D, const int64_t* I, int gpu, const char* fn);

/* The CPU reference of every storage: graft_graph_search_cpu_ex's walk on the distances of st's
 * decoded codes (codes: n codes of st; st NULL or FP32: x itself), then, for a compressed
 * storage, exact re-ranking of the final list's first p->rerank entries (0 = all; with a filter,
 * of the k allowed results) with x; x NULL (a compressed storage whose codes are the only copy,
 * keep_fp32 = 0): no re-rank, the codes' distances. Trusts its arguments (p not NULL): its callers checked them.
 * report (NULL: none): zeroed, then the walks' iterations and distances, summed over queries. */
int graft_graph_search_cpu_store(const graft_graph* g, const float* x, const graft_storage* st,
                                 const uint8_t* codes, int64_t d, graft_metric metric,
                                 const float* xq, int64_t nq, int64_t k,
                                 const graft_search_params* p, float* D, int64_t* I,
                                 graft_search_report* report);

/* Copies graph and x (n x d) to ctx's device into *out (zeroed first). On failure nothing is
 * held. */
int graft_graph_dev_upload(graft_gpu_ctx* ctx, const graft_graph* graph, const float* x,
                           int64_t d, graft_graph_dev* out);
/* The same with a storage: st (NULL = FP32) and codes (n codes of st, host) go to the device
 * beside x, which the compressed walks read only in their exact re-ranking. */
int graft_graph_dev_upload_store(graft_gpu_ctx* ctx, const graft_graph* graph, const float* x,
                                 const graft_storage* st, const uint8_t* codes, int64_t d,
                                 graft_graph_dev* out);
void graft_graph_dev_release(graft_graph_dev* dev);

/* Host queries in, host results out; splits nq into batches under p->memory_budget. Checks the
 * arguments as graft_graph_search_cpu_ex does. report may be NULL. */
int graft_graph_dev_search(graft_graph_dev* dev, graft_metric metric, const float* xq, int64_t nq,
                           int64_t k, const graft_search_params* p, float* D, int64_t* I,
                           graft_search_report* report);

#endif
