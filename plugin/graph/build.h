/* Internal: how a graph index gets its graph, and the checks of what a build takes. The build
 * dispatch (GRNND on the GPU, GRNND in pieces, RNN-Descent on the CPU) lives here, beside the
 * builders it calls, so that core/ never calls up into graph/. */
#ifndef GRAFT_GRAPH_BUILD_H
#define GRAFT_GRAPH_BUILD_H

#include "graft/graph.h"

#define GRAFT_GPU_BUILD_MAX_R 64   /* GRNND's pools (graft_grnnd_build_gpu) */
#define GRAFT_GPU_SEARCH_MAX_R 256 /* the GPU search kernels' rows */
#define GRAFT_GRAPH_MAX_R 4096     /* set_data / read: larger degrees are taken as a mistake */

/* The checks every graph build shares (rnnd.c): pointers, 0 < n < 2^31, d > 0, S and R >= 1,
 * T1 and T2 >= 0, rho in [0, 1], delta in [0, 1), a known metric, finite x. fn names the caller. */
int graft_check_graph_build(const float* x, int64_t n, int64_t d, const graft_rnnd_params* p,
                            const graft_graph* out, const char* fn);
/* The same but for the finite scan of x (vectors an index checked when they were added). */
int graft_check_graph_build_args(const float* x, int64_t n, int64_t d, const graft_rnnd_params* p,
                                 const graft_graph* out, const char* fn);

/* The convergence rule's threshold, one definition for the CPU reference and GRNND: a round that
 * adds at most this many new pool entries ends its outer iteration (graft_rnnd_params.delta). */
int64_t graft_rnnd_converged_below(int64_t n, int R, float delta);
/* With delta > 0 the outer iterations also end after one whose first round (the reverse edges'
 * effect) added at least this share of what the previous outer iteration's first round added:
 * from there on the reverse edges only churn (bench/RESULTS.md, "A build that converges"). */
#define GRAFT_RNND_CHURN_FLOOR 0.9f

/* The build parameters the next add will use, checked when they are set so that a bad value
 * fails then and not after the vectors were taken. gpu: also GRNND's limits. */
int graft_check_build_params(const graft_grnnd_params* b, int gpu, const char* fn);

/* GRAFT_EINVAL naming fn and the first fault unless graph is n rows of ids in [-1, n), R in
 * [1, GRAFT_GRAPH_MAX_R] (GRAFT_GPU_SEARCH_MAX_R when gpu), with entry in [0, n), over n finite
 * vectors x (n x d). */
int graft_check_graph_data(int64_t n, int64_t d, const float* x, const graft_graph* graph, int gpu,
                           const char* fn);

/* init_exact's start (graph/oracle.c): each vertex's exact min(R, n - 1) nearest others as a new
 * n x *k id array (*ids, malloc'd, the caller frees), by the flat index's k-NN graph on b->device
 * when gpu, else the CPU. Errors: the flat index's, GRAFT_ENOMEM. */
int graft_graph_exact_init(const float* x, int64_t n, int64_t d, const graft_grnnd_params* b, int gpu,
                           int32_t** ids, int* k);

/* The graph of an index's n vectors x: GRNND on the GPU (b->device) when gpu; when GRNND's device
 * pools do not fit (GRAFT_EGPU_NOMEM: the device or b->memory_budget), GRNND in pieces that fit
 * (graft_graph_build_pieces); without a GPU, or when even pieces of GRAFT_PIECE_MIN do not fit,
 * RNN-Descent on the CPU. *seconds gets the build's wall time, *rep how it was built (pieces 0: on
 * the CPU, 1: GRNND on the whole, P: GRNND in P pieces, with graft_graph_build_pieces's times).
 * dx (nullable): the same n vectors on b->device already (an index's device copy, checked finite
 * when added), which a whole GRNND build reads instead of uploading x again. Errors as the
 * builders'. */
int graft_index_build_graph(int gpu, const float* x, const float* dx, int64_t n, int64_t d,
                            const graft_grnnd_params* b, graft_graph* out, double* seconds,
                            graft_pieces_report* rep);

/* Gives every vertex of a built graph but the entry an in-edge (graph/orphans.c says why and
 * how): an orphan v goes into the row of one of its own neighbours, at its sorted place, a full
 * row giving up its last entry only when that entry keeps another in-edge. Rows stay sorted,
 * -1 padded and duplicate-free; a graph without orphans is left as it is. Deterministic. x: the
 * n x d vectors the graph was built over, metric the build's. *linked (nullable): vertices
 * linked. Every builder (rnnd.c, grnnd.c, pieces.c) ends with it. Errors: GRAFT_ENOMEM. */
int graft_graph_link_orphans(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                             int64_t* linked);

/* graft_rnnd_build_cpu, and *linked (nullable) gets graft_graph_link_orphans's count. */
int graft_rnnd_build_cpu_linked(const float* x, int64_t n, int64_t d, const graft_rnnd_params* params,
                                graft_graph* out, int64_t* linked);

/* graft_grnnd_build_gpu (graft/graph.h) over vectors dx already on params->device (not uploaded,
 * not checked again), or over x uploaded when dx is NULL; x (host) gives the entry point. */
int graft_grnnd_build_gpu_on(const float* x, const float* dx, int64_t n, int64_t d,
                             const graft_grnnd_params* params, graft_graph* out,
                             graft_grnnd_report* report);

#endif
