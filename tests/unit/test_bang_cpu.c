/* Product quantization (plugin/storage/pq.c) and the BANG search's CPU reference (plugin/graph/bang.c) on real
 * data: codebooks trained by FAISS's k-means (graft_faiss_kmeans), PQ + re-rank recall on sift5k
 * and Fashion-MNIST, re-rank depth, expansion cap, filter, inner product, edges, bad input.
 * The printed recall sweep is the one quoted in bench/RESULTS.md and the issue notes. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h" /* plugin/core/error.h: graft_fail */
#include "graft/bang.h"
#include "graft_faiss_c.h"
#include "testutil.h"

static graft_pq_params pq_params(int M) {
    graft_pq_params p;
    graft_pq_params_defaults(&p);
    p.M = M;
    p.kmeans = graft_faiss_kmeans;
    return p;
}

typedef struct {
    const float* xb;
    int64_t n, d;
    graft_graph g;
    graft_pq pq;
    uint8_t* codes;
    graft_metric metric;
} fixture;

static void fixture_make(fixture* f, const float* xb, int64_t n, int64_t d, int M, graft_metric m) {
    memset(f, 0, sizeof *f);
    f->xb = xb;
    f->n = n;
    f->d = d;
    f->metric = m;
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    rp.metric = m;
    CHECK_OK(graft_rnnd_build_cpu(xb, n, d, &rp, &f->g));
    graft_pq_params pp = pq_params(M);
    CHECK_OK(graft_pq_train(d, n, xb, &pp, &f->pq));
    f->codes = malloc((size_t)(n * M));
    CHECK_OK(graft_pq_encode(&f->pq, n, xb, f->codes));
}

static void fixture_free(fixture* f) {
    graft_graph_free(&f->g);
    graft_pq_free(&f->pq);
    free(f->codes);
}

static double bang_recall(const fixture* f, const float* xq, int64_t nq, const int32_t* gt,
                          int64_t gt_k, int k, const graft_bang_params* p) {
    float* D = malloc(sizeof(float) * nq * k);
    int64_t* I = malloc(sizeof(int64_t) * nq * k);
    CHECK_OK(graft_bang_search_cpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, xq, nq, k, p, D,
                                   I));
    double r = graft_test_recall(I, k, gt, gt_k, nq, k);
    free(D);
    free(I);
    return r;
}

/* k-means stand-ins for the failure paths, on data whose value j of point i is 1000 j + i (so a
 * sub-space of one dimension starts with 1000 m): sub-space 5 fails. */
static int kmeans_fail_at_5(void* ctx, int64_t d, int64_t n, int64_t k, const float* x,
                            float* centroids) {
    (void)ctx;
    for (int64_t i = 0; i < k * d; i++) centroids[i] = x[(i / d) % n * d + i % d];
    if (x[0] == 5000.f) return graft_fail(GRAFT_ENOMEM, "test k-means gave up");
    return GRAFT_OK;
}

static int kmeans_nan_at_5(void* ctx, int64_t d, int64_t n, int64_t k, const float* x,
                           float* centroids) {
    const int rc = kmeans_fail_at_5(ctx, d, n, k, x, centroids);
    if (rc != GRAFT_OK) centroids[3] = NAN;
    return GRAFT_OK;
}

static void test_pq(const graft_test_sift* s) {
    graft_pq pq = {0};
    graft_pq_params pp = pq_params(32);
    CHECK_OK(graft_pq_train(s->d, s->nb, s->xb, &pp, &pq));
    CHECK(pq.M == 32 && pq.dsub == 4 && pq.d == 128, "shape M=%d dsub=%d", pq.M, pq.dsub);
    {
        /* Sub-spaces trained in parallel (the default) = one after the other, bit for bit:
         * FAISS's k-means is deterministic per call. */
        graft_pq seq = {0};
        graft_pq_params sp = pq_params(32);
        sp.kmeans_threads = 1;
        CHECK_OK(graft_pq_train(s->d, s->nb, s->xb, &sp, &seq));
        CHECK(memcmp(seq.centroids, pq.centroids, sizeof(float) * 128 * 256) == 0,
              "codebooks trained in parallel differ from the sequential ones");
        graft_pq_free(&seq);
    }
    uint8_t* codes = malloc((size_t)s->nb * 32);
    float* rec = malloc(sizeof(float) * s->nb * s->d);
    CHECK_OK(graft_pq_encode(&pq, s->nb, s->xb, codes));
    {
        /* The vectorized encode picks what one centroid at a time picks (first nearest). */
        int64_t differ = 0;
        for (int64_t i = 0; i < s->nb; i++)
            for (int m = 0; m < 32; m++) {
                const float* v = s->xb + i * 128 + m * 4;
                int best = 0;
                float bd = FLT_MAX;
                for (int j = 0; j < 256; j++) {
                    const float* c = pq.centroids + ((size_t)m * 256 + j) * 4;
                    float dj = 0;
                    for (int t = 0; t < 4; t++) dj += (v[t] - c[t]) * (v[t] - c[t]);
                    if (dj < bd) bd = dj, best = j;
                }
                differ += codes[i * 32 + m] != best;
            }
        CHECK(differ == 0, "%lld codes differ from one-centroid-at-a-time encoding", (long long)differ);
    }
    CHECK_OK(graft_pq_decode(&pq, s->nb, codes, rec));
    /* Quantization error relative to the data's spread. */
    double err = 0, var = 0, mean[128] = {0};
    for (int64_t i = 0; i < s->nb; i++)
        for (int j = 0; j < 128; j++) mean[j] += s->xb[i * 128 + j] / (double)s->nb;
    for (int64_t i = 0; i < s->nb * 128; i++) {
        double e = s->xb[i] - rec[i], v = s->xb[i] - mean[i % 128];
        err += e * e;
        var += v * v;
    }
    printf("PQ M=32 on sift5k: relative reconstruction error %.4f\n", err / var);
    CHECK(err / var < 0.10, "relative reconstruction error %.4f (measured 0.04)", err / var);
    /* Asymmetric distance = distance to the decoded vector; the table sums it per sub-space. */
    float* table = malloc(sizeof(float) * 32 * 256);
    for (int l2 = 0; l2 <= 1; l2++) {
        double worst = 0;
        for (int64_t q = 0; q < 20; q++) {
            graft_pq_table(&pq, s->xq + q * 128, l2, table);
            for (int64_t i = 0; i < 200; i++) {
                double adc = 0, ref = 0;
                for (int m = 0; m < 32; m++) adc += table[m * 256 + codes[i * 32 + m]];
                for (int j = 0; j < 128; j++) {
                    double a = s->xq[q * 128 + j], b = rec[i * 128 + j];
                    ref += l2 ? (a - b) * (a - b) : -a * b;
                }
                double rel = fabs(adc - ref) / (fabs(ref) + 1);
                if (rel > worst) worst = rel;
            }
        }
        CHECK(worst < 1e-4, "%s table: ADC differs from the decoded distance by %.2e",
              l2 ? "L2" : "IP", worst);
    }
    /* Encoding the centroids themselves gives their own indices. */
    float v[128];
    for (int c = 0; c < 256; c += 17) {
        uint8_t code[32];
        for (int m = 0; m < 32; m++) memcpy(v + m * 4, pq.centroids + ((size_t)m * 256 + c) * 4, 16);
        CHECK_OK(graft_pq_encode(&pq, 1, v, code));
        int same = 1;
        for (int m = 0; m < 32; m++) {
            const float* a = pq.centroids + ((size_t)m * 256 + c) * 4;
            const float* b = pq.centroids + ((size_t)m * 256 + code[m]) * 4;
            same &= memcmp(a, b, 16) == 0; /* duplicate centroids may take the smaller index */
        }
        CHECK(same, "centroid %d encoded to another centroid", c);
    }
    /* Bad input: M not dividing d, too few points, no k-means, NaN, NULL. */
    graft_pq bad = {0};
    pp = pq_params(7);
    CHECK_ERR(graft_pq_train(s->d, s->nb, s->xb, &pp, &bad), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "divide") != NULL, "message: %s", graft_last_error());
    pp = pq_params(16);
    CHECK_ERR(graft_pq_train(s->d, 255, s->xb, &pp, &bad), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "too few training points") != NULL, "message: %s",
          graft_last_error());
    pp.kmeans = NULL;
    CHECK_ERR(graft_pq_train(s->d, s->nb, s->xb, &pp, &bad), GRAFT_EINVAL);
    pp = pq_params(16);
    float* nanx = malloc(sizeof(float) * 300 * 128);
    memcpy(nanx, s->xb, sizeof(float) * 300 * 128);
    nanx[299 * 128 + 5] = NAN;
    CHECK_ERR(graft_pq_train(s->d, 300, nanx, &pp, &bad), GRAFT_EINVAL);
    CHECK(bad.centroids == NULL, "a failed training filled the output");
    CHECK_ERR(graft_pq_encode(&bad, 1, s->xb, codes), GRAFT_EINVAL);
    pp = pq_params(16);
    pp.kmeans_threads = -1;
    CHECK_ERR(graft_pq_train(s->d, s->nb, s->xb, &pp, &bad), GRAFT_EINVAL);
    /* A k-means failing (on a worker thread) names its sub-space, with its own message, on the
     * calling thread; one returning NaN likewise. */
    float* ramp = malloc(sizeof(float) * 300 * 16);
    for (int i = 0; i < 300; i++)
        for (int j = 0; j < 16; j++) ramp[i * 16 + j] = 1000.f * j + i;
    for (int mode = 0; mode < 2; mode++) {
        pp = pq_params(16);
        pp.kmeans = mode ? kmeans_nan_at_5 : kmeans_fail_at_5;
        CHECK_ERR(graft_pq_train(16, 300, ramp, &pp, &bad),
                  mode ? GRAFT_EINTERNAL : GRAFT_ENOMEM);
        CHECK(strstr(graft_last_error(), "sub-space 5") != NULL &&
                  strstr(graft_last_error(), mode ? "NaN" : "test k-means gave up") != NULL,
              "message: %s", graft_last_error());
        CHECK(bad.centroids == NULL, "a failed training filled the output");
    }
    pp = pq_params(16);
    pp.kmeans = kmeans_fail_at_5; /* succeeds on data without a sub-space starting at 5000 */
    CHECK_OK(graft_pq_train(16, 290, ramp + 16 * 10, &pp, &bad)); /* rows 10..299 of 300 */
    graft_pq_free(&bad);
    free(ramp);
    CHECK(graft_pq_default_M(128) == 32 && graft_pq_default_M(784) == 196 &&
              graft_pq_default_M(3) == 1 && graft_pq_default_M(100) == 25,
          "default M");
    free(nanx);
    free(table);
    free(codes);
    free(rec);
    graft_pq_free(&pq);
}

static void test_sift5k(const graft_test_sift* s) {
    fixture f;
    fixture_make(&f, s->xb, s->nb, s->d, 32, GRAFT_METRIC_L2);
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    const int Ls[] = {10, 16, 32, 64, 128, 256};
    double r64 = 0;
    for (int i = 0; i < 6; i++) {
        p.L = Ls[i];
        double r = bang_recall(&f, s->xq, s->nq, s->gt, s->gt_k, 10, &p);
        printf("sift5k BANG CPU (M=32, R=%d): L=%3d recall@10 %.4f\n", f.g.R, Ls[i], r);
        if (Ls[i] == 64) r64 = r;
    }
    CHECK(r64 >= 0.95, "recall@10 at L=64: %.4f", r64);
    /* Re-ranking only the k best by PQ distance loses recall; a depth above the expansions is
     * the same as all. */
    p.L = 64;
    p.rerank = 10;
    double r_k = bang_recall(&f, s->xq, s->nq, s->gt, s->gt_k, 10, &p);
    p.rerank = 8192;
    p.max_expand = 1000;
    double r_all = bang_recall(&f, s->xq, s->nq, s->gt, s->gt_k, 10, &p);
    printf("sift5k BANG CPU L=64: rerank 10 -> %.4f, rerank all -> %.4f\n", r_k, r_all);
    CHECK(r_k < r64, "re-ranking 10 (%.4f) should lose to re-ranking all (%.4f)", r_k, r64);
    CHECK(r_all == r64, "a large max_expand changed the result: %.4f vs %.4f", r_all, r64);
    /* An expansion cap of L stops earlier. */
    p.rerank = 0;
    p.max_expand = 64;
    double r_cap = bang_recall(&f, s->xq, s->nq, s->gt, s->gt_k, 10, &p);
    printf("sift5k BANG CPU L=64: max_expand 64 -> %.4f\n", r_cap);
    CHECK(r_cap <= r64 && r_cap > 0.5, "capped recall %.4f", r_cap);

    /* Filter: only even ids; recall against the exact top-10 among them. */
    graft_bang_params_defaults(&p);
    uint8_t* allowed = calloc((size_t)(s->nb + 7) / 8, 1);
    for (int64_t i = 0; i < s->nb; i += 2) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    p.allowed = allowed;
    float* D = malloc(sizeof(float) * s->nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * s->nq * 10);
    CHECK_OK(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, s->xq, s->nq,
                                   10, &p, D, I));
    int odd = 0;
    for (int64_t i = 0; i < s->nq * 10; i++) odd += I[i] >= 0 && (I[i] & 1);
    CHECK(odd == 0, "%d filtered ids returned", odd);
    float* even = malloc(sizeof(float) * (s->nb / 2 + 1) * 128);
    int64_t ne = 0;
    for (int64_t i = 0; i < s->nb; i += 2) memcpy(even + 128 * ne++, s->xb + i * 128, 512);
    int32_t* gte = graft_test_exact_topk(even, ne, s->xq, s->nq, 128, GRAFT_METRIC_L2, 10);
    for (int64_t i = 0; i < s->nq * 10; i++) gte[i] *= 2;
    double rf = graft_test_recall(I, 10, gte, 10, s->nq, 10);
    printf("sift5k BANG CPU L=64, even ids only: recall@10 %.4f\n", rf);
    CHECK(rf >= 0.85, "filtered recall %.4f", rf);
    /* Results sorted, distances exact. */
    int sorted = 1;
    for (int64_t q = 0; q < s->nq; q++)
        for (int j = 1; j < 10; j++) sorted &= D[q * 10 + j - 1] <= D[q * 10 + j];
    CHECK(sorted, "results not sorted by distance");

    /* Bad input. */
    graft_bang_params_defaults(&p);
    p.L = 5;
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 10,
                                    &p, D, I), GRAFT_EINVAL);
    graft_bang_params_defaults(&p);
    p.rerank = 5;
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 10,
                                    &p, D, I), GRAFT_EINVAL);
    graft_bang_params_defaults(&p);
    p.max_expand = 32;
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 10,
                                    &p, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, 64, GRAFT_METRIC_L2, s->xq, 1, 10,
                                    NULL, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, NULL, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 10,
                                    NULL, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 0,
                                    NULL, D, I), GRAFT_EINVAL);
    float qn[128];
    memcpy(qn, s->xq, sizeof qn);
    qn[3] = INFINITY;
    CHECK_ERR(graft_bang_search_cpu(&f.g, &f.pq, f.codes, s->xb, s->d, GRAFT_METRIC_L2, qn, 1, 10,
                                    NULL, D, I), GRAFT_EINVAL);
    free(gte);
    free(even);
    free(D);
    free(I);
    free(allowed);
    fixture_free(&f);
}

/* Inner product on normalized vectors (cosine) and Fashion-MNIST (d = 784). */
static void test_ip_and_fmnist(const graft_test_sift* s) {
    float* xb = malloc(sizeof(float) * s->nb * 128);
    float* xq = malloc(sizeof(float) * s->nq * 128);
    memcpy(xb, s->xb, sizeof(float) * s->nb * 128);
    memcpy(xq, s->xq, sizeof(float) * s->nq * 128);
    graft_test_normalize(xb, s->nb, 128);
    graft_test_normalize(xq, s->nq, 128);
    int32_t* gt = graft_test_exact_topk(xb, s->nb, xq, s->nq, 128, GRAFT_METRIC_INNER_PRODUCT, 10);
    fixture f;
    fixture_make(&f, xb, s->nb, 128, 32, GRAFT_METRIC_INNER_PRODUCT);
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    double r = bang_recall(&f, xq, s->nq, gt, 10, 10, &p);
    printf("sift5k cosine BANG CPU L=64: recall@10 %.4f\n", r);
    CHECK(r >= 0.95, "cosine recall %.4f", r);
    float D[10];
    int64_t I[10];
    CHECK_OK(graft_bang_search_cpu(&f.g, &f.pq, f.codes, xb, 128, GRAFT_METRIC_INNER_PRODUCT, xq, 1,
                                   10, &p, D, I));
    CHECK(D[0] >= D[9] && D[0] <= 1.0001f, "inner products not descending: %f .. %f", D[0], D[9]);
    fixture_free(&f);
    free(gt);
    free(xb);
    free(xq);

    float *fb, *fq;
    int64_t nb, nq, d;
    /* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): Fashion-MNIST's first 2000 images,
     * d = 784 and M = 98 all the same, not 10000 (codebooks, codes, graph, walk and re-rank run on
     * the same paths; the 0.95 bar is set at 10000, where a beam of 64 covers less). */
    const int64_t fm_nb = graft_test_quick() ? 2000 : 10000;
    if (graft_test_load_fmnist(fm_nb, 200, &fb, &nb, &fq, &nq, &d) != 0) return;
    int32_t* gtf = graft_test_exact_topk(fb, nb, fq, nq, d, GRAFT_METRIC_L2, 10);
    fixture_make(&f, fb, nb, d, 98, GRAFT_METRIC_L2); /* 8 dimensions per byte */
    const int Ls[] = {16, 32, 64};
    double rf[3];
    for (int i = 0; i < 3; i++) {
        p.L = Ls[i];
        rf[i] = bang_recall(&f, fq, nq, gtf, 10, 10, &p);
        printf("Fashion-MNIST %lldk BANG CPU (M=98): L=%d recall@10 %.4f\n", (long long)nb / 1000, Ls[i], rf[i]);
    }
    CHECK(rf[2] >= 0.95, "Fashion-MNIST recall at L=64: %.4f", rf[2]);
    fixture_free(&f);
    free(gtf);
    free(fb);
    free(fq);
}

/* k > n, n = 1 and identical vectors: FAISS's -1 labels beyond what exists. */
static void test_edges(const graft_test_sift* s) {
    graft_pq_params pp = pq_params(16);
    graft_pq pq = {0};
    CHECK_OK(graft_pq_train(128, s->nb, s->xb, &pp, &pq));
    uint8_t codes[5 * 16];
    CHECK_OK(graft_pq_encode(&pq, 5, s->xb, codes));
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    graft_graph g = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 5, 128, &rp, &g));
    float D[20];
    int64_t I[20];
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    CHECK_OK(graft_bang_search_cpu(&g, &pq, codes, s->xb, 128, GRAFT_METRIC_L2, s->xb + 2 * 128, 1,
                                   20, &p, D, I));
    CHECK(I[0] == 2 && D[0] == 0.0f, "self not first: %lld %f", (long long)I[0], D[0]);
    int valid = 0;
    for (int j = 0; j < 20; j++) valid += I[j] >= 0;
    CHECK(valid == 5 && I[5] == -1 && D[19] == FLT_MAX, "k > n: %d valid, I[5]=%lld", valid,
          (long long)I[5]);
    graft_graph_free(&g);
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 1, 128, &rp, &g));
    CHECK_OK(graft_bang_search_cpu(&g, &pq, codes, s->xb, 128, GRAFT_METRIC_L2, s->xq, 1, 3, &p, D, I));
    CHECK(I[0] == 0 && I[1] == -1 && I[2] == -1, "n = 1: %lld %lld", (long long)I[0], (long long)I[1]);
    graft_graph_free(&g);
    float same[50 * 128];
    for (int i = 0; i < 50; i++) memcpy(same + i * 128, s->xb, 512);
    uint8_t sc[50 * 16];
    CHECK_OK(graft_pq_encode(&pq, 50, same, sc));
    CHECK_OK(graft_rnnd_build_cpu(same, 50, 128, &rp, &g));
    CHECK_OK(graft_bang_search_cpu(&g, &pq, sc, same, 128, GRAFT_METRIC_L2, same, 1, 10, &p, D, I));
    int distinct = 1;
    for (int a = 0; a < 10; a++)
        for (int b = 0; b < a; b++) distinct &= I[a] != I[b];
    CHECK(distinct && I[9] >= 0 && D[9] == 0.0f, "identical vectors: I[9]=%lld", (long long)I[9]);
    graft_graph_free(&g);
    graft_pq_free(&pq);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): sift5k's first 2000 vectors (still
     * 7.8 a centroid of the 256) and 200 queries with their exact truth; the bars are set at full
     * size. */
    graft_test_sift_quick(&s, 2000, 200);
    test_pq(&s);
    test_sift5k(&s);
    test_ip_and_fmnist(&s);
    test_edges(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_bang_cpu");
}
