/* Internal: the CPU reference's walk with a record of what it reads (plugin/graph/graph.c), for
 * bench studies that replay it (bench/studies/walk_replay.h: the walk's memory floor). */
#ifndef GRAFT_WALK_TRACE_H
#define GRAFT_WALK_TRACE_H
#include <stdint.h>

#include "graft/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a walk read, in order: the vertices it expanded (their graph rows) and those whose
 * distances it computed (their vectors). Arrays grown by the walk (realloc), freed by
 * graft_walk_trace_free; a zeroed struct is an empty trace. */
typedef struct graft_walk_trace {
    int32_t *rows, *vecs;
    int64_t nrows, nvecs, cap_rows, cap_vecs;
    int out_of_memory;  /* an array could not grow: the trace stops there */
} graft_walk_trace;

/* One query's single walk exactly as graft_graph_search_cpu_ex walks it (the entry vertex, L,
 * probes; FP32 vectors x, n x d), appending to *tr. seen: n stamps of the caller's scratch, stamp
 * a value none of them holds (as the search keeps one array a thread). GRAFT_ENOMEM when the
 * trace cannot grow. */
int graft_graph_walk_traced(const graft_graph* g, const float* x, int64_t d, graft_metric metric, const float* q,
                            int L, int probes, uint32_t* seen, uint32_t stamp, graft_walk_trace* tr);
void graft_walk_trace_free(graft_walk_trace* tr);

#ifdef __cplusplus
}
#endif

#endif
