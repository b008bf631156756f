/* graft: vector storages of the graph index — how the graph walk reads a vector. FP32 (the
 * vectors themselves), FP16 (IEEE half, 2 bytes a dimension) and SQ8 (FAISS's ScalarQuantizer
 * QT_8bit: per-dimension min/max 8-bit codes, 1 byte a dimension). The compressed storages walk
 * the graph on the codes' distances and re-rank the final candidates with the FP32 vectors
 * (graft_search_params.rerank), unless the index keeps the codes alone
 * (graft_gindex_params.keep_fp32 = 0). PQ (graft/pq.h) is one more kind of the graph index's storage,
 * searched by BANG's pipeline (graft/bang.h); its codebooks live in the index (graft_gindex_pq),
 * not in this descriptor, which for PQ holds only the kind and the trained flag.
 */
#ifndef GRAFT_STORAGE_H
#define GRAFT_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum graft_storage_kind {
    GRAFT_STORAGE_FP32 = 0, /* the vectors: no codes, no training */
    GRAFT_STORAGE_FP16 = 1, /* float -> half, round to nearest even (CUDA's __float2half_rn;
                               FAISS's QT_fp16 may differ on exact ties only) */
    GRAFT_STORAGE_SQ8 = 2,  /* FAISS QT_8bit with RS_minmax: trained per-dimension vmin and
                               vdiff = vmax - vmin; code = (int)(255 * clamp((x - vmin) / vdiff,
                               0, 1)) (0 where vdiff = 0); decoded x = vmin + (code + 0.5) / 255
                               * vdiff */
    GRAFT_STORAGE_PQ = 3    /* product quantization, M bytes a vector (graft/pq.h): the graph
                               index's PQ storage, searched by BANG (graft/bang.h) */
} graft_storage_kind;

/* Short name ("FP32", "FP16", "SQ8", "PQ"), or NULL for an unknown kind. */
const char* graft_storage_name(int kind);
/* Bytes of one vector's code: 4 d, 2 d, d; 0 for PQ (M bytes: the index knows M) and an unknown
 * kind. */
size_t graft_storage_code_size(int kind, int64_t d);

/* A storage's codec. vmin / vdiff (SQ8 only, d floats each) are owned by the struct once
 * trained; release with graft_storage_free. */
typedef struct graft_storage {
    int kind;     /* graft_storage_kind */
    int64_t d;
    int trained;  /* FP32, FP16: always 1; SQ8: after graft_storage_train or set_sq8; PQ: set by
                     the index once its codebooks are trained */
    float* vmin;  /* SQ8: d */
    float* vdiff; /* SQ8: d */
} graft_storage;

/* An untrained codec (trained already for FP32 and FP16). GRAFT_EINVAL: unknown kind, d < 1. */
int graft_storage_init(graft_storage* s, int kind, int64_t d);
void graft_storage_free(graft_storage* s);
/* SQ8: vmin / vdiff per dimension over the n training vectors (FAISS's train_NonUniform with
 * RS_minmax, rangestat_arg 0); FP32 / FP16: nothing to learn. On failure s is unchanged.
 * GRAFT_EINVAL: NULL, n < 1, NaN/Inf. GRAFT_ENOMEM. */
int graft_storage_train(graft_storage* s, int64_t n, const float* x);
/* SQ8: takes trained parameters (copied; from a file). GRAFT_EINVAL: NaN/Inf or vdiff < 0. */
int graft_storage_set_sq8(graft_storage* s, const float* vmin, const float* vdiff);
/* Copies src into dst (zeroed first). GRAFT_ENOMEM. */
int graft_storage_copy(graft_storage* dst, const graft_storage* src);
/* n vectors to n codes of graft_storage_code_size bytes (trained codec, finite x; OpenMP). */
void graft_storage_encode(const graft_storage* s, int64_t n, const float* x, uint8_t* codes);
/* n codes back to n x d floats. */
void graft_storage_decode(const graft_storage* s, int64_t n, const uint8_t* codes, float* x);

#ifdef __cplusplus
}
#endif
#endif
