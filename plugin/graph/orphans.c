/* An in-edge for every vertex of a built graph (graph/build.h, graft_graph_link_orphans).
 *
 * Why it exists: a vertex that no row points to is a vector no search can return. The builders'
 * pools have a fixed capacity (GRNND 3.5), and a full pool drops a redirected candidate even when
 * it was an outlier's last in-edge (rnnd.c's top comment). The CPU reference keeps such a
 * candidate with its source, which made sift5k fully reachable at R = 64 but guarantees nothing
 * (at S = R = 8 it left 37 of 4500 vertices without an in-edge); GRNND's pools on the GPU have no
 * such rule (H200 at e166a42, sift5k from the exact 64-NN: 1 of 4500 vertices unreachable), and
 * the build in pieces' merge prunes rows apart again. So every builder ends here.
 *
 * The rule: an orphan v (in-degree 0, the entry vertex excepted: searches start there) is put
 * into the row of one of its own neighbours u, nearest first, at its sorted place. A row with
 * room takes it. A full row gives up its last entry w for v only when w keeps another in-edge
 * (in-degree >= 2) and v is closer to u than w; else the next u is tried. An orphan that none of
 * its neighbours' rows took that way (all full of closer entries) then takes, as a last resort,
 * the last slot of the first such row whose last entry keeps another in-edge: a long edge of u
 * given up for a vector that would otherwise be lost (repeated while a sweep links any). A
 * neighbour u whose only in-edge is v's own is skipped (the entry excepted): the two would point
 * only at each other. Linking never leaves a vertex without an in-edge that had one, so the
 * orphans can be taken one at a time, in id order: the result depends on no thread count. An
 * orphan whose neighbours all refuse stays one (and is not counted as linked).
 *
 * In-degree 0 is what this repairs, not reachability: vertices that point only at each other
 * stay unreachable (sift5k on the CPU at S = R = 8: two such pairs after the 37 links; none at
 * R >= 12). Finding those takes a walk of the graph from the entry: a serial BFS of the graph
 * below took 0.25-0.45 s, 2-3x this pass.
 *
 * Cost: one pass over the n x R ids counting in-degrees, then one over n; the orphans are few,
 * and each costs at most a row's distances per neighbour tried. A random 1M x 64 graph with 100
 * orphans, full rows: 0.14-0.16 s on 2 cores shared with other work (load 8-9; IN_SAT below). */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/vec_dist.h"
#include "graft/storage.h"
#include "graph/build.h"

/* The in-degree counts stop at IN_SAT: the rule asks only "none", "one" or "another besides this
 * one", but a vertex that loses edges to several orphans needs more than 2 to be told right, or
 * the rule refuses orphans it had a place for. tests/unit/test_orphans.c, random 3000 x 8 graphs
 * with 1500 orphans: at 2, 10 were kept with L2 (a second call linked them); at 4, one with -dot
 * (its rows' nearest are a few long vectors, displaced again and again); at 8, the result of
 * exact counts on both. Cost over a random 1M x 64 graph on 2 cores (shared, load 8-9):
 * 0.08-0.11 s at 2, 0.14-0.16 s at 8, 0.47-0.55 s exact (every in-edge an atomic increment).
 * uint16: a count can pass IN_SAT by one per thread before the clamp. */
#define IN_SAT 8

/* The vectors: FP32 rows, or (a build from codes) codes decoded a row at a time into ra and rb
 * (graft_build_row; the linking runs on one thread, and the orphans are few). */
typedef struct {
    const graft_build_vectors* v;
    int64_t d;
    int l2;
    float *ra, *rb;
} space;

static float dist(const space* s, int64_t a, int64_t b) {
    return graft_vec_dist(graft_build_row(s->v, s->d, a, s->ra), graft_build_row(s->v, s->d, b, s->rb),
                          s->d, s->l2);
}

/* (distance, id) order, the rows' order (graft/graph.h). */
static int closer(float da, int32_t a, float db, int32_t b) {
    return da < db || (da == db && a < b);
}

/* Puts v into u's row (m valid ids, m < R after the caller made room) at its sorted place. */
static void put_sorted(const space* s, int32_t* row, int m, int64_t u, int32_t v, float dv) {
    int i = m;
    for (; i > 0 && closer(dv, v, dist(s, u, row[i - 1]), row[i - 1]); i--) row[i] = row[i - 1];
    row[i] = v;
}

/* Tries to link orphan v from u's row. last_resort: a full row's last entry may go even when it
 * is closer to u than v (then v takes the last slot). Returns 1 when v was linked. */
static int link_from(const space* s, graft_graph* g, uint16_t* indeg, int32_t v, int32_t u,
                     int last_resort) {
    const int R = g->R;
    /* v's own edge is one of u's: with no other, v and u would only point at each other. */
    if (indeg[u] < 2 && u != g->entry) return 0;
    int32_t* row = g->nbrs + (int64_t)u * R;
    int m = 0;
    while (m < R && row[m] >= 0) m++;
    const float dv = dist(s, u, v);
    if (m == R) {
        const int32_t w = row[R - 1];
        if (indeg[w] < 2) return 0;
        if (!last_resort && !closer(dv, v, dist(s, u, w), w)) return 0;
        indeg[w]--;
        m = R - 1;
    }
    put_sorted(s, row, m, u, v, dv);
    indeg[v]++;
    return 1;
}

int graft_graph_link_orphans(graft_graph* g, const float* x, int64_t d, graft_metric metric,
                             int64_t* linked) {
    const graft_build_vectors v = {.x = x};
    return graft_graph_link_orphans_of(g, &v, d, metric, linked);
}

int graft_graph_link_orphans_of(graft_graph* g, const graft_build_vectors* vec, int64_t d,
                                graft_metric metric, int64_t* linked) {
    if (linked) *linked = 0;
    const int64_t n = g->n, slots = n * (int64_t)g->R;
    const int R = g->R;
    /* In-degrees saturated at IN_SAT: once a vertex has that many, its later in-edges are plain
     * reads, not atomic increments. Threads that read IN_SAT - 1 at once can each still add one,
     * so a count ends in [IN_SAT, IN_SAT - 1 + threads]; the clamp below makes it IN_SAT, whatever
     * the threads. */
    uint16_t* indeg = calloc((size_t)n, sizeof(uint16_t));
    if (!indeg) return graft_fail(GRAFT_ENOMEM, "graft_graph_link_orphans: out of host memory");
    const int32_t* nb = g->nbrs;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < slots; i++) {
        const int32_t u = nb[i];
        if (u < 0) continue;
        uint16_t c;
#pragma omp atomic read
        c = indeg[u];
        if (c >= IN_SAT) continue;
#pragma omp atomic update
        indeg[u]++;
    }
    int64_t orphans = 0;
#pragma omp parallel for schedule(static) reduction(+ : orphans)
    for (int64_t v = 0; v < n; v++) {
        if (indeg[v] > IN_SAT) indeg[v] = IN_SAT;
        orphans += indeg[v] == 0 && v != g->entry;
    }
    int32_t* left = orphans ? malloc((size_t)orphans * sizeof(int32_t)) : NULL;
    if (orphans && !left) {
        free(indeg);
        return graft_fail(GRAFT_ENOMEM, "graft_graph_link_orphans: out of host memory");
    }
    int64_t nleft = 0;
    for (int64_t v = 0; v < n && nleft < orphans; v++)
        if (indeg[v] == 0 && v != g->entry) left[nleft++] = (int32_t)v;
    /* Sweeps over the orphans left, in id order: the rule's, then last resorts while one links
     * any (a displacement leaves a row another last entry, which an orphan refused before may
     * take the place of). */
    const int codes = graft_build_reads_codes(vec);
    float* rows = codes ? malloc(2 * (size_t)d * sizeof(float)) : NULL;
    if (codes && !rows) {
        free(indeg), free(left);
        return graft_fail(GRAFT_ENOMEM, "graft_graph_link_orphans: out of host memory");
    }
    const space s = {vec, d, metric == GRAFT_METRIC_L2, rows, rows ? rows + d : NULL};
    for (int sweep = 0, progress = 1; nleft > 0 && (sweep < 2 || progress); sweep++) {
        int64_t kept = 0;
        for (int64_t i = 0; i < nleft; i++) {
            const int32_t v = left[i], *own = g->nbrs + (int64_t)v * R;
            int done = 0;
            for (int j = 0; j < R && own[j] >= 0 && !done; j++)
                done = own[j] != v && link_from(&s, g, indeg, v, own[j], sweep > 0);
            if (!done) left[kept++] = v;
        }
        progress = kept < nleft;
        nleft = kept;
    }
    free(left);
    free(indeg);
    free(rows);
    if (linked) *linked = orphans - nleft;
    return GRAFT_OK;
}
