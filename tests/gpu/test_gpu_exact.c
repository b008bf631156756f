/* GPU exact k-NN against the CPU reference, on real data, random and adversarial sets (label
 * gpu), through the three GPU paths for any data: the FP32 GEMM, certified TF32 (TF32
 * tensor-core candidates, a rigorous error bound, FP32 re-ranking, FP32 again where the
 * certificate fails) and certified FP16 (the same over an FP16 GEMM of scaled vectors).
 *
 * The GPU ranks by ||b||^2 - 2 q.b in FP32 while the reference sums (q-b)^2 in double, so a
 * distance may differ by float rounding of the GEMM formula and two neighbours whose distances
 * are that close may swap. The check is therefore: at every rank the distances agree within
 * tol = 1e-5 * (||q||^2 + max ||b||^2) + 1e-6 (FP32 rounding of the sum, with room for d terms),
 * every returned label is a real vector whose exact distance agrees with the returned one within
 * tol, no label repeats in a row, and labels differ from the reference only where distances tie
 * within tol. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "graft/flat.h"
#include "testutil.h"

static double sqnorm(const float* x, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += (double)x[j] * x[j];
    return s;
}

static double exact_dist(const float* a, const float* b, int64_t d, int l2) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += l2 ? ((double)a[j] - b[j]) * ((double)a[j] - b[j]) : (double)a[j] * b[j];
    return s;
}

/* Returns the number of label differences not explained by ties; records failures. */
static int64_t compare(const char* what, const float* xb, int64_t nb, const float* xq, int64_t nq,
                       int64_t d, int64_t k, int l2, int64_t exclude_self, const float* Dg,
                       const int64_t* Ig, const float* Dc, const int64_t* Ic) {
    double bmax = 0;
    for (int64_t i = 0; i < nb; i++) bmax = fmax(bmax, sqnorm(xb + i * d, d));
    int64_t dist_bad = 0, label_bad = 0, swaps = 0, dup = 0;
    int64_t* seen = malloc(sizeof(int64_t) * (size_t)(nb ? nb : 1)); /* row that last returned id */
    for (int64_t i = 0; i < nb; i++) seen[i] = -1;
    for (int64_t q = 0; q < nq; q++) {
        const float* x = xq + q * d;
        double tol = 1e-5 * (sqnorm(x, d) + bmax) + 1e-6;
        if (!l2) tol = 1e-5 * sqrt(sqnorm(x, d) * bmax) * 4 + 1e-6;
        for (int64_t j = 0; j < k; j++) {
            int64_t g = Ig[q * k + j], c = Ic[q * k + j];
            float dg = Dg[q * k + j], dc = Dc[q * k + j];
            if (c < 0) {
                if (g != -1 || dg != dc) dist_bad++;
                continue;
            }
            if (g < 0 || g >= nb || (exclude_self >= 0 && g == exclude_self + q)) {
                label_bad++;
                continue;
            }
            if (fabs((double)dg - dc) > tol) dist_bad++;
            if (fabs(exact_dist(x, xb + g * d, d, l2) - dg) > tol) label_bad++;
            if (g != c) swaps++;
            dup += seen[g] == q;
            seen[g] = q;
        }
    }
    free(seen);
    CHECK(dist_bad == 0 && label_bad == 0 && dup == 0,
          "%s: %lld distances off, %lld wrong labels, %lld repeated labels", what,
          (long long)dist_bad, (long long)label_bad, (long long)dup);
    printf("  %-52s ok (%lld near-tie swaps of %lld)\n", what, (long long)swaps, (long long)(nq * k));
    return dist_bad + label_bad + dup;
}

static const int kPaths[] = {GRAFT_EXACT_FP32, GRAFT_EXACT_TF32_CERTIFIED, GRAFT_EXACT_FP16_CERTIFIED,
                             GRAFT_EXACT_FP16_FUSED};
static const char* path_label(int path) {
    return path == GRAFT_EXACT_FP32 ? "fp32" : path == GRAFT_EXACT_TF32_CERTIFIED ? "tf32c"
           : path == GRAFT_EXACT_FP16_CERTIFIED ? "fp16c" : "fp16f";
}
static int fused_runs; /* searches that took the fused FP16 path (some must) */
static graft_flat_exact_counts fused_counts; /* summed over the searches that took it */

static void run_case_path(const char* name, const float* xb, int64_t nb, const float* xq,
                          int64_t nq, int64_t d, int64_t k, graft_metric metric, size_t budget,
                          int graph, int path) {
    graft_flat_params gp, cp;
    graft_flat_params_defaults(&gp);
    gp.metric = metric;
    gp.device = 0;
    gp.exact_path = path;
    if (budget) gp.memory_budget = budget;
    cp = gp;
    cp.device = -1;
    graft_flat *g = NULL, *c = NULL;
    CHECK_OK(graft_flat_new(d, &gp, &g));
    CHECK_OK(graft_flat_new(d, &cp, &c));
    if (!g || !c) return;
    CHECK_OK(graft_flat_add(g, nb, xb));
    CHECK_OK(graft_flat_add(c, nb, xb));
    int64_t rows = graph ? nb : nq;
    size_t n = (size_t)rows * k;
    float *Dg = malloc(n * sizeof(float)), *Dc = malloc(n * sizeof(float));
    int64_t *Ig = malloc(n * sizeof(int64_t)), *Ic = malloc(n * sizeof(int64_t));
    /* Poison the outputs so an unwritten slot cannot pass. */
    memset(Dg, 0x7f, n * sizeof(float));
    memset(Ig, 0x55, n * sizeof(int64_t));
    if (graph) {
        CHECK_OK(graft_flat_knn_graph(g, k, Dg, Ig));
        CHECK_OK(graft_flat_knn_graph(c, k, Dc, Ic));
    } else {
        CHECK_OK(graft_flat_search(g, nq, xq, k, Dg, Ig));
        CHECK_OK(graft_flat_search(c, nq, xq, k, Dc, Ic));
    }
    char what[200];
    int64_t fallbacks = 0;
    int used = graft_flat_exact_path(g, &fallbacks);
    CHECK(used == path, "%s: exact path %d in use, asked for %d", name, used, path);
    /* The k-NN graph always runs in FP32 (graft_gpu_exact_knn); a search runs the path asked for
     * (an H100's cuBLAS has the FP16 GEMM, so no fallback to TF32 may pass unnoticed). */
    /* Fused FP16 runs where it applies and is the matrix FP16 path elsewhere. */
    const int ran = graft_flat_last_path(g), want_ran = graph ? GRAFT_EXACT_FP32 : path;
    const int fused_or_not = path == GRAFT_EXACT_FP16_FUSED && ran == GRAFT_EXACT_FP16_CERTIFIED;
    CHECK(ran == want_ran || (!graph && fused_or_not), "%s: the search took path %d, want %d", name, ran, want_ran);
    fused_runs += ran == GRAFT_EXACT_FP16_FUSED;
    graft_flat_exact_counts counts;
    graft_flat_get_exact_counts(g, &counts);
    CHECK(counts.queries == rows && counts.fp32_fallbacks == fallbacks, "%s: counts %lld queries, %lld to fp32",
          name, (long long)counts.queries, (long long)counts.fp32_fallbacks);
    if (ran == GRAFT_EXACT_FP16_FUSED) {
        fused_counts.queries += counts.queries;
        fused_counts.fp32_fallbacks += counts.fp32_fallbacks;
        fused_counts.band_reranks += counts.band_reranks;
        fused_counts.second_passes += counts.second_passes;
    }
    char fb[80] = "";
    if (ran == GRAFT_EXACT_FP16_FUSED)
        snprintf(fb, sizeof fb, " (%lld to fp32, %lld band, %lld second)", (long long)fallbacks,
                 (long long)counts.band_reranks, (long long)counts.second_passes);
    else if (path != GRAFT_EXACT_FP32) snprintf(fb, sizeof fb, " (%lld to fp32)", (long long)fallbacks);
    snprintf(what, sizeof what, "%s nq=%lld nb=%lld d=%lld k=%lld %s%s %s%s", name, (long long)rows,
             (long long)nb, (long long)d, (long long)k, metric == GRAFT_METRIC_L2 ? "L2" : "IP",
             budget ? " small-budget" : "", path_label(ran == GRAFT_EXACT_FP16_CERTIFIED ? ran : path), fb);
    compare(what, xb, nb, graph ? xb : xq, rows, d, k, metric == GRAFT_METRIC_L2, graph ? 0 : -1,
            Dg, Ig, Dc, Ic);
    free(Dg); free(Dc); free(Ig); free(Ic);
    graft_flat_free(g);
    graft_flat_free(c);
}

static void run_case(const char* name, const float* xb, int64_t nb, const float* xq, int64_t nq,
                     int64_t d, int64_t k, graft_metric metric, size_t budget, int graph) {
    for (size_t i = 0; i < sizeof kPaths / sizeof kPaths[0]; i++)
        run_case_path(name, xb, nb, xq, nq, d, k, metric, budget, graph, kPaths[i]);
}

/* Rows scaled by 10^e, e cycling through -12..12 (huge and tiny norms side by side). */
static void scale_rows(float* x, int64_t n, int64_t d, int step) {
    for (int64_t i = 0; i < n; i++) {
        float s = powf(10.f, (float)((i * step) % 25 - 12));
        for (int64_t j = 0; j < d; j++) x[i * d + j] *= s;
    }
}

/* Standard normal values (Box-Muller over graft_test_random's uniform values). */
static void random_normal(float* x, size_t n, uint64_t seed) {
    graft_test_random(x, n, seed);
    for (size_t i = 0; i + 1 < n; i += 2) {
        float u = fmaxf(x[i], 1e-7f), v = x[i + 1];
        x[i] = sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
        x[i + 1] = sqrtf(-2.f * logf(u)) * sinf(6.2831853f * v);
    }
}

/* The sets of the certified path's issue beyond sift5k: Fashion-MNIST, normal and adversarial
 * data (many equal distances, huge and tiny norms, near duplicates, values past FP16's range),
 * for k in {1, 10, 100, 1024, 4096}, L2 and inner product. */
static void certified_cases(void) {
    const int64_t ks[] = {1, 10, 100, 1024, 4096};
    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    if (graft_test_load_fmnist(20000, 200, &fb, &fnb, &fq, &fnq, &fd) == 0) {
        for (size_t i = 0; i < 5; i++) run_case("fmnist", fb, fnb, fq, fnq, fd, ks[i], GRAFT_METRIC_L2, 0, 0);
        run_case("fmnist", fb, fnb, fq, fnq, fd, 10, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    }
    free(fb);
    free(fq);
    int64_t nb = 50000, nq = 300, d = 64;
    float* xb = malloc(sizeof(float) * nb * d);
    float* xq = malloc(sizeof(float) * nq * d);
    random_normal(xb, (size_t)(nb * d), 31);
    random_normal(xq, (size_t)(nq * d), 32);
    for (size_t i = 0; i < 5; i++) run_case("normal", xb, nb, xq, nq, d, ks[i], i % 2 ? GRAFT_METRIC_INNER_PRODUCT : GRAFT_METRIC_L2, 0, 0);
    /* Integer grid 0..3: a few distinct distances, each shared by thousands of vectors. */
    for (int64_t i = 0; i < nb * d; i++) xb[i] = (float)((i * 2654435761u >> 7) % 4);
    for (int64_t i = 0; i < nq * d; i++) xq[i] = (float)((i * 40503u >> 5) % 4);
    run_case("grid ties", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    run_case("grid ties", xb, nb, xq, nq, d, 1024, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    /* Near duplicates: every vector a copy of one of 100 others, moved by one unit in the last place. */
    random_normal(xb, (size_t)(100 * d), 33);
    for (int64_t i = 100; i < nb; i++)
        for (int64_t j = 0; j < d; j++) xb[i * d + j] = nextafterf(xb[(i % 100) * d + j], i % 2 ? 1e30f : -1e30f);
    run_case("near-duplicates", xb, nb, xb, nq, d, 100, GRAFT_METRIC_L2, 0, 0);
    /* Values past FP16's largest (65504), and norms from 1e-12 to 1e12 scale. */
    random_normal(xb, (size_t)(nb * d), 34);
    random_normal(xq, (size_t)(nq * d), 35);
    for (int64_t i = 0; i < nb * d; i++) xb[i] *= 1e5f;
    for (int64_t i = 0; i < nq * d; i++) xq[i] *= 1e5f;
    run_case("beyond fp16", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    random_normal(xb, (size_t)(nb * d), 36);
    scale_rows(xb, nb, d, 7);
    scale_rows(xq, nq, d, 3);
    run_case("norms 1e-12..1e12", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    run_case("norms 1e-12..1e12", xb, nb, xq, nq, d, 100, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    /* FP16's extremes side by side: components of 1e6 (past its 65504) and 1e-30 (below its
     * smallest subnormal, and squares below FP32's), and plain ones. */
    random_normal(xb, (size_t)(nb * d), 37);
    random_normal(xq, (size_t)(nq * d), 38);
    for (int64_t i = 0; i < nb; i++)
        for (int64_t j = 0; j < d; j++) xb[i * d + j] *= i % 3 == 0 ? 1e6f : i % 3 == 1 ? 1e-30f : 1.f;
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < d; j++) xq[i * d + j] *= i % 3 == 0 ? 1e6f : i % 3 == 1 ? 1e-30f : 1.f;
    run_case("1e6 / 1e-30 / 1", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    run_case("1e6 / 1e-30 / 1", xb, nb, xq, nq, d, 100, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    /* Norms past 2^60 (about 1.2e18): the FP16 certificate fails them all, FP32 answers. */
    for (int64_t i = 0; i < nb * d; i++) xb[i] = (float)((i * 2654435761u >> 9) % 1000) * 1e15f;
    run_case("norms past 2^60", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    free(xb);
    free(xq);
}

/* Many equal and near-duplicate vectors (graft_test_duplicates: clusters of exact and +-1 copies
 * of sift5k rows, of up to 8192 rows, queries near them or real), the data of issue 36: on the
 * fused path a query whose cluster holds k' or more rows fails its certificate, and one whose
 * cluster holds more than a list's 4096 overflows; both are answered from the ambiguous band (a
 * re-rank from the list, or a second pass). A cluster of 131072 rows is wider than a second
 * pass's lists (65536): those queries go to FP32. */
static void duplicate_cases(const graft_test_sift* s) {
    const int64_t d = s->d, n = 140000, nq = 300;
    float* xb = malloc(sizeof(float) * (size_t)(n * d));
    float* xq = malloc(sizeof(float) * (size_t)(nq * d));
    const graft_flat_exact_counts before = fused_counts;
    int64_t nb = graft_test_duplicates(s->xb, s->nb, s->xq, s->nq, d, n, 8192, nq, xb, xq);
    run_case("duplicates", xb, nb, xq, nq, d, 10, GRAFT_METRIC_L2, 0, 0);
    run_case("duplicates", xb, nb, xq, nq, d, 100, GRAFT_METRIC_L2, 0, 0);
    run_case("duplicates", xb, nb, xq, nq, d, 10, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    CHECK(fused_counts.band_reranks > before.band_reranks && fused_counts.second_passes > before.second_passes,
          "duplicates: the fused path took no band re-rank (%lld) or no second pass (%lld)",
          (long long)(fused_counts.band_reranks - before.band_reranks),
          (long long)(fused_counts.second_passes - before.second_passes));
    const graft_flat_exact_counts mid = fused_counts;
    nb = graft_test_duplicates(s->xb, s->nb, s->xq, s->nq, d, n, 131072, 64, xb, xq);
    run_case("one cluster of 131072", xb, nb, xq, 64, d, 10, GRAFT_METRIC_L2, 0, 0);
    CHECK(fused_counts.fp32_fallbacks > mid.fp32_fallbacks && fused_counts.second_passes > mid.second_passes,
          "a band of 131072: %lld second passes, %lld to fp32", (long long)(fused_counts.second_passes - mid.second_passes),
          (long long)(fused_counts.fp32_fallbacks - mid.fp32_fallbacks));
    free(xb);
    free(xq);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    if (getenv("GRAFT_TEST_QUICK")) {
        /* A few small cases for compute-sanitizer (memcheck, racecheck), which runs ~100x slower:
         * sampled pivots, block mode, base tiles with a merge, the k-NN graph, k > ntotal. */
        run_case("sift5k", s.xb, s.nb, s.xq, 40, s.d, 10, GRAFT_METRIC_L2, 0, 0);
        run_case("sift5k tiled", s.xb, s.nb, s.xq, 40, s.d, 100, GRAFT_METRIC_L2, 1u << 20, 0);
        run_case("sift5k graph tiled", s.xb, 1500, NULL, 0, s.d, 16, GRAFT_METRIC_L2, 1u << 20, 1);
        run_case("sift5k k>ntotal", s.xb, 300, s.xq, 8, s.d, 400, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
        {   /* the band re-rank and the second pass (clusters of up to 8192 equal rows) */
            float* xb = malloc(sizeof(float) * 20000 * s.d);
            float* xq = malloc(sizeof(float) * 24 * s.d);
            int64_t nb = graft_test_duplicates(s.xb, s.nb, s.xq, s.nq, s.d, 20000, 8192, 24, xb, xq);
            run_case_path("duplicates", xb, nb, xq, 24, s.d, 10, GRAFT_METRIC_L2, 0, 0, GRAFT_EXACT_FP16_FUSED);
            free(xb);
            free(xq);
        }
        CHECK(fused_runs > 0, "no search took the fused FP16 path");
        graft_test_free_sift(&s);
        return graft_test_finish("test_gpu_exact (quick)");
    }
    const int64_t ks[] = {1, 10, 100, 1024, 4096};
    for (size_t i = 0; i < 5; i++)
        run_case("sift5k", s.xb, s.nb, s.xq, s.nq, s.d, ks[i], GRAFT_METRIC_L2, 0, 0);
    run_case("sift5k", s.xb, s.nb, s.xq, s.nq, s.d, 10, GRAFT_METRIC_INNER_PRODUCT, 0, 0);
    /* A budget this small forces base tiles that do not divide 4500 evenly, and a merge. */
    run_case("sift5k tiled", s.xb, s.nb, s.xq, s.nq, s.d, 10, GRAFT_METRIC_L2, 4u << 20, 0);
    run_case("sift5k tiled", s.xb, s.nb, s.xq, s.nq, s.d, 100, GRAFT_METRIC_L2, 4u << 20, 0);
    run_case("sift5k k>ntotal", s.xb, 300, s.xq, 50, s.d, 1000, GRAFT_METRIC_L2, 0, 0);
    run_case("sift5k graph", s.xb, s.nb, NULL, 0, s.d, 10, GRAFT_METRIC_L2, 0, 1);
    run_case("sift5k graph tiled", s.xb, s.nb, NULL, 0, s.d, 32, GRAFT_METRIC_L2, 4u << 20, 1);
    run_case("sift5k nq=1", s.xb, s.nb, s.xq, 1, s.d, 10, GRAFT_METRIC_L2, 0, 0);

    /* Random data: large rows (block mode, sampled pivots), many rows (warp mode), odd d. */
    struct { int64_t nq, nb, d, k; size_t budget; graft_metric m; } rc[] = {
        {64, 200000, 32, 10, 0, GRAFT_METRIC_L2},
        {64, 200000, 32, 1024, 0, GRAFT_METRIC_L2},
        {16, 300001, 8, 4096, 0, GRAFT_METRIC_INNER_PRODUCT},
        {6000, 20000, 33, 10, 0, GRAFT_METRIC_L2},
        {6000, 20000, 1, 7, 0, GRAFT_METRIC_L2},
        {300, 100000, 16, 100, 16u << 20, GRAFT_METRIC_L2},
        {1000, 5000, 5, 5000, 0, GRAFT_METRIC_INNER_PRODUCT},
    };
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
        float* xb = malloc(sizeof(float) * rc[i].nb * rc[i].d);
        float* xq = malloc(sizeof(float) * rc[i].nq * rc[i].d);
        graft_test_random(xb, (size_t)(rc[i].nb * rc[i].d), 1000 + i);
        graft_test_random(xq, (size_t)(rc[i].nq * rc[i].d), 2000 + i);
        run_case("random", xb, rc[i].nb, xq, rc[i].nq, rc[i].d, rc[i].k, rc[i].m, rc[i].budget, 0);
        free(xb);
        free(xq);
    }
    certified_cases();
    duplicate_cases(&s);
    /* All-identical vectors: every distance ties, so ids must come out 0, 1, 2, ... */
    {
        int64_t nb = 5000, d = 16, k = 50;
        float* xb = malloc(sizeof(float) * nb * d);
        for (int64_t i = 0; i < nb * d; i++) xb[i] = 0.5f;
        run_case("identical", xb, nb, xb, 20, d, k, GRAFT_METRIC_L2, 0, 0);
        graft_flat* g = NULL;
        CHECK_OK(graft_flat_new(d, NULL, &g));
        CHECK_OK(graft_flat_add(g, nb, xb));
        float D[50];
        int64_t I[50];
        CHECK_OK(graft_flat_search(g, 1, xb, k, D, I));
        for (int64_t j = 0; j < k; j++) CHECK(I[j] == j && D[j] == 0.f, "identical: rank %lld got id %lld d %g", (long long)j, (long long)I[j], D[j]);
        graft_flat_free(g);
        free(xb);
    }
    /* Errors on the GPU paths leave the index usable. */
    for (size_t i = 0; i < sizeof kPaths / sizeof kPaths[0]; i++) {
        graft_flat_params p;
        graft_flat_params_defaults(&p);
        p.exact_path = kPaths[i];
        graft_flat* g = NULL;
        CHECK_OK(graft_flat_new(s.d, &p, &g));
        CHECK_OK(graft_flat_add(g, s.nb, s.xb));
        float bad[128];
        memcpy(bad, s.xq, sizeof bad);
        bad[5] = NAN;
        float D[10];
        int64_t I[10];
        CHECK_ERR(graft_flat_search(g, 1, bad, 10, D, I), GRAFT_EINVAL);
        CHECK_OK(graft_flat_search(g, 1, s.xq, 10, D, I));
        CHECK(I[0] == s.gt[0], "after an error, query 0's nearest is %lld, want %d", (long long)I[0], s.gt[0]);
        graft_flat_free(g);
    }
    CHECK(fused_runs > 0, "no search took the fused FP16 path");
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_exact");
}
