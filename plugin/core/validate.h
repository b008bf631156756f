/* Internal: argument checks shared by the index objects. */
#ifndef GRAFT_VALIDATE_H
#define GRAFT_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

/* GRAFT_EINVAL naming `what` and the first offending row when x (n x d) holds NaN or +-Inf. */
int graft_check_finite(const float* x, int64_t n, int64_t d, const char* what);
/* That error for row `row`: the one message of every finiteness check (graft_check_finite,
 * graft_copy_rows_finite, the GPU walk's query check). */
int graft_fail_nonfinite(const char* what, int64_t row);

/* The first of `count` ids outside [-1, n) (-1: a free slot), or count when none is: the check of
 * a graph's rows and of given initial neighbours. */
int64_t graft_first_id_outside(const int32_t* ids, int64_t count, int64_t n);

struct graft_graph;
/* GRAFT_EINVAL naming fn unless g is a well-formed graph struct: nbrs set, 1 <= n < 2^31,
 * R >= 1, entry in [0, n). Here rather than in graph/ because io/ (DiskANN graph files) checks
 * the graphs it reads too. */
int graft_check_graph(const struct graft_graph* g, const char* fn);
#endif
