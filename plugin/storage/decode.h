/* Internal: the storages' decodes in the form the GPU kernels run them (graph_search.cu's walk,
 * grnnd_build.cu's build), so that every upload of SQ8's parameters makes the same numbers. */
#ifndef GRAFT_STORAGE_DECODE_H
#define GRAFT_STORAGE_DECODE_H

#include "graft/storage.h"

/* SQ8's decode as one FMA a dimension: decoded = vmin + (c + 0.5) / 255 vdiff = c scale + offset,
 * scale = vdiff / 255 and offset = vmin + 0.5 scale (the rounding differs from FAISS's formula,
 * graft_storage_decode's, by an ulp or so). so: 2 d floats, the d scales then the d offsets, of a
 * trained SQ8 storage st. */
void graft_sq8_affine(const graft_storage* st, float* so);

/* graft_storage_decode of n codes on the threads (blocks of rows; graft_storage_decode itself is
 * one thread's loop, cheap enough for the single rows the walks and the linking decode). */
void graft_storage_decode_rows(const graft_storage* st, int64_t n, const uint8_t* codes, float* x);

/* FP16: the index (row * d + dimension) of the first of n codes' values that is Inf or NaN
 * (exponent bits all set: a value past 65504 coded), n * d when none is; other storages code
 * every finite value finitely (SQ8 clamps to its ranges): n * d. */
int64_t graft_storage_first_nonfinite(const graft_storage* st, int64_t n, const uint8_t* codes);

#endif
