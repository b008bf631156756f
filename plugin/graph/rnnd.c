/* RNN-Descent on the CPU (Ono & Matsui 2023; Algorithms 1-2 of
 * ../shared/papers/grnnd-gpu-relative-nn-descent.txt): the reference of the GPU GRNND builder.
 *
 * Each vertex keeps a pool of at most R candidates sorted by (distance, id) with NN-Descent's
 * new/old flag; a full pool keeps the R closest (Alg. 2 line 4, GRNND's fixed-capacity pool,
 * section 3.5). A round of UPDATE_NEIGHBORS (Alg. 2) walks each pool closest first and drops a
 * candidate w that is closer to an already accepted neighbour u than to v (RNG rule, eq. 1-2;
 * with alpha > 1, alpha times closer: graph.h), redirecting it: w becomes a new candidate of u. Pairs of two old entries were compared in an
 * earlier round and are skipped, as in NN-Descent. After each outer iteration but the last,
 * reverse edges join the pools (Alg. 1 line 9; sampled with ratio rho as in GRNND 3.6).
 *
 * Two departures from the published code, both measured on sift5k (tests/unit/test_graph_cpu.c):
 *  - Rounds are synchronous (Jacobi), like GRNND's double-buffered pools (3.5): every vertex
 *    refines its own pool in parallel, then the redirections are inserted into the target pools in
 *    (source vertex, candidate) order, each target pool by one thread. The result depends only on
 *    the inputs, never on the thread count or schedule. Ono & Matsui's code inserts into other
 *    pools under locks as it goes (schedule-dependent); blocks of 256 vertices applied in turn
 *    (closer to that) gave no better graphs here, and 18x more barriers.
 *  - Their pools grow without bound between reverse-edge passes, so a redirected candidate is never
 *    lost. With fixed capacity (GRNND 3.5) a full target pool drops it; when the dropped vertex was
 *    an outlier, that was often its last in-edge and the vertex became unreachable (1-6 of 4500 on
 *    sift5k). Here a redirection the target has no room for stays with v instead (as an old entry):
 *    reachability 1.0 on every seed tried, recall@10 at L = 24 up from 0.933 to 0.953. That is
 *    no guarantee (at S = R = 8, 37 of 4500 vertices still ended without an in-edge), so the
 *    build ends, as every builder does, by linking those (graph/orphans.c).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/graph.h"
#include "core/rng.h"
#include "core/validate.h"
#include "graph/build.h"
#include "core/vec_dist.h"

typedef struct {
    float d;       /* distance to the pool's vertex (squared L2, or -dot) */
    int32_t id;
    uint8_t fresh; /* NN-Descent's "new" flag: not yet compared with the pool's other entries */
} ent;

typedef struct {
    int32_t to; /* pool that receives the candidate; -1 once it refused it */
    int32_t id;
    float d;    /* d(to, id) */
    float dv;   /* d(v, id): where the candidate goes back to when `to` has no room */
} redirect;

typedef struct {
    const float* x;
    int64_t n, d;
    int R, l2;
    ent* pool;    /* n x R */
    int32_t* cnt; /* entries used in each pool */
    const int32_t* init; /* graft_rnnd_params.init, init_k */
    int init_k;
    float alpha2; /* alpha squared: the pruning compares squared L2 distances */
} rnnd;

static int less(ent a, ent b) { return a.d < b.d || (a.d == b.d && a.id < b.id); }

static float dist(const rnnd* g, int64_t a, int64_t b) {
    return graft_vec_dist(g->x + a * g->d, g->x + b * g->d, g->d, g->l2);
}

/* Inserts e into pool v unless its id is there already (then the copy stays, old if either copy
 * is old: an old entry was compared already) or the pool is full of closer entries (then the
 * farthest entry makes room: Alg. 6 step 3). Returns 1 when e was added, 0 when its id was there,
 * -1 when the pool had no room. */
static int pool_insert(rnnd* g, int64_t v, ent e) {
    ent* p = g->pool + v * g->R;
    int m = g->cnt[v];
    for (int i = 0; i < m; i++)
        if (p[i].id == e.id) {
            p[i].fresh &= e.fresh;
            return 0;
        }
    if (m == g->R) {
        if (!less(e, p[m - 1])) return -1;
        m--;
    }
    int i = m;
    for (; i > 0 && less(e, p[i - 1]); i--) p[i] = p[i - 1];
    p[i] = e;
    g->cnt[v] = m + 1;
    return 1;
}

/* INITIALIZATION (Alg. 1 line 3): min(S, n - 1) distinct random other vertices, drawn by Floyd's
 * algorithm from v's own generator; mark (n bytes, all 0 on entry and exit) gives O(S) draws. */
static void init_vertex(rnnd* g, int64_t v, int S, uint64_t seed, uint8_t* mark, int64_t* pick) {
    const int64_t n = g->n;
    if (g->init) { /* given initial neighbours (the oracle graph's exact k-NN) */
        for (int j = 0; j < g->init_k; j++) {
            const int64_t u = g->init[v * g->init_k + j];
            if (u >= 0 && u != v) pool_insert(g, v, (ent){dist(g, v, u), (int32_t)u, 1});
        }
        return;
    }
    if (n - 1 <= S) {
        for (int64_t u = 0; u < n; u++)
            if (u != v) pool_insert(g, v, (ent){dist(g, v, u), (int32_t)u, 1});
        return;
    }
    uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(v + 1));
    int64_t m = 0;
    for (int64_t j = n - 1 - S; j < n - 1; j++) { /* S distinct values of [0, n - 1) */
        int64_t t = (int64_t)(graft_splitmix64(&s) % (uint64_t)(j + 1));
        if (mark[t]) t = j;
        mark[t] = 1;
        pick[m++] = t;
    }
    for (int64_t i = 0; i < m; i++) {
        int64_t u = pick[i] < v ? pick[i] : pick[i] + 1; /* skip v itself */
        mark[pick[i]] = 0;
        pool_insert(g, v, (ent){dist(g, v, u), (int32_t)u, 1});
    }
}

/* UPDATE_NEIGHBORS (Alg. 2) for one vertex, in place: keeps the accepted candidates (now old) and
 * writes one redirection per dropped candidate to out (at most R). Returns the number written. */
static int update_vertex(rnnd* g, int64_t v, redirect* out) {
    ent* p = g->pool + v * g->R;
    const int m = g->cnt[v];
    int kept = 0, nout = 0;
    for (int i = 0; i < m; i++) {
        const ent c = p[i]; /* p[0..kept) are accepted, all at most as far from v as c */
        int ok = 1;
        for (int j = 0; j < kept; j++) {
            if (!c.fresh && !p[j].fresh) continue;
            float duw = dist(g, p[j].id, c.id);
            /* Strict: identical vectors (d = 0 everywhere) are never pruned, so a set of
             * duplicates cannot collapse onto one vertex and overflow its pool. */
            if (g->alpha2 * duw < c.d) {
                ok = 0;
                out[nout++] = (redirect){p[j].id, c.id, duw, c.d};
                break;
            }
        }
        if (ok) p[kept++] = c; /* kept <= i: compaction never overwrites an unread entry */
    }
    for (int j = 0; j < kept; j++) p[j].fresh = 0;
    g->cnt[v] = kept;
    return nout;
}

/* Inserts the candidates of every vertex (vertex v wrote nr[v] of them at r + v * R) as new
 * entries of their target pools. Thread t owns the pools of ids [n t / T, n (t + 1) / T) and
 * inserts in source order, so the result does not depend on T. With give_back, a candidate that a
 * full pool refused returns to its source as an old entry (see the top of this file). Returns the
 * number of new entries. */
static int64_t apply_redirects(rnnd* g, redirect* r, const int* nr, int give_back) {
    int64_t added = 0;
#pragma omp parallel reduction(+ : added)
    {
        const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = g->n * t / T, hi = g->n * (t + 1) / T;
        for (int64_t v = 0; v < g->n; v++)
            for (int j = 0; j < nr[v]; j++) {
                redirect* e = r + v * g->R + j;
                if (e->to < lo || e->to >= hi) continue;
                int rc = pool_insert(g, e->to, (ent){e->d, e->id, 1});
                added += rc > 0;
                if (rc < 0) e->to = -1;
            }
        if (give_back) {
#pragma omp barrier
            for (int64_t v = lo; v < hi; v++)
                for (int j = 0; j < nr[v]; j++) {
                    const redirect* e = r + v * g->R + j;
                    if (e->to < 0) pool_insert(g, v, (ent){e->dv, e->id, 0});
                }
        }
    }
    return added;
}

int graft_check_graph_build(const float* x, int64_t n, int64_t d, const graft_rnnd_params* p,
                            const graft_graph* out, const char* fn) {
    GRAFT_TRY(graft_check_graph_build_args(x, n, d, p, out, fn));
    return graft_check_finite(x, n, d, fn);
}

int graft_check_graph_build_args(const float* x, int64_t n, int64_t d, const graft_rnnd_params* p,
                                 const graft_graph* out, const char* fn) {
    if (!x || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL pointer argument", fn);
    if (n < 1 || n > INT32_MAX || d < 1)
        return graft_fail(GRAFT_EINVAL, "%s: bad sizes n=%lld d=%lld (need 0 < n < 2^31, d > 0)",
                          fn, (long long)n, (long long)d);
    if (p->S < 1 || p->R < 1 || p->T1 < 0 || p->T2 < 0 || !(p->rho >= 0.0f && p->rho <= 1.0f) ||
        !(p->delta >= 0.0f && p->delta < 1.0f) || !(p->alpha >= 1.0f && p->alpha <= 100.0f))
        return graft_fail(GRAFT_EINVAL,
                          "%s: bad parameters S=%d R=%d T1=%d T2=%d rho=%g delta=%g alpha=%g "
                          "(need S, R >= 1; T1, T2 >= 0; 0 <= rho <= 1; 0 <= delta < 1; "
                          "1 <= alpha <= 100)",
                          fn, p->S, p->R, p->T1, p->T2, (double)p->rho, (double)p->delta,
                          (double)p->alpha);
    if (p->metric != GRAFT_METRIC_L2 && p->metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)p->metric);
    if (p->alpha != 1.0f && p->metric != GRAFT_METRIC_L2)
        return graft_fail(GRAFT_EINVAL, "%s: alpha = %g needs L2 (inner product prunes with alpha = 1)",
                          fn, (double)p->alpha);
    if (p->init) {
        if (p->init_k < 1)
            return graft_fail(GRAFT_EINVAL, "%s: init given with init_k = %d (need >= 1)", fn, p->init_k);
        const int64_t slots = n * p->init_k, bad = graft_first_id_outside(p->init, slots, n);
        if (bad < slots)
            return graft_fail(GRAFT_EINVAL, "%s: init row %lld holds id %d, outside [-1, %lld)", fn,
                              (long long)(bad / p->init_k), (int)p->init[bad], (long long)n);
    }
    return GRAFT_OK;
}

void graft_rnnd_params_defaults(graft_rnnd_params* p) {
    if (!p) return;
    p->S = 32;
    p->R = 64;
    p->T1 = 8;
    p->T2 = 30;
    p->rho = 1.0f;
    p->seed = 1234;
    p->metric = GRAFT_METRIC_L2;
    p->delta = 0.002f;
    p->init = NULL;
    p->init_k = 0;
    p->alpha = 1.0f;
    p->verbose = 0;
}

int64_t graft_rnnd_converged_below(int64_t n, int R, float delta) {
    return (int64_t)((double)delta * (double)n * (double)R);
}

int graft_rnnd_build_cpu(const float* x, int64_t n, int64_t d, const graft_rnnd_params* params,
                         graft_graph* out) {
    return graft_rnnd_build_cpu_linked(x, n, d, params, out, NULL);
}

int graft_rnnd_build_cpu_linked(const float* x, int64_t n, int64_t d, const graft_rnnd_params* params,
                                graft_graph* out, int64_t* linked) {
    graft_rnnd_params p;
    if (params)
        p = *params;
    else
        graft_rnnd_params_defaults(&p);
    GRAFT_TRY(graft_check_graph_build(x, n, d, &p, out, "graft_rnnd_build_cpu"));

    size_t nR, bytes, rbytes;
    if (graft_mul_overflow((size_t)n, (size_t)p.R, &nR) ||
        graft_mul_overflow(nR, sizeof(ent), &bytes) ||
        graft_mul_overflow(nR, sizeof(redirect), &rbytes))
        return graft_fail(GRAFT_ENOMEM, "graft_rnnd_build_cpu: n x R = %lld x %d overflows",
                          (long long)n, p.R);
    rnnd g = {x, n, d, p.R, p.metric == GRAFT_METRIC_L2, malloc(bytes),
              calloc((size_t)n, sizeof(int32_t)), p.init, p.init_k, p.alpha * p.alpha};
    redirect* red = malloc(rbytes); /* up to R per vertex and round */
    int* nred = malloc((size_t)n * sizeof(int));
    int32_t* nbrs = malloc(nR * sizeof(int32_t));
    int failed = !g.pool || !g.cnt || !red || !nred || !nbrs;

    /* Alg. 1 line 3: random S-NN pools. */
    if (!failed) {
#pragma omp parallel
        {
            uint8_t* mark = calloc((size_t)n, 1);
            /* pick is used only when S < n - 1 */
            int64_t* pick = malloc((size_t)(p.S < n ? p.S : 1) * sizeof(int64_t));
            if (!mark || !pick) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp for schedule(dynamic, 64)
            for (int64_t v = 0; v < n; v++)
                if (mark && pick) init_vertex(&g, v, p.S, p.seed, mark, pick);
            free(mark);
            free(pick);
        }
    }

    /* A round that adds at most `few` new entries ends its outer iteration (graph.h, delta); none
     * added means every entry is old, so further rounds would compare nothing. With delta > 0 the
     * outer iterations end after one that ended in its first round, or whose first round added
     * at least GRAFT_RNND_CHURN_FLOOR x the previous one's first (build.h). */
    const int64_t few = graft_rnnd_converged_below(n, p.R, p.delta);
    int64_t first_added = 0;
    for (int t1 = 0; t1 < p.T1 && !failed; t1++) {
        int rounds = 0, last_outer = 0;
        for (int t2 = 0; t2 < p.T2; t2++) {
#pragma omp parallel for schedule(dynamic, 16)
            for (int64_t v = 0; v < n; v++) nred[v] = update_vertex(&g, v, red + v * p.R);
            rounds++;
            const int64_t added = apply_redirects(&g, red, nred, 1);
            if (p.verbose) {
                printf("RNN-Descent round %d.%d: %lld new entries (%.5f of n R)\n", t1, t2,
                       (long long)added, (double)added / ((double)n * p.R));
                fflush(stdout);
            }
            if (t2 == 0) {
                last_outer = t1 > 0 && (double)added >= (double)GRAFT_RNND_CHURN_FLOOR * (double)first_added;
                first_added = added;
            }
            if (added <= few) break;
        }
        if (t1 == p.T1 - 1 || (p.delta > 0.0f && (last_outer || (t1 > 0 && rounds <= 1)))) break;
        /* ADD_REVERSE_EDGES (Alg. 1 line 9): v offers itself to its ceil(rho * degree) closest
         * neighbours (GRNND 3.6), all proposals taken from the same snapshot. Reverse edges are
         * new; an edge already present keeps its flag. */
#pragma omp parallel for schedule(static)
        for (int64_t v = 0; v < n; v++) {
            const ent* pv = g.pool + v * p.R;
            int m = (int)ceilf(p.rho * (float)g.cnt[v]);
            if (m > g.cnt[v]) m = g.cnt[v];
            for (int j = 0; j < m; j++)
                red[v * p.R + j] = (redirect){pv[j].id, (int32_t)v, pv[j].d, 0};
            nred[v] = m;
        }
        apply_redirects(&g, red, nred, 0);
    }

    if (failed) {
        free(g.pool);
        free(g.cnt);
        free(red);
        free(nred);
        free(nbrs);
        return graft_fail(GRAFT_ENOMEM, "graft_rnnd_build_cpu: out of host memory (n=%lld R=%d)",
                          (long long)n, p.R);
    }

    /* The pools are the graph: sorted, duplicate-free, at most R (the last round's redirected
     * candidates included, as in the published code). */
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < n; v++)
        for (int j = 0; j < p.R; j++)
            nbrs[v * p.R + j] = j < g.cnt[v] ? g.pool[v * p.R + j].id : -1;

    free(g.pool);
    free(g.cnt);
    free(red);
    free(nred);
    /* Keeping refused redirections with their source (the top of this file) is no guarantee. */
    graft_graph built = {n, p.R, nbrs, graft_graph_entry_point(x, n, d)};
    const int rc = graft_graph_link_orphans(&built, x, d, p.metric, linked);
    if (rc != GRAFT_OK) {
        free(nbrs);
        return rc;
    }
    *out = built;
    return GRAFT_OK;
}
