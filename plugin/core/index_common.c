/* Shared parts of the index objects (index_common.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/index_common.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "graft_gpu.h"
#include "core/validate.h"

double graft_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int graft_relabel(int status, const char* prefix) {
    char msg[960];
    snprintf(msg, sizeof msg, "%s", graft_last_error());
    return graft_fail(status, "%s%s", prefix, msg);
}

int graft_check_build_params(const graft_grnnd_params* b, int gpu, const char* fn) {
    const float one_vector = 0.0f;
    graft_graph unused = {0};
    GRAFT_TRY(graft_check_graph_build(&one_vector, 1, 1, &b->base, &unused, fn));
    if (gpu && (b->base.R > GRAFT_GPU_BUILD_MAX_R || b->pairs < 0 || b->pairs > 256 || b->staged < -1 ||
                b->staged > 1 || (b->order != GRAFT_GRNND_SORTED && b->order != GRAFT_GRNND_RANDOM)))
        return graft_fail(GRAFT_EINVAL,
                          "%s: R=%d order=%d pairs=%d staged=%d (a GPU index builds with GRNND: "
                          "R <= %d, order GRAFT_GRNND_SORTED or GRAFT_GRNND_RANDOM, "
                          "0 <= pairs <= 256, staged -1, 0 or 1)",
                          fn, b->base.R, b->order, b->pairs, b->staged, GRAFT_GPU_BUILD_MAX_R);
    return GRAFT_OK;
}

void graft_fill_empty(int64_t nq, int64_t k, graft_metric metric, float* D, int64_t* I) {
    const float none = metric == GRAFT_METRIC_L2 ? FLT_MAX : -FLT_MAX;
    for (int64_t i = 0; i < nq * k; i++) {
        D[i] = none;
        I[i] = -1;
    }
}

int graft_check_graph_data(int64_t n, int64_t d, const float* x, const graft_graph* graph, int gpu,
                           const char* fn) {
    if (!x || !graph || !graph->nbrs) return graft_fail(GRAFT_EINVAL, "%s: NULL vectors or graph", fn);
    if (n < 1 || n > INT32_MAX)
        return graft_fail(GRAFT_EINVAL, "%s: n = %lld out of range [1, 2^31)", fn, (long long)n);
    if (graph->n != n)
        return graft_fail(GRAFT_EINVAL, "%s: the graph has %lld rows for %lld vectors", fn,
                          (long long)graph->n, (long long)n);
    const int max_r = gpu ? GRAFT_GPU_SEARCH_MAX_R : GRAFT_GRAPH_MAX_R;
    if (graph->R < 1 || graph->R > max_r)
        return graft_fail(GRAFT_EINVAL, "%s: degree R = %d out of range [1, %d]%s", fn, graph->R,
                          max_r, gpu ? " (the GPU search kernel's limit)" : "");
    if (graph->entry < 0 || graph->entry >= n)
        return graft_fail(GRAFT_EINVAL, "%s: entry %lld out of range [0, %lld)", fn,
                          (long long)graph->entry, (long long)n);
    const int64_t slots = n * graph->R;
    int64_t bad = slots;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (int64_t i = 0; i < slots; i++)
        if ((graph->nbrs[i] < -1 || graph->nbrs[i] >= n) && i < bad) bad = i;
    if (bad < slots)
        return graft_fail(GRAFT_EINVAL, "%s: row %lld of the graph holds id %d, outside [-1, %lld)", fn,
                          (long long)(bad / graph->R), (int)graph->nbrs[bad], (long long)n);
    return graft_check_finite(x, n, d, fn);
}

size_t graft_index_scratch_cap(int device) {
    const size_t max_scratch = (size_t)8 << 30, quarter = graft_gpu_device_memory(device) / 4;
    return quarter && quarter < max_scratch ? quarter : max_scratch;
}

int graft_check_add_args(int have_index, int64_t n, const float* x, int64_t d, const char* fn) {
    if (!have_index || (!x && n > 0)) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (n < 0) return graft_fail(GRAFT_EINVAL, "%s: n = %lld < 0", fn, (long long)n);
    return graft_check_finite(x, n, d, fn);
}

int graft_check_search_call(int have_index, int64_t nq, const float* xq, int64_t k, const float* D,
                            const int64_t* I, const char* fn) {
    if (!have_index || ((!xq || !D || !I) && nq > 0))
        return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (nq < 0) return graft_fail(GRAFT_EINVAL, "%s: nq = %lld < 0", fn, (long long)nq);
    if (k < 1) return graft_fail(GRAFT_EINVAL, "%s: k must be >= 1, got %lld", fn, (long long)k);
    if (k > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: k = %lld exceeds the largest worklist (L <= 1024) of the "
                          "graph search; an exact flat index serves any k", fn, (long long)k);
    return GRAFT_OK;
}

int graft_check_filter_len(const uint8_t* allowed, int64_t allowed_n, int64_t ntotal,
                           const char* fn) {
    if (allowed && allowed_n > 0 && allowed_n < ntotal)
        return graft_fail(GRAFT_ESTATE, "%s: the filter covers %lld ids, the index holds %lld", fn,
                          (long long)allowed_n, (long long)ntotal);
    return GRAFT_OK;
}

int graft_index_build_graph(int gpu, const float* x, int64_t n, int64_t d, const graft_grnnd_params* b,
                            graft_graph* out, double* seconds, graft_pieces_report* rep) {
    const double t0 = graft_now_s();
    /* Data too large for GRNND's device pools (2 n R 8 bytes beside the vectors) is built on the
     * GPU in pieces that fit, halved while a piece still does not (another tenant's memory). Data
     * past the pools' room goes to the pieces at once: a whole build would first fault in its
     * n x R host graph and upload every vector, only to find no room for the pools. */
    const int64_t fit = gpu ? graft_grnnd_max_vectors(d, b) : 0;
    int rc = gpu && n <= fit ? graft_grnnd_build_gpu(x, n, d, b, out, NULL) : GRAFT_EGPU_NOMEM;
    *rep = (graft_pieces_report){.pieces = 1, .largest_piece = n};
    for (int64_t piece = fit; rc == GRAFT_EGPU_NOMEM && piece >= GRAFT_PIECE_MIN; piece /= 2)
        rc = graft_graph_build_pieces(x, n, d, b, 1, piece, out, rep);
    /* No GPU, or pieces below GRAFT_PIECE_MIN: the CPU reference (slow, but it finishes). */
    if (rc == GRAFT_EGPU_NOMEM) {
        rc = graft_rnnd_build_cpu(x, n, d, &b->base, out);
        *rep = (graft_pieces_report){.pieces = 0, .largest_piece = n};
    }
    *seconds = graft_now_s() - t0;
    if (rep->pieces < 2) rep->build_seconds = *seconds;
    return rc;
}

void graft_copy_rows(float* dst, const float* src, int64_t n, int64_t d) {
    const int64_t rows = 1 << 14;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += rows)
        memcpy(dst + i * d, src + i * d, (size_t)(n - i < rows ? n - i : rows) * (size_t)d * sizeof(float));
}
