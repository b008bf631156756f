/* The filtered search of the graph indexes (plugin/graph/filtered_search.h; the rule is documented in
 * graft/graph.h, "Filtered search"). */
#include "graph/filtered_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/flat.h"
#include "core/index_common.h"
#include "core/validate.h"

/* The cost model (graft/graph.h): a walk with beam L over a degree-R graph computes about
 * WALK_DISTANCES x L x R distances a query (1129 at L = 48, R = 64 on 1M dense SIFT, measured by
 * the GPU kernel's counters: bench/RESULTS.md); an exact distance over gathered vectors costs
 * EXACT_COST_* of a walk's distance (the GPU's FP32 GEMM + selection at 2.1e11 distances/s on
 * the H100 against the walk kernel's 6.2e9; on the CPU, see CPU_*_EXACT_COST). */
#define WALK_DISTANCES 0.37
#define GPU_EXACT_COST (1.0 / 34.0)
/* CPU, measured with tests/faiss/test_faiss_filter (it prints both paths' times) on a 2-core
 * machine, s = 0.5, walk at L' = 128. With a cpu_knn (the FAISS adapter: FAISS's brute force,
 * BLAS) an exact distance took 0.3-0.8 walk distances on sift5k (6-15 ms for 1.1M against 25 ms
 * for the walk's ~1.5M) and 0.27 on Fashion-MNIST 20k (53 ms for 2M against 60 ms for ~0.6M):
 * 0.5. graft_knn_cpu (no cpu_knn; double sums, a heap a query) took 2.5 (sift5k: 0.15 s for
 * 1.1M against 0.079 s for the walk) and 2.4 (Fashion-MNIST 20k). */
#define CPU_KNN_EXACT_COST 0.5
#define CPU_REFERENCE_EXACT_COST 2.5
/* Device bytes of one batch of queries and their results on the exact path. */
#define EXACT_IO_BYTES ((size_t)64 << 20)
/* Bytes of passing vectors gathered at once: more pass in chunks whose top k are merged, so that
 * an out-of-core index (or a forced exact search over most of a large index) never copies them
 * all to the GPU, nor doubles them in host memory. */
#define EXACT_CHUNK_BYTES ((size_t)256 << 20)

int64_t graft_filter_count(const uint8_t* allowed, int64_t n) {
    if (!allowed || n <= 0) return 0;
    const int64_t full = n >> 3;
    int64_t c = 0, i = 0;
    for (; i + 8 <= full; i += 8) {
        uint64_t w;
        memcpy(&w, allowed + i, 8);
        c += __builtin_popcountll(w);
    }
    for (; i < full; i++) c += __builtin_popcount(allowed[i]);
    if (n & 7) c += __builtin_popcount(allowed[full] & ((1u << (n & 7)) - 1u));
    return c;
}

int graft_filter_walk_beam(int L, double s) {
    if (s <= 0) return 1024;
    double w = ceil((double)L / s);
    if (w < L) w = L;
    return w > 1024 ? 1024 : (int)w;
}

/* Exact cost minus walk cost at selectivity s, in walk distances per query: increasing in s. */
static double cost_gap(double s, int64_t n, int L, int R, double c) {
    return s * (double)n * c - WALK_DISTANCES * graft_filter_walk_beam(L, s) * (double)R;
}

double graft_filter_threshold(double exact_below, const graft_filter_data* dt, int L) {
    if (exact_below >= 0) return exact_below;
    const int64_t n = dt->n;
    const int R = dt->R;
    const double c = dt->ctx ? GPU_EXACT_COST : dt->cpu_knn ? CPU_KNN_EXACT_COST : CPU_REFERENCE_EXACT_COST;
    if (cost_gap(1.0, n, L, R, c) <= 0) return 1.0; /* exact is cheaper at any selectivity */
    double lo = 0, hi = 1;
    for (int it = 0; it < 60; it++) {
        const double mid = 0.5 * (lo + hi);
        if (cost_gap(mid, n, L, R, c) <= 0)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int gpu_status(int rc, const char* fn) {
    return graft_fail(rc, "%s: filtered exact search: %s", fn, graft_gpu_last_error());
}

void graft_filter_dev_release(graft_gpu_ctx* ctx, graft_filter_dev* dev) {
    if (!dev) return;
    if (ctx) {
        graft_gpu_free(ctx, dev->ids);
        graft_gpu_free(ctx, dev->x);
        graft_gpu_free(ctx, dev->norms);
        graft_gpu_free(ctx, dev->io);
    }
    memset(dev, 0, sizeof *dev);
}

/* Grows a device buffer to at least `bytes` (contents dropped). */
static int grow(graft_gpu_ctx* ctx, void** buf, size_t* have, size_t bytes) {
    if (bytes <= *have) return GRAFT_OK;
    graft_gpu_free(ctx, *buf);
    *buf = NULL;
    *have = 0;
    GRAFT_TRY(graft_gpu_malloc(ctx, buf, bytes));
    *have = bytes;
    return GRAFT_OK;
}

/* Rows ids[0..np) of the index's vectors (d columns) into a new host buffer: copied from x, or
 * decoded from the codes when they are the only copy (keep_fp32 = 0); NULL when out of memory. */
static float* gather_host(const graft_filter_data* dt, const int32_t* ids, int64_t np) {
    const int64_t d = dt->d;
    float* xs = malloc((size_t)(np > 0 ? np : 1) * (size_t)d * sizeof(float));
    if (!xs) return NULL;
    const size_t cs = dt->x ? 0 : graft_storage_code_size(dt->st->kind, d);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < np; i++) {
        if (dt->x)
            memcpy(xs + i * d, dt->x + (int64_t)ids[i] * d, (size_t)d * sizeof(float));
        else
            graft_storage_decode(dt->st, 1, dt->codes + (size_t)ids[i] * cs, xs + i * d);
    }
    return xs;
}

/* Exact k-NN on the GPU of nq host queries among the np passing vectors. */
static int exact_gpu(const graft_filter_data* dt, const int32_t* ids, int64_t np, const float* xq,
                     int64_t nq, int64_t k, float* D, int64_t* I, const char* fn) {
    graft_gpu_ctx* ctx = dt->ctx;
    graft_filter_dev* dev = dt->dev;
    const int64_t d = dt->d;
    size_t xbytes;
    if (graft_mul_overflow((size_t)np, (size_t)d * sizeof(float), &xbytes))
        return graft_fail(GRAFT_ENOMEM, "%s: size overflow", fn);
    int rc = grow(ctx, (void**)&dev->x, &dev->x_bytes, xbytes);
    if (rc == GRAFT_OK && dt->x_dev) { /* the vectors are on the device: gather them there */
        rc = grow(ctx, (void**)&dev->ids, &dev->ids_bytes, (size_t)np * sizeof(int32_t));
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev->ids, ids, (size_t)np * sizeof(int32_t));
        if (rc == GRAFT_OK) rc = graft_gpu_gather_rows(ctx, dt->x_dev, dev->ids, np, d, dev->x);
    } else if (rc == GRAFT_OK) { /* out-of-core, or codes only: gathered on the host */
        float* xs = gather_host(dt, ids, np);
        if (!xs) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, xbytes);
        rc = graft_gpu_upload(ctx, dev->x, xs, xbytes);
        free(xs);
    }
    const int l2 = dt->metric == GRAFT_METRIC_L2;
    if (rc == GRAFT_OK && l2) rc = grow(ctx, (void**)&dev->norms, &dev->norms_bytes, (size_t)np * sizeof(float));
    if (rc == GRAFT_OK && l2) rc = graft_gpu_row_norms(ctx, dev->x, np, d, dev->norms);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    const size_t per_q = (size_t)d * sizeof(float) + (size_t)k * (sizeof(float) + sizeof(int64_t));
    int64_t batch = (int64_t)(EXACT_IO_BYTES / per_q);
    if (batch < 1) batch = 1;
    if (batch > nq) batch = nq;
    const size_t qbytes = ((size_t)batch * d * sizeof(float) + 255) / 256 * 256;
    const size_t dbytes = ((size_t)batch * k * sizeof(float) + 255) / 256 * 256;
    rc = grow(ctx, &dev->io, &dev->io_bytes, qbytes + dbytes + (size_t)batch * k * sizeof(int64_t));
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    float* dq = dev->io;
    float* dD = (float*)((char*)dev->io + qbytes);
    int64_t* dI = (int64_t*)((char*)dev->io + qbytes + dbytes);
    for (int64_t q0 = 0; q0 < nq && rc == GRAFT_OK; q0 += batch) {
        const int64_t nb = nq - q0 < batch ? nq - q0 : batch;
        graft_gpu_knn_args a = {dev->x, l2 ? dev->norms : NULL, np, dq, nb, d, k, (int)dt->metric,
                                -1, dD, dI};
        rc = graft_gpu_upload(ctx, dq, xq + q0 * d, (size_t)nb * d * sizeof(float));
        if (rc == GRAFT_OK) rc = graft_gpu_exact_knn(ctx, &a);
        if (rc == GRAFT_OK) rc = graft_gpu_download(ctx, D + q0 * k, dD, (size_t)nb * k * sizeof(float));
        if (rc == GRAFT_OK) rc = graft_gpu_download(ctx, I + q0 * k, dI, (size_t)nb * k * sizeof(int64_t));
    }
    return rc == GRAFT_OK ? GRAFT_OK : gpu_status(rc, fn);
}

/* Exact k-NN of nq queries among the np passing ids ids[0..np) (one chunk), results in FAISS
 * layout with index ids. */
static int exact_chunk(const graft_filter_data* dt, const int32_t* ids, int64_t np, const float* xq,
                       int64_t nq, int64_t k, float* D, int64_t* I, const char* fn) {
    int rc;
    if (dt->ctx) {
        rc = exact_gpu(dt, ids, np, xq, nq, k, D, I, fn);
    } else {
        float* xs = gather_host(dt, ids, np);
        if (!xs) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        rc = dt->cpu_knn ? dt->cpu_knn(xs, np, xq, nq, dt->d, k, dt->metric, D, I)
                         : graft_knn_cpu(xs, np, xq, nq, dt->d, k, dt->metric, -1, D, I);
        free(xs);
        if (rc != GRAFT_OK) return graft_relabel(rc, fn);
    }
    if (rc != GRAFT_OK) return rc;
    const int64_t total = nq * k;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; i++)
        if (I[i] >= 0) I[i] = ids[I[i]];
    return GRAFT_OK;
}

/* Row by row, the k best of (D, I) and (D2, I2), both in FAISS order, into (D, I). A tie goes to
 * (D, I), whose ids come from earlier chunks and so are smaller: FAISS's tie order is kept. */
static void merge_rows(int64_t nq, int64_t k, int l2, float* D, int64_t* I, const float* D2,
                       const int64_t* I2, float* tD, int64_t* tI) {
    for (int64_t q = 0; q < nq; q++) {
        const float *a = D + q * k, *b = D2 + q * k;
        const int64_t *ia = I + q * k, *ib = I2 + q * k;
        int64_t x = 0, y = 0;
        for (int64_t j = 0; j < k; j++) {
            const int take_a = ib[y] < 0 || (ia[x] >= 0 && (l2 ? a[x] <= b[y] : a[x] >= b[y]));
            if (take_a) tD[j] = a[x], tI[j] = ia[x], x++;
            else tD[j] = b[y], tI[j] = ib[y], y++;
        }
        memcpy(D + q * k, tD, (size_t)k * sizeof(float));
        memcpy(I + q * k, tI, (size_t)k * sizeof(int64_t));
    }
}

/* Exact k-NN of nq queries among the np passing ids (ascending, so that ties still go to the
 * smaller index id), results in FAISS layout with index ids; in chunks of EXACT_CHUNK_BYTES of
 * vectors. */
static int exact_search(const graft_filter_data* dt, const int32_t* ids, int64_t np, const float* xq,
                        int64_t nq, int64_t k, float* D, int64_t* I, const char* fn) {
    if (np == 0) {
        graft_fill_empty(nq, k, dt->metric, D, I);
        return GRAFT_OK;
    }
    int64_t chunk = (int64_t)(EXACT_CHUNK_BYTES / ((size_t)dt->d * sizeof(float)));
    if (chunk < k) chunk = k;
    if (chunk >= np) return exact_chunk(dt, ids, np, xq, nq, k, D, I, fn);
    GRAFT_TRY(exact_chunk(dt, ids, chunk, xq, nq, k, D, I, fn));
    float* D2 = malloc((size_t)(nq * k) * sizeof(float));
    int64_t* I2 = malloc((size_t)(nq * k) * sizeof(int64_t));
    float* tD = malloc((size_t)k * sizeof(float));
    int64_t* tI = malloc((size_t)k * sizeof(int64_t));
    int rc = D2 && I2 && tD && tI ? GRAFT_OK : graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    for (int64_t c0 = chunk; c0 < np && rc == GRAFT_OK; c0 += chunk) {
        const int64_t nc = np - c0 < chunk ? np - c0 : chunk;
        rc = exact_chunk(dt, ids + c0, nc, xq, nq, k, D2, I2, fn);
        if (rc == GRAFT_OK) merge_rows(nq, k, dt->metric == GRAFT_METRIC_L2, D, I, D2, I2, tD, tI);
    }
    free(D2), free(I2), free(tD), free(tI);
    return rc;
}

/* The queries whose row holds fewer than `need` results, searched again exactly. */
static int redo_short(const graft_filter_data* dt, const int32_t* ids, int64_t np, const float* xq,
                      int64_t nq, int64_t k, float* D, int64_t* I, int64_t* redone, const char* fn) {
    const int64_t need = k < np ? k : np;
    int64_t* rows = malloc((size_t)(nq > 0 ? nq : 1) * sizeof(int64_t));
    if (!rows) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    int64_t m = 0;
    for (int64_t q = 0; q < nq; q++) {
        int64_t found = 0;
        for (int64_t j = 0; j < k; j++) found += I[q * k + j] >= 0;
        if (found < need) rows[m++] = q;
    }
    *redone = m;
    int rc = GRAFT_OK;
    if (m > 0) {
        const int64_t d = dt->d;
        float* q2 = malloc((size_t)m * (size_t)d * sizeof(float));
        float* D2 = malloc((size_t)m * (size_t)k * sizeof(float));
        int64_t* I2 = malloc((size_t)m * (size_t)k * sizeof(int64_t));
        if (!q2 || !D2 || !I2) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        if (rc == GRAFT_OK) {
            for (int64_t i = 0; i < m; i++) memcpy(q2 + i * d, xq + rows[i] * d, (size_t)d * sizeof(float));
            rc = exact_search(dt, ids, np, q2, m, k, D2, I2, fn);
        }
        if (rc == GRAFT_OK)
            for (int64_t i = 0; i < m; i++) {
                memcpy(D + rows[i] * k, D2 + i * k, (size_t)k * sizeof(float));
                memcpy(I + rows[i] * k, I2 + i * k, (size_t)k * sizeof(int64_t));
            }
        free(q2);
        free(D2);
        free(I2);
    }
    free(rows);
    return rc;
}

int graft_filtered_search(const graft_filter_data* dt, const uint8_t* allowed, int L,
                          double exact_below, const float* xq, int64_t nq, int64_t k, float* D,
                          int64_t* I, graft_filter_walk_fn walk, void* walk_arg,
                          graft_filter_report* rep, const char* fn) {
    graft_filter_report r;
    memset(&r, 0, sizeof r);
    r.passing = dt->n;
    r.selectivity = 1.0;
    if (!allowed) {
        r.path = GRAFT_FILTER_NONE;
        r.L = L;
        if (rep) *rep = r;
        return walk(walk_arg, L, D, I);
    }
    const int64_t np = graft_filter_count(allowed, dt->n);
    r.passing = np;
    r.selectivity = dt->n > 0 ? (double)np / (double)dt->n : 0.0;
    r.exact_below = graft_filter_threshold(exact_below, dt, L);
    /* With at most k passing ids the exact answer is every one of them: no walk can do better. */
    const int exact = np <= k || r.selectivity < r.exact_below;
    int32_t* ids = malloc((size_t)(np > 0 ? np : 1) * sizeof(int32_t));
    if (!ids) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    for (int64_t i = 0, j = 0; i < dt->n && j < np; i++)
        if (allowed[i >> 3] >> (i & 7) & 1) ids[j++] = (int32_t)i;
    int rc;
    if (exact) {
        r.path = GRAFT_FILTER_EXACT;
        /* The walks check their queries' values where they read them; the exact path here. */
        rc = graft_check_finite(xq, nq, dt->d, fn);
        if (rc == GRAFT_OK) rc = exact_search(dt, ids, np, xq, nq, k, D, I, fn);
    } else {
        r.path = GRAFT_FILTER_WALK;
        r.L = graft_filter_walk_beam(L, r.selectivity);
        if (r.L < k) r.L = (int)k;
        rc = walk(walk_arg, r.L, D, I);
        if (rc == GRAFT_OK) rc = redo_short(dt, ids, np, xq, nq, k, D, I, &r.redone, fn);
    }
    free(ids);
    if (rc == GRAFT_OK && rep) *rep = r;
    return rc;
}
