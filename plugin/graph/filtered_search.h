/* Plugin-internal: the filtered search both graph indexes share (graft/graph.h, "Filtered
 * search"): count the ids a filter lets through, choose between the exact search over them and a
 * graph walk with a beam widened for the selectivity, and redo exactly the queries a walk left
 * short, so that a search returns min(k, passing) results by construction. The index supplies its
 * walk as a callback; this module owns the exact path (CPU reference, or the GPU's exact k-NN over
 * the passing vectors gathered on the device). Called under the index's lock. */
#ifndef GRAFT_FILTERED_SEARCH_H
#define GRAFT_FILTERED_SEARCH_H

#include "graft/graph.h"
#include "graft/storage.h"
#include "graft_gpu.h"

/* Grow-only device buffers of the exact path, owned by the index (released with it). */
typedef struct graft_filter_dev {
    int32_t* ids;    /* the passing ids */
    float* x;        /* their vectors, gathered */
    float* norms;    /* and squared norms (L2) */
    void* io;        /* a batch's queries and results */
    size_t ids_bytes, x_bytes, norms_bytes, io_bytes;
} graft_filter_dev;
void graft_filter_dev_release(graft_gpu_ctx* ctx, graft_filter_dev* dev);

/* What the exact path searches: the index's n vectors (host x, or st's codes; on a GPU index
 * ctx, dev and, when the vectors are on the device already, x_dev, from which the passing rows
 * are gathered there; else they are gathered on the host and uploaded). R: the graph's degree, for the cost model. */
typedef struct graft_filter_data {
    graft_metric metric;
    int64_t n, d;
    int R;
    const float* x;
    const float* x_dev;
    graft_gpu_ctx* ctx;    /* NULL: the CPU reference */
    graft_filter_dev* dev; /* with ctx */
    graft_cpu_knn_fn cpu_knn; /* without ctx; NULL: graft_knn_cpu */
    /* x NULL (an index with keep_fp32 = 0): the passing rows are these codes of st, decoded (the
     * vectors the walk's distances are of); x_dev is then NULL too */
    const graft_storage* st;
    const uint8_t* codes;
} graft_filter_data;

/* The index's graph search of all nq queries with beam L (its other parameters and the filter as
 * the caller gave them) into D, I. */
typedef int (*graft_filter_walk_fn)(void* arg, int L, float* D, int64_t* I);

/* Ids set among the first n bits of a filter (bit i & 7 of byte i >> 3). */
int64_t graft_filter_count(const uint8_t* allowed, int64_t n);

/* The walk's beam at selectivity s: min(1024, max(L, ceil(L / s))). */
int graft_filter_walk_beam(int L, double s);

/* The selectivity below which the exact path is chosen: exact_below itself when >= 0, else the
 * cost model's crossing (graft/graph.h) for data's n ids and degree R at beam L, with the exact
 * path's cost where it runs (the GPU, the CPU's cpu_knn or graft_knn_cpu). */
double graft_filter_threshold(double exact_below, const graft_filter_data* data, int L);

/* The filtered search: without a filter, walk(L) as it is (rep->path GRAFT_FILTER_NONE); with
 * one, the exact path or walk(L') and the exact redo of short queries, as graph.h says. rep (may
 * be NULL) gets the choice. Results in FAISS layout, -1 beyond min(k, passing). */
int graft_filtered_search(const graft_filter_data* data, const uint8_t* allowed, int L,
                          double exact_below, const float* xq, int64_t nq, int64_t k, float* D,
                          int64_t* I, graft_filter_walk_fn walk, void* walk_arg,
                          graft_filter_report* rep, const char* fn);

#endif
