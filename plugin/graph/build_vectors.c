/* What a graph build reads (graph/build.h, graft_build_vectors): FP32 vectors or an FP16 / SQ8
 * storage's codes (issue 48), their checks, and the host steps a build from codes needs: the entry
 * point of the decoded codes, a row at a time, and the whole decode for the builders that read
 * FP32 rows. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/validate.h"
#include "graph/build.h"
#include "storage/decode.h"

int graft_build_reads_codes(const graft_build_vectors* v) {
    return v && v->st && (v->st->kind == GRAFT_STORAGE_FP16 || v->st->kind == GRAFT_STORAGE_SQ8);
}

size_t graft_build_row_bytes(const graft_build_vectors* v, int64_t d) {
    return graft_build_reads_codes(v) ? graft_storage_code_size(v->st->kind, d)
                                      : (size_t)d * sizeof(float);
}

int graft_check_build_vectors(const graft_build_vectors* v, int64_t n, int64_t d,
                              const graft_rnnd_params* p, const graft_graph* out, const char* fn) {
    if (!v) return graft_fail(GRAFT_EINVAL, "%s: NULL vectors", fn);
    if (!graft_build_reads_codes(v))
        return v->dx ? graft_check_graph_build_args(v->x, n, d, p, out, fn)
                     : graft_check_graph_build(v->x, n, d, p, out, fn);
    const graft_storage* st = v->st;
    if (!v->codes || !st->trained || st->d != d)
        return graft_fail(GRAFT_EINVAL, "%s: %s codes %s (a build from codes needs the host "
                          "codes of a trained storage of dimension d = %lld)", fn,
                          graft_storage_name(st->kind),
                          !v->codes ? "missing" : !st->trained ? "of an untrained storage"
                                                               : "of another dimension",
                          (long long)d);
    /* The sizes and parameters, as every build checks them; they test x only for NULL, and here
     * the codes stand in for it. */
    GRAFT_TRY(graft_check_graph_build_args((const float*)(const void*)v->codes, n, d, p, out, fn));
    const int64_t bad = graft_storage_first_nonfinite(st, n, v->codes);
    if (bad < n * d) {
        return graft_fail(GRAFT_EINVAL, "%s: the FP16 code of vector %lld, dimension %lld, is "
                          "Inf or NaN (a value past FP16's 65504); build from the FP32 vectors",
                          fn, (long long)(bad / d), (long long)(bad % d));
    }
    return GRAFT_OK;
}

/* graft_graph_entry_point (graph.c) over the decoded codes, in the same order: column sums per
 * block of rows added in block order, then the nearest row with ties to the smaller id, so that
 * the two agree exactly on graft_storage_decode's rows. Each block decodes one row at a time
 * into its own d floats. */
int64_t graft_graph_entry_point_codes(const graft_storage* st, const uint8_t* codes, int64_t n) {
    const int64_t d = st ? st->d : 0;
    if (!codes || n < 1 || d < 1) return 0;
    const size_t cs = graft_storage_code_size(st->kind, d);
    int64_t B = n < 64 ? 1 : 64;
    double* c = calloc((size_t)d, sizeof(double));
    double* part = calloc((size_t)(B * d), sizeof(double));
    float* rows = malloc((size_t)(B * d) * sizeof(float));
    if (c && (!part || !rows)) { /* one block: graph.c's fallback order */
        free(part), free(rows);
        B = 1;
        part = calloc((size_t)d, sizeof(double));
        rows = malloc((size_t)d * sizeof(float));
    }
    if (!c || !part || !rows) {
        free(c), free(part), free(rows);
        return 0;
    }
    const int64_t per = (n + B - 1) / B;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        float* r = rows + b * d;
        for (int64_t i = b * per; i < n && i < (b + 1) * per; i++) {
            graft_storage_decode(st, 1, codes + (size_t)i * cs, r);
            for (int64_t j = 0; j < d; j++) part[b * d + j] += r[j];
        }
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < d; j++) c[j] += part[b * d + j];
    for (int64_t j = 0; j < d; j++) c[j] /= (double)n;
    /* The nearest row: each block's first minimum, then the blocks in order (ties to the smaller
     * id, as graph.c's threads combine). part's first B doubles and ids hold the blocks' bests. */
    int64_t* best_id = malloc((size_t)B * sizeof(int64_t));
    if (!best_id) B = 0; /* out of memory: vertex 0 (a valid, worse start) */
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        float* r = rows + b * d;
        double best = INFINITY;
        int64_t e = -1;
        for (int64_t i = b * per; i < n && i < (b + 1) * per; i++) {
            graft_storage_decode(st, 1, codes + (size_t)i * cs, r);
            double s = 0;
            for (int64_t j = 0; j < d; j++) s += (r[j] - c[j]) * (r[j] - c[j]);
            if (s < best) best = s, e = i;
        }
        part[b] = best;
        best_id[b] = e;
    }
    int64_t entry = 0;
    double best = INFINITY;
    for (int64_t b = 0; b < B; b++)
        if (best_id[b] >= 0 && part[b] < best) best = part[b], entry = best_id[b];
    free(best_id), free(c), free(part), free(rows);
    return entry;
}

int graft_build_decode(const graft_build_vectors* v, int64_t n, int64_t d, float** x) {
    size_t bytes;
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &bytes) || !(*x = malloc(bytes)))
        return graft_fail(GRAFT_ENOMEM, "graph build: out of host memory for the %lld x %lld "
                          "decoded codes", (long long)n, (long long)d);
    graft_storage_decode_rows(v->st, n, v->codes, *x);
    return GRAFT_OK;
}
