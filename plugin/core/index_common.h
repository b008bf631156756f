/* Internal: what the index objects (graph_index.c, grnnd.c, pieces.c, filtered_search.c) share:
 * timing, error relabelling, FAISS's empty-index answer, the argument checks of add and search.
 * Nothing here calls into graph/ (graph/build.h holds the build dispatch and the build checks). */
#ifndef GRAFT_INDEX_COMMON_H
#define GRAFT_INDEX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "graft/graft.h"

/* Monotonic wall clock in seconds. */
double graft_now_s(void);

/* Re-raises the last failure as `status`, its message prefixed by `prefix` ("" for none): the
 * builders and uploads name themselves, the index names the call the user made. */
int graft_relabel(int status, const char* prefix);

/* FAISS's answer for an empty index: every label -1, distance FLT_MAX (L2) or -FLT_MAX (IP). */
void graft_fill_empty(int64_t nq, int64_t k, graft_metric metric, float* D, int64_t* I);

/* The argument checks of an index's add (the index, x unless n = 0, n >= 0); have_index: the
 * index pointer was not NULL. That x is finite is checked where it is copied
 * (graft_copy_rows_finite). */
int graft_check_add_args(int have_index, int64_t n, const float* x, const char* fn);

/* The argument checks of a graph index's search: the index and the arrays (unless nq = 0),
 * nq >= 0, 1 <= k <= 1024 (the largest worklist of the graph searches). */
int graft_check_search_call(int have_index, int64_t nq, const float* xq, int64_t k, const float* D,
                            const int64_t* I, const char* fn);

/* GRAFT_ESTATE when a search filter of allowed_n bits (0: unchecked) is shorter than the index's
 * ntotal ids: an add ran between building it and the search, which would read past its end.
 * Called under the index's lock. */
int graft_check_filter_len(const uint8_t* allowed, int64_t allowed_n, int64_t ntotal,
                           const char* fn);

/* dst = src, n rows of d floats, copied by all threads (fresh pages fault in on every core: one
 * thread faulting in tens of GB is the slowest part of a large add). */
void graft_copy_rows(float* dst, const float* src, int64_t n, int64_t d);

/* The same, checking on the way that every value is finite: one pass over src where a check and
 * a copy made two (an add's check read all of its vectors once more). GRAFT_EINVAL naming `what`
 * and the first row holding NaN or Inf; dst is then partly written. */
int graft_copy_rows_finite(float* dst, const float* src, int64_t n, int64_t d, const char* what);

/* Device scratch cap of an index's GPU context: a quarter of the device's memory, at most 8 GiB.
 * The context's arena only grows to what the searches take, so a generous cap costs nothing and
 * lets a search pass a larger memory_budget than the defaults. */
size_t graft_index_scratch_cap(int device);

#endif
