/* Internal: which vectors the exact INT8 path can take (graft_gpu.h, "the exact INT8 path").
 * Its int8 codes are x - shift for shift 128 (every value an integer in [0, 255]: uint8 data such
 * as SIFT's bvecs/u8bin or image pixels) or 0 (integers in [-128, 127]); anything else takes the
 * certified TF32 path. */
#ifndef GRAFT_INT8_RANGE_H
#define GRAFT_INT8_RANGE_H

#include <stdint.h>

/* The integer content of some vectors: ok = every value is an integer in [-128, 255] (the union
 * of both code ranges), min / max their extremes. No values: ok = 1, min = +inf, max = -inf. */
typedef struct graft_int8_range {
    int ok;
    float min, max;
} graft_int8_range;

/* r of the n x d values of x (stops at the first value that is not such an integer). */
void graft_int8_range_scan(const float* x, int64_t n, int64_t d, graft_int8_range* r);
/* Range of the union of a and b. */
graft_int8_range graft_int8_range_union(graft_int8_range a, graft_int8_range b);
/* The shift of the codes for data with range r: 128 when it lies in [0, 255], else 0 when in
 * [-128, 127], else -1 (no INT8 path). Data in [0, 127] fits both and takes 128, the unsigned
 * codes: queries of such (uint8-like) data are then accepted up to 255. */
int graft_int8_shift(graft_int8_range r);
/* 1 when values with range r fit the codes of `shift`: integers in [shift - 128, shift + 127]. */
int graft_int8_fits(graft_int8_range r, int shift);

#endif
