/* Internal: argument checks shared by the index objects. */
#ifndef GRAFT_VALIDATE_H
#define GRAFT_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

/* GRAFT_EINVAL naming `what` and the first offending row when x (n x d) holds NaN or +-Inf. */
int graft_check_finite(const float* x, int64_t n, int64_t d, const char* what);
/* dst = src (n x d), with graft_check_finite's check and message (rows numbered from first_row)
 * on the way: one pass, on the calling thread, no OpenMP region (the GPU search's staging of its
 * queries into pinned memory, where a fork-join of every core would cost more than the copy). */
int graft_copy_finite(float* dst, const float* src, int64_t n, int64_t d, int64_t first_row,
                      const char* what);

struct graft_graph;
/* GRAFT_EINVAL naming fn unless g is a well-formed graph struct: nbrs set, 1 <= n < 2^31,
 * R >= 1, entry in [0, n). Here rather than in graph/ because io/ (DiskANN graph files) checks
 * the graphs it reads too. */
int graft_check_graph(const struct graft_graph* g, const char* fn);
#endif
