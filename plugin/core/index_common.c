/* Shared parts of the index objects (index_common.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/index_common.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/threads.h"
#include "graft_gpu.h"
#include "core/validate.h"

double graft_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int graft_relabel(int status, const char* prefix) {
    char msg[960];
    snprintf(msg, sizeof msg, "%s", graft_last_error());
    return graft_fail(status, "%s%s", prefix, msg);
}

void graft_fill_empty(int64_t nq, int64_t k, graft_metric metric, float* D, int64_t* I) {
    const float none = metric == GRAFT_METRIC_L2 ? FLT_MAX : -FLT_MAX;
    for (int64_t i = 0; i < nq * k; i++) {
        D[i] = none;
        I[i] = -1;
    }
}

size_t graft_index_scratch_cap(int device) {
    const size_t max_scratch = (size_t)8 << 30, quarter = graft_gpu_device_memory(device) / 4;
    return quarter && quarter < max_scratch ? quarter : max_scratch;
}

int graft_check_add_args(int have_index, int64_t n, const float* x, const char* fn) {
    if (!have_index || (!x && n > 0)) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (n < 0) return graft_fail(GRAFT_EINVAL, "%s: n = %lld < 0", fn, (long long)n);
    return GRAFT_OK;
}

int graft_check_search_call(int have_index, int64_t nq, const float* xq, int64_t k, const float* D,
                            const int64_t* I, const char* fn) {
    if (!have_index || ((!xq || !D || !I) && nq > 0))
        return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (nq < 0) return graft_fail(GRAFT_EINVAL, "%s: nq = %lld < 0", fn, (long long)nq);
    if (k < 1) return graft_fail(GRAFT_EINVAL, "%s: k must be >= 1, got %lld", fn, (long long)k);
    if (k > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: k = %lld exceeds the largest worklist (L <= 1024) of the "
                          "graph search; an exact flat index serves any k", fn, (long long)k);
    return GRAFT_OK;
}

int graft_check_filter_len(const uint8_t* allowed, int64_t allowed_n, int64_t ntotal,
                           const char* fn) {
    if (allowed && allowed_n > 0 && allowed_n < ntotal)
        return graft_fail(GRAFT_ESTATE, "%s: the filter covers %lld ids, the index holds %lld", fn,
                          (long long)allowed_n, (long long)ntotal);
    return GRAFT_OK;
}

void graft_copy_rows(float* dst, const float* src, int64_t n, int64_t d) {
    const int64_t bytes = n * d * (int64_t)sizeof(float);
    graft_memcpy_on(dst, src, (size_t)bytes, graft_threads_for(bytes));
}

int graft_copy_rows_finite(float* dst, const float* src, int64_t n, int64_t d, const char* what) {
    const int64_t rows = 1 << 14;
    const int t = graft_threads_for(n * d * (int64_t)sizeof(float));
    int64_t bad = n; /* the first block of rows holding NaN or Inf */
#pragma omp parallel for reduction(min : bad) schedule(static) num_threads(t) if (t > 1)
    for (int64_t i = 0; i < n; i += rows) {
        const size_t len = (size_t)(n - i < rows ? n - i : rows) * (size_t)d;
        const float* s = src + i * d;
        float* o = dst + i * d;
        uint32_t nonfinite = 0;
        /* Bit tests rather than isfinite(): the loop vectorizes (an all-ones exponent is NaN or
         * Inf). */
        for (size_t j = 0; j < len; j++) {
            uint32_t u;
            memcpy(&u, s + j, 4);
            memcpy(o + j, &u, 4);
            nonfinite |= (~u & 0x7f800000u) == 0;
        }
        if (nonfinite && i < bad) bad = i;
    }
    for (int64_t i = bad; i < n; i++)
        for (int64_t j = 0; j < d; j++)
            if (!isfinite(src[i * d + j])) return graft_fail_nonfinite(what, i);
    return GRAFT_OK;
}
