/* The graph index's memory model (graft/graph_index.h, docs/memory.md): the bytes its host and
 * device buffers take for n vectors, from the sizes the allocations use. Host: reserve and build
 * in gindex_living.c (vectors cap x 4 d, none with keep_fp32 = 0; codes cap x code size; graph
 * rows n x 4 R), the codec (SQ8 vmin | vdiff, PQ centroids). GPU: upload_taking in
 * gindex_living.c, the sizes resident_bytes and graft_bang_dev_resident_bytes report. Kept apart from both so that a test
 * checks them against it rather than against themselves. */
#include <string.h>

#include "core/error.h"
#include "graft/graph_index.h"

int graft_gindex_memory_model(graft_memory_side side, int storage, graft_bang_mode placement,
                              int64_t d, int R, int M, graft_memory_model* out) {
    return graft_gindex_memory_model_ex(side, storage, placement, 1, d, R, M, out);
}

int graft_gindex_memory_model_ex(graft_memory_side side, int storage, graft_bang_mode placement,
                                 int keep_fp32, int64_t d, int R, int M, graft_memory_model* out) {
    const char* fn = "graft_gindex_memory_model";
    if (!out) return graft_fail(GRAFT_EINVAL, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (side != GRAFT_MEMORY_HOST && side != GRAFT_MEMORY_GPU)
        return graft_fail(GRAFT_EINVAL, "%s: side %d (GRAFT_MEMORY_HOST or GRAFT_MEMORY_GPU)", fn,
                          (int)side);
    if (d < 1 || d > (1 << 20) || R < 1)
        return graft_fail(GRAFT_EINVAL, "%s: d = %lld, R = %d (d in [1, 2^20], R >= 1)", fn,
                          (long long)d, R);
    if (!graft_storage_name(storage))
        return graft_fail(GRAFT_EINVAL, "%s: unknown storage kind %d", fn, storage);
    const int pq = storage == GRAFT_STORAGE_PQ;
    if (pq && (M < 1 || M > d))
        return graft_fail(GRAFT_EINVAL, "%s: PQ needs M in [1, d = %lld], got %d", fn, (long long)d, M);
    /* keep_fp32 as graft_gindex_new takes it */
    if (keep_fp32 != 0 && keep_fp32 != 1)
        return graft_fail(GRAFT_EINVAL, "%s: keep_fp32 = %d (0 or 1)", fn, keep_fp32);
    if (!keep_fp32 && storage == GRAFT_STORAGE_FP32)
        return graft_fail(GRAFT_EINVAL, "%s: keep_fp32 = 0 needs FP16 or SQ8 (the FP32 storage's "
                          "vectors are its codes)", fn);
    if (!keep_fp32 && pq)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s: keep_fp32 = 0 is not supported for PQ", fn);
    if (placement != GRAFT_BANG_AUTO && placement != GRAFT_BANG_IN_MEMORY &&
        placement != GRAFT_BANG_OUT_OF_CORE)
        return graft_fail(GRAFT_EINVAL, "%s: unknown placement %d", fn, (int)placement);
    if (side == GRAFT_MEMORY_GPU && !pq && placement == GRAFT_BANG_OUT_OF_CORE)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s: the %s storage is GPU-resident (out-of-core "
                          "needs PQ)", fn, graft_storage_name(storage));
    /* AUTO resolves against the GPU budget and the contents (gindex_resolve_mode): not a model. */
    if (side == GRAFT_MEMORY_GPU && pq && placement == GRAFT_BANG_AUTO)
        return graft_fail(GRAFT_EINVAL, "%s: PQ on the GPU needs the placement resolved "
                          "(GRAFT_BANG_IN_MEMORY or GRAFT_BANG_OUT_OF_CORE)", fn);
    /* keep_fp32 = 0: no FP32 vectors on either side (reserve, upload_taking: codes only) */
    const size_t vec = keep_fp32 ? (size_t)d * sizeof(float) : 0, row = (size_t)R * sizeof(int32_t);
    const size_t code = pq ? (size_t)M : graft_storage_code_size(storage, d); /* FP32: 4 d */
    const size_t extra_code = storage == GRAFT_STORAGE_FP32 ? 0 : code;     /* beside the vectors */
    /* SQ8: d vmin + d vdiff on the host, d scales + d offsets on the GPU; PQ: 256 centroids of
     * d / M floats in each of M sub-spaces. */
    out->fixed = storage == GRAFT_STORAGE_SQ8 ? (size_t)d * 2 * sizeof(float)
                 : pq                        ? (size_t)d * GRAFT_PQ_KSUB * sizeof(float)
                                             : 0;
    if (side == GRAFT_MEMORY_GPU && pq && placement == GRAFT_BANG_OUT_OF_CORE)
        out->per_vector = code; /* graph and vectors stay on the host, gathered each iteration */
    else
        out->per_vector = vec + extra_code + row;
    return GRAFT_OK;
}
