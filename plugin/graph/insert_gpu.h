/* Plugin-internal: insertion into a graph on the GPU (graft/graph.h, "A living graph"): each
 * round's candidates from the GPU walk (gpu/graph_search.cu, FP32 distances), then the round's
 * prune, reverse edges and in-edges (gpu/graph_insert.cu), equal to graft_graph_insert_round_cpu
 * given the same candidates. Used by the graph index (its device data) and by the one-shot
 * graft_graph_insert_gpu. */
#ifndef GRAFT_INSERT_GPU_H
#define GRAFT_INSERT_GPU_H

#include "graft/graph.h"
#include "graft/storage.h"
#include "graft_gpu.h"

/* A graph on the device to insert into. */
typedef struct gindex_gpu_graph {
    const float* x;       /* device, rows [0, n + m): the graph's vectors, then the new ones */
    const int32_t* nbrs;  /* device, n rows: the graph before (read only) */
    int64_t n;
    int R;
    int64_t entry;
    int64_t cap;          /* rows `out` has room for, >= n + m */
    const uint8_t* dead;  /* host bitmap of removed vertices (n + m bits), NULL: none */
    int32_t* out;         /* device, cap rows: the graph after (rows [0, n) copied from nbrs first;
                             may equal nbrs, which then changes in place) */
} gindex_gpu_graph;

/* Inserts the m vertices after g->n into g->out, in graft_graph_insert_cpu's rounds, with the walk
 * at beam L (1..1024). cand_given (m x C, device, NULL: the walk's) makes it one round with those
 * candidates. report (may be NULL) is zeroed, then counts. Errors: the GPU's (GRAFT_EGPU_NOMEM,
 * GRAFT_ECUDA, GRAFT_ENODEVICE), GRAFT_EINVAL (R over GRAFT_GRAPH_INSERT_MAX_R). On ctx's stream;
 * returns when g->out is written. */
int graft_gindex_insert_gpu(graft_gpu_ctx* ctx, const gindex_gpu_graph* g, int64_t d,
                            graft_metric metric, int64_t m, int L, const int64_t* cand_given, int C,
                            graft_insert_report* report);

#endif
