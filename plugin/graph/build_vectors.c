/* What a graph build reads (graph/build.h, graft_build_vectors): FP32 vectors or an FP16 / SQ8
 * storage's codes (issue 48), their checks, and the whole decode for the builders that read FP32
 * rows (the codes' entry point is graph.c's, graft_graph_entry_point_of). */
#include <stdlib.h>

#include "core/error.h"
#include "core/validate.h"
#include "graph/build.h"
#include "storage/decode.h"

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

int graft_build_decode(const graft_build_vectors* v, int64_t n, int64_t d, float** x) {
    size_t bytes;
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &bytes) || !(*x = malloc(bytes)))
        return graft_fail(GRAFT_ENOMEM, "graph build: out of host memory for the %lld x %lld "
                          "decoded codes", (long long)n, (long long)d);
    graft_storage_decode_rows(v->st, n, v->codes, *x);
    return GRAFT_OK;
}
