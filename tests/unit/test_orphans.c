/* An in-edge for every vertex of a built graph (plugin/graph/orphans.c, graft_graph_link_orphans):
 * hand-made graphs for each branch of the rule (a row with room, a full row whose last entry
 * keeps or has no other in-edge, a farther orphan, the last resort, the refusals), a graph
 * without orphans left as it is, random graphs with many orphans (each linked where the rule has
 * a place for it, rows sorted, -1 padded, duplicate-free, the same with 1 and 2 threads), and the builders' graphs on sift5k
 * at a degree where they leave orphans. */
#include <omp.h>
#include <string.h>

#include "core/rng.h"
#include "core/vec_dist.h"
#include "graph/build.h"
#include "testutil.h"

/* A graph over the n points pos (n x d) whose row v holds the ids of rows[v] (R slots, -1 ended),
 * sorted as the builders sort: squared L2 to v (l2), else -dot, ties to the smaller id. */
static graft_graph make_metric(int64_t n, int R, const float* pos, int64_t d, const int32_t* rows,
                               int64_t entry, int l2) {
    graft_graph g = {n, R, malloc((size_t)n * R * sizeof(int32_t)), entry};
    memcpy(g.nbrs, rows, (size_t)n * R * sizeof(int32_t));
    for (int64_t v = 0; v < n; v++) {
        int32_t* r = g.nbrs + v * R;
        for (int j = 1; j < R && r[j] >= 0; j++)
            for (int i = j; i > 0; i--) {
                const float a = graft_vec_dist(pos + v * d, pos + (int64_t)r[i - 1] * d, d, l2);
                const float b = graft_vec_dist(pos + v * d, pos + (int64_t)r[i] * d, d, l2);
                if (!(b < a || (b == a && r[i] < r[i - 1]))) break;
                const int32_t t = r[i];
                r[i] = r[i - 1];
                r[i - 1] = t;
            }
    }
    return g;
}

static graft_graph make(int64_t n, int R, const float* pos, int64_t d, const int32_t* rows,
                        int64_t entry) {
    return make_metric(n, R, pos, d, rows, entry, 1);
}

static int row_is(const graft_graph* g, int64_t v, const int32_t* want) {
    return memcmp(g->nbrs + v * g->R, want, (size_t)g->R * sizeof(int32_t)) == 0;
}

/* Orphans of g (the entry excepted) that some neighbour's row could still take by the rule, with
 * exact in-degrees: a neighbour u with another in-edge than v's (or the entry) whose row has room,
 * or whose last entry has another in-edge than u's. */
static int64_t placeable(const graft_graph* g) {
    const int R = g->R;
    int64_t* in = calloc((size_t)g->n, sizeof(int64_t)), count = 0;
    for (int64_t i = 0; i < g->n * R; i++)
        if (g->nbrs[i] >= 0) in[g->nbrs[i]]++;
    for (int64_t v = 0; v < g->n; v++) {
        if (in[v] || v == g->entry) continue;
        int ok = 0;
        for (int j = 0; j < R && g->nbrs[v * R + j] >= 0 && !ok; j++) {
            const int32_t u = g->nbrs[v * R + j], last = g->nbrs[(int64_t)u * R + R - 1];
            ok = (in[u] >= 2 || u == g->entry) && (last < 0 || in[last] >= 2);
        }
        count += ok;
    }
    free(in);
    return count;
}

/* Links g's orphans; checks the layout, that no orphan the rule could place is left and, when
 * all = 1, that none is left. */
static int64_t link_metric(graft_graph* g, const float* pos, int64_t d, int l2, int all,
                           const char* what) {
    int64_t linked = -1;
    CHECK_OK(graft_graph_link_orphans(g, pos, d, l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT,
                                      &linked));
    graft_test_check_graph(g, g->n, g->R, pos, d, l2, what);
    const int64_t left = graft_test_orphans(g);
    CHECK(placeable(g) == 0, "%s: %lld of the %lld orphans left had a place", what,
          (long long)placeable(g), (long long)left);
    if (all) CHECK(left == 0, "%s: %lld orphans left", what, (long long)left);
    return linked;
}

static int64_t link(graft_graph* g, const float* pos, int64_t d, int all, const char* what) {
    return link_metric(g, pos, d, 1, all, what);
}

static void test_rules(void) {
    /* A row with room takes the orphan at its sorted place; a tie in distance goes to the smaller
     * id. 2 is the orphan; its nearest neighbour 1 is at distance 1 from both 0 and 2. */
    {
        const float pos[] = {0, 0, 1, 0, 2, 0};
        const int32_t rows[] = {1, -1, -1, /**/ 0, -1, -1, /**/ 1, 0, -1};
        graft_graph g = make(3, 3, pos, 2, rows, 0);
        CHECK(link(&g, pos, 2, 1, "room") == 1, "room: linked");
        CHECK(row_is(&g, 1, (const int32_t[]){0, 2, -1}), "room: row 1 = %d %d %d", g.nbrs[3],
              g.nbrs[4], g.nbrs[5]);
        graft_graph_free(&g);
    }
    /* A full row gives up its last entry for a closer orphan when that entry keeps another
     * in-edge: 3 takes 2's place in row 0 (2 keeps 1's edge). */
    const float pos4[] = {0, 0, 1, 0, 0, 3, -1, 0};
    {
        const int32_t rows[] = {1, 2, /**/ 0, 2, /**/ 0, 1, /**/ 0, 1};
        graft_graph g = make(4, 2, pos4, 2, rows, 0);
        CHECK(link(&g, pos4, 2, 1, "displace") == 1, "displace: linked");
        CHECK(row_is(&g, 0, (const int32_t[]){1, 3}), "displace: row 0 = %d %d", g.nbrs[0], g.nbrs[1]);
        graft_graph_free(&g);
    }
    /* ... but not when row 0's edge is its last entry's only in-edge: the next neighbour (1,
     * with room) takes 3, row 0 stays. */
    {
        const int32_t rows[] = {1, 2, /**/ 0, -1, /**/ 0, 1, /**/ 0, 1};
        graft_graph g = make(4, 2, pos4, 2, rows, 0);
        CHECK(link(&g, pos4, 2, 1, "only in-edge") == 1, "only in-edge: linked");
        CHECK(row_is(&g, 0, (const int32_t[]){1, 2}) && row_is(&g, 1, (const int32_t[]){0, 3}),
              "only in-edge: rows 0 = %d %d, 1 = %d %d", g.nbrs[0], g.nbrs[1], g.nbrs[2], g.nbrs[3]);
        graft_graph_free(&g);
    }
    /* A full row of entries closer than the orphan keeps them while another neighbour has room:
     * 3 (at distance 4 from 0, whose row holds 1 and 2 at distance 1) goes to row 4. */
    const float pos5[] = {0, 0, 1, 0, 0, 1, -2, 0, -2, 3};
    {
        const int32_t rows[] = {1, 2, /**/ 0, 2, /**/ 0, 4, /**/ 0, 4, /**/ 0, -1};
        graft_graph g = make(5, 2, pos5, 2, rows, 0);
        CHECK(link(&g, pos5, 2, 1, "farther") == 1, "farther: linked");
        CHECK(row_is(&g, 0, (const int32_t[]){1, 2}) && row_is(&g, 4, (const int32_t[]){3, 0}),
              "farther: rows 0 = %d %d, 4 = %d %d", g.nbrs[0], g.nbrs[1], g.nbrs[8], g.nbrs[9]);
        graft_graph_free(&g);
    }
    /* The last resort: 3's only neighbour 0 is full of closer entries; its last one (2) keeps
     * 1's edge, so 3 takes the last slot. */
    {
        const int32_t rows[] = {1, 2, /**/ 0, 2, /**/ 0, 4, /**/ 0, -1, /**/ 0, -1};
        graft_graph g = make(5, 2, pos5, 2, rows, 0);
        CHECK(link(&g, pos5, 2, 1, "last resort") == 1, "last resort: linked");
        CHECK(row_is(&g, 0, (const int32_t[]){1, 3}), "last resort: row 0 = %d %d", g.nbrs[0], g.nbrs[1]);
        graft_graph_free(&g);
    }
    /* Refusals leave the graph as it is: 3's only neighbour's last entry has no other in-edge;
     * then a neighbour whose only in-edge is the orphan's own (2 <- 3 only). */
    {
        const int32_t rows[] = {1, 2, /**/ 0, -1, /**/ 0, 4, /**/ 0, -1, /**/ 0, -1};
        graft_graph g = make(5, 2, pos5, 2, rows, 0);
        graft_graph g0 = make(5, 2, pos5, 2, rows, 0);
        CHECK(link(&g, pos5, 2, 0, "refused") == 0 && graft_test_orphans(&g) == 1, "refused: linked");
        CHECK(memcmp(g.nbrs, g0.nbrs, 10 * sizeof(int32_t)) == 0, "refused: the graph changed");
        graft_graph_free(&g);
        graft_graph_free(&g0);
        const float pos[] = {0, 0, 1, 0, 5, 0, 6, 0};
        const int32_t pair[] = {1, -1, /**/ 0, -1, /**/ 1, -1, /**/ 2, -1};
        graft_graph p = make(4, 2, pos, 2, pair, 0);
        CHECK(link(&p, pos, 2, 0, "pair") == 0 && row_is(&p, 2, (const int32_t[]){1, -1}),
              "pair: row 2 = %d %d", p.nbrs[4], p.nbrs[5]);
        graft_graph_free(&p);
    }
    /* No orphan (the entry, 0, has no in-edge and needs none): nothing changes. */
    {
        const float pos[] = {0, 0, 1, 0, 2, 0};
        const int32_t rows[] = {1, -1, /**/ 2, -1, /**/ 1, -1};
        graft_graph g = make(3, 2, pos, 2, rows, 0);
        CHECK(link(&g, pos, 2, 1, "none") == 0 && memcmp(g.nbrs, rows, sizeof rows) == 0,
              "none: the graph changed");
        graft_graph_free(&g);
    }
}

/* n random points, each row 2..R random neighbours among the first half of the ids: the second
 * half are orphans (1500 of 3000), some rows full. Rows sorted by squared L2 (l2) or -dot. With
 * L2 every orphan finds a place. With -dot the longest vectors are everyone's nearest, so the
 * orphans' rows point at the same few full rows: one orphan is left, and no neighbour's row
 * could take it (placeable). */
static void test_random(int l2) {
    const char* what = l2 ? "random L2" : "random inner product";
    const int64_t n = 3000, d = 8;
    const int R = 8;
    float* x = malloc((size_t)(n * d) * sizeof(float));
    int32_t* rows = malloc((size_t)(n * R) * sizeof(int32_t));
    uint64_t s = 7;
    for (int64_t i = 0; i < n * d; i++) x[i] = (float)(graft_splitmix64(&s) >> 40) / (float)(1 << 24);
    for (int64_t v = 0; v < n; v++) {
        const int k = 2 + (int)(graft_splitmix64(&s) % (R - 1));
        int m = 0;
        while (m < k) {
            const int32_t u = (int32_t)(graft_splitmix64(&s) % (uint64_t)(n / 2));
            int dup = u == v;
            for (int j = 0; j < m; j++) dup |= rows[v * R + j] == u;
            if (!dup) rows[v * R + m++] = u;
        }
        for (; m < R; m++) rows[v * R + m] = -1;
    }
    graft_graph a = make_metric(n, R, x, d, rows, 0, l2), b = make_metric(n, R, x, d, rows, 0, l2);
    const int64_t before = graft_test_orphans(&a);
    int64_t full = 0;
    for (int64_t v = 0; v < n; v++) full += a.nbrs[v * R + R - 1] >= 0;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const int64_t la = link_metric(&a, x, d, l2, l2, what);
    omp_set_num_threads(2);
    const int64_t lb = link_metric(&b, x, d, l2, l2, what);
    omp_set_num_threads(threads);
    printf("%s %lld x %d: %lld orphans, %lld full rows; linked %lld\n", what, (long long)n, R,
           (long long)before, (long long)full, (long long)la);
    CHECK(before == 1500 && la == before - graft_test_orphans(&a) && lb == la,
          "%s: %lld orphans, linked %lld and %lld", what,
          (long long)before, (long long)la, (long long)lb);
    CHECK(memcmp(a.nbrs, b.nbrs, (size_t)(n * R) * sizeof(int32_t)) == 0,
          "%s: 1 and 2 threads give different graphs", what);
    /* The edges there before are all still there but where a full row gave up its last entry. */
    int64_t lost = 0;
    for (int64_t v = 0; v < n; v++)
        for (int j = 0; j < R && rows[v * R + j] >= 0; j++) {
            int found = 0;
            for (int i = 0; i < R; i++) found |= a.nbrs[v * R + i] == rows[v * R + j];
            lost += !found;
        }
    CHECK(lost <= full, "%s: %lld edges lost, more than the %lld full rows", what, (long long)lost,
          (long long)full);
    int64_t again = -1;
    CHECK_OK(graft_graph_link_orphans(&b, x, d, l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT, &again));
    CHECK(again == 0 && memcmp(a.nbrs, b.nbrs, (size_t)(n * R) * sizeof(int32_t)) == 0,
          "%s: a second pass changed the graph (%lld linked)", what, (long long)again);
    graft_graph_free(&a);
    graft_graph_free(&b);
    free(x);
    free(rows);
}

/* The builders end with the links: sift5k at R = 8, where RNN-Descent leaves orphans (37 of
 * 4500 at S = R = 8 before this step), on the CPU and in pieces. */
static void test_builds(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, 2000, 200);
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    p.R = p.S = 8;
    graft_graph g = {0};
    int64_t linked = -1;
    CHECK_OK(graft_rnnd_build_cpu_linked(s.xb, s.nb, s.d, &p, &g, &linked));
    graft_test_check_graph(&g, s.nb, p.R, s.xb, s.d, 1, "sift5k R=8");
    printf("sift5k R=8 (n=%lld): %lld linked, %lld orphans left, reachable %.4f\n", (long long)s.nb,
           (long long)linked, (long long)graft_test_orphans(&g), graft_test_reachable(&g));
    CHECK(linked > 0 && graft_test_orphans(&g) == 0, "sift5k R=8: %lld linked, %lld left",
          (long long)linked, (long long)graft_test_orphans(&g));
    graft_graph plain = {0};
    CHECK_OK(graft_rnnd_build_cpu(s.xb, s.nb, s.d, &p, &plain));
    CHECK(plain.nbrs && memcmp(plain.nbrs, g.nbrs, (size_t)(s.nb * p.R) * sizeof(int32_t)) == 0,
          "graft_rnnd_build_cpu and its _linked form differ");
    graft_graph_free(&plain);
    graft_graph_free(&g);

    graft_grnnd_params gp;
    graft_grnnd_params_defaults(&gp);
    gp.base.R = gp.base.S = 8;
    graft_pieces_report rep;
    CHECK_OK(graft_graph_build_pieces(s.xb, s.nb, s.d, &gp, 0, s.nb / 4, &g, &rep));
    graft_test_check_graph(&g, s.nb, 8, s.xb, s.d, 1, "sift5k pieces R=8");
    printf("sift5k pieces R=8: %d pieces, %lld linked after the merge, %lld orphans left, "
           "reachable %.4f\n", rep.pieces, (long long)rep.linked, (long long)graft_test_orphans(&g),
           graft_test_reachable(&g));
    CHECK(graft_test_orphans(&g) == 0, "sift5k pieces R=8: %lld orphans", (long long)graft_test_orphans(&g));
    graft_graph_free(&g);
    graft_test_free_sift(&s);
}

int main(void) {
    test_rules();
    test_random(1);
    test_random(0);
    test_builds();
    return graft_test_finish("test_orphans");
}
