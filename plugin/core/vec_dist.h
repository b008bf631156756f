/* Internal: the dissimilarity every CPU graph routine uses (RNN-Descent build, graph search). */
#ifndef GRAFT_VEC_DIST_H
#define GRAFT_VEC_DIST_H
#include <stdint.h>

/* Squared L2 (l2 != 0) or minus the dot product. Eight partial sums in a fixed order:
 * vectorizable without -ffast-math, identical on every thread, and d(a, b) == d(b, a) bit for
 * bit. Inline so it folds into the callers' inner loops. */
static inline float graft_vec_dist(const float* a, const float* b, int64_t d, int l2) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    if (l2) {
        for (; j + 8 <= d; j += 8)
            for (int t = 0; t < 8; t++) {
                float u = a[j + t] - b[j + t];
                s[t] += u * u;
            }
        for (; j < d; j++) s[0] += (a[j] - b[j]) * (a[j] - b[j]);
    } else {
        for (; j + 8 <= d; j += 8)
            for (int t = 0; t < 8; t++) s[t] -= a[j + t] * b[j + t];
        for (; j < d; j++) s[0] -= a[j] * b[j];
    }
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

#endif
