/* BANG search, CPU reference (graft/bang.h): best-first search on asymmetric PQ distances, exact
 * re-ranking of the expanded vertices. The oracle of the GPU pipeline (gpu/bang_search.cu). */
#include "graft/bang.h"

#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "graph/bang_gpu.h"
#include "core/error.h"
#include "core/validate.h"
#include "core/vec_dist.h"
#include "graph/worklist.h"

#define MAX_EXPAND_CAP 8192

void graft_bang_params_defaults(graft_bang_params* p) { graft_search_params_defaults(p); }

int graft_bang_max_expand(const graft_bang_params* p) {
    return p->max_expand ? p->max_expand : 2 * p->L + 64;
}

int graft_bang_check_params(const graft_bang_params* p, int64_t k, int gpu, const char* fn) {
    if (!p) return graft_fail(GRAFT_EINVAL, "%s: NULL parameters", fn);
    /* k itself was checked where the search entered the core (graft_bang_check_args,
     * graft_check_search_call). */
    if (p->L < k || p->L > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: worklist size L=%d must be in [k, 1024] (k=%lld)", fn,
                          p->L, (long long)k);
    if (p->rerank < 0 || (p->rerank > 0 && p->rerank < k))
        return graft_fail(GRAFT_EINVAL, "%s: re-rank depth %d must be 0 (every expanded vertex) or "
                          ">= k = %lld", fn, p->rerank, (long long)k);
    if (p->max_expand != 0 && (p->max_expand < p->L || p->max_expand > MAX_EXPAND_CAP))
        return graft_fail(GRAFT_EINVAL, "%s: max_expand=%d must be 0 (2 L + 64) or in [L, %d] (L=%d)",
                          fn, p->max_expand, MAX_EXPAND_CAP, p->L);
    if (p->threads < 0) return graft_fail(GRAFT_EINVAL, "%s: threads=%d < 0", fn, p->threads);
    if (!(p->filter_exact_below <= 1.0)) /* NaN included */
        return graft_fail(GRAFT_EINVAL, "%s: filter_exact_below=%g must be < 0 (cost model) or in "
                          "[0, 1]", fn, p->filter_exact_below);
    if (gpu && (p->bloom_log2 < 10 || p->bloom_log2 > 24))
        return graft_fail(GRAFT_EINVAL, "%s: bloom_log2=%d must be in 10..24", fn, p->bloom_log2);
    return GRAFT_OK;
}

int graft_bang_check_args(const graft_graph* g, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* p, const float* D,
                          const int64_t* I, int gpu, const char* fn) {
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!pq || !codes || !x || (!xq && nq > 0) || !D || !I)
        return graft_fail(GRAFT_EINVAL, "%s: NULL pointer argument", fn);
    if (pq->d != d || pq->M < 1 || !pq->centroids)
        return graft_fail(GRAFT_EINVAL, "%s: codebooks of dimension %lld (M=%d) for vectors of "
                          "dimension %lld", fn, (long long)pq->d, pq->M, (long long)d);
    if (d < 1 || nq < 0 || k < 1)
        return graft_fail(GRAFT_EINVAL, "%s: bad sizes d=%lld nq=%lld k=%lld", fn, (long long)d,
                          (long long)nq, (long long)k);
    if (pq->dsub < 1 || (int64_t)pq->M * pq->dsub != d)
        return graft_fail(GRAFT_EINVAL, "%s: malformed codebooks (d=%lld M=%d dsub=%d)", fn,
                          (long long)pq->d, pq->M, pq->dsub);
    GRAFT_TRY(graft_bang_check_params(p, k, gpu, fn));
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)metric);
    return GRAFT_OK;
}

/* Asymmetric distance of one code: the table entries summed in sub-space order. */
static float adc(const float* table, const uint8_t* code, int M) {
    float s = 0;
    for (int m = 0; m < M; m++) s += table[m * GRAFT_PQ_KSUB + code[m]];
    return s;
}

static int cand_cmp(const void* a, const void* b) {
    const cand *x = a, *y = b;
    return cand_less(x->d, x->id, *y) ? -1 : cand_less(y->d, y->id, *x) ? 1 : 0;
}

/* Per-thread buffers of one search. */
typedef struct {
    float* table; /* M x 256 */
    cand* list;   /* L: worklist */
    cand* exp;    /* E: expanded vertices (the re-rank candidates) */
    cand* res;    /* k: results */
    uint32_t* seen;
    uint32_t stamp;
} scratch;

/* One query: steps 1-4 of graft/bang.h. Returns the number of results in s->res. */
static int search_one(const graft_graph* g, const graft_pq* pq, const uint8_t* codes,
                      const float* x, int64_t d, int l2, const float* q, int k, int L, int E,
                      int rerank, const uint8_t* allowed, scratch* s) {
    const int M = pq->M;
    graft_pq_table(pq, q, l2, s->table);
    const int32_t e = (int32_t)g->entry;
    int size = 1, nexp = 0;
    s->list[0] = (cand){adc(s->table, codes + (int64_t)e * M, M), e, 0};
    s->seen[e] = s->stamp;
    while (nexp < E) {
        int i = 0;
        while (i < size && s->list[i].expanded) i++;
        if (i == size) break;
        s->list[i].expanded = 1;
        s->exp[nexp++] = s->list[i];
        const int32_t* row = g->nbrs + (int64_t)s->list[i].id * g->R;
        for (int j = 0; j < g->R; j++) {
            const int32_t v = row[j];
            if (v < 0 || v >= g->n || s->seen[v] == s->stamp) continue;
            s->seen[v] = s->stamp;
            list_insert(s->list, &size, L, adc(s->table, codes + (int64_t)v * M, M), v);
        }
    }
    int r = nexp;
    if (rerank > 0 && rerank < nexp) {
        qsort(s->exp, (size_t)nexp, sizeof(cand), cand_cmp);
        r = rerank;
    }
    int nres = 0;
    for (int i = 0; i < r; i++) {
        const int32_t v = s->exp[i].id;
        if (is_allowed(allowed, v))
            list_insert(s->res, &nres, k, graft_vec_dist(q, x + (int64_t)v * d, d, l2), v);
    }
    return nres;
}

int graft_bang_search_cpu(const graft_graph* g, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params, float* D,
                          int64_t* I) {
    const char* fn = "graft_bang_search_cpu";
    graft_bang_params p;
    if (params)
        p = *params;
    else
        graft_bang_params_defaults(&p);
    GRAFT_TRY(graft_bang_check_args(g, pq, codes, x, d, metric, xq, nq, k, &p, D, I, 0, fn));
    return graft_bang_search_cpu_unchecked(g, pq, codes, x, d, metric, xq, nq, k, &p, D, I);
}

int graft_bang_search_cpu_unchecked(const graft_graph* g, const graft_pq* pq, const uint8_t* codes,
                                    const float* x, int64_t d, graft_metric metric, const float* xq,
                                    int64_t nq, int64_t k, const graft_bang_params* params, float* D,
                                    int64_t* I) {
    const char* fn = "graft_bang_search_cpu";
    const graft_bang_params p = *params;
    GRAFT_TRY(graft_check_finite(xq, nq, d, fn)); /* where the queries are read */
    const int l2 = metric == GRAFT_METRIC_L2, L = p.L, E = graft_bang_max_expand(&p);
    int failed = 0;
#pragma omp parallel
    {
        scratch s = {malloc((size_t)pq->M * GRAFT_PQ_KSUB * sizeof(float)),
                     malloc((size_t)L * sizeof(cand)), malloc((size_t)E * sizeof(cand)),
                     malloc((size_t)k * sizeof(cand)), calloc((size_t)g->n, sizeof(uint32_t)), 0};
        const int ok = s.table && s.list && s.exp && s.res && s.seen;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 8)
        for (int64_t i = 0; i < nq; i++) {
            if (!ok) continue;
            if (++s.stamp == 0) { /* visited stamps wrapped: start a clean table */
                memset(s.seen, 0, (size_t)g->n * sizeof(uint32_t));
                s.stamp = 1;
            }
            const int found = search_one(g, pq, codes, x, d, l2, xq + i * d, (int)k, L, E,
                                         p.rerank, p.allowed, &s);
            for (int64_t j = 0; j < k; j++) {
                D[i * k + j] = j < found ? (l2 ? s.res[j].d : -s.res[j].d) : (l2 ? FLT_MAX : -FLT_MAX);
                I[i * k + j] = j < found ? s.res[j].id : -1;
            }
        }
        free(s.table);
        free(s.list);
        free(s.exp);
        free(s.res);
        free(s.seen);
    }
    if (failed) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    return GRAFT_OK;
}
