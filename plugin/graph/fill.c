/* Rows filled to R (graft/graph.h, graft_graph_fill_rows; graft_grnnd_params.fill; issue 47).
 *
 * Why: the RNG rule that GRNND and RNN-Descent prune with leaves a row 9-12 entries on average at
 * R = 64, so a walk at small batches is a long chain of dependent steps, each a graph row and then
 * its candidates fetched. On the CPU reference (bench/RESULTS.md, "The chain against the graph's
 * rows"), rows filled from two hops made the chain to recall 0.95 1.7-2.5x shorter for 1.25-1.67x
 * the distances: a trade that pays where the walk waits on latency (small batches) and costs where
 * it is throughput-bound (a full GPU).
 *
 * The rule: vertex v's row keeps every entry it has and takes, into its empty slots, its nearest
 * vertices among its neighbours' neighbours that the row lacks (v excepted), nearest first, ties
 * to the smaller id; the row is then sorted by (distance, id) as every row is (graft/graph.h).
 * Every row reads the graph as it was before the pass, so the result depends on no thread count.
 * A row's two-hop set is at most R + R^2 ids: a hash set of twice the largest a thread, stamped
 * per vertex, so that nothing of size n is kept a thread.
 *
 * Cost: a distance per two-hop vertex (about deg^2, 100-150 a vertex of a pruned graph), each a
 * gathered row: memory-bound, about 2.2 s for dense-SIFT 1M on the GPU machine's 16 cores
 * (bench/RESULTS.md, "Rows filled to R on the GPU"), 1.4 s for Fashion-MNIST on 2 cores. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec_dist.h"
#include "graph/build.h"
#include "graph/worklist.h"

/* A per-thread set of ids, cleared per vertex by a stamp: slot = (stamp << 32) | id. */
typedef struct {
    uint64_t* slot;
    uint32_t mask, stamp;
} idset;

/* 1 if id was new to the set (and is now in it). */
static int idset_add(idset* s, int32_t id) {
    const uint64_t key = ((uint64_t)s->stamp << 32) | (uint32_t)id;
    for (uint32_t h = ((uint32_t)id * 2654435761u) & s->mask;; h = (h + 1) & s->mask) {
        if (s->slot[h] == key) return 0;
        if ((s->slot[h] >> 32) != s->stamp) {
            s->slot[h] = key;
            return 1;
        }
    }
}

/* Fills row v of dst from src (see the file comment); a, b: d floats of scratch. Returns the
 * entries added. */
static int fill_row(const graft_graph* src, int32_t* dst, int64_t v, const graft_build_vectors* vec,
                    int64_t d, int l2, idset* seen, cand* best, float* a, float* b) {
    const int R = src->R;
    const int32_t* row = src->nbrs + v * R;
    int deg = 0;
    while (deg < R && row[deg] >= 0) deg++;
    if (deg == R || deg == 0) {
        memcpy(dst, row, (size_t)R * sizeof(int32_t));
        return 0;
    }
    seen->stamp++;
    idset_add(seen, (int32_t)v);
    for (int i = 0; i < deg; i++) idset_add(seen, row[i]);
    const float* xv = graft_build_row(vec, d, v, a);
    const int room = R - deg;
    int m = 0;
    for (int i = 0; i < deg; i++) {
        const int32_t* hop = src->nbrs + (int64_t)row[i] * R;
        for (int j = 0; j < R && hop[j] >= 0; j++) {
            if (!idset_add(seen, hop[j])) continue;
            list_insert(best, &m, room, graft_vec_dist(xv, graft_build_row(vec, d, hop[j], b), d, l2), hop[j]);
        }
    }
    /* The row's own entries join the new ones in (distance, id) order. */
    cand* all = best + room;
    int t = 0;
    for (int i = 0; i < deg; i++)
        list_insert(all, &t, R, graft_vec_dist(xv, graft_build_row(vec, d, row[i], b), d, l2), row[i]);
    for (int i = 0; i < m; i++) list_insert(all, &t, R, best[i].d, best[i].id);
    for (int i = 0; i < R; i++) dst[i] = i < t ? all[i].id : -1;
    return t - deg;
}

int graft_graph_fill_rows(graft_graph* g, const float* x, int64_t d, graft_metric metric, int64_t* added) {
    if (added) *added = 0;
    GRAFT_TRY(graft_check_graph_rows(g ? g->n : 0, g, 0, "graft_graph_fill_rows"));
    if (!x || d < 1 || (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT))
        return graft_fail(GRAFT_EINVAL, "graft_graph_fill_rows: x NULL, d = %lld or metric %d (L2 or "
                          "inner product)", (long long)d, (int)metric);
    const graft_build_vectors v = {.x = x};
    return graft_graph_fill_rows_of(g, &v, d, metric, added);
}

int graft_graph_fill_rows_of(graft_graph* g, const graft_build_vectors* vec, int64_t d, graft_metric metric,
                             int64_t* added) {
    const int64_t n = g->n;
    const int R = g->R;
    if (added) *added = 0;
    int32_t* out = malloc((size_t)n * (size_t)R * sizeof(int32_t));
    if (!out) return graft_fail(GRAFT_ENOMEM, "graft_graph_fill_rows: out of host memory");
    /* The hash sets: twice the largest two-hop set (R + R^2 ids at most, far fewer in a pruned
     * graph), so that a set of a large R costs what its rows hold. */
    int64_t most = 0;
#pragma omp parallel for schedule(static) reduction(max : most)
    for (int64_t v = 0; v < n; v++) {
        const int32_t* row = g->nbrs + v * R;
        int64_t m = 1;
        for (int i = 0; i < R && row[i] >= 0; i++) {
            const int32_t* hop = g->nbrs + (int64_t)row[i] * R;
            m++;
            for (int j = 0; j < R && hop[j] >= 0; j++) m++;
        }
        most = m > most ? m : most;
    }
    uint32_t slots = 1;
    while (slots < 2 * (uint64_t)most) slots <<= 1;
    int failed = 0;
    int64_t sum = 0;
#pragma omp parallel reduction(+ : sum) reduction(| : failed)
    {
        idset seen = {calloc(slots, sizeof(uint64_t)), slots - 1, 0};
        cand* best = malloc(2 * (size_t)R * sizeof(cand));
        float* rows = malloc(2 * (size_t)d * sizeof(float));
        failed = !seen.slot || !best || !rows;
#pragma omp for schedule(dynamic, 256)
        for (int64_t v = 0; v < n; v++) {
            if (failed) continue;
            sum += fill_row(g, out + v * R, v, vec, d, metric == GRAFT_METRIC_L2, &seen, best, rows, rows + d);
        }
        free(seen.slot), free(best), free(rows);
    }
    if (failed) {
        free(out);
        return graft_fail(GRAFT_ENOMEM, "graft_graph_fill_rows: out of host memory");
    }
    free(g->nbrs);
    g->nbrs = out;
    if (added) *added = sum;
    return GRAFT_OK;
}
