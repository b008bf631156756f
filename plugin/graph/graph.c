/* Fixed-degree graphs on the CPU: best-first search (the oracle of the SONG/BANG kernels),
 * structure statistics and k-NN graph recall. See graft/graph.h. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/graph.h"
#include "graph/build.h"
#include "graph/graph_gpu.h"
#include "core/validate.h"
#include "core/vec_dist.h"
#include "graph/walk_trace.h"
#include "graph/worklist.h"

void graft_graph_free(graft_graph* g) {
    if (!g) return;
    free(g->nbrs);
    memset(g, 0, sizeof *g);
}

/* The vertex nearest the vectors' mean, over FP32 rows or FP16 / SQ8 codes decoded a row at a
 * time (graft_build_row: no n x d copy); the same sums in the same order either way. */
int64_t graft_graph_entry_point_of(const graft_build_vectors* v, int64_t n, int64_t d) {
    const int codes = graft_build_reads_codes(v);
    const int held = codes ? v->codes != NULL : v->x != NULL;
    double* c = held && n > 0 && d > 0 ? calloc((size_t)d, sizeof(double)) : NULL;
    if (!c) return 0;
    int failed = 0; /* a thread without its decode buffer: vertex 0, a valid (worse) start */
    /* Column sums per block of rows (OpenMP), then added in block order: the result does not
     * depend on the thread count. Falls back to one pass when the partial sums do not fit. */
    const int64_t B = n < 64 ? 1 : 64, rows = (n + B - 1) / B;
    double* part = calloc((size_t)(B * d), sizeof(double));
    if (part) {
#pragma omp parallel reduction(| : failed)
        {
            float* buf = codes ? malloc((size_t)d * sizeof(float)) : NULL;
            failed |= codes && !buf;
#pragma omp for schedule(static)
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = b * rows; (!codes || buf) && i < n && i < (b + 1) * rows; i++) {
                    const float* r = graft_build_row(v, d, i, buf);
                    for (int64_t j = 0; j < d; j++) part[b * d + j] += r[j];
                }
            free(buf);
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < d; j++) c[j] += part[b * d + j];
        free(part);
    } else {
        float* buf = codes ? malloc((size_t)d * sizeof(float)) : NULL;
        failed = codes && !buf;
        for (int64_t i = 0; !failed && i < n; i++) {
            const float* r = graft_build_row(v, d, i, buf);
            for (int64_t j = 0; j < d; j++) c[j] += r[j];
        }
        free(buf);
    }
    for (int64_t j = 0; j < d; j++) c[j] /= (double)n;
    int64_t entry = 0;
    double best = INFINITY;
#pragma omp parallel reduction(| : failed)
    {
        float* buf = codes ? malloc((size_t)d * sizeof(float)) : NULL;
        failed |= codes && !buf;
        int64_t e = 0;
        double b = INFINITY;
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; i++) {
            if (codes && !buf) continue;
            const float* r = graft_build_row(v, d, i, buf);
            double s = 0;
            for (int64_t j = 0; j < d; j++) s += (r[j] - c[j]) * (r[j] - c[j]);
            if (s < b) b = s, e = i;
        }
        free(buf);
#pragma omp critical
        if (b < best || (b == best && e < entry)) best = b, entry = e;
    }
    free(c);
    return failed ? 0 : entry;
}

int64_t graft_graph_entry_point(const float* x, int64_t n, int64_t d) {
    const graft_build_vectors v = {.x = x};
    return graft_graph_entry_point_of(&v, n, d);
}

/* What the walk reads a vertex's distance from: the FP32 vectors (st NULL or FP32) or the codes
 * of a compressed storage, decoded into buf (d floats) first, so that the distance is the one of
 * FAISS's decoded vector. */
typedef struct walk_store {
    const float* x;
    const graft_storage* st;
    const uint8_t* codes;
    size_t code_size;
    float* buf;
} walk_store;

static inline float walk_dist(const walk_store* w, const float* q, int32_t u, int64_t d, int l2) {
    if (!w->codes) return graft_vec_dist(q, w->x + (int64_t)u * d, d, l2);
    graft_storage_decode(w->st, 1, w->codes + (size_t)u * w->code_size, w->buf);
    return graft_vec_dist(q, w->buf, d, l2);
}

/* Appends v to one of a trace's arrays (graft_walk_trace; NULL: no trace); past a failed
 * allocation it only marks the trace. */
static void trace_push(graft_walk_trace* tr, int row, int32_t v) {
    if (!tr || tr->out_of_memory) return;
    int32_t** a = row ? &tr->rows : &tr->vecs;
    int64_t* n = row ? &tr->nrows : &tr->nvecs;
    int64_t* cap = row ? &tr->cap_rows : &tr->cap_vecs;
    if (*n == *cap) {
        const int64_t c = *cap ? 2 * *cap : 256;
        int32_t* b = realloc(*a, (size_t)c * sizeof(int32_t));
        if (!b) {
            tr->out_of_memory = 1;
            return;
        }
        *a = b, *cap = c;
    }
    (*a)[(*n)++] = v;
}

/* One walk of a query from the nstart vertices of start (the entry vertex; the multi mode's
 * other walks, their seeds). The worklist (the L best vertices seen, sorted by (distance, id))
 * doubles as the beam: each iteration expands its best `probes` unexpanded entries, and the
 * search ends when all are expanded (NSG's and SONG's 3.1 search). With a filter, `res` keeps
 * the k best allowed vertices seen. Returns the worklist size; *nres gets the result list's. */
static int search_one(const graft_graph* g, const walk_store* w, int64_t d, int l2, const float* q,
                      const int32_t* start, int nstart, int L, int probes, const uint8_t* allowed,
                      int k, cand* list, cand* res, int* nres, uint32_t* seen, uint32_t stamp,
                      int64_t* steps, int64_t* dists, graft_walk_trace* tr) {
    int size = 0, computed = 0, expansions = 0;
    *nres = 0;
    for (int i = 0; i < nstart; i++) {
        const int32_t u = start[i];
        if (seen[u] == stamp) continue;
        seen[u] = stamp;
        const float du = walk_dist(w, q, u, d, l2);
        computed++;
        trace_push(tr, 0, u);
        if (allowed && is_allowed(allowed, u)) list_insert(res, nres, k, du, u);
        list_insert(list, &size, L, du, u);
    }
    int32_t sel[8];
    for (;; expansions++) {
        int ns = 0;
        for (int i = 0; i < size && ns < probes; i++)
            if (!list[i].expanded) {
                list[i].expanded = 1;
                sel[ns++] = list[i].id;
                trace_push(tr, 1, list[i].id);
            }
        if (ns == 0) break;
        for (int s = 0; s < ns; s++) {
            const int32_t* row = g->nbrs + (int64_t)sel[s] * g->R;
            for (int j = 0; j < g->R; j++) {
                int32_t u = row[j];
                if (u < 0 || u >= g->n || seen[u] == stamp) continue;
                seen[u] = stamp;
                float du = walk_dist(w, q, u, d, l2);
                computed++;
                trace_push(tr, 0, u);
                if (allowed && is_allowed(allowed, u)) list_insert(res, nres, k, du, u);
                list_insert(list, &size, L, du, u);
            }
        }
    }
    *steps += expansions, *dists += computed;
    return size;
}

int graft_graph_walk_traced(const graft_graph* g, const float* x, int64_t d, graft_metric metric, const float* q,
                            int L, int probes, uint32_t* seen, uint32_t stamp, graft_walk_trace* tr) {
    if (L < 1 || probes < 1 || probes > 8)  /* search_one's selection holds 8 */
        return graft_fail(GRAFT_EINVAL, "graft_graph_walk_traced: L = %d, probes = %d (1..8)", L, probes);
    cand* list = malloc((size_t)L * sizeof(cand));
    if (!list) return graft_fail(GRAFT_ENOMEM, "graft_graph_walk_traced: out of host memory");
    const walk_store w = {x, NULL, NULL, 0, NULL};
    const int32_t start = (int32_t)g->entry;
    int nres = 0;
    int64_t steps = 0, dists = 0;
    search_one(g, &w, d, metric == GRAFT_METRIC_L2, q, &start, 1, L, probes, NULL, 0, list, NULL, &nres, seen,
               stamp, &steps, &dists, tr);
    free(list);
    return tr->out_of_memory ? graft_fail(GRAFT_ENOMEM, "graft_graph_walk_traced: out of host memory") : GRAFT_OK;
}

void graft_walk_trace_free(graft_walk_trace* tr) {
    if (!tr) return;
    free(tr->rows);
    free(tr->vecs);
    *tr = (graft_walk_trace){0};
}

static int cand_cmp(const void* a, const void* b) {
    const cand* x = a;
    const cand* y = b;
    return cand_less(x->d, x->id, *y) ? -1 : cand_less(y->d, y->id, *x) ? 1 : 0;
}

/* The query's hash the multi mode's starts come from (graft_gpu.h's graft_walk_seed). */
static uint64_t query_hash(const float* q, int64_t d) {
    uint64_t h = 0;
    for (int64_t j = 0; j < d; j++) {
        uint32_t bits;
        memcpy(&bits, q + j, 4);
        h += graft_mix64((uint64_t)j << 32 | bits);
    }
    return h;
}

/* Walk `walk`'s starts: the entry for walk 0, else min(L, GRAFT_WALK_SEEDS) vertices from the
 * query's hash h. Returns their count. */
static int walk_starts(const graft_graph* g, uint64_t h, int walk, int L, int32_t* start) {
    if (walk == 0) {
        start[0] = (int32_t)g->entry;
        return 1;
    }
    const int ns = L < GRAFT_WALK_SEEDS ? L : GRAFT_WALK_SEEDS;
    for (int j = 0; j < ns; j++) start[j] = (int32_t)graft_walk_seed(h, walk, j, g->n);
    return ns;
}

/* Exact re-ranking (BANG's last step): the first nr entries of a list sorted by code distance get
 * their FP32 distances and are sorted again by (distance, id). */
static void rerank_list(cand* a, int nr, const float* x, int64_t d, int l2, const float* q) {
    for (int i = 0; i < nr; i++) a[i].d = graft_vec_dist(q, x + (int64_t)a[i].id * d, d, l2);
    qsort(a, (size_t)nr, sizeof *a, cand_cmp);
}

void graft_search_params_defaults(graft_search_params* p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->L = 64;
    p->probes = 1;
    p->visited = GRAFT_VISITED_HASH;
    p->merge = GRAFT_MERGE_SORT;
    p->bloom_log2 = 17;
    p->allowed = NULL;
    p->device = 0;
    p->memory_budget = 0;
    p->filter_exact_below = -1.0;
    p->rerank = 0;
}

int graft_check_search_params(const graft_search_params* p, int64_t k, int gpu, const char* fn) {
    if (p->L < k || p->L > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: worklist size L=%d must be in [k, 1024] (k=%lld)", fn,
                          p->L, (long long)k);
    if (p->probes < 1 || p->probes > 8)
        return graft_fail(GRAFT_EINVAL, "%s: probes=%d must be in 1..8", fn, p->probes);
    if (gpu && (p->visited != GRAFT_VISITED_HASH && p->visited != GRAFT_VISITED_BLOOM))
        return graft_fail(GRAFT_EINVAL, "%s: unknown visited-set kind %d (GRAFT_VISITED_HASH or "
                          "GRAFT_VISITED_BLOOM)", fn, p->visited);
    if (gpu && (p->merge != GRAFT_MERGE_SORT && p->merge != GRAFT_MERGE_INSERT))
        return graft_fail(GRAFT_EINVAL, "%s: unknown merge kind %d (GRAFT_MERGE_SORT or "
                          "GRAFT_MERGE_INSERT)", fn, p->merge);
    if (gpu && (p->bloom_log2 < 10 || p->bloom_log2 > 24))
        return graft_fail(GRAFT_EINVAL, "%s: bloom_log2=%d must be in 10..24", fn, p->bloom_log2);
    if (p->mode < GRAFT_SEARCH_AUTO || p->mode > GRAFT_SEARCH_MULTI)
        return graft_fail(GRAFT_EINVAL, "%s: search_mode=%d must be 0 (auto), 1 (single) or 2 "
                          "(multi)", fn, p->mode);
    if (p->walks != 0 && (p->walks < 2 || p->walks > 64 || (int64_t)p->walks * k > 4096))
        return graft_fail(GRAFT_EINVAL, "%s: walks=%d must be 0 (auto) or in 2..64 with walks x k "
                          "<= 4096 (k=%lld)", fn, p->walks, (long long)k);
    if (!(p->filter_exact_below <= 1.0)) /* NaN included */
        return graft_fail(GRAFT_EINVAL, "%s: filter_exact_below=%g must be < 0 (cost model) or in "
                          "[0, 1]", fn, p->filter_exact_below);
    if (p->rerank < 0 || (p->rerank > 0 && p->rerank < k))
        return graft_fail(GRAFT_EINVAL, "%s: rerank=%d must be 0 (the whole worklist) or >= k = "
                          "%lld", fn, p->rerank, (long long)k);
    return GRAFT_OK;
}

/* The argument checks every graph search shares (CPU and GPU). */
int graft_check_search_args(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                            const float* xq, int64_t nq, int64_t k, const graft_search_params* p,
                            const float* D, const int64_t* I, int gpu, const char* fn) {
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!x || (!xq && nq > 0) || !D || !I)
        return graft_fail(GRAFT_EINVAL, "%s: NULL pointer argument", fn);
    if (d < 1 || nq < 0 || k < 1)
        return graft_fail(GRAFT_EINVAL, "%s: bad sizes d=%lld nq=%lld k=%lld", fn, (long long)d,
                          (long long)nq, (long long)k);
    GRAFT_TRY(graft_check_search_params(p, k, gpu, fn));
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)metric);
    return GRAFT_OK;
}

int graft_graph_search_cpu_ex(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                              const float* xq, int64_t nq, int64_t k,
                              const graft_search_params* params, float* D, int64_t* I) {
    return graft_graph_search_cpu_report(g, x, d, metric, xq, nq, k, params, D, I, NULL);
}

int graft_graph_search_cpu_report(const graft_graph* g, const float* x, int64_t d,
                                  graft_metric metric, const float* xq, int64_t nq, int64_t k,
                                  const graft_search_params* params, float* D, int64_t* I,
                                  graft_search_report* report) {
    graft_search_params p;
    if (params)
        p = *params;
    else
        graft_search_params_defaults(&p);
    GRAFT_TRY(graft_check_search_args(g, x, d, metric, xq, nq, k, &p, D, I, 0, "graft_graph_search_cpu"));
    return graft_graph_search_cpu_store(g, x, NULL, NULL, d, metric, xq, nq, k, &p, D, I, report);
}

int graft_graph_search_cpu_store(const graft_graph* g, const float* x, const graft_storage* st,
                                 const uint8_t* codes, int64_t d, graft_metric metric,
                                 const float* xq, int64_t nq, int64_t k,
                                 const graft_search_params* params, float* D, int64_t* I,
                                 graft_search_report* report) {
    /* Trusts its arguments (graft_graph_search_cpu_ex and graft_gindex_search checked them) but the
     * queries' values, which each walk checks where it reads them. */
    if (report) memset(report, 0, sizeof *report);
    const graft_search_params p = *params;
    GRAFT_TRY(graft_check_finite(xq, nq, d, "graft_graph_search_cpu"));
    if (st && st->kind == GRAFT_STORAGE_FP32) codes = NULL;
    const int l2 = metric == GRAFT_METRIC_L2, L = p.L;
    /* The multi mode (graft/graph.h): W walks a query, each walk's k best merged. The CPU has no
     * wave to fill: auto is one walk, and multi's walks = 0 is two. */
    const int W = p.mode == GRAFT_SEARCH_MULTI ? (p.walks ? p.walks : 2) : 1;
    int failed = 0;
    int64_t steps = 0, dists = 0;
#pragma omp parallel reduction(+ : steps, dists)
    {
        cand* list = malloc((size_t)(L + k + (W > 1 ? W * k : 0)) * sizeof(cand));
        cand* merged = list + L + k; /* W > 1: the walks' k best */
        uint32_t* seen = calloc((size_t)g->n, sizeof(uint32_t));
        walk_store w = {x, st, codes, codes ? graft_storage_code_size(st->kind, d) : 0,
                        codes ? malloc((size_t)d * sizeof(float)) : NULL};
        uint32_t stamp = 0;
        const int ok = list && seen && (!codes || w.buf);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 8)
        for (int64_t q = 0; q < nq; q++) {
            if (!ok) continue;
            if (++stamp == 0) { /* visited stamps wrapped: start a clean table */
                memset(seen, 0, (size_t)g->n * sizeof(uint32_t));
                stamp = 1;
            }
            const float* qv = xq + q * d;
            cand* out = NULL;
            int found = 0, nm = 0;
            const uint64_t h = W > 1 ? query_hash(qv, d) : 0;
            for (int walk = 0; walk < W; walk++) {
                if (walk > 0 && ++stamp == 0) { /* each walk its own visited set */
                    memset(seen, 0, (size_t)g->n * sizeof(uint32_t));
                    stamp = 1;
                }
                int32_t start[GRAFT_WALK_SEEDS];
                const int nstart = walk_starts(g, h, walk, L, start);
                int nres = 0;
                const int size = search_one(g, &w, d, l2, qv, start, nstart, L, p.probes, p.allowed,
                                            (int)k, list, list + L, &nres, seen, stamp, &steps,
                                            &dists, NULL);
                out = p.allowed ? list + L : list;
                found = p.allowed ? nres : size;
                if (codes && x) { /* x NULL: codes only (keep_fp32 = 0), no re-rank */
                    const int nr = p.allowed || p.rerank == 0 || p.rerank > found ? found : p.rerank;
                    rerank_list(out, nr, x, d, l2, qv);
                }
                for (int j = 0; W > 1 && j < found && j < k; j++) merged[nm++] = out[j];
            }
            if (W > 1) { /* the walks' k best, best first, each vertex once */
                qsort(merged, (size_t)nm, sizeof *merged, cand_cmp);
                found = 0;
                for (int i = 0; i < nm && found < k; i++) {
                    int taken = 0;
                    for (int j = 0; j < found && !taken; j++) taken = merged[j].id == merged[i].id;
                    if (!taken) merged[found++] = merged[i];
                }
                out = merged;
            }
            for (int64_t j = 0; j < k; j++) {
                D[q * k + j] = j < found ? (l2 ? out[j].d : -out[j].d) : (l2 ? FLT_MAX : -FLT_MAX);
                I[q * k + j] = j < found ? out[j].id : -1;
            }
        }
        free(list);
        free(seen);
        free(w.buf);
    }
    if (failed) return graft_fail(GRAFT_ENOMEM, "graft_graph_search_cpu: out of host memory");
    if (report) report->iterations = steps, report->distances = dists;
    return GRAFT_OK;
}

int graft_graph_search_cpu(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                           const float* xq, int64_t nq, int64_t k, int L, float* D, int64_t* I) {
    graft_search_params p;
    graft_search_params_defaults(&p);
    p.L = L;
    return graft_graph_search_cpu_ex(g, x, d, metric, xq, nq, k, &p, D, I);
}

int graft_graph_stats(const graft_graph* g, double* mean_degree, int* max_degree, int64_t* n_at_R,
                      double* reachable_fraction) {
    GRAFT_TRY(graft_check_graph(g, "graft_graph_stats"));
    const int64_t n = g->n;
    int64_t edges = 0, full = 0;
    int maxd = 0;
    for (int64_t v = 0; v < n; v++) {
        int deg = 0;
        for (int j = 0; j < g->R; j++) {
            const int32_t u = g->nbrs[v * g->R + j];
            deg += u >= 0 && u < n;
        }
        edges += deg;
        full += deg == g->R;
        if (deg > maxd) maxd = deg;
    }
    if (reachable_fraction) {
        int32_t* queue = malloc((size_t)n * sizeof(int32_t));
        uint8_t* seen = calloc((size_t)n, 1);
        if (!queue || !seen) {
            free(queue);
            free(seen);
            return graft_fail(GRAFT_ENOMEM, "graft_graph_stats: out of host memory");
        }
        int64_t head = 0, tail = 0;
        queue[tail++] = (int32_t)g->entry;
        seen[g->entry] = 1;
        while (head < tail) {
            const int32_t* row = g->nbrs + (int64_t)queue[head++] * g->R;
            for (int j = 0; j < g->R; j++)
                if (row[j] >= 0 && row[j] < n && !seen[row[j]]) {
                    seen[row[j]] = 1;
                    queue[tail++] = row[j];
                }
        }
        *reachable_fraction = (double)tail / (double)n;
        free(queue);
        free(seen);
    }
    if (mean_degree) *mean_degree = (double)edges / (double)n;
    if (max_degree) *max_degree = maxd;
    if (n_at_R) *n_at_R = full;
    return GRAFT_OK;
}

double graft_graph_knn_recall(const graft_graph* g, const int64_t* knn_I, int64_t knn_k, int k) {
    if (graft_check_graph(g, "graft_graph_knn_recall") != GRAFT_OK) return -1.0;
    if (!knn_I || k < 1 || k > knn_k) {
        graft_fail(GRAFT_EINVAL, "graft_graph_knn_recall: NULL knn_I or bad k=%d (knn_k=%lld)", k,
                   (long long)knn_k);
        return -1.0;
    }
    int64_t hits = 0, valid = 0;
#pragma omp parallel for reduction(+ : hits, valid) schedule(static)
    for (int64_t v = 0; v < g->n; v++) {
        const int32_t* row = g->nbrs + v * g->R;
        for (int i = 0; i < k; i++) {
            int64_t t = knn_I[v * knn_k + i];
            if (t < 0) continue;
            valid++;
            for (int j = 0; j < g->R; j++)
                if (row[j] == t) {
                    hits++;
                    break;
                }
        }
    }
    return valid ? (double)hits / (double)valid : 1.0;
}
