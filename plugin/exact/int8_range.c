/* Integer detection for the exact INT8 path (exact/int8_range.h). */
#include <math.h>

#include "exact/int8_range.h"

/* Values [i0, i1) of x: 1 when all are integers in [-128, 255], with their extremes. */
static int scan_part(const float* x, int64_t i0, int64_t i1, float* lo, float* hi) {
    float l = INFINITY, h = -INFINITY;
    for (int64_t i = i0; i < i1; i++) {
        const float v = x[i];
        /* The range test comes first: the cast is defined only for values in range (NaN fails). */
        if (!(v >= -128.f && v <= 255.f) || (float)(int)v != v) return 0;
        l = v < l ? v : l;
        h = v > h ? v : h;
    }
    *lo = l;
    *hi = h;
    return 1;
}

void graft_int8_range_scan(const float* x, int64_t n, int64_t d, graft_int8_range* r) {
    const int64_t m = n * d, part = (int64_t)1 << 16, parts = (m + part - 1) / part;
    float lo = INFINITY, hi = -INFINITY;
    int ok = 1;
    /* Integer data is read whole (1M SIFT vectors: 128M values), in parallel; other data stops
     * each part at its first non-integer value. */
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi) reduction(&& : ok) if (parts > 16)
    for (int64_t p = 0; p < parts; p++) {
        float l, h;
        const int64_t i1 = (p + 1) * part < m ? (p + 1) * part : m;
        if (!ok) continue;
        if (!scan_part(x, p * part, i1, &l, &h)) {
            ok = 0;
            continue;
        }
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
    }
    r->ok = ok;
    r->min = lo;
    r->max = hi;
}

graft_int8_range graft_int8_range_union(graft_int8_range a, graft_int8_range b) {
    graft_int8_range u = {a.ok && b.ok, a.min < b.min ? a.min : b.min, a.max > b.max ? a.max : b.max};
    return u;
}

int graft_int8_fits(graft_int8_range r, int shift) {
    return r.ok && (shift == 0 || shift == 128) && r.min >= (float)(shift - 128) &&
           r.max <= (float)(shift + 127);
}

int graft_int8_shift(graft_int8_range r) {
    if (graft_int8_fits(r, 128)) return 128;
    if (graft_int8_fits(r, 0)) return 0;
    return -1;
}
