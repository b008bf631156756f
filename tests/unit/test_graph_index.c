/* The graph index object (plugin/graph/graph_index.c) on the CPU references (device -1): add = rebuild,
 * search, FAISS's conventions for empty indexes and k > ntotal, state kept across failed calls,
 * set_data, set_graph, and the GRFTGRPH record (round trip, truncation, corruption). Real data: sift5k.
 * Where a GPU is visible, the same object on the GPU: GRNND build, kernel search against the CPU
 * reference over the same graph, filter, failed calls, records moved between devices. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/io.h"
#include "testutil.h"

#define HDR 152 /* bytes of a version-4 GRFTGRPH header */

static graft_gindex* new_cpu(int64_t d, graft_metric metric) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.metric = metric;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, &p, &g));
    return g;
}

typedef struct results {
    float* D;
    int64_t* I;
} results;

static results search(const graft_gindex* g, const float* xq, int64_t nq, int64_t k,
                      const graft_search_params* sp) {
    results r = {malloc(sizeof(float) * nq * k), malloc(sizeof(int64_t) * nq * k)};
    CHECK_OK(graft_gindex_search(g, nq, xq, k, sp, r.D, r.I, NULL));
    return r;
}
static void free_results(results* r) {
    free(r->D);
    free(r->I);
}
static int same_results(results a, results b, int64_t n) {
    return !memcmp(a.D, b.D, sizeof(float) * n) && !memcmp(a.I, b.I, sizeof(int64_t) * n);
}
static double recall10(const graft_gindex* g, const graft_test_sift* s) {
    results r = search(g, s->xq, s->nq, 10, NULL);
    double rec = graft_test_recall(r.I, 10, s->gt, s->gt_k, s->nq, 10);
    free_results(&r);
    return rec;
}

/* Every slot past the results FAISS's way: -1 with FLT_MAX (L2) / -FLT_MAX (IP). */
static void check_padding(results r, int64_t nq, int64_t k, int64_t found, int l2, const char* what) {
    int64_t bad = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t j = found; j < k; j++)
            bad += r.I[q * k + j] != -1 || r.D[q * k + j] != (l2 ? FLT_MAX : -FLT_MAX);
    CHECK(bad == 0, "%s: %lld padding slots are not (-1, %sFLT_MAX)", what, (long long)bad, l2 ? "" : "-");
}

/* Searches from 4 threads at once give the sequential results (the header promises thread-safe
 * search; a GPU index serializes its device work). */
typedef struct search_job {
    const graft_gindex* g;
    const graft_test_sift* s;
    int64_t q0, nq;
    results r;
} search_job;
static void* run_job(void* arg) {
    search_job* j = arg;
    j->r = search(j->g, j->s->xq + j->q0 * j->s->d, j->nq, 10, NULL);
    return NULL;
}
static void check_concurrent(const graft_gindex* g, const graft_test_sift* s, const char* what) {
    enum { T = 4 };
    search_job jobs[T];
    pthread_t th[T];
    const int64_t per = s->nq / T;
    for (int t = 0; t < T; t++) {
        jobs[t] = (search_job){g, s, t * per, per, {0}};
        pthread_create(&th[t], NULL, run_job, &jobs[t]);
    }
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    results all = search(g, s->xq, per * T, 10, NULL);
    int ok = 1;
    for (int t = 0; t < T; t++) {
        ok &= !memcmp(jobs[t].r.I, all.I + t * per * 10, sizeof(int64_t) * per * 10) &&
              !memcmp(jobs[t].r.D, all.D + t * per * 10, sizeof(float) * per * 10);
        free_results(&jobs[t].r);
    }
    CHECK(ok, "%s: concurrent searches differ from one sequential search", what);
    free_results(&all);
}

static void test_sift5k(const graft_test_sift* s) {
    graft_gindex* g = new_cpu(s->d, GRAFT_METRIC_L2);
    /* Adds that leave the graph to the next build (the living index's inserts: test_living). */
    graft_living_params lp = graft_gindex_get_params(g).living;
    lp.policy = GRAFT_ADD_REBUILD;
    CHECK_OK(graft_gindex_set_living_params(g, &lp));
    CHECK(graft_gindex_device(g) == -1 && graft_gindex_graph(g) == NULL && graft_gindex_ntotal(g) == 0 &&
          graft_gindex_build_pieces(g) == -1, "fresh index");
    graft_gindex_params p = graft_gindex_get_params(g);
    CHECK(p.search.L == 64 && p.build.base.R == 64, "defaults L=%d R=%d", p.search.L, p.build.base.R);

    /* Two adds: each leaves the build pending (no graph, pieces -1); an explicit build builds
     * over the 3000, and the build after the second add over all 4500 vectors. */
    const int64_t first = 3000;
    CHECK_OK(graft_gindex_add(g, first, s->xb));
    CHECK(graft_gindex_graph(g) == NULL && graft_gindex_build_pieces(g) == -1 &&
          graft_gindex_build_seconds(g) == 0, "the add leaves the build pending");
    CHECK_OK(graft_gindex_build(g));
    const graft_graph* gr = graft_gindex_graph(g);
    CHECK(gr && gr->n == first && graft_gindex_build_seconds(g) > 0, "graph after the first build");
    CHECK(graft_gindex_build_pieces(g) == 0, "a CPU index's build: pieces %d", graft_gindex_build_pieces(g));
    CHECK_OK(graft_gindex_build(g)); /* nothing pending: nothing to do */
    CHECK(graft_gindex_graph(g) == gr, "a build with nothing pending keeps the graph");
    CHECK_OK(graft_gindex_add(g, s->nb - first, s->xb + first * s->d));
    CHECK(graft_gindex_graph(g) == NULL, "the second add leaves the build pending");
    CHECK_OK(graft_gindex_build(g));
    gr = graft_gindex_graph(g);
    CHECK(graft_gindex_ntotal(g) == s->nb && gr && gr->n == s->nb && gr->R == 64, "graph after the second add");
    CHECK(!memcmp(graft_gindex_vectors(g), s->xb, sizeof(float) * s->nb * s->d), "stored vectors");
    graft_test_check_graph(gr, s->nb, gr->R, s->xb, s->d, 1, "index graph");
    printf("sift5k: build %.3f s (%d threads)\n", graft_gindex_build_seconds(g), omp_get_max_threads());

    /* Recall@10 at the default L = 64: measured 0.9944 (the graph built by the second add is the
     * one graft_rnnd_build_cpu gives over all 4500 vectors; test_graph_cpu sweeps L). */
    double t0 = omp_get_wtime();
    double rec = recall10(g, s);
    printf("sift5k: recall@10 %.4f at L=64, %.3f s for %lld queries\n", rec, omp_get_wtime() - t0,
           (long long)s->nq);
    CHECK(rec >= 0.99, "recall@10 %.4f at L=64 (measured 0.9944)", rec);
    graft_graph direct = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, s->nb, s->d, &p.build.base, &direct));
    CHECK(direct.R == gr->R && !memcmp(direct.nbrs, gr->nbrs, sizeof(int32_t) * s->nb * gr->R) &&
          direct.entry == gr->entry, "add = one build over every vector");
    graft_graph_free(&direct);
    check_concurrent(g, s, "CPU index");

    /* Per-search parameters: a narrow beam loses recall; k > L widens the beam to k. */
    graft_search_params sp;
    graft_search_params_defaults(&sp);
    sp.L = 10;
    results r10 = search(g, s->xq, s->nq, 10, &sp);
    double rec_l10 = graft_test_recall(r10.I, 10, s->gt, s->gt_k, s->nq, 10);
    printf("sift5k: recall@10 %.4f at L=10\n", rec_l10);
    CHECK(rec_l10 < rec - 0.1 && rec_l10 > 0.8, "L=10 recall %.4f (measured 0.8422) vs %.4f at L=64",
          rec_l10, rec);
    sp.L = 16;
    results r100 = search(g, s->xq, 5, 100, &sp); /* runs with L = 100 */
    sp.L = 100;
    results r100b = search(g, s->xq, 5, 100, &sp);
    CHECK(same_results(r100, r100b, 5 * 100), "k > L: the beam is widened to k");
    free_results(&r10);
    free_results(&r100);
    free_results(&r100b);

    /* Default parameters. */
    sp = p.search;
    sp.L = 10;
    CHECK_OK(graft_gindex_set_search_params(g, &sp));
    CHECK(graft_gindex_get_params(g).search.L == 10 && fabs(recall10(g, s) - rec_l10) < 1e-12,
          "set_search_params");
    sp.L = 64;
    CHECK_OK(graft_gindex_set_search_params(g, &sp));

    /* reset, then add again. */
    CHECK_OK(graft_gindex_reset(g));
    CHECK(graft_gindex_ntotal(g) == 0 && graft_gindex_graph(g) == NULL && graft_gindex_build_pieces(g) == -1,
          "reset");
    results e = search(g, s->xq, 3, 10, NULL);
    check_padding(e, 3, 10, 0, 1, "after reset");
    free_results(&e);
    CHECK_OK(graft_gindex_add(g, s->nb, s->xb));
    CHECK(fabs(recall10(g, s) - rec) < 1e-12, "add after reset: same recall");
    graft_gindex_free(g);
}

/* FAISS's conventions at the edges: empty index, k > ntotal, n = 1, all-identical vectors. */
static void test_edges(const graft_test_sift* s) {
    for (int l2 = 0; l2 <= 1; l2++) {
        graft_gindex* g = new_cpu(s->d, l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT);
        results r = search(g, s->xq, 4, 7, NULL);
        check_padding(r, 4, 7, 0, l2, "search before add");
        free_results(&r);

        CHECK_OK(graft_gindex_add(g, 1, s->xb));
        r = search(g, s->xq, 4, 5, NULL);
        for (int q = 0; q < 4; q++) CHECK(r.I[q * 5] == 0, "n = 1: query %d got %lld", q, (long long)r.I[q * 5]);
        check_padding(r, 4, 5, 1, l2, "n = 1");
        free_results(&r);

        /* k > ntotal: all 20 vectors (the graph over 20 is connected), then padding. */
        CHECK_OK(graft_gindex_reset(g));
        CHECK_OK(graft_gindex_add(g, 20, s->xb));
        r = search(g, s->xq, 4, 30, NULL);
        for (int q = 0; q < 4; q++) {
            int seen[20] = {0}, ok = 1;
            for (int j = 0; j < 20; j++) {
                int64_t id = r.I[q * 30 + j];
                ok &= id >= 0 && id < 20 && !seen[id]++;
                if (j > 0) ok &= l2 ? r.D[q * 30 + j] >= r.D[q * 30 + j - 1] : r.D[q * 30 + j] <= r.D[q * 30 + j - 1];
            }
            CHECK(ok, "k > ntotal: query %d does not list the 20 vectors in order", q);
        }
        check_padding(r, 4, 30, 20, l2, "k > ntotal");
        free_results(&r);
        graft_gindex_free(g);
    }

    /* 50 copies of one vector: every copy at distance 0, no duplicates in a result row. */
    const int64_t n = 50;
    float* x = malloc(sizeof(float) * n * s->d);
    for (int64_t i = 0; i < n; i++) memcpy(x + i * s->d, s->xb, sizeof(float) * s->d);
    graft_gindex* g = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_add(g, n, x));
    results r = search(g, x, 1, 10, NULL);
    int ok = 1;
    for (int j = 0; j < 10; j++)
        for (int i = 0; i < j; i++) ok &= r.I[i] != r.I[j];
    for (int j = 0; j < 10; j++) ok &= r.I[j] >= 0 && r.I[j] < n && r.D[j] == 0;
    CHECK(ok, "identical vectors: 10 distinct ids at distance 0 (first %lld %g)", (long long)r.I[0],
          (double)r.D[0]);
    free_results(&r);
    graft_gindex_free(g);
    free(x);
}

/* Every bad argument: GRAFT_EINVAL with a message, and the index as it was. */
static void test_bad_args(const graft_test_sift* s) {
    graft_gindex* g = NULL;
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    CHECK_ERR(graft_gindex_new(0, &p, &g), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_new((1 << 20) + 1, &p, &g), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_new(8, &p, NULL), GRAFT_EINVAL);
    graft_gindex_params b = p;
    b.metric = (graft_metric)7;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    b = p, b.device = -3;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    /* Placement: only the PQ storage leaves data in host memory; PQ's M must divide d. */
    b = p, b.mode = GRAFT_BANG_OUT_OF_CORE;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EUNSUPPORTED);
    b = p, b.mode = (graft_bang_mode)5;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    b = p, b.storage = GRAFT_STORAGE_PQ, b.pq.M = 3;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    CHECK(g == NULL, "no index from refused parameters");
    CHECK_OK(graft_gindex_new(8, &p, &g));
    CHECK_ERR(graft_gindex_set_mode(g, GRAFT_BANG_OUT_OF_CORE, 0), GRAFT_EUNSUPPORTED);
    CHECK_OK(graft_gindex_set_mode(g, GRAFT_BANG_IN_MEMORY, 0));
    CHECK(graft_gindex_mode(g) == GRAFT_BANG_AUTO, "a CPU index's placement: AUTO");
    graft_pq none = {8, 2, 4, NULL};
    CHECK_ERR(graft_gindex_set_pq(g, &none), GRAFT_EINVAL);
    CHECK(graft_gindex_pq(g) == NULL && graft_gindex_codes(g) == NULL, "FP32: no codebooks, no codes");
    graft_gindex_free(g);
    g = NULL;
    b = p, b.build.base.R = 0;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    b = p, b.search.L = 2000;
    CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_EINVAL);
    CHECK(g == NULL, "a failed new set *out");
    if (!graft_gpu_available()) {
        b = p, b.device = 0;
        CHECK_ERR(graft_gindex_new(8, &b, &g), GRAFT_ENODEVICE);
        printf("GPU index without a device: %s\n", graft_last_error());
    }

    const int64_t n = 300, nq = 20;
    g = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_add(g, n, s->xb));
    results before = search(g, s->xq, nq, 10, NULL);
    const double secs = graft_gindex_build_seconds(g);
    float* bad = malloc(sizeof(float) * 3 * s->d);
    memcpy(bad, s->xq, sizeof(float) * 3 * s->d);
    bad[s->d + 5] = NAN;
    float D[3 * 10];
    int64_t I[3 * 10];
    CHECK_ERR(graft_gindex_add(g, 3, bad), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "row 1"), "NaN add message: %s", graft_last_error());
    /* Past the first block of rows that the add's parallel copy checks (graft_copy_rows_finite). */
    const int64_t many = 20000;
    float* rows = malloc(sizeof(float) * many * s->d);
    for (int64_t i = 0; i < many; i++)
        memcpy(rows + i * s->d, s->xb + (i % n) * s->d, sizeof(float) * s->d);
    rows[16390 * s->d + 7] = INFINITY;
    CHECK_ERR(graft_gindex_add(g, many, rows), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "row 16390 "), "Inf add message: %s", graft_last_error());
    free(rows);
    CHECK_ERR(graft_gindex_add(g, -1, s->xb), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_add(g, 3, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_add(NULL, 3, s->xb), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, bad, 10, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(NULL, 3, s->xq, 10, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, NULL, 10, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 10, NULL, NULL, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 10, NULL, D, NULL, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, -1, s->xq, 10, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 0, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, -4, NULL, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 1025, NULL, D, I, NULL), GRAFT_EINVAL);
    printf("k = 1025: %s\n", graft_last_error());
    CHECK_OK(graft_gindex_search(g, 0, NULL, 10, NULL, NULL, NULL, NULL)); /* nq = 0 */
    graft_search_params sp;
    graft_search_params_defaults(&sp);
    sp.L = 1025;
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 10, &sp, D, I, NULL), GRAFT_EINVAL);
    sp.L = 64, sp.probes = 0;
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 10, &sp, D, I, NULL), GRAFT_EINVAL);
    sp.probes = 9;
    CHECK_ERR(graft_gindex_search(g, 3, s->xq, 10, &sp, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_search_params(g, &sp), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_search_params(g, NULL), GRAFT_EINVAL);
    sp.probes = 1, sp.allowed = (const uint8_t*)bad;
    CHECK_ERR(graft_gindex_set_search_params(g, &sp), GRAFT_EINVAL);
    graft_grnnd_params bp = graft_gindex_get_params(g).build;
    bp.base.R = 0;
    CHECK_ERR(graft_gindex_set_build_params(g, &bp), GRAFT_EINVAL);
    bp.base.R = 64, bp.base.rho = 2;
    CHECK_ERR(graft_gindex_set_build_params(g, &bp), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_build_params(g, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_reset(NULL), GRAFT_EINVAL);
    graft_gindex_free(NULL);

    /* A CPU index builds with R > 64 (only GRNND on the GPU caps R). */
    bp.base.rho = 1, bp.base.R = 100;
    CHECK_OK(graft_gindex_set_build_params(g, &bp));
    CHECK(graft_gindex_get_params(g).build.base.R == 100 && graft_gindex_graph(g)->R == 64,
          "build parameters take effect on the next build");
    bp.base.R = 64;
    CHECK_OK(graft_gindex_set_build_params(g, &bp));

    results after = search(g, s->xq, nq, 10, NULL);
    CHECK(graft_gindex_ntotal(g) == n && graft_gindex_build_seconds(g) == secs &&
          graft_gindex_get_params(g).search.probes == 1 && same_results(before, after, nq * 10),
          "failed calls changed the index");
    free_results(&before);
    free_results(&after);
    free(bad);
    graft_gindex_free(g);
}

static void test_set_data(const graft_test_sift* s) {
    const int64_t n = 500, nq = 20;
    graft_rnnd_params bp;
    graft_rnnd_params_defaults(&bp);
    bp.R = 24;
    graft_graph gr = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, n, s->d, &bp, &gr));
    graft_gindex* g = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_add(g, 100, s->xb + 1000 * s->d));
    results before = search(g, s->xq, nq, 10, NULL);

    graft_graph bad = gr;
    bad.n = n - 1;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &bad), GRAFT_EINVAL);
    bad = gr, bad.R = 0;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &bad), GRAFT_EINVAL);
    bad = gr, bad.entry = n;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &bad), GRAFT_EINVAL);
    bad = gr, bad.entry = -1;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &bad), GRAFT_EINVAL);
    bad = gr, bad.nbrs = NULL;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &bad), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_data(g, n, NULL, &gr), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_data(g, 0, s->xb, &gr), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_data(NULL, n, s->xb, &gr), GRAFT_EINVAL);
    int32_t keep = gr.nbrs[77 * gr.R + 3];
    gr.nbrs[77 * gr.R + 3] = (int32_t)n;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &gr), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "row 77"), "bad id message: %s", graft_last_error());
    gr.nbrs[77 * gr.R + 3] = -2;
    CHECK_ERR(graft_gindex_set_data(g, n, s->xb, &gr), GRAFT_EINVAL);
    gr.nbrs[77 * gr.R + 3] = keep;
    float* x = malloc(sizeof(float) * n * s->d);
    memcpy(x, s->xb, sizeof(float) * n * s->d);
    x[123 * s->d] = INFINITY;
    CHECK_ERR(graft_gindex_set_data(g, n, x, &gr), GRAFT_EINVAL);
    results after = search(g, s->xq, nq, 10, NULL);
    CHECK(graft_gindex_ntotal(g) == 100 && same_results(before, after, nq * 10),
          "a rejected set_data changed the index");

    /* Accepted: copies of both; the search is the reference search over that graph. */
    x[123 * s->d] = s->xb[123 * s->d];
    CHECK_OK(graft_gindex_set_data(g, n, x, &gr));
    memset(x, 0, sizeof(float) * n * s->d);
    CHECK(graft_gindex_ntotal(g) == n && graft_gindex_graph(g)->R == 24 &&
          !memcmp(graft_gindex_graph(g)->nbrs, gr.nbrs, sizeof(int32_t) * n * 24) &&
          !memcmp(graft_gindex_vectors(g), s->xb, sizeof(float) * n * s->d), "set_data copies");
    results r = search(g, s->xq, nq, 10, NULL);
    float* D = malloc(sizeof(float) * nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * nq * 10);
    CHECK_OK(graft_graph_search_cpu_ex(&gr, s->xb, s->d, GRAFT_METRIC_L2, s->xq, nq, 10, NULL, D, I));
    CHECK(!memcmp(r.I, I, sizeof(int64_t) * nq * 10) && !memcmp(r.D, D, sizeof(float) * nq * 10),
          "index search = graft_graph_search_cpu_ex on the same graph");
    free(D); free(I); free(x);
    free_results(&before); free_results(&after); free_results(&r);
    graft_graph_free(&gr);
    graft_gindex_free(g);
}

/* set_graph: another index's graph over the same vectors (replicas); refused for another count,
 * a bad graph or NULL, the index unchanged; accepted, the same results as the index that built
 * it, and no build left pending. */
static void test_set_graph(const graft_test_sift* s) {
    const int64_t n = 600, nq = 20;
    graft_gindex* a = new_cpu(s->d, GRAFT_METRIC_L2);
    graft_gindex* b = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_add(a, n, s->xb));
    CHECK_OK(graft_gindex_add(b, n, s->xb));
    CHECK_OK(graft_gindex_build(a));
    const graft_graph* ga = graft_gindex_graph(a);
    CHECK(ga && !graft_gindex_graph(b), "a built, b pending");
    graft_graph bad = *ga;
    bad.n = n - 1;
    CHECK_ERR(graft_gindex_set_graph(b, &bad), GRAFT_EINVAL);
    bad = *ga, bad.entry = n;
    CHECK_ERR(graft_gindex_set_graph(b, &bad), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_graph(b, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_graph(NULL, ga), GRAFT_EINVAL);
    CHECK(!graft_gindex_graph(b) && graft_gindex_ntotal(b) == n, "a refused set_graph changed the index");
    CHECK_OK(graft_gindex_set_graph(b, ga));
    CHECK(graft_gindex_graph(b) && graft_gindex_graph(b) != ga &&
          !memcmp(graft_gindex_graph(b)->nbrs, ga->nbrs, sizeof(int32_t) * n * ga->R) &&
          graft_gindex_build_pieces(b) == -1 && graft_gindex_build_seconds(b) == 0,
          "set_graph: a copy of the rows, nothing pending, pieces -1");
    results ra = search(a, s->xq, nq, 10, NULL), rb = search(b, s->xq, nq, 10, NULL);
    CHECK(same_results(ra, rb, nq * 10), "set_graph: the same results as the index that built the graph");
    free_results(&ra);
    free_results(&rb);
    graft_gindex_free(a);
    graft_gindex_free(b);
}

/* ---- the GRFTGRPH record ---------------------------------------------------------------------- */

static unsigned char* record_of(const graft_gindex* g, size_t* len) {
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(g, f));
    return graft_test_bytes_of(f, len);
}

/* One record from f as an index on the CPU (graft_test_reader). */
static int read_record(FILE* f, void** out) {
    graft_gindex_params cpu;
    graft_gindex_params_defaults(&cpu);
    cpu.device = -1;
    graft_gindex* g = NULL;
    int rc = graft_gindex_read(f, &cpu, &g);
    if (rc == GRAFT_OK) *out = g;
    return rc;
}

/* Reads `len` bytes of b as an index on the CPU into *out; returns its status. */
static int read_bytes(const unsigned char* b, size_t len, graft_gindex** out) {
    FILE* f = tmpfile();
    if (len) fwrite(b, 1, len, f);
    rewind(f);
    void* g = *out;
    int rc = read_record(f, &g);
    *out = g;
    fclose(f);
    return rc;
}

static void expect_format(const unsigned char* b, size_t len, const char* what, const char* needle) {
    graft_test_expect_format(read_record, b, len, what, needle);
}

/* A copy of b with an n-byte field at off set to v; the checksum recomputed when `resum`. */
static void with_field(const unsigned char* b, size_t len, size_t off, uint64_t v, int n, int resum,
                       const char* what, const char* needle) {
    graft_test_with_field(read_record, b, len, off, v, n, resum, what, needle);
}

static void test_io(const graft_test_sift* s) {
    const int64_t n = 1000, nq = 50;
    for (int l2 = 0; l2 <= 1; l2++) {
        graft_gindex* g = new_cpu(s->d, l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT);
        graft_search_params sp = graft_gindex_get_params(g).search;
        sp.L = 40, sp.probes = 2;
        CHECK_OK(graft_gindex_set_search_params(g, &sp));
        CHECK_OK(graft_gindex_add(g, n, s->xb));
        size_t len;
        unsigned char* b = record_of(g, &len);
        const int R = graft_gindex_graph(g)->R;
        CHECK(len == HDR + (size_t)n * s->d * 4 + (size_t)n * R * 4 + 8, "record length %zu", len);
        graft_gindex* r = NULL;
        CHECK_OK(read_bytes(b, len, &r));
        if (!r) return;
        const graft_graph *ga = graft_gindex_graph(g), *gb = graft_gindex_graph(r);
        graft_gindex_params pr = graft_gindex_get_params(r);
        CHECK(graft_gindex_ntotal(r) == n && graft_gindex_d(r) == s->d &&
              graft_gindex_metric(r) == graft_gindex_metric(g) && graft_gindex_device(r) == -1 &&
              pr.search.L == 40 && pr.search.probes == 2, "read: shape, metric, search defaults");
        CHECK(gb && gb->R == ga->R && gb->entry == ga->entry &&
              !memcmp(gb->nbrs, ga->nbrs, sizeof(int32_t) * n * R) &&
              !memcmp(graft_gindex_vectors(r), graft_gindex_vectors(g), sizeof(float) * n * s->d),
              "read: bitwise-equal graph and vectors");
        results ra = search(g, s->xq, nq, 10, NULL), rb = search(r, s->xq, nq, 10, NULL);
        CHECK(same_results(ra, rb, nq * 10), "read: same search results");
        free_results(&ra);
        free_results(&rb);
        size_t len2;
        unsigned char* b2 = record_of(r, &len2);
        CHECK(len2 == len && !memcmp(b, b2, len), "write(read(record)) == record");
        free(b2);
        graft_gindex_free(r);
        /* Empty index: a header and a checksum, read back empty with its metric. */
        CHECK_OK(graft_gindex_reset(g));
        free(b);
        b = record_of(g, &len);
        CHECK(len == HDR + 8, "empty record length %zu", len);
        CHECK_OK(read_bytes(b, len, &r));
        CHECK(r && graft_gindex_ntotal(r) == 0 && graft_gindex_metric(r) == graft_gindex_metric(g) &&
              graft_gindex_graph(r) == NULL, "empty round trip");
        graft_gindex_free(r);
        free(b);
        graft_gindex_free(g);
    }

    /* A small record, damaged in every way a reader can meet. */
    printf("damaged records\n");
    const int64_t m = 60;
    graft_gindex* g = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_add(g, m, s->xb));
    size_t len;
    unsigned char* b = record_of(g, &len); /* builds the pending graph */
    const int R = graft_gindex_graph(g)->R;
    const size_t graph_at = HDR + (size_t)m * s->d * 4;
    expect_format(b, 0, "empty", "empty");
    const size_t cuts[] = {5, 8, 20, 63, 64, 79, 80, 103, 104, 151, HDR, HDR + 999, graph_at + 7, len - 8, len - 1};
    char what[64];
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "truncated at byte %zu", cuts[i]);
        expect_format(b, cuts[i], what, "truncated");
    }
    unsigned char* c = malloc(len);
    memcpy(c, b, len);
    c[HDR + 4321] ^= 0x10;
    expect_format(c, len, "bit flipped in the vectors", "checksum");
    memcpy(c, b, len);
    c[graph_at + 4 * (size_t)R * 7 + 2] ^= 0x01;
    expect_format(c, len, "bit flipped in the graph", "checksum");
    memcpy(c, b, len);
    c[len - 1] ^= 0x80;
    expect_format(c, len, "bit flipped in the checksum", "checksum");
    memcpy(c, b, len);
    c[3] = 'X';
    expect_format(c, len, "wrong magic", "not a graft graph index");
    free(c);
    with_field(b, len, 8, 6, 4, 0, "format version 6", "newer graft, format version 6");
    with_field(b, len, 8, 0, 4, 0, "format version 0", "format version 0");
    with_field(b, len, 12, 32, 4, 0, "header size 32", "header size");
    with_field(b, len, 16, 0, 8, 0, "d = 0", "dimension");
    with_field(b, len, 24, (uint64_t)-5, 8, 0, "ntotal = -5", "ntotal");
    with_field(b, len, 24, 1u << 30, 8, 0, "ntotal = 2^30", "truncated");
    with_field(b, len, 32, 3, 4, 0, "metric 3", "metric");
    with_field(b, len, 36, 0, 4, 0, "R = 0", "degree");
    with_field(b, len, 36, 5000, 4, 0, "R = 5000", "degree");
    with_field(b, len, 40, (uint64_t)m, 8, 0, "entry = n", "entry");
    with_field(b, len, 48, 0, 4, 0, "L = 0", "L=0");
    with_field(b, len, 52, 9, 4, 0, "probes = 9", "probes");
    with_field(b, len, 56, 7, 4, 0, "visited kind 7", "visited");
    with_field(b, len, 60, 7, 4, 0, "merge kind 7", "merge");
    with_field(b, len, 12, 64, 4, 0, "version 4, header size 64", "version-4 header");
    with_field(b, len, 12, 104, 4, 0, "version 4, header size 104", "version-4 header");
    with_field(b, len, 64, 9, 4, 0, "storage kind 9", "storage kind");
    with_field(b, len, 68, 0, 4, 0, "untrained FP32", "untrained");
    with_field(b, len, 68, 2, 4, 0, "trained flag 2", "trained flag");
    with_field(b, len, 72, 0xffffffffu, 4, 0, "rerank -1", "rerank");
    with_field(b, len, 84, 7, 4, 0, "placement mode 7", "mode");
    with_field(b, len, 84, GRAFT_BANG_OUT_OF_CORE, 4, 0, "FP32 out-of-core", "out-of-core");
    with_field(b, len, 92, 40, 4, 0, "bloom_log2 40", "bloom_log2");
    with_field(b, len, 104, (uint64_t)m + 1, 8, 0, "tombstones > n", "tombstones");
    with_field(b, len, 104, 3, 8, 0, "tombstones without their bitmap", "truncated");
    with_field(b, len, 112, (uint64_t)-1, 8, 0, "inserted since the build -1", "inserted since");
    with_field(b, len, 120, 7, 4, 0, "add policy 7", "policy");
    with_field(b, len, 124, 2000, 4, 0, "insert_L 2000", "insert_L");
    with_field(b, len, 144, 3, 4, 0, "background 3", "background");
    /* Checksums that match, contents that do not (another tool's writer). */
    with_field(b, len, graph_at + 4 * ((size_t)R * 9 + 1), (uint32_t)m, 4, 1, "id = n, valid checksum",
               "row 9");
    with_field(b, len, HDR + 4 * 130, 0x7fc00000u, 4, 1, "NaN vector, valid checksum", "row 1");
    free(b);

    /* A record inside a larger stream: read stops right after the checksum. */
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(g, f));
    CHECK_OK(graft_gindex_write(g, f));
    rewind(f);
    graft_gindex *r1 = NULL, *r2 = NULL;
    CHECK_OK(graft_gindex_read(f, NULL, &r1));
    CHECK_OK(graft_gindex_read(f, NULL, &r2));
    CHECK(r1 && r2 && graft_gindex_ntotal(r2) == m && fgetc(f) == EOF, "two records in one stream");
    graft_gindex_free(r1);
    graft_gindex_free(r2);
    CHECK_ERR(graft_gindex_write(NULL, f), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_write(g, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_read(NULL, NULL, &r1), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_read(f, NULL, NULL), GRAFT_EINVAL);
    fclose(f);
    graft_gindex_free(g);
}

/* ---- the same object on a GPU (where one is visible; the gpu-label tests compare the kernels
 * with the CPU reference in depth) ----------------------------------------------------------- */

static void test_gpu(const graft_test_sift* s) {
    if (!graft_gpu_available()) {
        printf("GPU index: no GPU visible, skipped\n");
        return;
    }
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    CHECK(p.device == 0, "default device %d with a GPU visible", p.device);
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(s->d, &p, &g));
    if (!g) return;
    const int64_t nq = s->nq;
    results e = search(g, s->xq, 3, 10, NULL);
    check_padding(e, 3, 10, 0, 1, "GPU: search before add");
    free_results(&e);
    CHECK_OK(graft_gindex_add(g, 2000, s->xb));
    CHECK_OK(graft_gindex_add(g, s->nb - 2000, s->xb + 2000 * s->d));
    CHECK(graft_gindex_graph(g) == NULL && graft_gindex_gpu_bytes(g) == 0, "GPU: build pending");
    CHECK_OK(graft_gindex_build(g));
    const graft_graph* gr = graft_gindex_graph(g);
    CHECK(graft_gindex_device(g) == 0 && gr && gr->n == s->nb, "GPU: two adds");
    graft_test_check_graph(gr, s->nb, gr->R, s->xb, s->d, 1, "GPU index graph");
    double rec = recall10(g, s);
    printf("GPU index: GRNND build %.3f s, recall@10 %.4f at L=64\n", graft_gindex_build_seconds(g), rec);
    CHECK(rec >= 0.98, "GPU recall@10 %.4f at L=64", rec);
    CHECK(graft_gindex_build_pieces(g) == 1, "GPU build: pieces %d", graft_gindex_build_pieces(g));
    {
        /* A build budget below GRNND's pools for 4500 vectors (16 R bytes each): GRNND in pieces
         * of at most 1500, not the CPU. Recall as the whole GPU graph's (the CPU test measures
         * pieces at or above the whole graph). */
        graft_gindex_params pp;
        graft_gindex_params_defaults(&pp);
        pp.build.memory_budget = 1500 * 16 * 64 + 3 * 256; /* + grnnd.c's fixed overhead */
        CHECK(graft_grnnd_max_vectors(s->d, &pp.build) == 1500, "GRNND capacity %lld under the budget",
              (long long)graft_grnnd_max_vectors(s->d, &pp.build));
        graft_gindex* gp = NULL;
        CHECK_OK(graft_gindex_new(s->d, &pp, &gp));
        if (gp) {
            CHECK_OK(graft_gindex_add(gp, s->nb, s->xb));
            const double rp = recall10(gp, s);
            printf("GPU index built in %d pieces (budget for 1500 vectors): %.3f s, recall@10 %.4f at L=64\n",
                   graft_gindex_build_pieces(gp), graft_gindex_build_seconds(gp), rp);
            CHECK(graft_gindex_build_pieces(gp) >= 3, "GPU build in pieces: %d", graft_gindex_build_pieces(gp));
            CHECK(rp >= 0.98, "GPU recall@10 in pieces %.4f at L=64", rp);
            graft_gindex_free(gp);
        }
    }

    /* The same graph searched by the CPU reference: the same results but for float rounding. */
    graft_gindex* c = new_cpu(s->d, GRAFT_METRIC_L2);
    CHECK_OK(graft_gindex_set_data(c, s->nb, s->xb, gr));
    results rg = search(g, s->xq, nq, 10, NULL), rc = search(c, s->xq, nq, 10, NULL);
    int64_t same = 0;
    for (int64_t i = 0; i < nq * 10; i++) same += rg.I[i] == rc.I[i];
    printf("GPU index: %.4f of result ids equal to the CPU reference's\n", (double)same / (nq * 10));
    CHECK(same >= 0.99 * nq * 10, "GPU vs CPU: %lld of %lld ids equal", (long long)same, (long long)(nq * 10));
    check_concurrent(g, s, "GPU index");

    /* A filter: only allowed ids come back. */
    uint8_t* allowed = calloc((size_t)(s->nb + 7) / 8, 1);
    for (int64_t i = 0; i < s->nb; i += 3) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.allowed = allowed;
    results rf = search(g, s->xq, nq, 10, &sp);
    int64_t outside = 0;
    for (int64_t i = 0; i < nq * 10; i++) outside += rf.I[i] < 0 || rf.I[i] % 3 != 0;
    CHECK(outside == 0, "GPU filter: %lld slots empty or not allowed", (long long)outside);
    free_results(&rf);
    free(allowed);

    /* Failed calls keep the device state. */
    float* bad = malloc(sizeof(float) * s->d);
    memcpy(bad, s->xq, sizeof(float) * s->d);
    bad[2] = NAN;
    CHECK_ERR(graft_gindex_add(g, 1, bad), GRAFT_EINVAL);
    graft_grnnd_params bp = graft_gindex_get_params(g).build;
    bp.base.R = 100;
    CHECK_ERR(graft_gindex_set_build_params(g, &bp), GRAFT_EINVAL);
    graft_graph wide = {0};
    graft_rnnd_params wp;
    graft_rnnd_params_defaults(&wp);
    wp.R = 300;
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 400, s->d, &wp, &wide));
    CHECK_ERR(graft_gindex_set_data(g, 400, s->xb, &wide), GRAFT_EINVAL); /* R > 256 on the GPU */
    graft_graph_free(&wide);
    results again = search(g, s->xq, nq, 10, NULL);
    CHECK(same_results(rg, again, nq * 10), "GPU: failed calls changed the results");
    free_results(&again);
    free(bad);

    /* Records move between devices: GPU -> CPU keeps graph and vectors; CPU -> GPU searches as
     * the GPU index does. */
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(g, f));
    CHECK_OK(graft_gindex_write(c, f));
    rewind(f);
    graft_gindex_params cpu = p, gpu = p;
    cpu.device = -1;
    graft_gindex *on_cpu = NULL, *on_gpu = NULL;
    CHECK_OK(graft_gindex_read(f, &cpu, &on_cpu));
    CHECK_OK(graft_gindex_read(f, &gpu, &on_gpu));
    fclose(f);
    if (on_cpu && on_gpu) {
        CHECK(graft_gindex_device(on_cpu) == -1 && graft_gindex_device(on_gpu) == 0, "read devices");
        CHECK(!memcmp(graft_gindex_graph(on_cpu)->nbrs, gr->nbrs, sizeof(int32_t) * s->nb * gr->R),
              "GPU record read on the CPU: same graph");
        results r1 = search(on_cpu, s->xq, nq, 10, NULL), r2 = search(on_gpu, s->xq, nq, 10, NULL);
        CHECK(same_results(r1, rc, nq * 10) && same_results(r2, rg, nq * 10), "searches after reading");
        free_results(&r1);
        free_results(&r2);
    }
    graft_gindex_free(on_cpu);
    graft_gindex_free(on_gpu);

    /* Edges on the GPU: n = 1 and k > ntotal. */
    CHECK_OK(graft_gindex_reset(g));
    CHECK_OK(graft_gindex_add(g, 1, s->xb));
    results r1 = search(g, s->xq, 2, 4, NULL);
    CHECK(r1.I[0] == 0 && r1.I[4] == 0, "GPU n = 1");
    check_padding(r1, 2, 4, 1, 1, "GPU n = 1");
    free_results(&r1);
    free_results(&rg);
    free_results(&rc);
    graft_gindex_free(c);
    graft_gindex_free(g);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    double t0 = omp_get_wtime();
    test_sift5k(&s);
    test_edges(&s);
    test_bad_args(&s);
    test_set_data(&s);
    test_set_graph(&s);
    test_io(&s);
    test_gpu(&s);
    printf("total %.2f s\n", omp_get_wtime() - t0);
    graft_test_free_sift(&s);
    return graft_test_finish("test_graph_index");
}
