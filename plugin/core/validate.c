#include "core/validate.h"

#include <math.h>

#include "core/error.h"
#include "core/threads.h"
#include "graft/graph.h"

int graft_check_finite(const float* x, int64_t n, int64_t d, const char* what) {
    int64_t bad = n;
    const int t = graft_threads_for(n * d * (int64_t)sizeof(float));
#pragma omp parallel for reduction(min : bad) schedule(static) num_threads(t) if (t > 1)
    for (int64_t i = 0; i < n; i++) {
        const float* row = x + i * d;
        for (int64_t j = 0; j < d; j++)
            if (!isfinite(row[j])) {
                if (i < bad) bad = i;
                break;
            }
    }
    return bad < n ? graft_fail_nonfinite(what, bad) : GRAFT_OK;
}

int64_t graft_first_id_outside(const int32_t* ids, int64_t count, int64_t n) {
    int64_t bad = count;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (int64_t i = 0; i < count; i++)
        if ((ids[i] < -1 || ids[i] >= n) && i < bad) bad = i;
    return bad;
}

int graft_fail_nonfinite(const char* what, int64_t row) {
    return graft_fail(GRAFT_EINVAL, "%s: row %lld holds NaN or Inf; graft accepts finite values only",
                      what, (long long)row);
}

int graft_check_graph(const graft_graph* g, const char* fn) {
    if (!g || !g->nbrs) return graft_fail(GRAFT_EINVAL, "%s: NULL or empty graph", fn);
    if (g->n < 1 || g->n > INT32_MAX || g->R < 1 || g->entry < 0 || g->entry >= g->n)
        return graft_fail(GRAFT_EINVAL, "%s: malformed graph (n=%lld R=%d entry=%lld)", fn,
                          (long long)g->n, g->R, (long long)g->entry);
    return GRAFT_OK;
}
