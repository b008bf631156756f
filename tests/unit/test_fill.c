/* Rows filled to R (plugin/graph/fill.c, graft_graph_fill_rows; the index's build option fill):
 * on sift5k's CPU graph and its inner-product copy, each filled row against a brute-force
 * reading of the rule (every old entry kept; the new ones the row's nearest two-hop vertices it
 * lacked, by (distance, id)); the same result on 1 and 2 threads; a build from SQ8 codes filled
 * from the codes (a row at a time) equal to the fill over the decoded vectors; the errors (graph
 * unchanged); the index option (its values, its refusal, recall at a short beam above the
 * pruned graph's); inserts, removals and a consolidation on filled rows. */
#include <float.h>
#include <omp.h>
#include <string.h>

#include "core/vec_dist.h"
#include "graft/graph_index.h"
#include "graph/build.h"
#include "testutil.h"

static graft_graph copy_graph(const graft_graph* g) {
    graft_graph c = *g;
    c.nbrs = malloc((size_t)g->n * g->R * sizeof(int32_t));
    memcpy(c.nbrs, g->nbrs, (size_t)g->n * g->R * sizeof(int32_t));
    return c;
}

static int closer(float da, int32_t a, float db, int32_t b) { return da < db || (da == db && a < b); }

/* Row v of f against the rule applied to g's rows by brute force. */
static int row_follows_rule(const graft_graph* g, const graft_graph* f, const float* x, int64_t d,
                            int l2, int64_t v) {
    const int R = g->R;
    const int32_t *old = g->nbrs + v * R, *got = f->nbrs + v * R;
    int deg = 0, fdeg = 0;
    while (deg < R && old[deg] >= 0) deg++;
    while (fdeg < R && got[fdeg] >= 0) fdeg++;
    for (int i = 0; i < deg; i++) {
        int kept = 0;
        for (int j = 0; j < fdeg; j++) kept |= got[j] == old[i];
        if (!kept) return 0;
    }
    /* The two-hop set the row lacked, and its nearest R - deg by (distance, id), by selection. */
    int32_t* hop = malloc((size_t)(R * R + 1) * sizeof(int32_t));
    int m = 0;
    for (int i = 0; i < deg; i++)
        for (int j = 0; j < R && g->nbrs[(int64_t)old[i] * R + j] >= 0; j++) {
            const int32_t u = g->nbrs[(int64_t)old[i] * R + j];
            int dup = u == v;
            for (int t = 0; t < deg && !dup; t++) dup = old[t] == u;
            for (int t = 0; t < m && !dup; t++) dup = hop[t] == u;
            if (!dup) hop[m++] = u;
        }
    const int want = deg + (m < R - deg ? m : R - deg);
    int ok = deg == 0 || deg == R ? fdeg == deg : fdeg == want;
    for (int take = 0; ok && deg > 0 && take < want - deg; take++) {
        int best = -1;
        float bd = FLT_MAX;
        for (int t = 0; t < m; t++) {
            if (hop[t] < 0) continue;
            const float dt = graft_vec_dist(x + v * d, x + (int64_t)hop[t] * d, d, l2);
            if (best < 0 || closer(dt, hop[t], bd, hop[best])) best = t, bd = dt;
        }
        int found = 0;
        for (int j = 0; j < fdeg; j++) found |= got[j] == hop[best];
        ok = found;
        hop[best] = -1;
    }
    free(hop);
    return ok;
}

static void check_fill(const graft_test_sift* s, int l2, const char* what) {
    const int64_t n = s->nb, d = s->d;
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    p.metric = l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT;
    graft_graph g = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, n, d, &p, &g));
    if (!g.nbrs) return;
    graft_graph f1 = copy_graph(&g), f2 = copy_graph(&g);
    int64_t added = -1, added2 = -1;
    omp_set_num_threads(1);
    CHECK_OK(graft_graph_fill_rows(&f1, s->xb, d, p.metric, &added));
    omp_set_num_threads(2);
    CHECK_OK(graft_graph_fill_rows(&f2, s->xb, d, p.metric, &added2));
    CHECK(memcmp(f1.nbrs, f2.nbrs, (size_t)n * g.R * sizeof(int32_t)) == 0 && added == added2,
          "%s: 1 and 2 threads differ", what);
    graft_test_check_graph(&f1, n, g.R, s->xb, d, l2, what);
    int64_t before = 0, after = 0, bad = 0;
    for (int64_t i = 0; i < n * g.R; i++) before += g.nbrs[i] >= 0, after += f1.nbrs[i] >= 0;
    for (int64_t v = 0; v < n; v++) bad += !row_follows_rule(&g, &f1, s->xb, d, l2, v);
    CHECK(bad == 0, "%s: %lld rows break the rule", what, (long long)bad);
    CHECK(added == after - before && after > 3 * before,
          "%s: %lld entries added, %lld -> %lld (the pruned rows are a fraction of R)", what,
          (long long)added, (long long)before, (long long)after);
    CHECK(f1.entry == g.entry, "%s: the entry moved", what);
    printf("%s: mean degree %.2f -> %.2f\n", what, (double)before / n, (double)after / n);
    graft_graph_free(&f1);
    graft_graph_free(&f2);
    graft_graph_free(&g);
}

/* A graph over SQ8 codes filled from the codes equals the fill over the decoded vectors. */
static void check_codes(const graft_test_sift* s) {
    const int64_t n = 1500, d = s->d;
    graft_storage st;
    uint8_t* codes;
    float* dec;
    graft_test_encode(GRAFT_STORAGE_SQ8, s->xb, n, d, &st, &codes, &dec);
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    graft_graph g = {0};
    CHECK_OK(graft_rnnd_build_cpu(dec, n, d, &p, &g));
    if (g.nbrs) {
        graft_graph a = copy_graph(&g), b = copy_graph(&g);
        const graft_build_vectors v = {.st = &st, .codes = codes};
        CHECK_OK(graft_graph_fill_rows_of(&a, &v, d, GRAFT_METRIC_L2, NULL));
        CHECK_OK(graft_graph_fill_rows(&b, dec, d, GRAFT_METRIC_L2, NULL));
        CHECK(memcmp(a.nbrs, b.nbrs, (size_t)n * g.R * sizeof(int32_t)) == 0,
              "SQ8: filled from the codes differs from the decoded vectors' fill");
        graft_graph_free(&a);
        graft_graph_free(&b);
    }
    graft_graph_free(&g);
    free(codes);
    free(dec);
    graft_storage_free(&st);
}

static void check_errors(const graft_test_sift* s) {
    graft_graph g = {4, 2, malloc(8 * sizeof(int32_t)), 0};
    const int32_t rows[8] = {1, -1, 0, 2, 1, -1, 0, -1};
    memcpy(g.nbrs, rows, sizeof rows);
    CHECK_ERR(graft_graph_fill_rows(NULL, s->xb, s->d, GRAFT_METRIC_L2, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_fill_rows(&g, NULL, s->d, GRAFT_METRIC_L2, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_fill_rows(&g, s->xb, 0, GRAFT_METRIC_L2, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_fill_rows(&g, s->xb, s->d, (graft_metric)7, NULL), GRAFT_EINVAL);
    g.nbrs[3] = 9; /* outside [-1, n) */
    CHECK_ERR(graft_graph_fill_rows(&g, s->xb, s->d, GRAFT_METRIC_L2, NULL), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "row 1") != NULL, "message: %s", graft_last_error());
    g.nbrs[3] = 2;
    CHECK(memcmp(g.nbrs, rows, sizeof rows) == 0, "a refused fill changed the graph");
    /* Rows 0, 2 and 3 take their one two-hop vertex each (2, 0, 1); row 1 is full and stays. */
    int64_t added = 0;
    CHECK_OK(graft_graph_fill_rows(&g, s->xb, s->d, GRAFT_METRIC_L2, &added));
    CHECK(added == 3 && g.nbrs[2] == 0 && g.nbrs[3] == 2 && g.nbrs[5] >= 0 && g.nbrs[7] >= 0,
          "the 4-vertex graph: %lld added", (long long)added);
    graft_graph_free(&g);
}

/* The index option: its values, a refusal leaving the index's, recall at a short beam. */
static void check_index(const graft_test_sift* s) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    graft_gindex* g = NULL;
    p.build.fill = 2;
    CHECK_ERR(graft_gindex_new(s->d, &p, &g), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "fill = 2") != NULL, "message: %s", graft_last_error());
    const int k = 10, L = 10;
    double recall[2] = {0, 0};
    for (int fill = 0; fill < 2; fill++) {
        p.build.fill = fill;
        p.search.L = L;
        g = NULL;
        CHECK_OK(graft_gindex_new(s->d, &p, &g));
        if (!g) return;
        graft_grnnd_params b = graft_gindex_get_params(g).build;
        b.fill = -1;
        CHECK_ERR(graft_gindex_set_build_params(g, &b), GRAFT_EINVAL);
        CHECK(graft_gindex_get_params(g).build.fill == fill, "a refused fill changed the index's");
        CHECK_OK(graft_gindex_add(g, s->nb, s->xb));
        float* dist = malloc((size_t)s->nq * k * sizeof(float));
        int64_t* ids = malloc((size_t)s->nq * k * sizeof(int64_t));
        CHECK_OK(graft_gindex_search(g, s->nq, s->xq, k, NULL, dist, ids, NULL));
        recall[fill] = graft_test_recall(ids, k, s->gt, s->gt_k, s->nq, k);
        free(dist);
        free(ids);
        graft_gindex_free(g);
    }
    printf("index, L = %d: recall@10 %.4f pruned rows, %.4f filled\n", L, recall[0], recall[1]);
    /* sift5k at L = 10 on 2 cores (b453f7b): 0.88 pruned, 0.955 filled. */
    CHECK(recall[1] >= recall[0] + 0.03, "filled rows %.4f, pruned %.4f", recall[1], recall[0]);
}

/* Inserts into filled rows (the insert rule treats them as any rows): the first 4000 vectors
 * built with and without fill, the rest inserted; recall at L = 32 against sift5k's truth, the
 * graph well-formed, then removals and a consolidation leave it well-formed. */
static void check_inserts(const graft_test_sift* s) {
    const int64_t first = s->nb * 8 / 9, k = 10;
    double recall[2] = {0, 0};
    for (int fill = 0; fill < 2; fill++) {
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        p.device = -1;
        p.build.fill = fill;
        p.search.L = 32;
        p.living.policy = GRAFT_ADD_INSERT;
        graft_gindex* g = NULL;
        CHECK_OK(graft_gindex_new(s->d, &p, &g));
        if (!g) return;
        CHECK_OK(graft_gindex_add(g, first, s->xb));
        CHECK_OK(graft_gindex_build(g));
        CHECK_OK(graft_gindex_add(g, s->nb - first, s->xb + first * s->d));
        graft_living_report rep;
        CHECK_OK(graft_gindex_living_report(g, &rep));
        CHECK(rep.inserted == s->nb - first, "fill=%d: %lld inserted of %lld", fill, (long long)rep.inserted,
              (long long)(s->nb - first));
        const graft_graph* gr = graft_gindex_graph(g);
        if (gr) graft_test_check_graph(gr, s->nb, gr->R, graft_gindex_vectors(g), s->d, 1, "inserted");
        float* dist = malloc((size_t)s->nq * k * sizeof(float));
        int64_t* ids = malloc((size_t)s->nq * k * sizeof(int64_t));
        CHECK_OK(graft_gindex_search(g, s->nq, s->xq, k, NULL, dist, ids, NULL));
        recall[fill] = graft_test_recall(ids, k, s->gt, s->gt_k, s->nq, (int)k);
        int64_t gone[100], removed = 0;
        for (int i = 0; i < 100; i++) gone[i] = i * 7;
        CHECK_OK(graft_gindex_remove_ids(g, 100, gone, &removed));
        CHECK_OK(graft_gindex_consolidate(g));
        gr = graft_gindex_graph(g);
        CHECK(removed == 100 && gr && gr->n == s->nb - 100, "fill=%d: %lld removed, graph of %lld", fill,
              (long long)removed, gr ? (long long)gr->n : -1LL);
        if (gr) graft_test_check_graph(gr, s->nb - 100, gr->R, graft_gindex_vectors(g), s->d, 1, "consolidated");
        free(dist);
        free(ids);
        graft_gindex_free(g);
    }
    printf("inserts, L = 32: recall@10 %.4f pruned rows, %.4f filled\n", recall[0], recall[1]);
    CHECK(recall[1] >= recall[0] - 0.005, "inserts into filled rows: %.4f against %.4f pruned", recall[1],
          recall[0]);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, 1500, 100);
    check_fill(&s, 1, "sift5k L2");
    float* xn = malloc((size_t)s.nb * s.d * sizeof(float));
    memcpy(xn, s.xb, (size_t)s.nb * s.d * sizeof(float));
    graft_test_normalize(xn, s.nb, s.d);
    float* keep = s.xb;
    s.xb = xn;
    check_fill(&s, 0, "sift5k normalized, inner product");
    s.xb = keep;
    free(xn);
    check_codes(&s);
    check_errors(&s);
    check_index(&s);
    check_inserts(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_fill");
}
