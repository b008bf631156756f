/* Product quantization (graft/pq.h): training through the caller's k-means, encoding, decoding,
 * and the per-query distance tables of the asymmetric distance. */
#include "graft/pq.h"

#include <float.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/validate.h"

void graft_pq_params_defaults(graft_pq_params* p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->M = 0;
    p->max_train = 65536;
    p->seed = 1234;
}

void graft_pq_free(graft_pq* pq) {
    if (!pq) return;
    free(pq->centroids);
    memset(pq, 0, sizeof *pq);
}

int graft_pq_default_M(int64_t d) {
    if (d < 4) return 1;
    int64_t m = d / 4;
    while (d % m) m--;
    return (int)m;
}

int graft_pq_check(const graft_pq* pq, const char* fn) {
    if (!pq || !pq->centroids) return graft_fail(GRAFT_EINVAL, "%s: NULL or untrained codebooks", fn);
    if (pq->M < 1 || pq->dsub < 1 || pq->d != (int64_t)pq->M * pq->dsub)
        return graft_fail(GRAFT_EINVAL, "%s: malformed codebooks (d=%lld M=%d dsub=%d)", fn,
                          (long long)pq->d, pq->M, pq->dsub);
    return graft_check_finite(pq->centroids, (int64_t)pq->M * GRAFT_PQ_KSUB, pq->dsub, fn);
}

int graft_pq_check_coding(const graft_pq* pq, int64_t n, const void* x, const void* codes,
                          const char* fn) {
    GRAFT_TRY(graft_pq_check(pq, fn));
    if ((!x || !codes) && n > 0) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (n < 0) return graft_fail(GRAFT_EINVAL, "%s: n = %lld < 0", fn, (long long)n);
    return GRAFT_OK;
}

/* The sub-space sizes for (d, M), or GRAFT_EINVAL naming what is wrong. */
static int check_shape(int64_t d, int M, const char* fn) {
    if (d < 1) return graft_fail(GRAFT_EINVAL, "%s: dimension %lld < 1", fn, (long long)d);
    if (M < 1 || M > d || d % M)
        return graft_fail(GRAFT_EINVAL, "%s: M = %d sub-quantizers must divide the dimension d = %lld "
                          "(e.g. M = %d)", fn, M, (long long)d, graft_pq_default_M(d));
    return GRAFT_OK;
}

/* Knuth's selection sampling (TAOCP 3.4.2, Algorithm S): m of [0, n) in increasing order, one
 * pass, O(1) memory besides the output. */
static void sample_rows(int64_t n, int64_t m, uint64_t seed, int64_t* out) {
    uint64_t s = seed;
    int64_t got = 0;
    for (int64_t i = 0; i < n && got < m; i++) {
        const double u = (double)(graft_splitmix64(&s) >> 11) * 0x1.0p-53;
        if ((double)(n - i) * u < (double)(m - got)) out[got++] = i;
    }
}

int graft_pq_train(int64_t d, int64_t n, const float* x, const graft_pq_params* params,
                   graft_pq* out) {
    const char* fn = "graft_pq_train";
    graft_pq_params p;
    graft_pq_params_defaults(&p);
    if (params) p = *params;
    if (!x || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    const int M = p.M ? p.M : graft_pq_default_M(d);
    GRAFT_TRY(check_shape(d, M, fn));
    if (n < GRAFT_PQ_KSUB)
        return graft_fail(GRAFT_EINVAL, "%s: too few training points: %lld for %d centroids per "
                          "sub-space (at least %d; FAISS recommends %d or more)", fn, (long long)n,
                          GRAFT_PQ_KSUB, GRAFT_PQ_KSUB, 39 * GRAFT_PQ_KSUB);
    if (p.max_train < GRAFT_PQ_KSUB)
        return graft_fail(GRAFT_EINVAL, "%s: max_train = %lld < %d centroids", fn,
                          (long long)p.max_train, GRAFT_PQ_KSUB);
    if (!p.kmeans)
        return graft_fail(GRAFT_EINVAL, "%s: no k-means given (graft_pq_params.kmeans); the FAISS "
                          "adapter's graft_faiss_kmeans is FAISS's own", fn);
    GRAFT_TRY(graft_check_finite(x, n, d, fn));
    if (p.kmeans_threads < 0)
        return graft_fail(GRAFT_EINVAL, "%s: kmeans_threads = %d < 0", fn, p.kmeans_threads);
    const int dsub = (int)(d / M);
    const int64_t nt = n < p.max_train ? n : p.max_train;
    /* Sub-spaces in parallel, each k-means on one thread: FAISS's k-means of a few dimensions
     * is mostly per-iteration overhead that its own threads do not remove (measured: 36 s for
     * M = 32 on 65k points, 16 threads, one sub-space after the other). */
    int threads = p.kmeans_threads ? p.kmeans_threads : omp_get_max_threads();
    if (threads > M) threads = M;
    if (threads < 1) threads = 1;
    int64_t* rows = malloc((size_t)nt * sizeof(int64_t));
    float* subs = malloc((size_t)threads * (size_t)nt * (size_t)dsub * sizeof(float));
    float* cent = malloc((size_t)M * GRAFT_PQ_KSUB * (size_t)dsub * sizeof(float));
    int rc = GRAFT_OK;
    if (!rows || !subs || !cent) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    if (rc == GRAFT_OK) sample_rows(n, nt, p.seed, rows);
    /* The lowest failing sub-space's status and message (the k-means set it on its thread);
     * after a failure the sub-spaces not started are skipped. */
    int fail_m = M, fail_rc = GRAFT_OK, fail_nan = 0, stop = rc != GRAFT_OK;
    char fail_msg[900] = "";
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
    for (int m = 0; m < M; m++) {
        int skip;
#pragma omp atomic read
        skip = stop;
        if (skip) continue;
        float* sub = subs + (size_t)omp_get_thread_num() * (size_t)nt * dsub;
        for (int64_t i = 0; i < nt; i++)
            memcpy(sub + i * dsub, x + rows[i] * d + (int64_t)m * dsub, (size_t)dsub * sizeof(float));
        float* cm = cent + (size_t)m * GRAFT_PQ_KSUB * dsub;
        int r = p.kmeans(p.kmeans_ctx, dsub, nt, GRAFT_PQ_KSUB, sub, cm);
        const int nan = r == GRAFT_OK && graft_check_finite(cm, GRAFT_PQ_KSUB, dsub, fn) != GRAFT_OK;
        if (r != GRAFT_OK || nan) {
#pragma omp critical(graft_pq_train_fail)
            if (m < fail_m) {
                fail_m = m;
                fail_rc = nan ? GRAFT_EINTERNAL : r;
                fail_nan = nan;
                if (!nan) snprintf(fail_msg, sizeof fail_msg, "%s", graft_last_error());
            }
#pragma omp atomic write
            stop = 1;
        }
    }
    if (rc == GRAFT_OK && fail_rc != GRAFT_OK) {
        if (fail_nan)
            rc = graft_fail(GRAFT_EINTERNAL, "%s: k-means of sub-space %d returned NaN/Inf", fn,
                            fail_m);
        else
            rc = graft_fail(fail_rc < 0 ? fail_rc : GRAFT_EINTERNAL,
                            "%s: k-means of sub-space %d failed: %s", fn, fail_m, fail_msg);
    }
    free(rows);
    free(subs);
    if (rc != GRAFT_OK) {
        free(cent);
        return rc;
    }
    graft_pq_free(out);
    out->d = d;
    out->M = M;
    out->dsub = dsub;
    out->centroids = cent;
    return GRAFT_OK;
}

static float sq_l2(const float* a, const float* b, int n) {
    float s = 0;
    for (int j = 0; j < n; j++) s += (a[j] - b[j]) * (a[j] - b[j]);
    return s;
}

int graft_pq_encode(const graft_pq* pq, int64_t n, const float* x, uint8_t* codes) {
    GRAFT_TRY(graft_pq_check_coding(pq, n, x, codes, "graft_pq_encode"));
    const int M = pq->M, ds = pq->dsub, K = GRAFT_PQ_KSUB;
    /* The codebooks transposed (M x dsub x 256) so that the 256 distances of a sub-vector are
     * summed side by side (vectorized) over its dsub values, each in the order of a plain loop
     * over the dimensions: the same floats as one centroid at a time, 1.26x faster (2 cores,
     * baseline x86-64 SSE2; the GPU encode, graft_pq_encode_gpu, is the fast path). */
    float* ct = malloc((size_t)M * ds * K * sizeof(float));
    if (!ct) return graft_fail(GRAFT_ENOMEM, "graft_pq_encode: out of host memory");
    for (int m = 0; m < M; m++)
        for (int j = 0; j < K; j++)
            for (int t = 0; t < ds; t++)
                ct[((size_t)m * ds + t) * K + j] = pq->centroids[((size_t)m * K + j) * ds + t];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float acc[GRAFT_PQ_KSUB];
        for (int m = 0; m < M; m++) {
            const float* v = x + i * pq->d + (int64_t)m * ds;
            for (int j = 0; j < K; j++) acc[j] = 0;
            for (int t = 0; t < ds; t++) {
                const float u = v[t], *c = ct + ((size_t)m * ds + t) * K;
                for (int j = 0; j < K; j++) {
                    const float e = u - c[j];
                    acc[j] += e * e;
                }
            }
            int best = 0; /* the first nearest, as a strict < from centroid 0 */
            for (int j = 1; j < K; j++)
                if (acc[j] < acc[best]) best = j;
            codes[i * M + m] = (uint8_t)best;
        }
    }
    free(ct);
    return GRAFT_OK;
}

int graft_pq_decode(const graft_pq* pq, int64_t n, const uint8_t* codes, float* x) {
    GRAFT_TRY(graft_pq_check_coding(pq, n, x, codes, "graft_pq_decode"));
    const int M = pq->M, ds = pq->dsub;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (int m = 0; m < M; m++)
            memcpy(x + i * pq->d + (int64_t)m * ds,
                   pq->centroids + ((size_t)m * GRAFT_PQ_KSUB + codes[i * M + m]) * ds,
                   (size_t)ds * sizeof(float));
    return GRAFT_OK;
}

void graft_pq_table(const graft_pq* pq, const float* q, int l2, float* table) {
    const int M = pq->M, ds = pq->dsub;
    for (int m = 0; m < M; m++) {
        const float* qm = q + (int64_t)m * ds;
        const float* c = pq->centroids + (size_t)m * GRAFT_PQ_KSUB * ds;
        for (int j = 0; j < GRAFT_PQ_KSUB; j++) {
            const float* cj = c + (size_t)j * ds;
            float s = 0;
            if (l2)
                s = sq_l2(qm, cj, ds);
            else
                for (int t = 0; t < ds; t++) s -= qm[t] * cj[t];
            table[m * GRAFT_PQ_KSUB + j] = s;
        }
    }
}
