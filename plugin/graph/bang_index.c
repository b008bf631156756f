/* The graph + PQ index (graft/bang_index.h): host copies of the vectors, codes and graph (I/O,
 * reconstruct, CPU search, out-of-core gathering) and, on a GPU, the device data of the chosen
 * mode (plugin/graph/bang_gpu.h). Also its GRFTBANG record. */
#define _POSIX_C_SOURCE 200809L
#include "graft/bang_index.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "graph/bang_gpu.h"
#include "core/error.h"
#include "core/index_common.h"
#include "io/io_stream.h"
#include "core/validate.h"
#include "graph/filtered_search.h"

#define HEADER_V1 88u /* bytes of the version-1 record header, magic included */

struct graft_bindex {
    int64_t d, ntotal, capacity;
    graft_bindex_params p; /* metric and device copied into p.build and p.search (tie_params) */
    graft_pq pq;           /* centroids NULL until trained */
    float* xb;             /* capacity x d */
    uint8_t* codes;        /* capacity x M */
    graft_graph graph;     /* ntotal rows; nbrs NULL while ntotal == 0 */
    double build_seconds;
    graft_pieces_report build_rep; /* of the last build (graft_index_build_graph); pieces -1: none */
    /* GPU state; `lock` serializes GPU work so that concurrent searches are safe. */
    pthread_mutex_t lock;
    graft_gpu_ctx* ctx;
    graft_bang_dev dev;
    int on_device;         /* dev holds the current contents */
    graft_bang_mode dev_mode;
    graft_filter_dev fdev;           /* the filtered search's exact path (device buffers) */
    graft_filter_report last_filter; /* of the last successful search */
};

static void tie_params(graft_bindex_params* p) {
    p->build.base.metric = p->metric;
    p->build.device = p->device;
    p->search.device = p->device;
}

void graft_bindex_params_defaults(graft_bindex_params* p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->metric = GRAFT_METRIC_L2;
    p->device = graft_gpu_available() ? 0 : -1;
    p->mode = GRAFT_BANG_AUTO;
    p->gpu_budget = 0;
    graft_pq_params_defaults(&p->pq);
    graft_grnnd_params_defaults(&p->build);
    graft_bang_params_defaults(&p->search);
    tie_params(p);
}

/* Default search parameters: a search's with k = 1, the GPU-only fields included (they are
 * written to files a GPU index may read), no filter (a bitmap cannot outlive the next add). */
static int check_default_search(const graft_bang_params* s, const char* fn) {
    GRAFT_TRY(graft_bang_check_params(s, 1, 1, fn));
    if (s->allowed)
        return graft_fail(GRAFT_EINVAL, "%s: a default filter (allowed) is not kept; pass it to "
                          "each search", fn);
    return GRAFT_OK;
}

static int check_mode(graft_bang_mode mode, const char* fn) {
    if (mode != GRAFT_BANG_AUTO && mode != GRAFT_BANG_IN_MEMORY && mode != GRAFT_BANG_OUT_OF_CORE)
        return graft_fail(GRAFT_EINVAL, "%s: unknown mode %d (GRAFT_BANG_AUTO, GRAFT_BANG_IN_MEMORY "
                          "or GRAFT_BANG_OUT_OF_CORE)", fn, (int)mode);
    return GRAFT_OK;
}

int graft_bindex_new(int64_t d, const graft_bindex_params* params, graft_bindex** out) {
    const char* fn = "graft_bindex_new";
    if (!out) return graft_fail(GRAFT_EINVAL, "%s: out is NULL", fn);
    if (d < 1 || d > (1 << 20))
        return graft_fail(GRAFT_EINVAL, "%s: dimension %lld out of range [1, 2^20]", fn, (long long)d);
    graft_bindex_params p;
    graft_bindex_params_defaults(&p);
    if (params) p = *params;
    if (p.metric != GRAFT_METRIC_L2 && p.metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)p.metric);
    if (p.device < -1)
        return graft_fail(GRAFT_EINVAL, "%s: device %d (-1 for the CPU, or a CUDA device >= 0)", fn,
                          p.device);
    GRAFT_TRY(check_mode(p.mode, fn));
    if (p.pq.M == 0) p.pq.M = graft_pq_default_M(d);
    if (p.pq.M < 1 || p.pq.M > d || d % p.pq.M)
        return graft_fail(GRAFT_EINVAL, "%s: M = %d sub-quantizers must divide the dimension d = %lld "
                          "(e.g. M = %d)", fn, p.pq.M, (long long)d, graft_pq_default_M(d));
    tie_params(&p);
    GRAFT_TRY(graft_check_build_params(&p.build, p.device >= 0, fn));
    GRAFT_TRY(check_default_search(&p.search, fn));
    graft_bindex* g = calloc(1, sizeof *g);
    if (!g) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    g->d = d;
    g->p = p;
    g->build_rep = (graft_pieces_report){.pieces = -1};
    pthread_mutex_init(&g->lock, NULL);
    if (p.device >= 0) {
        int rc = graft_gpu_ctx_create(p.device, graft_index_scratch_cap(p.device), &g->ctx);
        if (rc != GRAFT_OK) {
            rc = graft_fail(rc, "%s: device %d: %s", fn, p.device, graft_gpu_last_error());
            graft_bindex_free(g);
            return rc;
        }
    }
    *out = g;
    return GRAFT_OK;
}

static void drop_device(graft_bindex* g) {
    if (g->on_device) graft_bang_dev_release(&g->dev);
    g->on_device = 0;
}

void graft_bindex_free(graft_bindex* g) {
    if (!g) return;
    drop_device(g);
    graft_graph_free(&g->graph);
    graft_pq_free(&g->pq);
    graft_filter_dev_release(g->ctx, &g->fdev);
    if (g->ctx) graft_gpu_ctx_destroy(g->ctx);
    pthread_mutex_destroy(&g->lock);
    free(g->xb);
    free(g->codes);
    free(g);
}

/* A budget argument: 0 means the default, half the device (not the index's stored budget, which
 * callers pass themselves when they mean it). */
static size_t gpu_budget(const graft_bindex* g, size_t budget) {
    return budget ? budget : graft_gpu_device_memory(g->p.device) / 2;
}

/* The mode for n vectors with a graph of degree R under (mode, budget). */
static graft_bang_mode resolve_mode(const graft_bindex* g, graft_bang_mode mode, size_t budget,
                                    int64_t n, int R) {
    if (!g->ctx) return GRAFT_BANG_AUTO;
    if (mode != GRAFT_BANG_AUTO) return mode;
    budget = gpu_budget(g, budget);
    return graft_bang_dev_resident_bytes(n, g->d, R, g->pq.M, 1) <= budget ? GRAFT_BANG_IN_MEMORY
                                                                          : GRAFT_BANG_OUT_OF_CORE;
}

/* Uploads the contents (graph over n vectors xb with codes) in `mode` under `budget` into *dev.
 * On failure nothing is held. */
static int upload(graft_bindex* g, const graft_graph* graph, const float* xb, const uint8_t* codes,
                  graft_bang_mode mode, size_t budget, graft_bang_dev* dev, const char* fn) {
    budget = gpu_budget(g, budget);
    const int in_memory = mode == GRAFT_BANG_IN_MEMORY;
    const size_t need = graft_bang_dev_resident_bytes(graph->n, g->d, graph->R, g->pq.M, in_memory);
    if (need > budget)
        return graft_fail(GRAFT_EGPU_NOMEM, "%s%s mode keeps %zu bytes on the GPU, over the index's "
                          "GPU budget of %zu bytes%s", fn, in_memory ? "in-memory" : "out-of-core",
                          need, budget, in_memory ? " (out-of-core mode keeps only the codes)" : "");
    int rc = graft_bang_dev_upload(g->ctx, graph, &g->pq, codes, xb, g->d, g->p.metric, in_memory, dev);
    return rc == GRAFT_OK ? GRAFT_OK : graft_relabel(rc, fn);
}

/* Makes graph (over the first n vectors of xb, codes) the index's contents: uploads the device
 * data of the resolved mode, then releases the previous graph. On failure the index is unchanged
 * and graph stays the caller's. */
static int install(graft_bindex* g, int64_t n, graft_graph* graph, const char* fn) {
    graft_bang_dev dev;
    const graft_bang_mode mode = resolve_mode(g, g->p.mode, g->p.gpu_budget, n, graph->R);
    if (g->ctx) GRAFT_TRY(upload(g, graph, g->xb, g->codes, mode, g->p.gpu_budget, &dev, fn));
    drop_device(g);
    graft_graph_free(&g->graph);
    g->graph = *graph;
    memset(graph, 0, sizeof *graph);
    if (g->ctx) {
        g->dev = dev;
        g->on_device = 1;
        g->dev_mode = mode;
    }
    g->ntotal = n;
    return GRAFT_OK;
}

/* The codes of n vectors: on the index's GPU (the same codes as the CPU's; test_gpu_bang times
 * both), on the CPU without one or when the GPU is short of memory. */
static int encode(graft_bindex* g, int64_t n, const float* x, uint8_t* codes, const char* fn) {
    if (g->ctx) {
        const int rc = graft_bang_encode_ctx(g->ctx, &g->pq, n, x, codes, fn);
        if (rc != GRAFT_EGPU_NOMEM) return rc;
    }
    return graft_pq_encode(&g->pq, n, x, codes);
}

/* Room for `need` vectors and codes; the first ntotal of both are kept. */
static int reserve(graft_bindex* g, int64_t need, const char* fn) {
    if (need <= g->capacity) return GRAFT_OK;
    int64_t cap = g->capacity * 2 > need ? g->capacity * 2 : need;
    size_t xbytes, cbytes;
    if (graft_mul_overflow((size_t)cap, (size_t)g->d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)cap, (size_t)g->p.pq.M, &cbytes))
        return graft_fail(GRAFT_ENOMEM, "%s: %lld vectors of dimension %lld overflow", fn,
                          (long long)cap, (long long)g->d);
    float* xb = realloc(g->xb, xbytes);
    if (!xb) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, xbytes);
    g->xb = xb;
    uint8_t* codes = realloc(g->codes, cbytes);
    if (!codes) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, cbytes);
    g->codes = codes;
    g->capacity = cap;
    return GRAFT_OK;
}

static int require_trained(const graft_bindex* g, const char* fn) {
    if (!g->pq.centroids)
        return graft_fail(GRAFT_ESTATE, "%s: the index is not trained; train the PQ codebooks first "
                          "(graft_bindex_train, FAISS's Index::train)", fn);
    return GRAFT_OK;
}

int graft_bindex_train(graft_bindex* g, int64_t n, const float* x) {
    const char* fn = "graft_bindex_train";
    if (!g || (!x && n > 0)) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->lock);
    int rc = GRAFT_OK;
    if (g->ntotal > 0)
        rc = graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors encoded with the current "
                        "codebooks; reset it before training again", fn, (long long)g->ntotal);
    graft_pq pq = {0};
    if (rc == GRAFT_OK) rc = graft_pq_train(g->d, n, x, &g->p.pq, &pq);
    if (rc == GRAFT_OK) {
        graft_pq_free(&g->pq);
        g->pq = pq;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_bindex_set_pq(graft_bindex* g, const graft_pq* pq) {
    const char* fn = "graft_bindex_set_pq";
    if (!g || !pq) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    GRAFT_TRY(graft_pq_check(pq, fn));
    /* M is fixed at creation: the codes buffer is sized by it. */
    if (pq->d != g->d || pq->M != g->p.pq.M)
        return graft_fail(GRAFT_EINVAL, "%s: codebooks of d = %lld, M = %d for an index of d = %lld, "
                          "M = %d", fn, (long long)pq->d, pq->M, (long long)g->d, g->p.pq.M);
    const size_t bytes = (size_t)pq->M * GRAFT_PQ_KSUB * pq->dsub * sizeof(float);
    float* c = malloc(bytes);
    if (!c) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, bytes);
    memcpy(c, pq->centroids, bytes);
    pthread_mutex_lock(&g->lock);
    int rc = GRAFT_OK;
    if (g->ntotal > 0)
        rc = graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors encoded with the current "
                        "codebooks; reset it before installing others", fn, (long long)g->ntotal);
    if (rc == GRAFT_OK) {
        graft_pq_free(&g->pq);
        g->pq = (graft_pq){.d = pq->d, .M = pq->M, .dsub = pq->dsub, .centroids = c};
        c = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    free(c);
    return rc;
}

int graft_bindex_is_trained(const graft_bindex* g) { return g && g->pq.centroids != NULL; }

/* Appends n vectors and their codes. The graph, now over a prefix only, and the device data go:
 * the next search (or graft_bindex_build, or write) builds one graph over everything, so adding
 * in chunks costs one build, not one per chunk. */
static int add_locked(graft_bindex* g, int64_t n, const float* x) {
    GRAFT_TRY(require_trained(g, "graft_bindex_add"));
    const int64_t need = g->ntotal + n;
    if (need > INT32_MAX)
        return graft_fail(GRAFT_EUNSUPPORTED, "graft_bindex_add: %lld vectors; a graph index holds at "
                          "most 2^31 - 1 (int32 neighbour ids)", (long long)need);
    GRAFT_TRY(reserve(g, need, "graft_bindex_add"));
    /* Past ntotal: invisible until the count moves. */
    graft_copy_rows(g->xb + g->ntotal * g->d, x, n, g->d);
    GRAFT_TRY(encode(g, n, x, g->codes + g->ntotal * g->pq.M, "graft_bindex_add: "));
    drop_device(g);
    graft_graph_free(&g->graph);
    g->ntotal = need;
    g->build_seconds = 0;
    g->build_rep = (graft_pieces_report){.pieces = -1};
    return GRAFT_OK;
}

/* Builds the graph over every vector when adds left it pending (GRNND on the GPU, in pieces when
 * its pools do not fit, else RNN-Descent on the CPU). Lock held. A failed build keeps the vectors
 * and codes; the next call tries again. */
static int build_pending(graft_bindex* g, const char* fn) {
    if (g->ntotal == 0 || g->graph.nbrs) return GRAFT_OK;
    graft_graph graph = {0};
    double seconds;
    graft_pieces_report rep;
    const int rc = graft_index_build_graph(g->ctx != NULL, g->xb, g->ntotal, g->d, &g->p.build, &graph,
                                           &seconds, &rep);
    if (rc != GRAFT_OK) return graft_relabel(rc, fn);
    g->graph = graph;
    g->build_seconds = seconds;
    g->build_rep = rep;
    return GRAFT_OK;
}

/* build_pending, then the device data of the resolved mode when the GPU does not hold it (after
 * an add, or a failed upload). Lock held. A failed upload keeps the graph: the next call retries
 * only the upload. */
static int make_ready(graft_bindex* g, const char* fn) {
    GRAFT_TRY(build_pending(g, fn));
    if (!g->ctx || g->ntotal == 0 || g->on_device) return GRAFT_OK;
    const graft_bang_mode mode = resolve_mode(g, g->p.mode, g->p.gpu_budget, g->ntotal, g->graph.R);
    GRAFT_TRY(upload(g, &g->graph, g->xb, g->codes, mode, g->p.gpu_budget, &g->dev, fn));
    g->on_device = 1;
    g->dev_mode = mode;
    return GRAFT_OK;
}

int graft_bindex_build(graft_bindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_bindex_build: NULL index");
    pthread_mutex_lock(&g->lock);
    const int rc = make_ready(g, "graft_bindex_build: ");
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_bindex_add(graft_bindex* g, int64_t n, const float* x) {
    GRAFT_TRY(graft_check_add_args(g != NULL, n, x, g ? g->d : 0, "graft_bindex_add"));
    if (n == 0) return GRAFT_OK;
    pthread_mutex_lock(&g->lock);
    int rc = add_locked(g, n, x);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_bindex_reset(graft_bindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_bindex_reset: NULL index");
    pthread_mutex_lock(&g->lock);
    drop_device(g);
    graft_graph_free(&g->graph);
    g->ntotal = 0;
    g->build_rep = (graft_pieces_report){.pieces = -1};
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

/* Replaces the contents with x (malloc'd n x d, taken), their codes (malloc'd, taken) and graph
 * (taken); all are freed on failure, and the index is then unchanged. Checked by the caller. */
static int adopt_data(graft_bindex* g, int64_t n, float* x, uint8_t* codes, graft_graph* graph,
                      const char* fn) {
    pthread_mutex_lock(&g->lock);
    float* old_x = g->xb;
    uint8_t* old_codes = g->codes;
    const int64_t old_n = g->ntotal, old_cap = g->capacity;
    g->xb = x;
    g->codes = codes;
    int rc = install(g, n, graph, fn);
    if (rc == GRAFT_OK) {
        g->capacity = n;
        g->build_seconds = 0;
        g->build_rep = (graft_pieces_report){.pieces = -1};
        x = old_x;
        codes = old_codes;
    } else {
        g->xb = old_x;
        g->codes = old_codes;
        g->ntotal = old_n;
        g->capacity = old_cap;
        graft_graph_free(graph);
    }
    pthread_mutex_unlock(&g->lock);
    free(x);
    free(codes);
    return rc;
}

int graft_bindex_set_data(graft_bindex* g, int64_t n, const float* x, const graft_graph* graph) {
    const char* fn = "graft_bindex_set_data";
    if (!g) return graft_fail(GRAFT_EINVAL, "%s: NULL index", fn);
    GRAFT_TRY(require_trained(g, fn));
    GRAFT_TRY(graft_check_graph_data(n, g->d, x, graph, g->ctx != NULL, fn));
    const size_t xbytes = (size_t)n * (size_t)g->d * sizeof(float),
                 gbytes = (size_t)n * graph->R * sizeof(int32_t), cbytes = (size_t)n * g->pq.M;
    float* xc = malloc(xbytes);
    uint8_t* codes = malloc(cbytes);
    graft_graph gc = {n, graph->R, malloc(gbytes), graph->entry};
    int rc = GRAFT_OK;
    if (!xc || !codes || !gc.nbrs)
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu + %zu + %zu bytes)", fn, xbytes,
                        gbytes, cbytes);
    if (rc == GRAFT_OK) { /* the GPU encode uses the index's stream, which searches share */
        pthread_mutex_lock(&g->lock);
        rc = encode(g, n, x, codes, fn);
        pthread_mutex_unlock(&g->lock);
    }
    if (rc != GRAFT_OK) {
        free(xc);
        free(codes);
        free(gc.nbrs);
        return rc;
    }
    memcpy(xc, x, xbytes);
    memcpy(gc.nbrs, graph->nbrs, gbytes);
    return adopt_data(g, n, xc, codes, &gc, "graft_bindex_set_data: ");
}

/* The graph search of a filtered search (graft_filter_walk_fn) with beam L: at least L
 * expansions, so that a widened beam is walked. */
typedef struct walk_arg {
    graft_bindex* g;
    const float* xq;
    int64_t nq, k;
    const graft_bang_params* p;
    graft_bang_report* report;
} walk_arg;

static int walk(void* arg, int L, float* D, int64_t* I) {
    const walk_arg* w = arg;
    graft_bindex* g = w->g;
    graft_bang_params p = *w->p;
    p.L = L;
    if (p.max_expand && p.max_expand < L) p.max_expand = L;
    if (g->ctx) return graft_bang_dev_search(&g->dev, g->graph.nbrs, g->xb, w->xq, w->nq, w->k, &p, D, I, w->report);
    return graft_bang_search_cpu(&g->graph, &g->pq, g->codes, g->xb, g->d, g->p.metric, w->xq, w->nq, w->k,
                                 &p, D, I);
}

static int search_locked(graft_bindex* g, int64_t nq, const float* xq, int64_t k,
                         const graft_bang_params* params, float* D, int64_t* I,
                         graft_bang_report* report, const char* fn) {
    graft_bang_params p = params ? *params : g->p.search;
    p.device = g->p.device; /* the index's device decides */
    if (p.L < k) { /* the worklist holds the candidates: at least k wide, and so many expansions */
        p.L = (int)k;
        if (p.max_expand && p.max_expand < p.L) p.max_expand = p.L;
    }
    GRAFT_TRY(graft_bang_check_params(&p, k, g->ctx != NULL, fn));
    GRAFT_TRY(graft_check_filter_len(p.allowed, p.allowed_n, g->ntotal, fn));
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    int rc;
    if (g->ntotal == 0) {
        rc = graft_check_finite(xq, nq, g->d, "graft_bindex_search: queries");
        if (rc == GRAFT_OK) graft_fill_empty(nq, k, g->p.metric, D, I);
    } else if ((rc = make_ready(g, "graft_bindex_search: ")) != GRAFT_OK) {
        /* the build or upload failed: its message says which */
    } else {
        const graft_filter_data dt = {g->p.metric, g->ntotal, g->d, g->graph.R, g->xb,
                                      g->ctx && g->dev.in_memory ? g->dev.x : NULL, g->ctx, &g->fdev};
        walk_arg w = {g, xq, nq, k, &p, report};
        graft_filter_report fr;
        rc = graft_filtered_search(&dt, p.allowed, p.L, p.filter_exact_below, xq, nq, k, D, I, walk,
                                   &w, &fr, fn);
        if (rc == GRAFT_OK) {
            g->last_filter = fr;
            if (report) report->filter = fr;
        }
    }
    return rc;
}

int graft_bindex_search(const graft_bindex* cg, int64_t nq, const float* xq, int64_t k,
                        const graft_bang_params* params, float* D, int64_t* I,
                        graft_bang_report* report) {
    const char* fn = "graft_bindex_search";
    graft_bindex* g = (graft_bindex*)cg; /* the lock and the device buffers are the mutable part */
    GRAFT_TRY(graft_check_search_call(g != NULL, nq, xq, k, D, I, fn));
    /* Everything under the lock, the default parameters included: set_search_params and add may
     * run in other threads (the contract in graft/bang_index.h). */
    pthread_mutex_lock(&g->lock);
    int rc = search_locked(g, nq, xq, k, params, D, I, report, fn);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int64_t graft_bindex_ntotal(const graft_bindex* g) { return g ? g->ntotal : 0; }
int64_t graft_bindex_d(const graft_bindex* g) { return g ? g->d : 0; }
graft_metric graft_bindex_metric(const graft_bindex* g) { return g ? g->p.metric : GRAFT_METRIC_L2; }
int graft_bindex_device(const graft_bindex* g) { return g && g->ctx ? g->p.device : -1; }
const float* graft_bindex_vectors(const graft_bindex* g) { return g ? g->xb : NULL; }
const uint8_t* graft_bindex_codes(const graft_bindex* g) { return g ? g->codes : NULL; }
const graft_pq* graft_bindex_pq(const graft_bindex* g) { return g && g->pq.centroids ? &g->pq : NULL; }
const graft_graph* graft_bindex_graph(const graft_bindex* g) {
    return g && g->graph.nbrs ? &g->graph : NULL;
}
double graft_bindex_build_seconds(const graft_bindex* g) { return g ? g->build_seconds : 0.0; }
int graft_bindex_build_pieces(const graft_bindex* g) { return g ? g->build_rep.pieces : -1; }
int graft_bindex_last_filter(const graft_bindex* cg, graft_filter_report* out) {
    graft_bindex* g = (graft_bindex*)cg;
    if (!g || !out) return graft_fail(GRAFT_EINVAL, "graft_bindex_last_filter: NULL argument");
    pthread_mutex_lock(&g->lock);
    *out = g->last_filter;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

int graft_bindex_build_report(const graft_bindex* g, graft_pieces_report* rep) {
    if (!g || !rep) return graft_fail(GRAFT_EINVAL, "graft_bindex_build_report: NULL argument");
    *rep = g->build_rep;
    return GRAFT_OK;
}

graft_bang_mode graft_bindex_mode(const graft_bindex* g) {
    if (!g || !g->ctx) return GRAFT_BANG_AUTO;
    if (g->on_device) return g->dev_mode;
    return resolve_mode(g, g->p.mode, g->p.gpu_budget, g->ntotal, g->p.build.base.R);
}

size_t graft_bindex_gpu_bytes(const graft_bindex* g) {
    if (!g || !g->on_device) return 0;
    return graft_bang_dev_resident_bytes(g->ntotal, g->d, g->graph.R, g->pq.M,
                                         g->dev_mode == GRAFT_BANG_IN_MEMORY);
}

graft_bindex_params graft_bindex_get_params(const graft_bindex* cg) {
    graft_bindex_params p;
    graft_bindex* g = (graft_bindex*)cg;
    if (!g) {
        graft_bindex_params_defaults(&p);
        return p;
    }
    pthread_mutex_lock(&g->lock); /* a consistent copy while set_*_params may run */
    p = g->p;
    pthread_mutex_unlock(&g->lock);
    return p;
}

int graft_bindex_set_search_params(graft_bindex* g, const graft_bang_params* params) {
    const char* fn = "graft_bindex_set_search_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    graft_bang_params s = *params;
    s.device = g->p.device;
    GRAFT_TRY(check_default_search(&s, fn));
    pthread_mutex_lock(&g->lock);
    g->p.search = s;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

int graft_bindex_set_build_params(graft_bindex* g, const graft_grnnd_params* params) {
    const char* fn = "graft_bindex_set_build_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->lock);
    graft_bindex_params p = g->p;
    p.build = *params;
    tie_params(&p);
    int rc = graft_check_build_params(&p.build, g->ctx != NULL, fn);
    if (rc == GRAFT_OK) g->p = p;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_bindex_set_mode(graft_bindex* g, graft_bang_mode mode, size_t budget) {
    const char* fn = "graft_bindex_set_mode: ";
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_bindex_set_mode: NULL index");
    GRAFT_TRY(check_mode(mode, "graft_bindex_set_mode"));
    pthread_mutex_lock(&g->lock);
    int rc = GRAFT_OK;
    if (g->ctx && g->graph.nbrs) { /* while a build is pending, the build's upload applies it */
        const graft_bang_mode m = resolve_mode(g, mode, budget, g->ntotal, g->graph.R);
        graft_bang_dev dev;
        const int was_on = g->on_device;
        if (!was_on || m != g->dev_mode || budget != g->p.gpu_budget) {
            /* The old device data goes first: two copies of a near-budget index may not fit. A
             * failed upload then puts the old mode back (which fitted before); without one, the
             * next search uploads. */
            drop_device(g);
            rc = upload(g, &g->graph, g->xb, g->codes, m, budget, &dev, fn);
            if (rc == GRAFT_OK) {
                g->dev = dev;
                g->on_device = 1;
                g->dev_mode = m;
            } else if (was_on && upload(g, &g->graph, g->xb, g->codes, g->dev_mode, g->p.gpu_budget,
                                        &dev, fn) == GRAFT_OK) {
                g->dev = dev;
                g->on_device = 1;
                rc = graft_relabel(rc, ""); /* the first failure's message */
            }
        }
    }
    if (rc == GRAFT_OK) {
        g->p.mode = mode;
        g->p.gpu_budget = budget;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* ---- the GRFTBANG record ----------------------------------------------------------------------- */

static int write_locked(const graft_bindex* g, FILE* f) {
    const int64_t n = g->ntotal;
    const int R = n > 0 ? g->graph.R : 0, M = g->p.pq.M, trained = g->pq.centroids != NULL;
    const graft_bang_params* sp = &g->p.search;
    unsigned char hdr[HEADER_V1];
    memcpy(hdr, GRAFT_BANG_MAGIC, 8);
    graft_put_le(hdr + 8, GRAFT_BANG_FORMAT_VERSION, 4);
    graft_put_le(hdr + 12, HEADER_V1, 4);
    graft_put_le(hdr + 16, (uint64_t)g->d, 8);
    graft_put_le(hdr + 24, (uint64_t)n, 8);
    graft_put_le(hdr + 32, (uint32_t)g->p.metric, 4);
    graft_put_le(hdr + 36, (uint32_t)R, 4);
    graft_put_le(hdr + 40, (uint64_t)(n > 0 ? g->graph.entry : 0), 8);
    graft_put_le(hdr + 48, (uint32_t)M, 4);
    graft_put_le(hdr + 52, (uint32_t)g->p.mode, 4);
    graft_put_le(hdr + 56, (uint32_t)sp->L, 4);
    graft_put_le(hdr + 60, (uint32_t)sp->rerank, 4);
    graft_put_le(hdr + 64, (uint32_t)sp->max_expand, 4);
    graft_put_le(hdr + 68, (uint32_t)sp->bloom_log2, 4);
    graft_put_le(hdr + 72, (uint64_t)g->p.gpu_budget, 8);
    graft_put_le(hdr + 80, (uint32_t)trained, 4);
    graft_put_le(hdr + 84, 0, 4);
    graft_stream s = graft_stream_at(f, "graft_bindex_write", "graph + PQ index");
    GRAFT_TRY(graft_stream_put(&s, hdr, sizeof hdr));
    /* the index holds every array: their sizes do not overflow */
    GRAFT_TRY(graft_stream_put_words(&s, g->pq.centroids,
                                     trained ? (size_t)GRAFT_PQ_KSUB * (size_t)g->d * sizeof(float) : 0));
    GRAFT_TRY(graft_stream_put(&s, g->codes, (size_t)n * (size_t)M));
    GRAFT_TRY(graft_stream_put_words(&s, g->xb, (size_t)n * (size_t)g->d * sizeof(float)));
    GRAFT_TRY(graft_stream_put_words(&s, g->graph.nbrs, (size_t)n * (size_t)R * sizeof(int32_t)));
    return graft_stream_put_checksum(&s);
}

int graft_bindex_write(const graft_bindex* cg, FILE* f) {
    if (!cg || !f) return graft_fail(GRAFT_EINVAL, "graft_bindex_write: NULL argument");
    graft_bindex* g = (graft_bindex*)cg; /* a pending graph is built first: the file holds one */
    pthread_mutex_lock(&g->lock);
    int rc = build_pending(g, "graft_bindex_write: ");
    if (rc == GRAFT_OK) rc = write_locked(g, f);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* The header's fields, checked; GRAFT_EFORMAT naming the bad one. */
static int parse_header(const unsigned char* hdr, const graft_bindex_params* base, const char* fn,
                        int64_t* d, int64_t* n, int* R, int64_t* entry, int* M, int* trained,
                        graft_bindex_params* p) {
    *d = (int64_t)graft_get_le(hdr + 16, 8);
    *n = (int64_t)graft_get_le(hdr + 24, 8);
    const int32_t metric = (int32_t)(uint32_t)graft_get_le(hdr + 32, 4);
    *R = (int32_t)(uint32_t)graft_get_le(hdr + 36, 4);
    *entry = (int64_t)graft_get_le(hdr + 40, 8);
    *M = (int32_t)(uint32_t)graft_get_le(hdr + 48, 4);
    *trained = (int32_t)(uint32_t)graft_get_le(hdr + 80, 4);
    if (*d < 1 || *d > (1 << 20))
        return graft_fail(GRAFT_EFORMAT, "%s: dimension %lld out of range [1, 2^20]", fn, (long long)*d);
    if (*n < 0 || *n > INT32_MAX)
        return graft_fail(GRAFT_EFORMAT, "%s: ntotal %lld out of range [0, 2^31)", fn, (long long)*n);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EFORMAT, "%s: unknown metric %d", fn, (int)metric);
    if (*M < 1 || *M > *d || *d % *M)
        return graft_fail(GRAFT_EFORMAT, "%s: M = %d does not divide d = %lld", fn, *M, (long long)*d);
    if (*trained != 0 && *trained != 1)
        return graft_fail(GRAFT_EFORMAT, "%s: trained flag %d (0 or 1)", fn, *trained);
    if (!*trained && *n > 0)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors in an untrained index", fn, (long long)*n);
    if (*n == 0 && (*R != 0 || *entry != 0))
        return graft_fail(GRAFT_EFORMAT, "%s: an empty index with R = %d and entry %lld (both must be 0)",
                          fn, *R, (long long)*entry);
    if (*n > 0 && (*R < 1 || *R > GRAFT_GRAPH_MAX_R))
        return graft_fail(GRAFT_EFORMAT, "%s: degree R = %d out of range [1, %d]", fn, *R,
                          GRAFT_GRAPH_MAX_R);
    if (*n > 0 && (*entry < 0 || *entry >= *n))
        return graft_fail(GRAFT_EFORMAT, "%s: entry %lld out of range [0, %lld)", fn, (long long)*entry,
                          (long long)*n);
    if (base)
        *p = *base;
    else
        graft_bindex_params_defaults(p);
    p->metric = (graft_metric)metric;
    p->pq.M = *M;
    p->mode = (graft_bang_mode)(int32_t)(uint32_t)graft_get_le(hdr + 52, 4);
    p->search.L = (int32_t)(uint32_t)graft_get_le(hdr + 56, 4);
    p->search.rerank = (int32_t)(uint32_t)graft_get_le(hdr + 60, 4);
    p->search.max_expand = (int32_t)(uint32_t)graft_get_le(hdr + 64, 4);
    p->search.bloom_log2 = (int32_t)(uint32_t)graft_get_le(hdr + 68, 4);
    p->search.allowed = NULL;
    p->gpu_budget = (size_t)graft_get_le(hdr + 72, 8);
    if (check_mode(p->mode, fn) != GRAFT_OK || check_default_search(&p->search, fn) != GRAFT_OK)
        return graft_relabel(GRAFT_EFORMAT, "");
    return GRAFT_OK;
}

int graft_bindex_read(FILE* f, const graft_bindex_params* params, graft_bindex** out) {
    const char* fn = "graft_bindex_read";
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    unsigned char hdr[HEADER_V1];
    graft_stream s = graft_stream_at(f, fn, "graph + PQ index");
    GRAFT_TRY(graft_stream_read_header(&s, GRAFT_BANG_MAGIC, GRAFT_BANG_FORMAT_VERSION, HEADER_V1, hdr));
    int64_t d, n, entry;
    int R, M, trained;
    graft_bindex_params p;
    GRAFT_TRY(parse_header(hdr, params, fn, &d, &n, &R, &entry, &M, &trained, &p));
    size_t xbytes, gbytes, cbytes = (size_t)n * (size_t)M,
                           pbytes = trained ? (size_t)GRAFT_PQ_KSUB * (size_t)d * sizeof(float) : 0;
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)n, (size_t)R * sizeof(int32_t), &gbytes) ||
        xbytes > SIZE_MAX / 2 - gbytes - cbytes - pbytes)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors of dimension %lld overflow the address space",
                          fn, (long long)n, (long long)d);
    GRAFT_TRY(graft_stream_check_room(&s, (uint64_t)(pbytes + cbytes + xbytes + gbytes) + 8));

    graft_pq pq = {d, M, (int)(d / M), trained ? malloc(pbytes) : NULL};
    uint8_t* codes = n > 0 ? malloc(cbytes) : NULL;
    float* x = n > 0 ? malloc(xbytes) : NULL;
    graft_graph graph = {n, R, n > 0 ? malloc(gbytes) : NULL, entry};
    int rc = GRAFT_OK;
    if ((trained && !pq.centroids) || (n > 0 && (!x || !codes || !graph.nbrs)))
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn,
                        pbytes + cbytes + xbytes + gbytes);
    if (rc == GRAFT_OK && trained) rc = graft_stream_get_words(&s, pq.centroids, pbytes, "codebooks");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get(&s, codes, cbytes, "codes");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, x, xbytes, "vectors");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, graph.nbrs, gbytes, "graph");
    if (rc == GRAFT_OK) rc = graft_stream_check_checksum(&s);
    /* A record with a valid checksum can still hold bad ids or NaN (written by another tool). */
    if (rc == GRAFT_OK && trained && graft_pq_check(&pq, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    if (rc == GRAFT_OK && n > 0 && graft_check_graph_data(n, d, x, &graph, 0, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    graft_bindex* index = NULL;
    if (rc == GRAFT_OK) rc = graft_bindex_new(d, &p, &index);
    if (rc == GRAFT_OK && n > 0)
        rc = graft_check_graph_data(n, d, x, &graph, index->ctx != NULL, fn); /* GPU's R */
    if (rc == GRAFT_OK && trained) {
        index->pq = pq;
        memset(&pq, 0, sizeof pq);
    }
    if (rc == GRAFT_OK && n > 0) {
        rc = adopt_data(index, n, x, codes, &graph, "graft_bindex_read: ");
        x = NULL; /* taken, and freed on failure */
        codes = NULL;
    }
    free(x);
    free(codes);
    graft_pq_free(&pq);
    graft_graph_free(&graph);
    if (rc != GRAFT_OK) {
        graft_bindex_free(index);
        return rc;
    }
    *out = index;
    return GRAFT_OK;
}
