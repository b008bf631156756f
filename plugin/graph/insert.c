/* A living graph, CPU reference (graft/graph.h, "A living graph"): vertices inserted into a built
 * graph, and the rows that point at removed vertices repaired. The oracle of gpu/graph_insert.cu.
 *
 * Insert (one round; graft_graph_insert_round_cpu), with the build's own rule (RNN-Descent's
 * UPDATE_NEIGHBORS, Alg. 2 of ../shared/papers/grnnd-gpu-relative-nn-descent.txt):
 *   1. each new vertex v takes its candidates: the walk's over the graph (the L best live vertices
 *      it saw) and its R nearest among the round's new vertices (exact: the walk cannot see them),
 *      sorted by (distance, id), and keeps a candidate c unless an accepted closer neighbour a has
 *      d(a, c) < d(v, c) (the RNG test, strict as in the build), at most R;
 *   2. v offers itself to each accepted old neighbour a as a reverse edge (Alg. 1 line 9 with
 *      rho = 1); a row with room takes its offers; a row they overflow is pruned again by the same
 *      test, offers as Alg. 2's new entries, so that two old entries are not compared again (the
 *      build compared them), and keeps the R closest survivors. New rows take no offers: two new
 *      vertices near each other are in each other's candidates already;
 *   3. a new vertex that no row took (no new row kept it, all its offers pruned) is linked from
 *      its nearest neighbour, in place of that row's farthest entry: every new vertex has an
 *      in-edge (rnnd.c's top comment: vertices without one became unreachable in the build).
 * Offers are applied per target row in (distance, source) order, one row per thread: the result
 * depends on no thread count. graft_graph_insert_cpu cuts a batch into rounds of at most
 * GRAFT_INSERT_ROUND_SHARE of the graph, each walking the graph the rounds before it left (the
 * prefix-doubling batches of ParlayANN, Manohar et al. 2024). The round's own k-NN matters where a
 * batch is not spread like the graph: an append of new content (new images, a new catalogue)
 * forms clusters of its own, and with the walk's candidates alone its vertices pointed only at
 * old ones (1M dense-SIFT, the last 10% of the images appended in ten 1% adds: recall@10 at
 * L = 32 0.879 against 0.938 for a fresh build, bench_living on the H100 at 4262bce).
 *
 * Consolidate (DiskANN's, Singh et al. 2021 "FreshDiskANN" Alg. 4): a live vertex whose row holds
 * removed vertices takes, as candidates, its live neighbours (old entries) and the live
 * neighbours of its removed ones (new entries), pruned to R by the rule that joins rows pruned
 * apart (graph/merge_rule.h: the build in pieces' relaxed test; the plain one thinned the rows and
 * cost 0.012-0.015 recall against a fresh build); then the removed rows go and ids are renumbered
 * in order (id - removed ids before it).
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/validate.h"
#include "core/vec_dist.h"
#include "graft/flat.h"
#include "graft/graph.h"
#include "graph/graph_gpu.h"
#include "graph/merge_rule.h"

typedef struct {
    float d;
    int32_t id;
    int32_t fresh; /* Alg. 2's "new": compared with every accepted entry; two old ones are not */
} ent;

static int ent_less(ent a, ent b) { return a.d < b.d || (a.d == b.d && a.id < b.id); }

static int ent_cmp(const void* a, const void* b) {
    const ent x = *(const ent*)a, y = *(const ent*)b;
    return ent_less(x, y) ? -1 : ent_less(y, x) ? 1 : 0;
}

static int is_dead(const uint8_t* dead, int64_t v) { return dead && (dead[v >> 3] >> (v & 7) & 1); }

static float dist(const float* x, int64_t d, int l2, int64_t a, int64_t b) {
    return graft_vec_dist(x + a * d, x + b * d, d, l2);
}

int graft_insert_default_L(int R) {
    /* Twice the degree: 1M dense SIFT (H100, bench_living --insert-L, one run, ten 1% adds to a
     * graph of 90%, R = 64): recall@10 at L = 32 0.0115 below a fresh build at beam 64 and 0.0028
     * at 128, the median add 4.07% and 4.09% of a full build (a GPU add's time is not in its
     * walk). CPU, sift5k (500 queries): 0.0040 and 0.0036 below at L = 32, the add 1.44-1.73x. */
    const int L = 2 * R < 64 ? 64 : 2 * R;
    return L > 1024 ? 1024 : L;
}

int64_t graft_insert_round_size(int64_t n) {
    const int64_t r = (int64_t)ceil(GRAFT_INSERT_ROUND_SHARE * (double)n);
    return r < GRAFT_INSERT_ROUND_MIN ? GRAFT_INSERT_ROUND_MIN : r;
}

/* The RNG test over a list sorted by (d, id): keeps an entry unless an accepted one (at most R,
 * closer) prunes it, alpha d(a, c) < d(v, c); old-old pairs are skipped. alpha 0: no test, the R
 * closest. Returns the entries kept, first in e. */
static int rng_prune_a(ent* e, int m, int R, const float* x, int64_t d, int l2, float alpha) {
    if (alpha == 0.0f) return m < R ? m : R;
    int kept = 0;
    for (int i = 0; i < m && kept < R; i++) {
        const ent c = e[i];
        int ok = 1;
        for (int j = 0; j < kept && ok; j++) {
            if (!c.fresh && !e[j].fresh) continue;
            if (alpha * dist(x, d, l2, e[j].id, c.id) < c.d) ok = 0;
        }
        if (ok) e[kept++] = c; /* kept <= i */
    }
    return kept;
}
static int rng_prune(ent* e, int m, int R, const float* x, int64_t d, int l2) {
    return rng_prune_a(e, m, R, x, d, l2, 1.0f);
}

/* Writes e[0..m) (ids) as row r of R slots, -1 padded. */
static void put_row(int32_t* row, const ent* e, int m, int R) {
    for (int j = 0; j < R; j++) row[j] = j < m ? e[j].id : -1;
}

typedef struct {
    int32_t to, from;
    float d;
} offer;

static int offer_cmp(const void* a, const void* b) {
    const offer* x = a;
    const offer* y = b;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

int graft_graph_insert_round_cpu(graft_graph* g, const float* x, int64_t d, graft_metric metric,
                                 int64_t m, const uint8_t* dead, const int64_t* cand, int C,
                                 graft_insert_report* rep) {
    const char* fn = "graft_graph_insert_round_cpu";
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!x || (m > 0 && !cand) || d < 1 || m < 0 || C < 1 || g->n + m > INT32_MAX)
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments (m=%lld C=%d)", fn, (long long)m, C);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)metric);
    if (g->R > GRAFT_GRAPH_INSERT_MAX_R)
        return graft_fail(GRAFT_EINVAL, "%s: degree R=%d over %d", fn, g->R, GRAFT_GRAPH_INSERT_MAX_R);
    if (m == 0) return GRAFT_OK;
    const int64_t n = g->n;
    const int R = g->R, l2 = metric == GRAFT_METRIC_L2;
    const int W = C > R ? C : R; /* scratch entries per thread */
    offer* offers = malloc((size_t)m * R * sizeof(offer));
    int* nacc = malloc((size_t)m * sizeof(int));
    uint8_t* linked = calloc((size_t)m, 1); /* a row (new, or old after step 2) keeps the vertex */
    int failed = !offers || !nacc || !linked;

    /* 1. the rows of the new vertices */
#pragma omp parallel if (!failed)
    {
        ent* e = malloc((size_t)W * sizeof(ent));
        if (!e) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t i = 0; i < m; i++) {
            if (!e) continue;
            const int64_t v = n + i;
            int c = 0;
            for (int j = 0; j < C; j++) {
                const int64_t u = cand[i * C + j];
                if (u < 0 || u >= n + m || u == v || (u < n && is_dead(dead, u))) continue;
                e[c++] = (ent){dist(x, d, l2, v, u), (int32_t)u, 1};
            }
            qsort(e, (size_t)c, sizeof(ent), ent_cmp);
            int u = 0; /* duplicates (a list given by the caller) are adjacent */
            for (int j = 0; j < c; j++)
                if (u == 0 || e[j].id != e[u - 1].id) e[u++] = e[j];
            const int kept = rng_prune(e, u, R, x, d, l2);
            put_row(g->nbrs + v * R, e, kept, R);
            int no = 0;
            for (int j = 0; j < kept; j++) {
                if (e[j].id < n) {
                    offers[i * R + no++] = (offer){e[j].id, (int32_t)v, e[j].d};
                } else {
#pragma omp atomic write
                    linked[e[j].id - n] = 1;
                }
            }
            nacc[i] = no;
        }
        free(e);
    }
    if (failed) {
        free(offers), free(nacc), free(linked);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }

    /* 2. the reverse edges, grouped by target row in (distance, source) order */
    int64_t no = 0;
    for (int64_t i = 0; i < m; i++)
        for (int j = 0; j < nacc[i]; j++) offers[no++] = offers[i * R + j];
    qsort(offers, (size_t)no, sizeof(offer), offer_cmp);
    int64_t nt = 0; /* targets: segment starts */
    int64_t* seg = malloc((size_t)(no + 1) * sizeof(int64_t));
    if (!seg) {
        free(offers), free(nacc), free(seg), free(linked);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    for (int64_t o = 0; o < no; o++)
        if (o == 0 || offers[o].to != offers[o - 1].to) seg[nt++] = o;
    seg[nt] = no;
    int64_t repruned = 0;
#pragma omp parallel reduction(+ : repruned)
    {
        ent* e = malloc((size_t)2 * R * sizeof(ent));
        if (!e) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t t = 0; t < nt; t++) {
            if (!e) continue;
            const int32_t u = offers[seg[t]].to;
            int32_t* row = g->nbrs + (int64_t)u * R;
            int c = 0;
            for (int j = 0; j < R; j++)
                if (row[j] >= 0 && row[j] < n) e[c++] = (ent){dist(x, d, l2, u, row[j]), row[j], 0};
            /* a row takes at most R offers, the closest: it keeps R entries at most */
            for (int64_t o = seg[t]; o < seg[t + 1] && c < 2 * R; o++)
                e[c++] = (ent){offers[o].d, offers[o].from, 1};
            qsort(e, (size_t)c, sizeof(ent), ent_cmp);
            int kept = c;
            if (c > R) {
                kept = rng_prune(e, c, R, x, d, l2);
                repruned++;
            }
            put_row(row, e, kept, R);
            for (int j = 0; j < kept; j++)
                if (e[j].fresh) {
#pragma omp atomic write
                    linked[e[j].id - n] = 1;
                }
        }
        free(e);
    }
    int64_t forced = 0;
    /* 3. an in-edge for every new vertex, in vertex order */
    for (int64_t i = 0; i < m && !failed; i++) {
        const int64_t v = n + i;
        const int32_t u = g->nbrs[v * R];
        if (linked[i] || u < 0) continue;
        int32_t* row = g->nbrs + (int64_t)u * R;
        ent e[GRAFT_GRAPH_INSERT_MAX_R + 1];
        int c = 0;
        for (int j = 0; j < R; j++)
            if (row[j] >= 0) e[c++] = (ent){dist(x, d, l2, u, row[j]), row[j], 0};
        if (c == R) c--; /* the farthest entry makes room */
        e[c++] = (ent){dist(x, d, l2, u, v), (int32_t)v, 1};
        qsort(e, (size_t)c, sizeof(ent), ent_cmp);
        put_row(row, e, c, R);
        forced++;
    }
    free(offers), free(nacc), free(seg), free(linked);
    if (failed) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    g->n = n + m;
    if (rep) {
        rep->reverse_edges += no;
        rep->repruned += repruned;
        rep->forced += forced;
    }
    return GRAFT_OK;
}

int graft_insert_candidates_cpu(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                                int64_t m, const uint8_t* live, int L, int64_t* cand) {
    const char* fn = "graft_insert_candidates_cpu";
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!x || !cand || d < 1 || m < 0 || L < 1 || L > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments (m=%lld L=%d)", fn, (long long)m, L);
    const int R = g->R, C = L + R;
    /* D holds the walk's distances, then the k-NN's (m x max(L, R)) */
    float* D = malloc((size_t)m * (L > R ? L : R) * sizeof(float));
    int64_t* I = malloc((size_t)m * L * sizeof(int64_t));
    int64_t* K = malloc((size_t)m * R * sizeof(int64_t));
    int rc = D && I && K ? GRAFT_OK : graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    graft_search_params sp;
    graft_search_params_defaults(&sp);
    sp.L = L;
    sp.allowed = live;
    if (rc == GRAFT_OK) rc = graft_graph_search_cpu_ex(g, x, d, metric, x + g->n * d, m, L, &sp, D, I);
    /* the round among itself: exact, each one's R nearest but itself (graft_knn_cpu) */
    const float* xr = x + g->n * d;
    if (rc == GRAFT_OK) rc = graft_knn_cpu(xr, m, xr, m, d, R, metric, 0, D, K);
    for (int64_t i = 0; rc == GRAFT_OK && i < m; i++) {
        memcpy(cand + i * C, I + i * L, (size_t)L * sizeof(int64_t));
        for (int j = 0; j < R; j++) cand[i * C + L + j] = K[i * R + j] < 0 ? -1 : g->n + K[i * R + j];
    }
    free(D), free(I), free(K);
    return rc;
}

int graft_graph_insert_cpu(graft_graph* g, const float* x, int64_t d, graft_metric metric, int64_t m,
                           const uint8_t* dead, int L, graft_insert_report* rep) {
    const char* fn = "graft_graph_insert_cpu";
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!x || d < 1 || m < 0 || g->n + m > INT32_MAX)
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments (m=%lld)", fn, (long long)m);
    if (g->R > GRAFT_GRAPH_INSERT_MAX_R)
        return graft_fail(GRAFT_EINVAL, "%s: degree R=%d over %d", fn, g->R, GRAFT_GRAPH_INSERT_MAX_R);
    if (L == 0) L = graft_insert_default_L(g->R);
    if (L < 1 || L > 1024) return graft_fail(GRAFT_EINVAL, "%s: L=%d outside 1..1024", fn, L);
    GRAFT_TRY(graft_check_finite(x + g->n * d, m, d, fn));
    if (rep) memset(rep, 0, sizeof *rep);
    const int64_t total = g->n + m;
    /* The walk's filter: the live vertices (new ones are not in the graph yet). */
    uint8_t* live = NULL;
    if (dead) {
        live = malloc((size_t)(total + 7) / 8);
        if (!live) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        for (int64_t b = 0; b < (total + 7) / 8; b++) live[b] = (uint8_t)~dead[b];
    }
    const int64_t most = graft_insert_round_size(total); /* rounds only grow */
    const int C = L + g->R;
    int64_t* cand = malloc((size_t)(m < most ? m : most) * C * sizeof(int64_t));
    int rc = cand ? GRAFT_OK : graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    for (int64_t done = 0; done < m && rc == GRAFT_OK;) {
        int64_t r = graft_insert_round_size(g->n);
        if (r > m - done) r = m - done;
        rc = graft_insert_candidates_cpu(g, x, d, metric, r, live, L, cand);
        if (rc == GRAFT_OK) rc = graft_graph_insert_round_cpu(g, x, d, metric, r, dead, cand, C, rep);
        if (rc == GRAFT_OK && rep) rep->rounds++;
        done += r;
    }
    free(cand), free(live);
    return rc == GRAFT_OK ? GRAFT_OK : graft_fail(rc, "%s: %s", fn, graft_last_error());
}

/* ---- consolidation ----------------------------------------------------------------------------- */

/* The live vertex nearest (squared L2, ties to the smaller id) the centroid of the live vectors:
 * graft_graph_entry_point's rule over the vertices that stay. */
static int64_t live_entry(const float* x, int64_t n, int64_t d, const uint8_t* dead) {
    double* c = calloc((size_t)d, sizeof(double));
    if (!c) return -1;
    int64_t live = 0;
    for (int64_t i = 0; i < n; i++)
        if (!is_dead(dead, i)) {
            for (int64_t j = 0; j < d; j++) c[j] += x[i * d + j];
            live++;
        }
    int64_t best_i = -1;
    double best = INFINITY;
    for (int64_t j = 0; j < d && live; j++) c[j] /= (double)live;
    for (int64_t i = 0; i < n; i++) {
        if (is_dead(dead, i)) continue;
        double s = 0;
        for (int64_t j = 0; j < d; j++) s += (x[i * d + j] - c[j]) * (x[i * d + j] - c[j]);
        if (s < best) best = s, best_i = i;
    }
    free(c);
    return best_i;
}

int graft_graph_consolidate_cpu(graft_graph* g, const float* x, int64_t d, graft_metric metric,
                                const uint8_t* dead, int64_t* repaired) {
    const char* fn = "graft_graph_consolidate_cpu";
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!x || d < 1) return graft_fail(GRAFT_EINVAL, "%s: NULL vectors or d < 1", fn);
    const int64_t n = g->n;
    const int R = g->R, l2 = metric == GRAFT_METRIC_L2;
    int64_t fixed = 0;
    int failed = 0;
    if (dead) {
        /* Rows of live vertices read only their own row and removed rows, which stay as they are
         * until the compaction: repaired in place, in parallel. */
#pragma omp parallel reduction(+ : fixed)
        {
            const int cap = R + R * R;
            ent* e = malloc((size_t)cap * sizeof(ent));
            if (!e) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp for schedule(dynamic, 64)
            for (int64_t u = 0; u < n; u++) {
                if (!e || is_dead(dead, u)) continue;
                int32_t* row = g->nbrs + u * R;
                int any = 0;
                for (int j = 0; j < R && !any; j++) any = row[j] >= 0 && row[j] < n && is_dead(dead, row[j]);
                if (!any) continue;
                int c = 0;
                for (int j = 0; j < R; j++) {
                    const int32_t w = row[j];
                    if (w < 0 || w >= n) continue;
                    if (!is_dead(dead, w)) {
                        e[c++] = (ent){0, w, 0};
                        continue;
                    }
                    const int32_t* wr = g->nbrs + (int64_t)w * R;
                    for (int t = 0; t < R; t++)
                        if (wr[t] >= 0 && wr[t] < n && wr[t] != u && !is_dead(dead, wr[t]))
                            e[c++] = (ent){0, wr[t], 1};
                }
                for (int j = 0; j < c; j++) e[j].d = dist(x, d, l2, u, e[j].id);
                qsort(e, (size_t)c, sizeof(ent), ent_cmp);
                int m = 0; /* one copy of each id, old if any copy is old */
                for (int j = 0; j < c; j++) {
                    if (m > 0 && e[j].id == e[m - 1].id) {
                        e[m - 1].fresh &= e[j].fresh;
                        continue;
                    }
                    e[m++] = e[j];
                }
                /* rows pruned apart joined again: the merge rule of the build in pieces */
                const int kept = rng_prune_a(e, m, R, x, d, l2, l2 ? GRAFT_MERGE_ALPHA : 0.0f);
                put_row(row, e, kept, R);
                fixed++;
            }
            free(e);
        }
    }
    if (failed) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    if (repaired) *repaired = fixed;
    if (!dead) return GRAFT_OK;
    /* Compaction: new id = id - removed ids before it; rows move down in order. */
    int32_t* newid = malloc((size_t)n * sizeof(int32_t));
    int32_t* tmp = malloc((size_t)R * sizeof(int32_t));
    if (!newid || !tmp) {
        free(newid);
        free(tmp);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    int64_t live = 0;
    for (int64_t v = 0; v < n; v++) newid[v] = is_dead(dead, v) ? -1 : (int32_t)live++;
    if (live == 0) {
        free(newid);
        free(tmp);
        return graft_fail(GRAFT_EINVAL, "%s: every vertex is removed (reset the index instead)", fn);
    }
    int64_t entry = g->entry;
    if (is_dead(dead, entry)) entry = live_entry(x, n, d, dead);
    if (entry < 0) {
        free(newid);
        free(tmp);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    for (int64_t v = 0; v < n; v++) {
        if (newid[v] < 0) continue;
        const int32_t* src = g->nbrs + v * R;
        int32_t* dst = g->nbrs + (int64_t)newid[v] * R; /* newid[v] <= v: never ahead of src */
        int c = 0;
        for (int j = 0; j < R; j++)
            if (src[j] >= 0 && src[j] < n && newid[src[j]] >= 0) tmp[c++] = newid[src[j]];
        for (int j = 0; j < R; j++) dst[j] = j < c ? tmp[j] : -1;
    }
    g->entry = newid[entry];
    g->n = live;
    free(newid);
    free(tmp);
    return GRAFT_OK;
}
