/* CPU reference for exact k-NN: the oracle of the GPU tests (see graft/flat.h). Plain loops in
 * double, a bounded max-heap per query ordered by (distance, id), OpenMP over queries. */
#include <float.h>
#include <stdlib.h>

#include "core/error.h"
#include "graft/flat.h"

typedef struct {
    double v; /* smaller is better: L2 distance, or minus the dot product */
    int64_t id;
} cand;

static int worse(cand a, cand b) { return a.v > b.v || (a.v == b.v && a.id > b.id); }

/* Max-heap on `worse`: the root is the worst kept candidate. */
static void sift_down(cand* h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && worse(h[l], h[m])) m = l;
        if (r < n && worse(h[r], h[m])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void sift_up(cand* h, int64_t i) {
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!worse(h[i], h[p])) return;
        cand t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static double score(const float* a, const float* b, int64_t d, int l2) {
    double s = 0;
    if (l2) {
        for (int64_t j = 0; j < d; j++) {
            double t = (double)a[j] - (double)b[j];
            s += t * t;
        }
        return s;
    }
    for (int64_t j = 0; j < d; j++) s += (double)a[j] * (double)b[j];
    return -s;
}

int graft_knn_cpu(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int64_t k,
                  graft_metric metric, int64_t exclude_self, float* D, int64_t* I) {
    if ((!xb && nb > 0) || (!xq && nq > 0) || !D || !I)
        return graft_fail(GRAFT_EINVAL, "graft_knn_cpu: NULL pointer argument");
    if (nb < 0 || nq < 0 || d < 1 || k < 1)
        return graft_fail(GRAFT_EINVAL, "graft_knn_cpu: bad sizes nb=%lld nq=%lld d=%lld k=%lld",
                          (long long)nb, (long long)nq, (long long)d, (long long)k);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "graft_knn_cpu: unknown metric %d", (int)metric);
    const int l2 = metric == GRAFT_METRIC_L2;
    const int64_t kk = k < nb ? k : nb;
    int failed = 0;
#pragma omp parallel
    {
        cand* heap = malloc((size_t)(kk > 0 ? kk : 1) * sizeof(cand));
        if (!heap) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t q = 0; q < nq; q++) {
            if (!heap) continue;
            const float* x = xq + q * d;
            int64_t n = 0;
            for (int64_t i = 0; i < nb; i++) {
                if (exclude_self >= 0 && i == exclude_self + q) continue;
                cand c = {score(x, xb + i * d, d, l2), i};
                if (n < kk) {
                    heap[n] = c;
                    sift_up(heap, n++);
                } else if (worse(heap[0], c)) {
                    heap[0] = c;
                    sift_down(heap, n, 0);
                }
            }
            /* Pop worst-first into the tail: the row ends up best-first. */
            float* Dq = D + q * k;
            int64_t* Iq = I + q * k;
            for (int64_t j = n; j < k; j++) {
                Dq[j] = l2 ? FLT_MAX : -FLT_MAX;
                Iq[j] = -1;
            }
            for (int64_t j = n - 1; j >= 0; j--) {
                Dq[j] = (float)(l2 ? heap[0].v : -heap[0].v);
                Iq[j] = heap[0].id;
                heap[0] = heap[j];
                sift_down(heap, j, 0);
            }
        }
        free(heap);
    }
    if (failed) return graft_fail(GRAFT_ENOMEM, "graft_knn_cpu: out of host memory");
    return GRAFT_OK;
}
