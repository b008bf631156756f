/* The CPU reference's walk with its record (plugin/graph/walk_trace.h; bench_search's memory
 * floor replays it): on sift5k's CPU graph, L2 and inner product, probes 1 and 2, the traced
 * walks' steps and distances summed over the queries equal graft_graph_search_cpu_report's; a
 * trace starts at the entry vertex, expands it first, holds no vertex twice among its distances;
 * bad arguments are refused. */
#include <stdlib.h>
#include <string.h>

#include "graph/walk_trace.h"
#include "testutil.h"

static void agrees(const graft_graph* g, const float* x, int64_t d, graft_metric metric, const float* xq,
                   int64_t nq, int L, int probes) {
    graft_search_params sp;
    graft_search_params_defaults(&sp);
    sp.L = L, sp.probes = probes;
    float* D = malloc((size_t)nq * 10 * sizeof(float));
    int64_t* I = malloc((size_t)nq * 10 * sizeof(int64_t));
    graft_search_report rep;
    CHECK_OK(graft_graph_search_cpu_report(g, x, d, metric, xq, nq, 10, &sp, D, I, &rep));
    uint32_t* seen = calloc((size_t)g->n, sizeof(uint32_t));
    uint32_t* stamps = calloc((size_t)g->n, sizeof(uint32_t));  /* the test's own, for repeats */
    int64_t steps = 0, dists = 0;
    int first_ok = 1, unique = 1;
    for (int64_t q = 0; q < nq; q++) {
        graft_walk_trace tr = {0};
        CHECK_OK(graft_graph_walk_traced(g, x, d, metric, xq + q * d, L, probes, seen, (uint32_t)q + 1, &tr));
        steps += (tr.nrows + probes - 1) / probes;  /* the report counts steps of `probes` rows */
        dists += tr.nvecs;
        first_ok &= tr.nvecs > 0 && tr.vecs[0] == g->entry && tr.nrows > 0 && tr.rows[0] == g->entry;
        for (int64_t i = 0; i < tr.nvecs; i++) {
            unique &= stamps[tr.vecs[i]] != (uint32_t)q + 1;
            stamps[tr.vecs[i]] = (uint32_t)q + 1;
        }
        graft_walk_trace_free(&tr);
    }
    CHECK(dists == rep.distances, "L=%d probes=%d metric %d: traced %lld distances, the search %lld", L, probes,
          (int)metric, (long long)dists, (long long)rep.distances);
    if (probes == 1)
        CHECK(steps == rep.iterations, "L=%d: traced %lld steps, the search %lld", L, (long long)steps,
              (long long)rep.iterations);
    CHECK(first_ok, "L=%d probes=%d: a trace does not start at the entry vertex %lld", L, probes,
          (long long)g->entry);
    CHECK(unique, "L=%d probes=%d: a vertex's distance traced twice in one walk", L, probes);
    free(D), free(I), free(seen), free(stamps);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, 2000, 100);
    graft_graph g = {0};
    CHECK_OK(graft_rnnd_build_cpu(s.xb, s.nb, s.d, NULL, &g));
    for (int probes = 1; probes <= 2; probes++)
        for (int L = 16; L <= 64; L *= 2) {
            agrees(&g, s.xb, s.d, GRAFT_METRIC_L2, s.xq, s.nq, L, probes);
            agrees(&g, s.xb, s.d, GRAFT_METRIC_INNER_PRODUCT, s.xq, s.nq, L, probes);
        }
    uint32_t* seen = calloc((size_t)g.n, sizeof(uint32_t));
    graft_walk_trace tr = {0};
    CHECK_ERR(graft_graph_walk_traced(&g, s.xb, s.d, GRAFT_METRIC_L2, s.xq, 0, 1, seen, 1, &tr), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_walk_traced(&g, s.xb, s.d, GRAFT_METRIC_L2, s.xq, 16, 9, seen, 1, &tr), GRAFT_EINVAL);
    CHECK(tr.nrows == 0 && tr.nvecs == 0, "a refused walk left a trace");
    free(seen);
    graft_graph_free(&g);
    graft_test_free_sift(&s);
    return graft_test_finish("test_walk_trace");
}
