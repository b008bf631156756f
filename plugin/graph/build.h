/* Internal: how a graph index gets its graph, and the checks of what a build takes. The build
 * dispatch (GRNND on the GPU, GRNND in pieces, RNN-Descent on the CPU) lives here, beside the
 * builders it calls, so that core/ never calls up into graph/. */
#ifndef GRAFT_GRAPH_BUILD_H
#define GRAFT_GRAPH_BUILD_H

#include "graft/graph.h"
#include "graft/storage.h"

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
/* The same checks of the graph alone (vectors held as codes, checked when they were encoded). */
int graft_check_graph_rows(int64_t n, const graft_graph* graph, int gpu, const char* fn);

/* init_exact's start (graph/oracle.c): each vertex's exact min(R, n - 1) nearest others as a new
 * n x *k id array (*ids, malloc'd, the caller frees), by the flat index's k-NN graph on b->device
 * when gpu, else the CPU. Errors: the flat index's, GRAFT_ENOMEM. */
int graft_graph_exact_init(const float* x, int64_t n, int64_t d, const graft_grnnd_params* b, int gpu,
                           int32_t** ids, int* k);

/* The vectors a build reads (issue 48: GRNND builds from what the storage keeps). A graph built
 * from codes is the graph of the decoded vectors (graft_storage_decode's values, the GPU's by an
 * ulp or so). */
typedef struct graft_build_vectors {
    const float* x;          /* n x d FP32 on the host; NULL when only the codes are kept */
    const float* dx;         /* the same on the build's device already (checked finite when the
                                index took them), or NULL */
    const graft_storage* st; /* the codes' storage, trained (NULL: no codes) */
    const uint8_t* codes;    /* n codes of graft_storage_code_size(st->kind, d) bytes (host) */
    const void* dcodes;      /* the same codes on the build's device already, or NULL */
} graft_build_vectors;

/* 1 when a build of v reads the codes: an FP16 or SQ8 storage with its codes. Inline, as
 * graft_build_row: graph.c and orphans.c read rows through them, and a call into build_vectors.c
 * (which calls the builds' shared checks in rnnd.c) would close a circle of calls. */
static inline int graft_build_reads_codes(const graft_build_vectors* v) {
    return v && v->st && (v->st->kind == GRAFT_STORAGE_FP16 || v->st->kind == GRAFT_STORAGE_SQ8);
}
/* Row i of what a build of v reads: a pointer into v->x, or its code decoded into buf (d floats,
 * the caller's; unused for FP32 rows). */
static inline const float* graft_build_row(const graft_build_vectors* v, int64_t d, int64_t i, float* buf) {
    if (!graft_build_reads_codes(v)) return v->x + i * d;
    graft_storage_decode(v->st, 1, v->codes + (size_t)i * graft_storage_code_size(v->st->kind, d), buf);
    return buf;
}
/* Bytes a vector of what a build of v reads on the device: 4 d, or the code size. */
size_t graft_build_row_bytes(const graft_build_vectors* v, int64_t d);
/* The checks of graft_check_graph_build (x finite unless dx is given) or, reading codes, of the
 * codes: a trained FP16 / SQ8 storage of dimension d, FP16 codes finite (a value past 65504 codes
 * to Inf). */
int graft_check_build_vectors(const graft_build_vectors* v, int64_t n, int64_t d,
                              const graft_rnnd_params* p, const graft_graph* out, const char* fn);
/* graft_graph_entry_point over what a build reads: FP32 rows, or codes decoded a row at a time
 * (no n x d copy), equal to graft_graph_entry_point over graft_storage_decode's rows. */
int64_t graft_graph_entry_point_of(const graft_build_vectors* v, int64_t n, int64_t d);
/* The n codes decoded into a new n x d array (*x, malloc'd, the caller frees). GRAFT_ENOMEM. */
int graft_build_decode(const graft_build_vectors* v, int64_t n, int64_t d, float** x);

/* graft_grnnd_max_vectors for vectors of row_bytes bytes on the device. */
int64_t graft_grnnd_max_vectors_of(size_t row_bytes, const graft_grnnd_params* params);

/* The graph of an index's n vectors v: GRNND on the GPU (b->device) when gpu; when GRNND's device
 * pools do not fit (GRAFT_EGPU_NOMEM: the device or b->memory_budget), GRNND in pieces that fit
 * (graft_graph_build_pieces); without a GPU, or when even pieces of GRAFT_PIECE_MIN do not fit,
 * RNN-Descent on the CPU. *seconds gets the build's wall time, *rep how it was built (pieces 0: on
 * the CPU, 1: GRNND on the whole, P: GRNND in P pieces, with graft_graph_build_pieces's times).
 * v->dx (nullable): the same n vectors on b->device already (an index's device copy), which a
 * whole GRNND build reads instead of uploading x again. b->build_from = GRAFT_BUILD_FROM_CODES
 * (or no x) builds from v's FP16 / SQ8 codes: GRNND, on the whole or in pieces, reads them (the
 * pieces decode a row at a time on the host, and GRNND reads each piece's codes on the GPU); the
 * exact start and the CPU reference read FP32 rows, so they take the codes decoded whole (n x 4 d
 * host bytes for the build's time). Errors as the builders'. */
int graft_index_build_graph(int gpu, const graft_build_vectors* v, int64_t n, int64_t d,
                            const graft_grnnd_params* b, graft_graph* out, double* seconds,
                            graft_pieces_report* rep);

/* graft_graph_build_pieces (graft/graph.h) over what a build reads: FP32 rows, or FP16 / SQ8
 * codes (v->st with v->codes) that the partition and the merge decode a row at a time and GRNND
 * (gpu) reads a piece at a time, so that no n x d FP32 copy is made (the CPU builder, gpu = 0,
 * decodes a piece at a time). The graph of the decoded vectors. */
int graft_graph_build_pieces_from(const graft_build_vectors* v, int64_t n, int64_t d,
                                  const graft_grnnd_params* params, int gpu, int64_t piece_max,
                                  graft_graph* out, graft_pieces_report* report);

/* Gives every vertex of a built graph but the entry an in-edge (graph/orphans.c says why and
 * how): an orphan v goes into the row of one of its own neighbours, at its sorted place, a full
 * row giving up its last entry only when that entry keeps another in-edge. Rows stay sorted,
 * -1 padded and duplicate-free; a graph without orphans is left as it is. Deterministic. x: the
 * n x d vectors the graph was built over, metric the build's. *linked (nullable): vertices
 * linked. Every builder (rnnd.c, grnnd.c, pieces.c) ends with it. Errors: GRAFT_ENOMEM. */
int graft_graph_link_orphans(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                             int64_t* linked);
/* The same over what a build read (a build from codes: the decoded codes, a row at a time). */
int graft_graph_link_orphans_of(graft_graph* graph, const graft_build_vectors* v, int64_t d,
                                graft_metric metric, int64_t* linked);
/* graft_graph_fill_rows (graft/graph.h) over what a build read (a build from codes: the decoded
 * codes, a row at a time). */
int graft_graph_fill_rows_of(graft_graph* graph, const graft_build_vectors* v, int64_t d,
                             graft_metric metric, int64_t* added);

/* graft_rnnd_build_cpu, and *linked (nullable) gets graft_graph_link_orphans's count. */
int graft_rnnd_build_cpu_linked(const float* x, int64_t n, int64_t d, const graft_rnnd_params* params,
                                graft_graph* out, int64_t* linked);

/* graft_grnnd_build_gpu (graft/graph.h) over vectors dx already on params->device (not uploaded,
 * not checked again), or over x uploaded when dx is NULL; x (host) gives the entry point. */
int graft_grnnd_build_gpu_on(const float* x, const float* dx, int64_t n, int64_t d,
                             const graft_grnnd_params* params, graft_graph* out,
                             graft_grnnd_report* report);
/* The same over what v holds: its codes when graft_build_reads_codes (v->dcodes on the device, or
 * v->codes uploaded; the entry point from the decoded codes), else its FP32 vectors as above. The
 * device holds the codes, SQ8's 2 d floats and the pools (report->gpu_peak_bytes). */
int graft_grnnd_build_gpu_from(const graft_build_vectors* v, int64_t n, int64_t d,
                               const graft_grnnd_params* params, graft_graph* out,
                               graft_grnnd_report* report);

#endif
