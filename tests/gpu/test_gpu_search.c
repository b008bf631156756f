/* The SONG-style GPU graph search against its CPU reference (label gpu).
 * On one graph per data set (the CPU RNN-Descent reference's, deterministic), every GPU
 * configuration must give recall@10 within 0.01 of graft_graph_search_cpu_ex with the same L and
 * probes, at every L of a sweep, and the same result ids for 99% of the slots; repeated searches of a batch must give identical results; the
 * filter must return only allowed ids; sizes and bad arguments as documented. The multi mode
 * (several walks a query) is checked against the single walk's reference (multi_walks). sift5k's
 * graph is searched again with its rows filled to R (graft_graph_fill_rows, the build option fill).
 * GRAFT_TEST_QUICK=1: small batches of each variant (for compute-sanitizer). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "graft/graph.h"
#include "testutil.h"

typedef struct {
    const char* name;
    const float* xb;
    const float* xq;
    const int32_t* gt; /* nq x 10 */
    int64_t nb, nq, d;
    graft_metric metric;
    graft_graph g;
} dataset;

/* The defaults with one walk a query: every check below but multi_walks' is of the single walk
 * against its CPU reference (the auto mode may give a small batch several walks). */
static void single_defaults(graft_search_params* p) {
    graft_search_params_defaults(p);
    p->mode = GRAFT_SEARCH_SINGLE;
}

static const char* variant(const graft_search_params* p) {
    static char buf[96];
    snprintf(buf, sizeof buf, "L=%d probes=%d %s+%s%s", p->L, p->probes,
             p->visited == GRAFT_VISITED_HASH ? "hash" : "bloom",
             p->merge == GRAFT_MERGE_SORT ? "sort-merge" : "insert", p->allowed ? " filtered" : "");
    return buf;
}

/* GPU vs CPU on the whole query set: recall@10 of each, the fraction of equal result ids, and
 * with `check` the 0.01 rule. Returns the GPU recall. */
static double compare(const dataset* s, const graft_search_params* p, int check) {
    const int64_t nq = s->nq, k = 10;
    float *Dc = malloc(sizeof(float) * nq * k), *Dg = malloc(sizeof(float) * nq * k);
    int64_t *Ic = malloc(sizeof(int64_t) * nq * k), *Ig = malloc(sizeof(int64_t) * nq * k);
    graft_search_report rep = {0};
    CHECK_OK(graft_graph_search_cpu_ex(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, Dc, Ic));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, Dg, Ig, &rep));
    const double rc = graft_test_recall(Ic, k, s->gt, 10, nq, 10);
    const double rg = graft_test_recall(Ig, k, s->gt, 10, nq, 10);
    int64_t same = 0;
    double maxrel = 0;
    for (int64_t i = 0; i < nq * k; i++) {
        same += Ic[i] == Ig[i];
        if (Ic[i] == Ig[i] && Ic[i] >= 0) {
            double rel = fabs((double)Dc[i] - Dg[i]) / (fabs((double)Dc[i]) + 1e-6);
            if (rel > maxrel) maxrel = rel;
        }
    }
    printf("  %-40s recall@10 cpu %.4f gpu %.4f; equal ids %.4f; max rel dist diff %.1e; "
           "%.0f distances/query, %.1f iterations/query\n",
           variant(p), rc, rg, (double)same / (nq * k), maxrel, (double)rep.distances / nq,
           (double)rep.iterations / nq);
    if (check) CHECK(rg >= rc - 0.01, "%s %s: GPU recall %.4f vs CPU %.4f", s->name, variant(p), rg, rc);
    /* Same algorithm, distances equal up to float rounding: the results agree but for rare
     * near-ties (measured on the H100: 1.0000 in every configuration of every data set). */
    if (check) CHECK(same >= 0.99 * nq * k, "%s %s: only %.4f of the result ids equal the CPU's",
                     s->name, variant(p), (double)same / (nq * k));
    CHECK(maxrel < 1e-4, "%s %s: distances differ by %.2e relative", s->name, variant(p), maxrel);
    for (int64_t i = 0; i < nq * k; i++)
        if (Ig[i] < -1 || Ig[i] >= s->nb) {
            CHECK(0, "%s %s: label %lld out of range", s->name, variant(p), (long long)Ig[i]);
            break;
        }
    free(Dc), free(Dg), free(Ic), free(Ig);
    return rg;
}

/* The same batch twice: bitwise-equal results. */
static void repeat(const dataset* s, const graft_search_params* p) {
    const int64_t nq = s->nq, k = 10;
    float *D1 = malloc(sizeof(float) * nq * k), *D2 = malloc(sizeof(float) * nq * k);
    int64_t *I1 = malloc(sizeof(int64_t) * nq * k), *I2 = malloc(sizeof(int64_t) * nq * k);
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, D1, I1, NULL));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, D2, I2, NULL));
    CHECK(!memcmp(D1, D2, sizeof(float) * nq * k) && !memcmp(I1, I2, sizeof(int64_t) * nq * k),
          "%s %s: two runs of the same batch differ", s->name, variant(p));
    free(D1), free(D2), free(I1), free(I2);
}

/* A large call: the query set `times` times over (at d = 784, 500 x 8 queries are 12.5 MB), so
 * that the call runs as a pipeline of chunks, each copied into pinned memory on several threads
 * (graft_memcpy_wide). It gives what the same call as one chunk gives (with a report, a call is
 * not pipelined), and every copy of a query the same results. */
static void large_call(const dataset* s, int times) {
    const int64_t nq = s->nq, k = 10, n = nq * times;
    graft_search_params p;
    single_defaults(&p);
    float *xq = malloc(sizeof(float) * n * s->d), *D1 = malloc(sizeof(float) * n * k),
          *D = malloc(sizeof(float) * n * k);
    int64_t *I1 = malloc(sizeof(int64_t) * n * k), *I = malloc(sizeof(int64_t) * n * k);
    for (int t = 0; t < times; t++) memcpy(xq + t * nq * s->d, s->xq, sizeof(float) * nq * s->d);
    graft_search_report rep = {0};
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, xq, n, k, &p, D1, I1, &rep));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, xq, n, k, &p, D, I, NULL));
    int same = !memcmp(D, D1, sizeof(float) * n * k) && !memcmp(I, I1, sizeof(int64_t) * n * k);
    for (int t = 1; t < times; t++)
        same &= !memcmp(D + t * nq * k, D, sizeof(float) * nq * k) &&
                !memcmp(I + t * nq * k, I, sizeof(int64_t) * nq * k);
    printf("  large call: %lld queries (%.1f MB), pipelined and in %d chunk(s): %s\n", (long long)n,
           n * s->d * 4e-6, rep.batches, same ? "equal" : "DIFFER");
    CHECK(same, "%s: a pipelined call of %lld queries differs from the same call in one chunk, or "
          "between copies of a query", s->name, (long long)n);
    free(xq), free(D1), free(D), free(I1), free(I);
}

/* Filter (even ids only): no odd id comes back; GPU within 0.01 of the CPU (which checks the
 * same rule against the exact search restricted to the allowed ids). */
static void filtered(const dataset* s, graft_search_params p) {
    const int64_t nq = s->nq, k = 10;
    uint8_t* allowed = calloc((size_t)(s->nb + 7) / 8, 1);
    for (int64_t i = 0; i < s->nb; i += 2) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    p.allowed = allowed;
    /* exact answer over the even ids */
    const int64_t ne = (s->nb + 1) / 2;
    float* xe = malloc(sizeof(float) * ne * s->d);
    for (int64_t i = 0; i < ne; i++) memcpy(xe + i * s->d, s->xb + 2 * i * s->d, sizeof(float) * s->d);
    int32_t* gte = graft_test_exact_topk(xe, ne, s->xq, nq, s->d, s->metric, 10);
    for (int64_t i = 0; i < nq * 10; i++) gte[i] *= 2;
    float* D = malloc(sizeof(float) * nq * k);
    int64_t *Ic = malloc(sizeof(int64_t) * nq * k), *Ig = malloc(sizeof(int64_t) * nq * k);
    CHECK_OK(graft_graph_search_cpu_ex(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &p, D, Ic));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &p, D, Ig, NULL));
    int odd = 0;
    for (int64_t i = 0; i < nq * k; i++) odd += Ig[i] >= 0 && (Ig[i] & 1);
    const double rc = graft_test_recall(Ic, k, gte, 10, nq, 10), rg = graft_test_recall(Ig, k, gte, 10, nq, 10);
    printf("  %-40s recall@10 among allowed: cpu %.4f gpu %.4f\n", variant(&p), rc, rg);
    CHECK(odd == 0, "%s: %d filtered-out ids returned", s->name, odd);
    CHECK(rg >= rc - 0.01, "%s filtered: GPU recall %.4f vs CPU %.4f", s->name, rg, rc);
    free(allowed), free(xe), free(gte), free(D), free(Ic), free(Ig);
}

static void sweep(const dataset* s, const int* Ls, int nL) {
    graft_search_params p;
    single_defaults(&p);
    printf("%s: n=%lld d=%lld nq=%lld\n", s->name, (long long)s->nb, (long long)s->d, (long long)s->nq);
    for (int i = 0; i < nL; i++) {
        p.L = Ls[i];
        compare(s, &p, 1);
    }
    /* every visited-set x merge combination and multi-step probing at one L */
    p.L = 64;
    for (int v = 0; v < 2; v++)
        for (int m = 0; m < 2; m++)
            for (int pr = 1; pr <= 4; pr *= 2) {
                p.visited = v, p.merge = m, p.probes = pr;
                compare(s, &p, 1);
            }
    single_defaults(&p);
    repeat(s, &p);
    p.visited = GRAFT_VISITED_BLOOM, p.probes = 4;
    repeat(s, &p);
    p.merge = GRAFT_MERGE_INSERT;
    repeat(s, &p);
    single_defaults(&p);
    filtered(s, p);
    p.visited = GRAFT_VISITED_BLOOM, p.merge = GRAFT_MERGE_INSERT;
    filtered(s, p);
}

/* Batches: a budget that forces many launches gives the one-launch results. */
static void batches(const dataset* s) {
    const int64_t nq = s->nq, k = 10;
    graft_search_params p;
    single_defaults(&p);
    p.visited = GRAFT_VISITED_BLOOM;
    float *D1 = malloc(sizeof(float) * nq * k), *D2 = malloc(sizeof(float) * nq * k);
    int64_t *I1 = malloc(sizeof(int64_t) * nq * k), *I2 = malloc(sizeof(int64_t) * nq * k);
    graft_search_report r1 = {0}, r2 = {0};
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &p, D1, I1, &r1));
    p.memory_budget = 37 * (((size_t)1 << p.bloom_log2) / 8 + 4 * s->d + 12 * k); /* 37 queries */
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &p, D2, I2, &r2));
    printf("  batches: %d launch(es) vs %d; %.4f s of kernels\n", r1.batches, r2.batches, r1.gpu_seconds);
    CHECK(r1.batches == 1 && r2.batches == (int)((nq + 36) / 37), "batches %d and %d", r1.batches, r2.batches);
    CHECK(!memcmp(D1, D2, sizeof(float) * nq * k) && !memcmp(I1, I2, sizeof(int64_t) * nq * k),
          "%s: split batches changed the results", s->name);
    p.memory_budget = 100; /* under one query */
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &p, D2, I2, NULL),
              GRAFT_EGPU_NOMEM);
    free(D1), free(D2), free(I1), free(I2);
}

/* Sizes at the edges and bad arguments. */
static void edges(const dataset* s) {
    graft_search_params p;
    single_defaults(&p);
    float D[64];
    int64_t I[64];
    /* k > vertices: found ones then -1 / FLT_MAX, as FAISS */
    graft_graph g3 = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 3, s->d, NULL, &g3));
    p.L = 16;
    CHECK_OK(graft_graph_search_gpu(&g3, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 2, 8, &p, D, I, NULL));
    CHECK(I[0] >= 0 && I[2] >= 0 && I[3] == -1 && I[7] == -1 && D[7] == FLT_MAX,
          "k > n: labels %lld %lld %lld, D[7] %g", (long long)I[0], (long long)I[3], (long long)I[7], D[7]);
    int64_t Ic[16];
    float Dc[16];
    CHECK_OK(graft_graph_search_cpu_ex(&g3, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 2, 8, &p, Dc, Ic));
    CHECK(!memcmp(I, Ic, sizeof(int64_t) * 16), "k > n: GPU and CPU labels differ");
    CHECK_OK(graft_graph_search_gpu(&g3, s->xb, s->d, GRAFT_METRIC_INNER_PRODUCT, s->xq, 1, 8, &p, D, I, NULL));
    CHECK(I[3] == -1 && D[3] == -FLT_MAX, "IP padding: %lld %g", (long long)I[3], D[3]);
    graft_graph_free(&g3);
    /* n = 1 */
    graft_graph g1 = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 1, s->d, NULL, &g1));
    CHECK_OK(graft_graph_search_gpu(&g1, s->xb, s->d, GRAFT_METRIC_L2, s->xq, 1, 2, &p, D, I, NULL));
    CHECK(I[0] == 0 && I[1] == -1, "n = 1: %lld %lld", (long long)I[0], (long long)I[1]);
    graft_graph_free(&g1);
    /* identical vectors (100 copies), d = 3 (no float4 path), L = k = 1 and L = 1024 */
    float* same = malloc(sizeof(float) * 300);
    for (int i = 0; i < 300; i++) same[i] = (float)(i % 3);
    graft_graph gs = {0};
    CHECK_OK(graft_rnnd_build_cpu(same, 100, 3, NULL, &gs));
    const int Ls[] = {1, 10, 1024};
    for (int i = 0; i < 3; i++) {
        p.L = Ls[i];
        const int k = Ls[i] < 10 ? Ls[i] : 10;
        CHECK_OK(graft_graph_search_gpu(&gs, same, 3, GRAFT_METRIC_L2, same, 1, k, &p, D, I, NULL));
        CHECK_OK(graft_graph_search_cpu_ex(&gs, same, 3, GRAFT_METRIC_L2, same, 1, k, &p, Dc, Ic));
        CHECK(!memcmp(I, Ic, sizeof(int64_t) * k) && D[0] == 0.f,
              "identical vectors L=%d: GPU %lld.. CPU %lld.., D %g", Ls[i], (long long)I[0],
              (long long)Ic[0], D[0]);
    }
    free(same);
    graft_graph_free(&gs);
    /* nq = 0 */
    single_defaults(&p);
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 0, 10, &p, D, I, NULL));
    /* bad arguments (a missing device too): EINVAL, outputs untouched */
    graft_search_params e = p;
    I[0] = 4242;
    e.L = 5;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    e = p, e.L = 1025;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    e = p, e.probes = 9;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    e = p, e.visited = 2;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    e = p, e.merge = -1;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    e = p, e.bloom_log2 = 9;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 0, &p, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, NULL, 1, 10, &p, D, I, NULL), GRAFT_EINVAL);
    float nanq[128];
    memcpy(nanq, s->xq, sizeof nanq);
    nanq[5] = NAN;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, nanq, 1, 10, &p, D, I, NULL), GRAFT_EINVAL);
    e = p, e.device = 99;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &e, D, I, NULL), GRAFT_EINVAL);
    CHECK(I[0] == 4242, "a failed search wrote its output");
}

/* The multi mode (graft/graph.h): W walks a query, walk 0 the single walk, merged. Against its
 * CPU reference (graft_graph_search_cpu_ex in the same mode: the same starts, each walk as the
 * single walk is, merged the same way): recall within 0.01 and 99% of the ids equal, as compare()
 * holds the single walk. Against the single walk's CPU reference: each query's i-th distance at
 * most its own up to float rounding (walk 0's results are among those merged; 1% of the slots
 * may differ, where the GPU's single walk does), recall at least its own. Labels in range and
 * never repeated in a row, each distance its label's, the same bits on a second run and for a
 * query searched at another place in the batch (the starts follow from the query alone). A
 * filtered search returns allowed ids only. `cpu_multi` 0: only the checks against the single
 * walk (auto, whose walks a query the device chooses). */
static double dist(const dataset* s, int64_t q, int64_t id) {
    double acc = 0;
    for (int64_t j = 0; j < s->d; j++) {
        const double a = s->xq[q * s->d + j], b = s->xb[id * s->d + j];
        acc += s->metric == GRAFT_METRIC_L2 ? (a - b) * (a - b) : a * b;
    }
    return acc;
}

static void multi_check(const dataset* s, const graft_search_params* p, int64_t nq, int cpu_multi,
                        const char* what) {
    const int64_t k = 10, m = nq * k;
    float *D1 = malloc(sizeof(float) * m), *Dm = malloc(sizeof(float) * m),
          *Dg = malloc(sizeof(float) * m), *D2 = malloc(sizeof(float) * m);
    int64_t *I1 = malloc(sizeof(int64_t) * m), *Im = malloc(sizeof(int64_t) * m),
            *Ig = malloc(sizeof(int64_t) * m), *I2 = malloc(sizeof(int64_t) * m);
    graft_search_params one = *p;
    one.mode = GRAFT_SEARCH_SINGLE;
    CHECK_OK(graft_graph_search_cpu_ex(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, &one, D1, I1));
    if (cpu_multi) CHECK_OK(graft_graph_search_cpu_ex(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, Dm, Im));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, Dg, Ig, NULL));
    CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, nq, k, p, D2, I2, NULL));
    const int l2 = s->metric == GRAFT_METRIC_L2;
    int64_t worse = 0, bad_label = 0, repeated = 0, bad_dist = 0, same = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t i = 0; i < k; i++) {
            const int64_t at = q * k + i, id = Ig[at];
            const double tol = 1e-5 * (fabs((double)D1[at]) + 1e-6);
            if (l2 ? Dg[at] > D1[at] + tol : Dg[at] < D1[at] - tol) worse++;
            if (cpu_multi) same += Im[at] == id;
            if (id < -1 || id >= s->nb) {
                bad_label++;
                continue;
            }
            for (int64_t j = 0; j < i && id >= 0; j++) repeated += Ig[q * k + j] == id;
            if (id >= 0 && fabs(dist(s, q, id) - Dg[at]) > 1e-4 * (fabs(dist(s, q, id)) + 1e-3)) bad_dist++;
        }
    const double r1 = graft_test_recall(I1, k, s->gt, 10, nq, 10);
    const double rm = cpu_multi ? graft_test_recall(Im, k, s->gt, 10, nq, 10) : 0;
    const double rg = graft_test_recall(Ig, k, s->gt, 10, nq, 10);
    /* The auto case has no CPU counterpart (the CPU's auto is one walk): its columns say "-". */
    char multi[32] = "-", equal[32] = "-";
    if (cpu_multi) {
        snprintf(multi, sizeof multi, "%.4f", rm);
        snprintf(equal, sizeof equal, "%.4f", (double)same / m);
    }
    printf("  %-40s recall@10 cpu single %.4f, cpu multi %s, gpu %.4f; equal ids %s; slots worse "
           "than single %.4f\n", what, r1, multi, rg, equal, (double)worse / m);
    if (cpu_multi) {
        CHECK(rg >= rm - 0.01, "%s %s: GPU recall %.4f vs CPU %.4f", s->name, what, rg, rm);
        CHECK(same >= 0.99 * m, "%s %s: only %.4f of the ids equal the CPU's", s->name, what, (double)same / m);
    }
    CHECK(worse <= 0.01 * m, "%s %s: %lld slots worse than the single walk's", s->name, what, (long long)worse);
    CHECK(rg >= r1 - 0.005, "%s %s: recall %.4f under the single walk's %.4f", s->name, what, rg, r1);
    CHECK(!bad_label && !repeated && !bad_dist, "%s %s: %lld labels out of range, %lld repeated, "
          "%lld distances not their label's", s->name, what, (long long)bad_label,
          (long long)repeated, (long long)bad_dist);
    CHECK(!memcmp(Dg, D2, sizeof(float) * m) && !memcmp(Ig, I2, sizeof(int64_t) * m),
          "%s %s: two runs of the same batch differ", s->name, what);
    if (cpu_multi && nq > 7) { /* the queries from the 8th on, as a batch of their own */
        CHECK_OK(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq + 7 * s->d, nq - 7, k, p,
                                        D2, I2, NULL));
        CHECK(!memcmp(Dg + 7 * k, D2, sizeof(float) * (m - 7 * k)) &&
                      !memcmp(Ig + 7 * k, I2, sizeof(int64_t) * (m - 7 * k)),
              "%s %s: a query's results depend on its place in the batch", s->name, what);
    }
    if (p->allowed)
        for (int64_t i = 0; i < m; i++)
            if (Ig[i] >= 0 && !(p->allowed[Ig[i] >> 3] >> (Ig[i] & 7) & 1)) {
                CHECK(0, "%s %s: filtered-out id %lld returned", s->name, what, (long long)Ig[i]);
                break;
            }
    free(D1), free(Dm), free(Dg), free(D2), free(I1), free(Im), free(Ig), free(I2);
}

static void multi_walks(const dataset* s, const int* Ls, int nL) {
    graft_search_params p;
    graft_search_params_defaults(&p);
    p.mode = GRAFT_SEARCH_MULTI;
    char what[96];
    const int walks[] = {2, 8, 32};
    for (int i = 0; i < nL; i++)
        for (int w = 0; w < 3; w++) {
            p.L = Ls[i], p.walks = walks[w];
            p.visited = w == 1 ? GRAFT_VISITED_BLOOM : GRAFT_VISITED_HASH;
            snprintf(what, sizeof what, "multi L=%d walks=%d %s", p.L, p.walks, w == 1 ? "bloom" : "hash");
            multi_check(s, &p, s->nq, 1, what);
        }
    uint8_t* allowed = calloc((size_t)(s->nb + 7) / 8, 1);
    for (int64_t i = 0; i < s->nb; i += 2) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    p.L = 32, p.walks = 8, p.visited = GRAFT_VISITED_HASH, p.allowed = allowed;
    multi_check(s, &p, s->nq, 1, "multi L=32 walks=8 even ids only");
    free(allowed);
    graft_search_params_defaults(&p);  /* auto: batch 1 gets the most walks */
    p.L = 32;
    multi_check(s, &p, 1, 0, "auto L=32 batch 1");
    /* walks x k over 4096, walks outside 2..64: EINVAL */
    float D[10];
    int64_t I[10];
    p.mode = GRAFT_SEARCH_MULTI, p.walks = 65;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &p, D, I, NULL), GRAFT_EINVAL);
    p.walks = 1;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &p, D, I, NULL), GRAFT_EINVAL);
    p.walks = 0, p.mode = 3;
    CHECK_ERR(graft_graph_search_gpu(&s->g, s->xb, s->d, s->metric, s->xq, 1, 10, &p, D, I, NULL), GRAFT_EINVAL);
}

static void build(dataset* s) {
    graft_rnnd_params bp;
    graft_rnnd_params_defaults(&bp);
    bp.metric = s->metric;
    CHECK_OK(graft_rnnd_build_cpu(s->xb, s->nb, s->d, &bp, &s->g));
}

/* The graph's rows filled to R (graft_graph_fill_rows, the build option fill): a step then has
 * up to 64 candidates instead of about 12, more than one staging buffer's 32 rows on sm_90. */
static void fill(dataset* s) {
    CHECK_OK(graft_graph_fill_rows(&s->g, s->xb, s->d, s->metric, NULL));
    s->name = "sift5k, rows filled";
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift sift;
    graft_test_load_sift5k(&sift);
    const int quick = getenv("GRAFT_TEST_QUICK") != NULL;
    int32_t* gt10 = malloc(sizeof(int32_t) * sift.nq * 10);
    for (int64_t i = 0; i < sift.nq; i++) memcpy(gt10 + i * 10, sift.gt + i * sift.gt_k, 40);
    dataset s = {"sift5k", sift.xb, sift.xq, gt10, sift.nb, quick ? 40 : sift.nq, sift.d,
                 GRAFT_METRIC_L2, {0}};
    build(&s);
    if (quick) {
        graft_search_params p;
        single_defaults(&p);
        p.L = 32;
        for (int v = 0; v < 2; v++)
            for (int m = 0; m < 2; m++) {
                p.visited = v, p.merge = m, p.probes = 1 + 2 * m;
                compare(&s, &p, 0);
            }
        single_defaults(&p);
        filtered(&s, p);
        const int Lq[] = {32};
        multi_walks(&s, Lq, 1);
        edges(&s);
        fill(&s);
        p.L = 32;
        compare(&s, &p, 0);
        multi_walks(&s, Lq, 1);
        graft_graph_free(&s.g);
        free(gt10);
        graft_test_free_sift(&sift);
        return graft_test_finish("test_gpu_search (quick)");
    }
    const int Ls[] = {10, 16, 24, 32, 48, 64, 96, 128, 256};
    sweep(&s, Ls, 9);
    const int Lm[] = {10, 32, 128};
    multi_walks(&s, Lm, 3);
    batches(&s);
    edges(&s);
    fill(&s);
    const int Lfill[] = {10, 16, 32, 64};
    sweep(&s, Lfill, 4);
    multi_walks(&s, Lfill, 2);
    graft_graph_free(&s.g);

    /* cosine: inner product on normalized sift5k, graph built for it */
    float* xb = malloc(sizeof(float) * sift.nb * sift.d);
    float* xq = malloc(sizeof(float) * sift.nq * sift.d);
    memcpy(xb, sift.xb, sizeof(float) * sift.nb * sift.d);
    memcpy(xq, sift.xq, sizeof(float) * sift.nq * sift.d);
    graft_test_normalize(xb, sift.nb, sift.d);
    graft_test_normalize(xq, sift.nq, sift.d);
    int32_t* gtc = graft_test_exact_topk(xb, sift.nb, xq, sift.nq, sift.d, GRAFT_METRIC_INNER_PRODUCT, 10);
    dataset c = {"sift5k cosine (IP)", xb, xq, gtc, sift.nb, sift.nq, sift.d,
                 GRAFT_METRIC_INNER_PRODUCT, {0}};
    build(&c);
    const int Lc[] = {16, 32, 64};
    sweep(&c, Lc, 3);
    multi_walks(&c, Lc, 2);
    graft_graph_free(&c.g);
    free(gtc), free(xb), free(xq);

    /* Fashion-MNIST, d = 784 (whole-warp distances) */
    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    if (graft_test_load_fmnist(10000, 500, &fb, &fnb, &fq, &fnq, &fd) == 0) {
        int32_t* gtf = graft_test_exact_topk(fb, fnb, fq, fnq, fd, GRAFT_METRIC_L2, 10);
        dataset f = {"fashion-mnist 10k", fb, fq, gtf, fnb, fnq, fd, GRAFT_METRIC_L2, {0}};
        build(&f);
        const int Lf[] = {10, 16, 32, 64};
        sweep(&f, Lf, 4);
        multi_walks(&f, Lf, 2);
        large_call(&f, 8);
        graft_graph_free(&f.g);
        free(gtf), free(fb), free(fq);
    }
    free(gt10);
    graft_test_free_sift(&sift);
    return graft_test_finish("test_gpu_search");
}
