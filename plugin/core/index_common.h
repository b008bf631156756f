/* Internal: what the index objects (graph_index.c, grnnd.c, pieces.c, filtered_search.c) share: timing, error relabelling,
 * FAISS's empty-index answer and the checks of build parameters and of outside graphs. */
#ifndef GRAFT_INDEX_COMMON_H
#define GRAFT_INDEX_COMMON_H

#include "graft/graph.h"

#define GRAFT_GPU_BUILD_MAX_R 64   /* GRNND's pools (graft_grnnd_build_gpu) */
#define GRAFT_GPU_SEARCH_MAX_R 256 /* the GPU search kernels' rows */
#define GRAFT_GRAPH_MAX_R 4096     /* set_data / read: larger degrees are taken as a mistake */

/* Monotonic wall clock in seconds. */
double graft_now_s(void);

/* Re-raises the last failure as `status`, its message prefixed by `prefix` ("" for none): the
 * builders and uploads name themselves, the index names the call the user made. */
int graft_relabel(int status, const char* prefix);

/* FAISS's answer for an empty index: every label -1, distance FLT_MAX (L2) or -FLT_MAX (IP). */
void graft_fill_empty(int64_t nq, int64_t k, graft_metric metric, float* D, int64_t* I);

/* The build parameters the next add will use, checked when they are set so that a bad value
 * fails then and not after the vectors were taken. gpu: also GRNND's limits. */
int graft_check_build_params(const graft_grnnd_params* b, int gpu, const char* fn);

/* GRAFT_EINVAL naming fn and the first fault unless graph is n rows of ids in [-1, n), R in
 * [1, GRAFT_GRAPH_MAX_R] (GRAFT_GPU_SEARCH_MAX_R when gpu), with entry in [0, n), over n finite
 * vectors x (n x d). */
int graft_check_graph_data(int64_t n, int64_t d, const float* x, const graft_graph* graph, int gpu,
                           const char* fn);

/* The argument checks of an index's add (the index, x unless n = 0, n >= 0, finite x of d
 * columns); have_index: the index pointer was not NULL. */
int graft_check_add_args(int have_index, int64_t n, const float* x, int64_t d, const char* fn);

/* The argument checks of a graph index's search: the index and the arrays (unless nq = 0),
 * nq >= 0, 1 <= k <= 1024 (the largest worklist of the graph searches). */
int graft_check_search_call(int have_index, int64_t nq, const float* xq, int64_t k, const float* D,
                            const int64_t* I, const char* fn);

/* GRAFT_ESTATE when a search filter of allowed_n bits (0: unchecked) is shorter than the index's
 * ntotal ids: an add ran between building it and the search, which would read past its end.
 * Called under the index's lock. */
int graft_check_filter_len(const uint8_t* allowed, int64_t allowed_n, int64_t ntotal,
                           const char* fn);

/* The graph of an index's n vectors x: GRNND on the GPU (b->device) when gpu; when GRNND's device
 * pools do not fit (GRAFT_EGPU_NOMEM: the device or b->memory_budget), GRNND in pieces that fit
 * (graft_graph_build_pieces); without a GPU, or when even pieces of GRAFT_PIECE_MIN do not fit,
 * RNN-Descent on the CPU. *seconds gets the build's wall time, *rep how it was built (pieces 0: on
 * the CPU, 1: GRNND on the whole, P: GRNND in P pieces, with graft_graph_build_pieces's times).
 * Errors as the builders'. */
int graft_index_build_graph(int gpu, const float* x, int64_t n, int64_t d, const graft_grnnd_params* b,
                            graft_graph* out, double* seconds, graft_pieces_report* rep);

/* dst = src, n rows of d floats, copied by all threads (fresh pages fault in on every core: one
 * thread faulting in tens of GB is the slowest part of a large add). */
void graft_copy_rows(float* dst, const float* src, int64_t n, int64_t d);

/* Device scratch cap of an index's GPU context: a quarter of the device's memory, at most 8 GiB.
 * The context's arena only grows to what the searches take, so a generous cap costs nothing and
 * lets a search pass a larger memory_budget than the defaults. */
size_t graft_index_scratch_cap(int device);

#endif
