/* The exact INT8 path of GraftFlat on the GPU (graft/flat.h, exact_path; gpu/exact_knn.cu) against
 * the CPU reference graft_knn_cpu, which sums in double and is therefore exact on integer data:
 * where the INT8 path runs, its labels and distances must equal the reference's bit for bit
 * (distances are the exact integers rounded once to float, ties go to the smaller id, -1 /
 * FLT_MAX padding), at every rank. Data: sift5k and Fashion-MNIST (uint8 values), random integers
 * in [0, 255] and [-128, 127], adversarial sets (ties everywhere, all-255 vectors, code extremes,
 * d not a multiple of 4, d = 1), k in {1, 10, 100, 1024, 4096}, L2 and inner product, base tiles
 * with a merge, the k-NN graph; the path asked for with exact_path 3 (auto takes certified FP16,
 * measured faster on the H100: graft/flat.h). Auto on the same data takes certified FP16 and
 * agrees with the reference within FP32 rounding (test_gpu_exact.c's rule); with exact_path 3,
 * data the codes cannot hold (float queries, a float add) is refused. label gpu; exit 77 without
 * a GPU. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graft/flat.h"
#include "testutil.h"

static const char* metric_name(graft_metric m) { return m == GRAFT_METRIC_L2 ? "L2" : "IP"; }

/* Bit-for-bit equality with the reference; prints the first difference. */
static void check_equal(const char* what, int64_t rows, int64_t k, const float* Dg, const int64_t* Ig,
                        const float* Dc, const int64_t* Ic) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < rows * k; i++)
        if (Ig[i] != Ic[i] || memcmp(&Dg[i], &Dc[i], sizeof(float)) != 0) {
            if (first < 0) first = i;
            bad++;
        }
    if (bad) {
        int64_t q = first / k, j = first % k;
        CHECK(0, "%s: %lld of %lld results differ from the reference; first: query %lld rank %lld: "
              "GPU id %lld d %.9g, reference id %lld d %.9g", what, (long long)bad, (long long)(rows * k),
              (long long)q, (long long)j, (long long)Ig[first], Dg[first], (long long)Ic[first], Dc[first]);
        return;
    }
    printf("  %-64s equal\n", what);
}

static double exact_dist(const float* a, const float* b, int64_t d, int l2) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += l2 ? ((double)a[j] - b[j]) * ((double)a[j] - b[j]) : (double)a[j] * b[j];
    return s;
}

/* test_gpu_exact.c's rule for the FP32-rounded paths: distances within tol of the reference at
 * every rank, each label's exact distance within tol of the returned one, no repeated label. */
static void check_close(const char* what, const float* xb, int64_t nb, const float* xq, int64_t nq,
                        int64_t d, int64_t k, int l2, const float* Dg, const int64_t* Ig, const float* Dc,
                        const int64_t* Ic) {
    double bmax = 0;
    for (int64_t i = 0; i < nb; i++) bmax = fmax(bmax, exact_dist(xb + i * d, xb + i * d, d, 0));
    int64_t bad = 0;
    for (int64_t q = 0; q < nq; q++) {
        const float* x = xq + q * d;
        double qn = exact_dist(x, x, d, 0);
        double tol = l2 ? 1e-5 * (qn + bmax) + 1e-6 : 4e-5 * sqrt(qn * bmax) + 1e-6;
        for (int64_t j = 0; j < k; j++) {
            int64_t g = Ig[q * k + j], c = Ic[q * k + j];
            if (c < 0) {
                bad += g != -1 || Dg[q * k + j] != Dc[q * k + j];
                continue;
            }
            if (g < 0 || g >= nb) {
                bad++;
                continue;
            }
            bad += fabs((double)Dg[q * k + j] - Dc[q * k + j]) > tol;
            bad += fabs(exact_dist(x, xb + g * d, d, l2) - Dg[q * k + j]) > tol;
            for (int64_t m = 0; m < j; m++) bad += Ig[q * k + m] == g;
        }
    }
    CHECK(bad == 0, "%s: %lld results off", what, (long long)bad);
    if (!bad) printf("  %-64s ok (within FP32 rounding)\n", what);
}

/* One search (graph: the k-NN graph of the base) on a GPU index with exact_path `path`, against
 * the reference. want_path: the path the search must report (3: INT8, then bit-for-bit). */
static void run(const char* name, const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d,
                int64_t k, graft_metric metric, size_t budget, int graph, int path, int want_path) {
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    p.metric = metric;
    p.device = 0;
    p.exact_path = path;
    if (budget) p.memory_budget = budget;
    graft_flat* g = NULL;
    CHECK_OK(graft_flat_new(d, &p, &g));
    if (!g) return;
    CHECK_OK(graft_flat_add(g, nb, xb));
    const int64_t rows = graph ? nb : nq;
    const size_t n = (size_t)rows * k;
    float *Dg = malloc(n * sizeof(float)), *Dc = malloc(n * sizeof(float));
    int64_t *Ig = malloc(n * sizeof(int64_t)), *Ic = malloc(n * sizeof(int64_t));
    memset(Dg, 0x7f, n * sizeof(float)); /* poison: an unwritten slot cannot pass */
    memset(Ig, 0x55, n * sizeof(int64_t));
    if (graph) {
        CHECK_OK(graft_flat_knn_graph(g, k, Dg, Ig));
        CHECK_OK(graft_knn_cpu(xb, nb, xb, nb, d, k, metric, 0, Dc, Ic));
    } else {
        CHECK_OK(graft_flat_search(g, nq, xq, k, Dg, Ig));
        CHECK_OK(graft_knn_cpu(xb, nb, xq, nq, d, k, metric, -1, Dc, Ic));
    }
    const int got = graft_flat_last_path(g);
    char what[240];
    snprintf(what, sizeof what, "%s nq=%lld nb=%lld d=%lld k=%lld %s%s%s path %d", name, (long long)rows,
             (long long)nb, (long long)d, (long long)k, metric_name(metric), budget ? " small-budget" : "",
             graph ? " graph" : "", got);
    CHECK(got == want_path, "%s: took path %d, want %d", what, got, want_path);
    if (want_path == GRAFT_EXACT_INT8) {
        CHECK(graft_flat_exact_path(g, NULL) == GRAFT_EXACT_INT8, "%s: index reports path %d", what,
              graft_flat_exact_path(g, NULL));
        check_equal(what, rows, k, Dg, Ig, Dc, Ic);
    } else {
        check_close(what, xb, nb, graph ? xb : xq, rows, d, k, metric == GRAFT_METRIC_L2, Dg, Ig, Dc, Ic);
    }
    free(Dg); free(Dc); free(Ig); free(Ic);
    graft_flat_free(g);
}

/* The INT8 path (exact_path 3: auto takes certified FP16, measured faster) on integer data. */
static void run8(const char* name, const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d,
                 int64_t k, graft_metric metric) {
    run(name, xb, nb, xq, nq, d, k, metric, 0, 0, GRAFT_EXACT_INT8, GRAFT_EXACT_INT8);
}

/* Uniform integers in [lo, lo + span). */
static void random_ints(float* x, size_t n, uint64_t seed, int lo, int span) {
    graft_test_random(x, n, seed);
    for (size_t i = 0; i < n; i++) {
        int v = (int)(x[i] * span);
        x[i] = (float)(lo + (v < span ? v : span - 1));
    }
}

static const int64_t ks[] = {1, 10, 100, 1024, 4096};

static void real_data(const graft_test_sift* s) {
    for (size_t i = 0; i < 5; i++) run8("sift5k", s->xb, s->nb, s->xq, s->nq, s->d, ks[i], GRAFT_METRIC_L2);
    for (size_t i = 0; i < 5; i++)
        run8("sift5k", s->xb, s->nb, s->xq, s->nq, s->d, ks[i], GRAFT_METRIC_INNER_PRODUCT);
    /* Budgets this small force base tiles (not dividing 4500) whose integer keys are merged. */
    run("sift5k tiled", s->xb, s->nb, s->xq, s->nq, s->d, 10, GRAFT_METRIC_L2, 4u << 20, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k tiled", s->xb, s->nb, s->xq, s->nq, s->d, 100, GRAFT_METRIC_INNER_PRODUCT, 4u << 20, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k graph", s->xb, s->nb, NULL, 0, s->d, 10, GRAFT_METRIC_L2, 0, 1, GRAFT_EXACT_INT8, 3);
    run("sift5k graph tiled", s->xb, s->nb, NULL, 0, s->d, 32, GRAFT_METRIC_L2, 4u << 20, 1, GRAFT_EXACT_INT8, 3);
    run("sift5k k>ntotal", s->xb, 300, s->xq, 50, s->d, 1000, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k k>ntotal", s->xb, 300, s->xq, 50, s->d, 1000, GRAFT_METRIC_INNER_PRODUCT, 0, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k nq=1", s->xb, s->nb, s->xq, 1, s->d, 10, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_INT8, 3);
    /* nb not a multiple of 4: the GEMM's rows are rounded up past the last vector. */
    for (int64_t nb = s->nb - 3; nb < s->nb; nb++)
        run("sift5k odd nb", s->xb, nb, s->xq, 37, s->d, 10, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k odd nb tiled", s->xb, s->nb - 1, s->xq, 37, s->d, 100, GRAFT_METRIC_INNER_PRODUCT, 4u << 20, 0, GRAFT_EXACT_INT8, 3);
    run("sift5k odd nb graph", s->xb, 1499, NULL, 0, s->d, 10, GRAFT_METRIC_L2, 0, 1, GRAFT_EXACT_INT8, 3);
    /* Forced INT8 gives the same results as auto. */
    run("sift5k forced int8", s->xb, s->nb, s->xq, s->nq, s->d, 100, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_INT8, 3);

    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    if (graft_test_load_fmnist(20000, 200, &fb, &fnb, &fq, &fnq, &fd) == 0 && fb) {
        for (size_t i = 0; i < 5; i++) run8("fmnist", fb, fnb, fq, fnq, fd, ks[i], GRAFT_METRIC_L2);
        run8("fmnist", fb, fnb, fq, fnq, fd, 10, GRAFT_METRIC_INNER_PRODUCT);
        run8("fmnist", fb, fnb, fq, fnq, fd, 1024, GRAFT_METRIC_INNER_PRODUCT);
    }
    free(fb);
    free(fq);
}

static void random_sets(void) {
    /* [0, 255] and [-128, 127]: the two code ranges; block mode (few rows) and warp mode. */
    const int64_t nb = 100000, nq = 300, d = 128;
    float* xb = malloc(sizeof(float) * nb * d);
    float* xq = malloc(sizeof(float) * 6000 * 40);
    random_ints(xb, (size_t)(nb * d), 41, 0, 256);
    random_ints(xq, (size_t)(nq * d), 42, 0, 256);
    for (size_t i = 0; i < 5; i++)
        run8("uint8 uniform", xb, nb, xq, nq, d, ks[i], i % 2 ? GRAFT_METRIC_INNER_PRODUCT : GRAFT_METRIC_L2);
    run8("uint8 uniform", xb, nb, xq, nq, d, 10, GRAFT_METRIC_INNER_PRODUCT);
    random_ints(xb, (size_t)(nb * d), 43, -128, 256);
    random_ints(xq, (size_t)(nq * d), 44, -128, 256);
    for (size_t i = 0; i < 5; i++)
        run8("int8 uniform", xb, nb, xq, nq, d, ks[i], i % 2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT);
    run8("int8 uniform", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2);
    /* Many rows (warp mode), d = 33 (codes padded to 48 bytes). */
    random_ints(xb, (size_t)(20000 * 33), 45, 0, 256);
    random_ints(xq, (size_t)(6000 * 33), 46, 0, 256);
    run8("uint8 d=33", xb, 20000, xq, 6000, 33, 10, GRAFT_METRIC_L2);
    run8("uint8 d=33", xb, 20000, xq, 6000, 33, 100, GRAFT_METRIC_INNER_PRODUCT);
    free(xb);
    free(xq);
}

static void adversarial(void) {
    const int64_t nb = 50000, nq = 200;
    float* xb = malloc(sizeof(float) * nb * 64);
    float* xq = malloc(sizeof(float) * nq * 64);
    /* Grid 0..3: a few distinct distances, each shared by thousands of vectors: the order is the
     * tie rule itself (smaller id first) at every rank. */
    for (int64_t i = 0; i < nb * 64; i++) xb[i] = (float)((i * 2654435761u >> 7) % 4);
    for (int64_t i = 0; i < nq * 64; i++) xq[i] = (float)((i * 40503u >> 5) % 4);
    for (size_t i = 1; i < 5; i++) run8("grid ties", xb, nb, xq, nq, 64, ks[i], GRAFT_METRIC_L2);
    run8("grid ties", xb, nb, xq, nq, 64, 1024, GRAFT_METRIC_INNER_PRODUCT);
    /* d = 1: values 0..255 on a line, each taken by ~195 vectors. */
    random_ints(xb, (size_t)nb, 51, 0, 256);
    random_ints(xq, (size_t)nq, 52, 0, 256);
    run8("d=1 line", xb, nb - 1, xq, nq, 1, 100, GRAFT_METRIC_L2);
    run8("d=1 line", xb, nb - 2, xq, nq, 1, 1024, GRAFT_METRIC_INNER_PRODUCT);
    run8("d=1 line", xb, nb - 3, xq, nq, 1, 4096, GRAFT_METRIC_L2);
    /* d = 2, 3, 5: inner dimensions padded with zeros. */
    for (int64_t d = 2; d <= 5; d += d == 3 ? 2 : 1) {
        random_ints(xb, (size_t)(nb * d), 53 + d, -128, 256);
        random_ints(xq, (size_t)(nq * d), 63 + d, -128, 256);
        run8("small d", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2);
        run8("small d", xb, nb, xq, nq, d, 100, GRAFT_METRIC_INNER_PRODUCT);
    }
    free(xb);
    free(xq);
    /* All-255 vectors beside all-0 ones at d = 1000 (not a multiple of 4 or 16): inner products
     * up to 65025 d, far past 2^24, so the float returned is the exact integer rounded once; every
     * distance ties within its group. */
    {
        const int64_t n = 3000, d = 1000, q = 20;
        float* b = malloc(sizeof(float) * n * d);
        float* x = malloc(sizeof(float) * q * d);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < d; j++) b[i * d + j] = i % 3 == 0 ? 255.f : i % 3 == 1 ? 0.f : (float)((i + j) % 256);
        for (int64_t i = 0; i < q * d; i++) x[i] = i < d ? 255.f : (float)((i * 7) % 256);
        run8("all-255", b, n, x, q, d, 10, GRAFT_METRIC_L2);
        run8("all-255", b, n, x, q, d, 1024, GRAFT_METRIC_INNER_PRODUCT);
        run8("all-255", b, n, x, q, d, 4096, GRAFT_METRIC_L2);
        free(b);
        free(x);
    }
    /* Code extremes: -128 and 127 everywhere, d = 4099: |q'.b'| near 2^14 d. */
    {
        const int64_t n = 2000, d = 4099, q = 16;
        float* b = malloc(sizeof(float) * n * d);
        float* x = malloc(sizeof(float) * q * d);
        for (int64_t i = 0; i < n * d; i++) b[i] = ((i * 2654435761u) >> 13) % 5 ? -128.f : 127.f;
        for (int64_t i = 0; i < q * d; i++) x[i] = i % 7 ? -128.f : 127.f;
        run8("code extremes", b, n, x, q, d, 10, GRAFT_METRIC_L2);
        run8("code extremes", b, n, x, q, d, 100, GRAFT_METRIC_INNER_PRODUCT);
        free(b);
        free(x);
    }
}

/* What must not take INT8, and how the codes follow adds. */
static void mixed(const graft_test_sift* s) {
    const int64_t nq = 100, d = s->d;
    float* xq = malloc(sizeof(float) * nq * d);
    /* Float queries over an integer base: auto's certified FP16 (fused at these k). */
    memcpy(xq, s->xq, sizeof(float) * nq * d);
    xq[5 * d + 3] += 0.5f;
    run("sift5k base, float query", s->xb, s->nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, 0, GRAFT_EXACT_FP16_FUSED);
    run("sift5k base, float query", s->xb, s->nb, xq, nq, d, 100, GRAFT_METRIC_INNER_PRODUCT, 0, 0, 0, GRAFT_EXACT_FP16_FUSED);
    /* Integer queries outside the codes' range: 300, and -1 (the base takes the unsigned codes). */
    memcpy(xq, s->xq, sizeof(float) * nq * d);
    xq[7] = 300.f;
    run("sift5k base, query value 300", s->xb, s->nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, 0, GRAFT_EXACT_FP16_FUSED);
    xq[7] = -1.f;
    run("sift5k base, query value -1", s->xb, s->nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, 0, GRAFT_EXACT_FP16_FUSED);
    /* Non-integer base: certified FP16; and FP32 / TF32 when forced, even on integer data. */
    float* fb = malloc(sizeof(float) * s->nb * d);
    for (int64_t i = 0; i < s->nb * d; i++) fb[i] = s->xb[i] * 0.25f;
    run("sift5k / 4 (fractions)", fb, s->nb, s->xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, 0, GRAFT_EXACT_FP16_FUSED);
    run("sift5k forced tf32", s->xb, s->nb, s->xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_TF32_CERTIFIED, 2);
    run("sift5k forced fp32", s->xb, s->nb, s->xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_FP32, 1);

    graft_flat_params p;
    graft_flat_params_defaults(&p);
    p.device = 0;
    float D[2 * 50], Dc[2 * 50];
    int64_t I[2 * 50], Ic[2 * 50];
    /* Forced INT8 with float queries fails, and the index goes on working. */
    {
        p.exact_path = GRAFT_EXACT_INT8;
        graft_flat* g = NULL;
        CHECK_OK(graft_flat_new(d, &p, &g));
        CHECK_OK(graft_flat_add(g, s->nb, s->xb));
        xq[7] = 0.5f;
        CHECK_ERR(graft_flat_search(g, 2, xq, 50, D, I), GRAFT_EINVAL);
        CHECK_OK(graft_flat_search(g, 2, s->xq, 50, D, I));
        CHECK_OK(graft_knn_cpu(s->xb, s->nb, s->xq, 2, d, 50, GRAFT_METRIC_L2, -1, Dc, Ic));
        CHECK(graft_flat_last_path(g) == 3, "forced int8 after an error: path %d", graft_flat_last_path(g));
        check_equal("forced int8 after a refused float query", 2, 50, D, I, Dc, Ic);
        /* A fractional add: the stored vectors no longer qualify; forced INT8 refuses. */
        float* frac = malloc(sizeof(float) * d);
        memcpy(frac, s->xb, sizeof(float) * d);
        frac[0] += 0.5f;
        CHECK_OK(graft_flat_add(g, 1, frac));
        free(frac);
        CHECK_ERR(graft_flat_search(g, 2, s->xq, 50, D, I), GRAFT_EINVAL);
        graft_flat_free(g);
    }
    /* Codes follow adds: [0, 127] data takes the unsigned codes; a signed add moves every
     * vector to the signed ones; after a fractional add the INT8 path refuses (GRAFT_EINVAL). */
    {
        p.exact_path = GRAFT_EXACT_INT8;
        const int64_t n1 = 3000, n2 = 1000;
        float* b = malloc(sizeof(float) * (n1 + n2 + 1) * d);
        for (int64_t i = 0; i < n1 * d; i++) b[i] = (float)((int)s->xb[i] / 2);
        random_ints(b + n1 * d, (size_t)(n2 * d), 71, -128, 256);
        b[(n1 + n2) * d] = 0.75f;
        for (int64_t i = 1; i < d; i++) b[(n1 + n2) * d + i] = 3.f;
        for (int64_t i = 0; i < nq * d; i++) xq[i] = (float)((int)s->xq[i] / 2 - 20);
        graft_flat* g = NULL;
        CHECK_OK(graft_flat_new(d, &p, &g));
        const int64_t steps[3] = {n1, n1 + n2, n1 + n2 + 1};
        const int want[3] = {3, 3, -1}; /* -1: refused */
        float *Dg = malloc(sizeof(float) * nq * 100), *Dr = malloc(sizeof(float) * nq * 100);
        int64_t *Ig = malloc(sizeof(int64_t) * nq * 100), *Ir = malloc(sizeof(int64_t) * nq * 100);
        /* The queries: [0, 127] first (they fit the unsigned codes), then shifted down by 20. */
        for (int st = 0; st < 3; st++) {
            int64_t from = st ? steps[st - 1] : 0;
            CHECK_OK(graft_flat_add(g, steps[st] - from, b + from * d));
            const float* q = st == 0 ? s->xq : xq;
            /* sift5k's queries reach 161: halve them so they fit the first step's codes too. */
            float* qh = malloc(sizeof(float) * nq * d);
            for (int64_t i = 0; i < nq * d; i++) qh[i] = st == 0 ? (float)((int)q[i] / 2) : q[i];
            if (want[st] < 0) {
                CHECK_ERR(graft_flat_search(g, nq, qh, 100, Dg, Ig), GRAFT_EINVAL);
                free(qh);
                continue;
            }
            CHECK_OK(graft_flat_search(g, nq, qh, 100, Dg, Ig));
            CHECK_OK(graft_knn_cpu(b, steps[st], qh, nq, d, 100, GRAFT_METRIC_L2, -1, Dr, Ir));
            char what[120];
            snprintf(what, sizeof what, "codes after add %d (%lld vectors)", st + 1, (long long)steps[st]);
            CHECK(graft_flat_last_path(g) == want[st], "%s: path %d, want %d", what, graft_flat_last_path(g), want[st]);
            check_equal(what, nq, 100, Dg, Ig, Dr, Ir);
            free(qh);
        }
        /* reset: integer data takes INT8 again. */
        CHECK_OK(graft_flat_reset(g));
        CHECK_OK(graft_flat_add(g, s->nb, s->xb));
        CHECK_OK(graft_flat_search(g, nq, s->xq, 100, Dg, Ig));
        CHECK_OK(graft_knn_cpu(s->xb, s->nb, s->xq, nq, d, 100, GRAFT_METRIC_L2, -1, Dr, Ir));
        CHECK(graft_flat_last_path(g) == 3, "after reset: path %d", graft_flat_last_path(g));
        check_equal("codes after reset and add", nq, 100, Dg, Ig, Dr, Ir);
        free(Dg); free(Dr); free(Ig); free(Ir);
        free(b);
        graft_flat_free(g);
    }
    free(fb);
    free(xq);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    if (getenv("GRAFT_TEST_QUICK")) {
        /* compute-sanitizer: sampled pivots, block mode, tiles with a merge, the graph, padding. */
        run8("sift5k", s.xb, s.nb, s.xq, 40, s.d, 10, GRAFT_METRIC_L2);
        run("sift5k tiled", s.xb, s.nb, s.xq, 40, s.d, 100, GRAFT_METRIC_L2, 1u << 20, 0, GRAFT_EXACT_INT8, 3);
        run("sift5k graph tiled", s.xb, 1499, NULL, 0, s.d, 16, GRAFT_METRIC_L2, 1u << 20, 1, GRAFT_EXACT_INT8, 3);
        run("sift5k k>ntotal", s.xb, 300, s.xq, 8, s.d, 400, GRAFT_METRIC_INNER_PRODUCT, 0, 0, GRAFT_EXACT_INT8, 3);
        graft_test_free_sift(&s);
        return graft_test_finish("test_gpu_exact_int8 (quick)");
    }
    real_data(&s);
    random_sets();
    adversarial();
    mixed(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_exact_int8");
}
