/* The graph index (graft/graph_index.h), one object for every storage: a host copy of the vectors,
 * the storage's codes and the graph (reconstruct, I/O, CPU search, out-of-core gathering) and, on
 * a GPU, the device data of its placement: the walk's (plugin/graph/graph_gpu.h) for FP32 / FP16 /
 * SQ8, BANG's (plugin/graph/bang_gpu.h) for PQ. Also its GRFTGRPH record, and the reader of the
 * graph + PQ index's GRFTBANG version-1 records, through the shared helpers of io_stream.h. */
#define _POSIX_C_SOURCE 200809L
#include "graft/graph_index.h"

#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/index_common.h"
#include "graph/build.h"
#include "core/validate.h"
#include "graph/bang_gpu.h"
#include "graph/filtered_search.h"
#include "graph/graph_gpu.h"
#include "io/io_stream.h"

#define HEADER_V1 64u  /* bytes of the version-1 record header, magic included */
#define HEADER_V2 80u  /* version 2: storage kind, trained, rerank, reserved */
#define HEADER_V3 104u /* version 3: PQ M, placement, max_expand, bloom_log2, GPU budget */
#define BANG_MAGIC "GRFTBANG"
#define BANG_HEADER 88u /* the graph + PQ index's record, version 1 */

struct graft_gindex {
    int64_t d, ntotal, capacity;
    graft_gindex_params p; /* metric and device copied into p.build and p.search (tie_params) */
    float* xb;             /* capacity x d, host */
    graft_storage st;      /* the storage's kind and codec (SQ8 ranges) */
    graft_pq pq;           /* PQ: the codebooks, centroids NULL until trained */
    uint8_t* codes;        /* compressed storages: capacity codes, host (CPU search, I/O, upload) */
    size_t code_size;      /* bytes of one code; 0 for FP32 (the walk reads xb), M for PQ */
    graft_graph graph;     /* ntotal rows; nbrs NULL while empty or while a build is pending */
    double build_seconds;
    graft_pieces_report build_rep; /* of the last build (graft_index_build_graph); pieces -1: none */
    /* GPU state; `lock` serializes GPU work (one stream, one scratch arena) so that concurrent
     * searches are safe, as FAISS requires of const search. */
    pthread_mutex_t lock;
    graft_gpu_ctx* ctx;
    graft_graph_dev gdev; /* FP32 / FP16 / SQ8 */
    graft_bang_dev bdev;  /* PQ */
    int on_device;        /* the device data holds the current graph and contents */
    graft_bang_mode dev_mode;
    graft_filter_dev fdev;           /* the filtered search's exact path (device buffers) */
    graft_filter_report last_filter; /* of the last successful search */
};

static int is_pq(const graft_gindex* g) { return g->p.storage == GRAFT_STORAGE_PQ; }

static void tie_params(graft_gindex_params* p) {
    p->build.base.metric = p->metric;
    p->build.device = p->device;
    p->search.device = p->device;
}

void graft_gindex_params_defaults(graft_gindex_params* p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->metric = GRAFT_METRIC_L2;
    p->device = graft_gpu_available() ? 0 : -1;
    graft_grnnd_params_defaults(&p->build);
    graft_search_params_defaults(&p->search);
    p->storage = GRAFT_STORAGE_FP32;
    graft_pq_params_defaults(&p->pq);
    p->mode = GRAFT_BANG_AUTO;
    p->gpu_budget = 0;
    p->cpu_knn = NULL;
    tie_params(p);
}

/* A search's parameters for k on this storage (gpu: also the GPU-only fields); k itself was
 * checked where the search entered (graft_check_search_call). */
static int check_search(int storage, const graft_search_params* s, int64_t k, int gpu, const char* fn) {
    if (storage == GRAFT_STORAGE_PQ) return graft_bang_check_params(s, k, gpu, fn);
    return graft_check_search_params(s, k, gpu, fn);
}

/* Default search parameters: those of a search with k = 1, the GPU-only fields included on any
 * index (they are written to files, which a GPU index may read), and no filter (a bitmap of n
 * bits cannot outlive the next add). */
static int check_default_search(int storage, const graft_search_params* s, const char* fn) {
    GRAFT_TRY(check_search(storage, s, 1, 1, fn));
    if (s->allowed)
        return graft_fail(GRAFT_EINVAL, "%s: a default filter (allowed) is not kept; pass it to "
                          "each search", fn);
    return GRAFT_OK;
}

static int check_mode(int storage, graft_bang_mode mode, const char* fn) {
    if (mode != GRAFT_BANG_AUTO && mode != GRAFT_BANG_IN_MEMORY && mode != GRAFT_BANG_OUT_OF_CORE)
        return graft_fail(GRAFT_EINVAL, "%s: unknown mode %d (GRAFT_BANG_AUTO, GRAFT_BANG_IN_MEMORY "
                          "or GRAFT_BANG_OUT_OF_CORE)", fn, (int)mode);
    /* The walk reads every vector it scores from the device: nothing to leave in host memory. */
    if (mode == GRAFT_BANG_OUT_OF_CORE && storage != GRAFT_STORAGE_PQ)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s: out-of-core placement needs the PQ storage (the "
                          "%s storage is GPU-resident)", fn, graft_storage_name(storage));
    return GRAFT_OK;
}

int graft_gindex_new(int64_t d, const graft_gindex_params* params, graft_gindex** out) {
    const char* fn = "graft_gindex_new";
    if (!out) return graft_fail(GRAFT_EINVAL, "%s: out is NULL", fn);
    if (d < 1 || d > (1 << 20))
        return graft_fail(GRAFT_EINVAL, "%s: dimension %lld out of range [1, 2^20]", fn, (long long)d);
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    if (params) p = *params;
    if (p.metric != GRAFT_METRIC_L2 && p.metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)p.metric);
    if (p.device < -1)
        return graft_fail(GRAFT_EINVAL, "%s: device %d (-1 for the CPU, or a CUDA device >= 0)", fn,
                          p.device);
    if (!graft_storage_name(p.storage))
        return graft_fail(GRAFT_EINVAL, "%s: unknown storage kind %d (FP32 = 0, FP16 = 1, SQ8 = 2, "
                          "PQ = 3)", fn, p.storage);
    GRAFT_TRY(check_mode(p.storage, p.mode, fn));
    if (p.storage == GRAFT_STORAGE_PQ) {
        if (p.pq.M == 0) p.pq.M = graft_pq_default_M(d);
        if (p.pq.M < 1 || p.pq.M > d || d % p.pq.M)
            return graft_fail(GRAFT_EINVAL, "%s: M = %d sub-quantizers must divide the dimension "
                              "d = %lld (e.g. M = %d)", fn, p.pq.M, (long long)d,
                              graft_pq_default_M(d));
    }
    tie_params(&p);
    GRAFT_TRY(graft_check_build_params(&p.build, p.device >= 0, fn));
    GRAFT_TRY(check_default_search(p.storage, &p.search, fn));
    graft_storage st;
    GRAFT_TRY(graft_storage_init(&st, p.storage, d));
    graft_gindex* g = calloc(1, sizeof *g);
    if (!g) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    g->d = d;
    g->p = p;
    g->st = st;
    g->code_size = p.storage == GRAFT_STORAGE_PQ     ? (size_t)p.pq.M
                   : p.storage == GRAFT_STORAGE_FP32 ? 0
                                                     : graft_storage_code_size(p.storage, d);
    g->build_rep = (graft_pieces_report){.pieces = -1};
    pthread_mutex_init(&g->lock, NULL);
    if (p.device >= 0) {
        int rc = graft_gpu_ctx_create(p.device, graft_index_scratch_cap(p.device), &g->ctx);
        if (rc != GRAFT_OK) {
            rc = graft_fail(rc, "%s: device %d: %s", fn, p.device, graft_gpu_last_error());
            graft_gindex_free(g);
            return rc;
        }
    }
    *out = g;
    return GRAFT_OK;
}

static void drop_device(graft_gindex* g) {
    if (g->on_device) {
        if (is_pq(g))
            graft_bang_dev_release(&g->bdev);
        else
            graft_graph_dev_release(&g->gdev);
    }
    g->on_device = 0;
}

void graft_gindex_free(graft_gindex* g) {
    if (!g) return;
    drop_device(g);
    graft_graph_free(&g->graph);
    graft_pq_free(&g->pq);
    graft_filter_dev_release(g->ctx, &g->fdev);
    if (g->ctx) graft_gpu_ctx_destroy(g->ctx);
    pthread_mutex_destroy(&g->lock);
    free(g->xb);
    free(g->codes);
    graft_storage_free(&g->st);
    free(g);
}

/* ---- placement --------------------------------------------------------------------------------- */

/* A budget argument: 0 means the default, half the device (not the index's stored budget, which
 * callers pass themselves when they mean it). */
static size_t gpu_budget(const graft_gindex* g, size_t budget) {
    return budget ? budget : graft_gpu_device_memory(g->p.device) / 2;
}

/* The placement of n vectors with a graph of degree R under (mode, budget). */
static graft_bang_mode resolve_mode(const graft_gindex* g, graft_bang_mode mode, size_t budget,
                                    int64_t n, int R) {
    if (!g->ctx) return GRAFT_BANG_AUTO;
    if (!is_pq(g)) return GRAFT_BANG_IN_MEMORY; /* the walk's storages are GPU-resident */
    if (mode != GRAFT_BANG_AUTO) return mode;
    budget = gpu_budget(g, budget);
    return graft_bang_dev_resident_bytes(n, g->d, R, g->pq.M, 1) <= budget ? GRAFT_BANG_IN_MEMORY
                                                                          : GRAFT_BANG_OUT_OF_CORE;
}

/* The device data of `graph` over the first graph->n vectors of xb and codes, in `mode` under
 * `budget`, into *gd (walk) or *bd (PQ). On failure nothing is held. */
static int upload(graft_gindex* g, const graft_graph* graph, graft_bang_mode mode, size_t budget,
                  graft_graph_dev* gd, graft_bang_dev* bd, const char* fn) {
    int rc;
    if (!is_pq(g)) {
        rc = graft_graph_dev_upload_store(g->ctx, graph, g->xb, &g->st, g->codes, g->d, gd);
    } else {
        budget = gpu_budget(g, budget);
        const int in_memory = mode == GRAFT_BANG_IN_MEMORY;
        const size_t need = graft_bang_dev_resident_bytes(graph->n, g->d, graph->R, g->pq.M, in_memory);
        if (need > budget)
            return graft_fail(GRAFT_EGPU_NOMEM, "%s%s mode keeps %zu bytes on the GPU, over the "
                              "index's GPU budget of %zu bytes%s", fn,
                              in_memory ? "in-memory" : "out-of-core", need, budget,
                              in_memory ? " (out-of-core mode keeps only the codes)" : "");
        rc = graft_bang_dev_upload(g->ctx, graph, &g->pq, g->codes, g->xb, g->d, g->p.metric,
                                   in_memory, bd);
    }
    return rc == GRAFT_OK ? GRAFT_OK : graft_relabel(rc, fn);
}

/* upload's result becomes the index's device data. */
static void hold_device(graft_gindex* g, const graft_graph_dev* gd, const graft_bang_dev* bd,
                        graft_bang_mode mode) {
    if (is_pq(g))
        g->bdev = *bd;
    else
        g->gdev = *gd;
    g->on_device = 1;
    g->dev_mode = mode;
}

/* Makes graph (over the first n vectors of xb, codes) the index's graph: uploads the device data
 * of the resolved placement, then releases the previous graph. On failure the index is unchanged
 * and graph stays the caller's. */
static int install(graft_gindex* g, int64_t n, graft_graph* graph, const char* fn) {
    graft_graph_dev gd;
    graft_bang_dev bd;
    const graft_bang_mode mode = resolve_mode(g, g->p.mode, g->p.gpu_budget, n, graph->R);
    if (g->ctx) GRAFT_TRY(upload(g, graph, mode, g->p.gpu_budget, &gd, &bd, fn));
    drop_device(g);
    graft_graph_free(&g->graph);
    g->graph = *graph;
    memset(graph, 0, sizeof *graph);
    if (g->ctx) hold_device(g, &gd, &bd, mode);
    g->ntotal = n;
    return GRAFT_OK;
}

/* ---- contents ---------------------------------------------------------------------------------- */

/* The codes of n vectors. PQ: on the index's GPU (the same codes as the CPU's; test_gpu_bang
 * times both), on the CPU without one or when the GPU is short of memory. Lock held. */
static int encode(graft_gindex* g, int64_t n, const float* x, uint8_t* codes, const char* fn) {
    if (!g->code_size) return GRAFT_OK;
    if (!is_pq(g)) {
        graft_storage_encode(&g->st, n, x, codes);
        return GRAFT_OK;
    }
    if (g->ctx) {
        const int rc = graft_bang_encode_ctx(g->ctx, &g->pq, n, x, codes, fn);
        if (rc != GRAFT_EGPU_NOMEM) return rc;
    }
    return graft_pq_encode(&g->pq, n, x, codes);
}

/* Room for `need` vectors and codes; the first ntotal of both are kept (a failed add loses
 * nothing). */
static int reserve(graft_gindex* g, int64_t need, const char* fn) {
    if (need <= g->capacity) return GRAFT_OK;
    int64_t cap = g->capacity * 2 > need ? g->capacity * 2 : need;
    size_t bytes;
    if (graft_mul_overflow((size_t)cap, (size_t)g->d * sizeof(float), &bytes))
        return graft_fail(GRAFT_ENOMEM, "%s: %lld vectors of dimension %lld overflow", fn,
                          (long long)cap, (long long)g->d);
    float* xb = realloc(g->xb, bytes);
    if (!xb) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, bytes);
    g->xb = xb;
    if (g->code_size) { /* codes are at most as large as the vectors: no overflow */
        uint8_t* c = realloc(g->codes, (size_t)cap * g->code_size);
        if (!c) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn,
                                  (size_t)cap * g->code_size);
        g->codes = c;
    }
    g->capacity = cap;
    return GRAFT_OK;
}

/* fn: the caller's message prefix ("graft_gindex_add: "). */
static int require_trained(const graft_gindex* g, const char* fn) {
    if (g->st.trained) return GRAFT_OK;
    if (is_pq(g))
        return graft_fail(GRAFT_ESTATE, "%sthe index is not trained; train the PQ codebooks first "
                          "(graft_gindex_train, FAISS's Index::train)", fn);
    return graft_fail(GRAFT_ESTATE, "%sthe %s storage must be trained before adding "
                      "(graft_gindex_train)", fn, graft_storage_name(g->st.kind));
}

/* The graph, now over a prefix only, and the device data go: the next search (or build, or
 * write) builds one graph over everything. */
static void drop_graph(graft_gindex* g) {
    drop_device(g);
    graft_graph_free(&g->graph);
    g->build_seconds = 0;
    g->build_rep = (graft_pieces_report){.pieces = -1};
}

static int add_locked(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_add";
    GRAFT_TRY(require_trained(g, "graft_gindex_add: "));
    const int64_t need = g->ntotal + n;
    if (need > INT32_MAX)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s: %lld vectors; a graph index holds at most 2^31 - 1 "
                          "(int32 neighbour ids)", fn, (long long)need);
    GRAFT_TRY(reserve(g, need, fn));
    /* Past ntotal: invisible until the count moves. */
    graft_copy_rows(g->xb + g->ntotal * g->d, x, n, g->d);
    /* FP32 keeps no codes (codes NULL): no pointer is formed past it (UBSan). */
    uint8_t* dst = g->code_size ? g->codes + (size_t)g->ntotal * g->code_size : NULL;
    GRAFT_TRY(encode(g, n, x, dst, "graft_gindex_add: "));
    drop_graph(g);
    g->ntotal = need;
    return GRAFT_OK;
}

int graft_gindex_add(graft_gindex* g, int64_t n, const float* x) {
    GRAFT_TRY(graft_check_add_args(g != NULL, n, x, g ? g->d : 0, "graft_gindex_add"));
    if (n == 0) return GRAFT_OK;
    pthread_mutex_lock(&g->lock);
    int rc = add_locked(g, n, x);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* Builds the graph over every vector when adds left it pending (GRNND on the GPU, in pieces when
 * its pools do not fit, else RNN-Descent on the CPU). Lock held. A failed build keeps the vectors
 * and codes; the next call tries again. */
static int build_pending(graft_gindex* g, const char* fn) {
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

/* build_pending, then the device data of the resolved placement when the GPU does not hold it
 * (after an add, or a failed upload). Lock held. A failed upload keeps the graph: the next call
 * retries only the upload. */
static int make_ready(graft_gindex* g, const char* fn) {
    GRAFT_TRY(build_pending(g, fn));
    if (!g->ctx || g->ntotal == 0 || g->on_device) return GRAFT_OK;
    const graft_bang_mode mode = resolve_mode(g, g->p.mode, g->p.gpu_budget, g->ntotal, g->graph.R);
    graft_graph_dev gd;
    graft_bang_dev bd;
    GRAFT_TRY(upload(g, &g->graph, mode, g->p.gpu_budget, &gd, &bd, fn));
    hold_device(g, &gd, &bd, mode);
    return GRAFT_OK;
}

int graft_gindex_build(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_build: NULL index");
    pthread_mutex_lock(&g->lock);
    const int rc = make_ready(g, "graft_gindex_build: ");
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_gindex_reset(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_reset: NULL index");
    pthread_mutex_lock(&g->lock);
    drop_graph(g);
    g->ntotal = 0;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

/* ---- training ---------------------------------------------------------------------------------- */

static int train_locked(graft_gindex* g, int64_t n, const float* x, const char* fn) {
    if ((g->st.kind == GRAFT_STORAGE_SQ8 || is_pq(g)) && g->ntotal > 0)
        return graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors whose %s codes would go "
                          "stale; reset it before training again", fn, (long long)g->ntotal,
                          graft_storage_name(g->st.kind));
    if (is_pq(g)) {
        graft_pq pq = {0};
        GRAFT_TRY(graft_pq_train(g->d, n, x, &g->p.pq, &pq));
        graft_pq_free(&g->pq);
        g->pq = pq;
        g->st.trained = 1;
        return GRAFT_OK;
    }
    graft_storage t;
    GRAFT_TRY(graft_storage_copy(&t, &g->st));
    const int rc = graft_storage_train(&t, n, x);
    if (rc != GRAFT_OK) {
        graft_storage_free(&t);
        return rc;
    }
    graft_storage_free(&g->st);
    g->st = t;
    return GRAFT_OK;
}

int graft_gindex_train(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_train";
    /* x and n are checked once, by the trainer that takes them (graft_pq_train,
     * graft_storage_train). */
    if (!g) return graft_fail(GRAFT_EINVAL, "%s: NULL index", fn);
    pthread_mutex_lock(&g->lock);
    const int rc = train_locked(g, n, x, fn);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_gindex_set_pq(graft_gindex* g, const graft_pq* pq) {
    const char* fn = "graft_gindex_set_pq";
    if (!g || !pq) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (!is_pq(g))
        return graft_fail(GRAFT_EINVAL, "%s: the index's storage is %s, not PQ", fn,
                          graft_storage_name(g->st.kind));
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
        g->st.trained = 1;
        c = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    free(c);
    return rc;
}

/* ---- search ------------------------------------------------------------------------------------ */

/* The graph search of a filtered search (graft_filter_walk_fn) with beam L: the storage's walk,
 * or for PQ BANG's, with at least L expansions so that a widened beam is walked. */
typedef struct walk_arg {
    graft_gindex* g;
    const float* xq;
    int64_t nq, k;
    const graft_search_params* p;
    graft_search_report* report;
} walk_arg;

static int walk(void* arg, int L, float* D, int64_t* I) {
    const walk_arg* w = arg;
    graft_gindex* g = w->g;
    graft_search_params p = *w->p;
    p.L = L;
    if (is_pq(g)) {
        if (p.max_expand && p.max_expand < L) p.max_expand = L;
        if (g->ctx)
            return graft_bang_dev_search(&g->bdev, g->graph.nbrs, g->xb, w->xq, w->nq, w->k, &p, D, I,
                                         w->report);
        return graft_bang_search_cpu_unchecked(&g->graph, &g->pq, g->codes, g->xb, g->d, g->p.metric,
                                               w->xq, w->nq, w->k, &p, D, I);
    }
    if (g->ctx) return graft_graph_dev_search(&g->gdev, g->p.metric, w->xq, w->nq, w->k, &p, D, I, w->report);
    return graft_graph_search_cpu_store(&g->graph, g->xb, &g->st, g->codes, g->d, g->p.metric, w->xq,
                                        w->nq, w->k, &p, D, I);
}

static int search_locked(graft_gindex* g, int64_t nq, const float* xq, int64_t k,
                         const graft_search_params* params, float* D, int64_t* I,
                         graft_search_report* report, const char* fn) {
    graft_search_params p = params ? *params : g->p.search;
    p.device = g->p.device; /* the index's device decides, whatever the caller's struct says */
    /* The worklist holds the results, so it is at least k wide (and BANG expands so many): FAISS's
     * HNSW searches with max(efSearch, k) the same way. */
    if (p.L < k) {
        p.L = (int)k;
        if (p.max_expand && p.max_expand < p.L) p.max_expand = p.L;
    }
    if (g->st.kind == GRAFT_STORAGE_FP32) p.rerank = 0; /* exact already: nothing to re-rank */
    GRAFT_TRY(check_search(g->st.kind, &p, k, g->ctx != NULL, fn));
    GRAFT_TRY(graft_check_filter_len(p.allowed, p.allowed_n, g->ntotal, fn));
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    /* The queries' values are checked once, where they are read: by the walks (the GPU's as it
     * copies them into pinned memory), by the filtered search's exact path, or here when the index
     * is empty. */
    if (g->ntotal == 0) {
        int rc = graft_check_finite(xq, nq, g->d, "graft_gindex_search: queries");
        if (rc == GRAFT_OK) graft_fill_empty(nq, k, g->p.metric, D, I);
        return rc;
    }
    GRAFT_TRY(make_ready(g, "graft_gindex_search: ")); /* the build's or upload's message */
    const float* dev_x = !g->on_device ? NULL : is_pq(g) ? (g->bdev.in_memory ? g->bdev.x : NULL)
                                                          : g->gdev.x;
    const graft_filter_data dt = {g->p.metric, g->ntotal, g->d, g->graph.R, g->xb, dev_x, g->ctx,
                                  &g->fdev, g->p.cpu_knn};
    walk_arg w = {g, xq, nq, k, &p, report};
    graft_filter_report fr;
    int rc = graft_filtered_search(&dt, p.allowed, p.L, p.filter_exact_below, xq, nq, k, D, I, walk,
                                   &w, &fr, fn);
    if (rc != GRAFT_OK) return rc;
    g->last_filter = fr;
    if (report) report->filter = fr;
    return GRAFT_OK;
}

int graft_gindex_search(const graft_gindex* cg, int64_t nq, const float* xq, int64_t k,
                        const graft_search_params* params, float* D, int64_t* I,
                        graft_search_report* report) {
    const char* fn = "graft_gindex_search";
    graft_gindex* g = (graft_gindex*)cg; /* the lock, the pending build and the device buffers are
                                            the mutable part */
    /* The boundary: the call's arguments are checked here, once, and the parameters in
     * search_locked; the walks below trust them. */
    GRAFT_TRY(graft_check_search_call(g != NULL, nq, xq, k, D, I, fn));
    /* Everything under the lock, the default parameters included: set_search_params and add may
     * run in other threads (the contract in graft/graph_index.h). */
    pthread_mutex_lock(&g->lock);
    int rc = search_locked(g, nq, xq, k, params, D, I, report, fn);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* ---- accessors and parameters ------------------------------------------------------------------ */

int64_t graft_gindex_ntotal(const graft_gindex* g) { return g ? g->ntotal : 0; }
int64_t graft_gindex_d(const graft_gindex* g) { return g ? g->d : 0; }
graft_metric graft_gindex_metric(const graft_gindex* g) { return g ? g->p.metric : GRAFT_METRIC_L2; }
int graft_gindex_device(const graft_gindex* g) { return g && g->ctx ? g->p.device : -1; }
const float* graft_gindex_vectors(const graft_gindex* g) { return g ? g->xb : NULL; }
const uint8_t* graft_gindex_codes(const graft_gindex* g) { return g ? g->codes : NULL; }
const graft_pq* graft_gindex_pq(const graft_gindex* g) { return g && g->pq.centroids ? &g->pq : NULL; }
const graft_graph* graft_gindex_graph(const graft_gindex* g) {
    return g && g->graph.nbrs ? &g->graph : NULL;
}
double graft_gindex_build_seconds(const graft_gindex* g) { return g ? g->build_seconds : 0.0; }
int graft_gindex_build_pieces(const graft_gindex* g) { return g ? g->build_rep.pieces : -1; }
const graft_storage* graft_gindex_storage(const graft_gindex* g) { return g ? &g->st : NULL; }
int graft_gindex_is_trained(const graft_gindex* g) { return g && g->st.trained; }

int graft_gindex_build_report(const graft_gindex* g, graft_pieces_report* rep) {
    if (!g || !rep) return graft_fail(GRAFT_EINVAL, "graft_gindex_build_report: NULL argument");
    *rep = g->build_rep;
    return GRAFT_OK;
}

graft_bang_mode graft_gindex_mode(const graft_gindex* g) {
    if (!g || !g->ctx) return GRAFT_BANG_AUTO;
    if (g->on_device) return g->dev_mode;
    return resolve_mode(g, g->p.mode, g->p.gpu_budget, g->ntotal, g->p.build.base.R);
}

size_t graft_gindex_gpu_bytes(const graft_gindex* cg) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) return 0;
    pthread_mutex_lock(&g->lock);
    const size_t b = !g->on_device ? 0 : is_pq(g) ? g->bdev.resident_bytes : g->gdev.bytes;
    pthread_mutex_unlock(&g->lock);
    return b;
}

int graft_gindex_last_filter(const graft_gindex* cg, graft_filter_report* out) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g || !out) return graft_fail(GRAFT_EINVAL, "graft_gindex_last_filter: NULL argument");
    pthread_mutex_lock(&g->lock);
    *out = g->last_filter;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

graft_gindex_params graft_gindex_get_params(const graft_gindex* cg) {
    graft_gindex_params p;
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) {
        graft_gindex_params_defaults(&p);
        return p;
    }
    pthread_mutex_lock(&g->lock); /* a consistent copy while set_*_params may run */
    p = g->p;
    pthread_mutex_unlock(&g->lock);
    return p;
}

int graft_gindex_set_search_params(graft_gindex* g, const graft_search_params* params) {
    const char* fn = "graft_gindex_set_search_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    graft_search_params s = *params;
    s.device = g->p.device;
    GRAFT_TRY(check_default_search(g->p.storage, &s, fn));
    pthread_mutex_lock(&g->lock);
    g->p.search = s;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

int graft_gindex_set_build_params(graft_gindex* g, const graft_grnnd_params* params) {
    const char* fn = "graft_gindex_set_build_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->lock);
    graft_gindex_params p = g->p;
    p.build = *params;
    tie_params(&p);
    int rc = graft_check_build_params(&p.build, g->ctx != NULL, fn);
    if (rc == GRAFT_OK) g->p = p;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int graft_gindex_set_mode(graft_gindex* g, graft_bang_mode mode, size_t budget) {
    const char* fn = "graft_gindex_set_mode: ";
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_set_mode: NULL index");
    GRAFT_TRY(check_mode(g->p.storage, mode, "graft_gindex_set_mode"));
    pthread_mutex_lock(&g->lock);
    int rc = GRAFT_OK;
    if (g->ctx && g->graph.nbrs && is_pq(g)) { /* pending build: the build's upload applies it */
        const graft_bang_mode m = resolve_mode(g, mode, budget, g->ntotal, g->graph.R);
        graft_bang_dev bd;
        const int was_on = g->on_device;
        if (!was_on || m != g->dev_mode || budget != g->p.gpu_budget) {
            /* The old device data goes first: two copies of a near-budget index may not fit. A
             * failed upload then puts the old mode back (which fitted before); without one, the
             * next search uploads. */
            const graft_bang_mode old = g->dev_mode;
            drop_device(g);
            rc = upload(g, &g->graph, m, budget, NULL, &bd, fn);
            if (rc == GRAFT_OK) {
                hold_device(g, NULL, &bd, m);
            } else if (was_on && upload(g, &g->graph, old, g->p.gpu_budget, NULL, &bd, fn) == GRAFT_OK) {
                hold_device(g, NULL, &bd, old);
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

/* Replaces the contents with x (malloc'd n x d, taken), their codes (malloc'd and taken; NULL:
 * encoded here) and graph (taken); all are freed on failure, and the index is then unchanged.
 * Checked by the caller; fn is the message prefix ("graft_gindex_set_data: "). */
static int adopt_data(graft_gindex* g, int64_t n, float* x, uint8_t* codes, graft_graph* graph,
                      const char* fn) {
    pthread_mutex_lock(&g->lock);
    int rc = require_trained(g, fn);
    if (rc == GRAFT_OK && g->code_size && !codes) { /* the GPU encode uses the index's stream */
        codes = malloc((size_t)n * g->code_size);
        if (!codes)
            rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes of codes)", fn,
                            (size_t)n * g->code_size);
        else
            rc = encode(g, n, x, codes, fn);
    }
    float* old_x = g->xb;
    uint8_t* old_codes = g->codes;
    const int64_t old_n = g->ntotal, old_cap = g->capacity;
    if (rc == GRAFT_OK) {
        g->xb = x;
        g->codes = codes;
        rc = install(g, n, graph, fn);
    }
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

int graft_gindex_set_data(graft_gindex* g, int64_t n, const float* x, const graft_graph* graph) {
    const char* fn = "graft_gindex_set_data";
    if (!g) return graft_fail(GRAFT_EINVAL, "%s: NULL index", fn);
    GRAFT_TRY(graft_check_graph_data(n, g->d, x, graph, g->ctx != NULL, fn));
    size_t xbytes = (size_t)n * (size_t)g->d * sizeof(float), gbytes = (size_t)n * graph->R * sizeof(int32_t);
    float* xc = malloc(xbytes);
    graft_graph gc = {n, graph->R, malloc(gbytes), graph->entry};
    if (!xc || !gc.nbrs) {
        free(xc);
        free(gc.nbrs);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu + %zu bytes)", fn, xbytes, gbytes);
    }
    memcpy(xc, x, xbytes);
    memcpy(gc.nbrs, graph->nbrs, gbytes);
    return adopt_data(g, n, xc, NULL, &gc, "graft_gindex_set_data: ");
}

/* ---- the GRFTGRPH record (and the GRFTBANG reader) --------------------------------------------- */

static int write_locked(const graft_gindex* g, FILE* f) {
    const int64_t n = g->ntotal;
    const int R = n > 0 ? g->graph.R : 0, pq = is_pq(g);
    const graft_search_params* sp = &g->p.search;
    unsigned char hdr[HEADER_V3];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, GRAFT_GRAPH_MAGIC, 8);
    graft_put_le(hdr + 8, GRAFT_GRAPH_FORMAT_VERSION, 4);
    graft_put_le(hdr + 12, HEADER_V3, 4);
    graft_put_le(hdr + 16, (uint64_t)g->d, 8);
    graft_put_le(hdr + 24, (uint64_t)n, 8);
    graft_put_le(hdr + 32, (uint32_t)g->p.metric, 4);
    graft_put_le(hdr + 36, (uint32_t)R, 4);
    graft_put_le(hdr + 40, (uint64_t)(n > 0 ? g->graph.entry : 0), 8);
    graft_put_le(hdr + 48, (uint32_t)sp->L, 4);
    graft_put_le(hdr + 52, (uint32_t)sp->probes, 4);
    graft_put_le(hdr + 56, (uint32_t)sp->visited, 4);
    graft_put_le(hdr + 60, (uint32_t)sp->merge, 4);
    graft_put_le(hdr + 64, (uint32_t)g->st.kind, 4);
    graft_put_le(hdr + 68, (uint32_t)g->st.trained, 4);
    graft_put_le(hdr + 72, (uint32_t)sp->rerank, 4);
    graft_put_le(hdr + 80, (uint32_t)(pq ? g->p.pq.M : 0), 4);
    graft_put_le(hdr + 84, (uint32_t)g->p.mode, 4);
    graft_put_le(hdr + 88, (uint32_t)sp->max_expand, 4);
    graft_put_le(hdr + 92, (uint32_t)sp->bloom_log2, 4);
    graft_put_le(hdr + 96, (uint64_t)g->p.gpu_budget, 8);
    graft_stream s = graft_stream_at(f, "graft_gindex_write", "graph index");
    GRAFT_TRY(graft_stream_put(&s, hdr, sizeof hdr));
    if (g->st.kind == GRAFT_STORAGE_SQ8 && g->st.trained) {
        GRAFT_TRY(graft_stream_put_words(&s, g->st.vmin, (size_t)g->d * sizeof(float)));
        GRAFT_TRY(graft_stream_put_words(&s, g->st.vdiff, (size_t)g->d * sizeof(float)));
    }
    /* the index holds every array: their sizes do not overflow */
    if (pq && g->st.trained)
        GRAFT_TRY(graft_stream_put_words(&s, g->pq.centroids,
                                         (size_t)GRAFT_PQ_KSUB * (size_t)g->d * sizeof(float)));
    if (pq) GRAFT_TRY(graft_stream_put(&s, g->codes, (size_t)n * g->code_size));
    GRAFT_TRY(graft_stream_put_words(&s, g->xb, (size_t)n * (size_t)g->d * sizeof(float)));
    GRAFT_TRY(graft_stream_put_words(&s, g->graph.nbrs, (size_t)n * (size_t)R * sizeof(int32_t)));
    return graft_stream_put_checksum(&s);
}

int graft_gindex_write(const graft_gindex* cg, FILE* f) {
    if (!cg || !f) return graft_fail(GRAFT_EINVAL, "graft_gindex_write: NULL argument");
    graft_gindex* g = (graft_gindex*)cg; /* a pending graph is built first: the file holds one */
    pthread_mutex_lock(&g->lock);
    int rc = build_pending(g, "graft_gindex_write: ");
    if (rc == GRAFT_OK) rc = write_locked(g, f);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* What a record's header says, whichever kind and version. */
typedef struct record {
    int64_t d, n, entry;
    int R, trained;
    graft_gindex_params p;
} record;

/* The sizes every record has at 16..48, checked; GRAFT_EFORMAT naming the bad one. */
static int parse_shape(const unsigned char* hdr, const char* fn, record* r) {
    r->d = (int64_t)graft_get_le(hdr + 16, 8);
    r->n = (int64_t)graft_get_le(hdr + 24, 8);
    const int32_t metric = (int32_t)(uint32_t)graft_get_le(hdr + 32, 4);
    r->R = (int32_t)(uint32_t)graft_get_le(hdr + 36, 4);
    r->entry = (int64_t)graft_get_le(hdr + 40, 8);
    if (r->d < 1 || r->d > (1 << 20))
        return graft_fail(GRAFT_EFORMAT, "%s: dimension %lld out of range [1, 2^20]", fn, (long long)r->d);
    if (r->n < 0 || r->n > INT32_MAX)
        return graft_fail(GRAFT_EFORMAT, "%s: ntotal %lld out of range [0, 2^31)", fn, (long long)r->n);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EFORMAT, "%s: unknown metric %d", fn, (int)metric);
    if (r->n == 0 && (r->R != 0 || r->entry != 0))
        return graft_fail(GRAFT_EFORMAT, "%s: an empty index with R = %d and entry %lld (both must be 0)",
                          fn, r->R, (long long)r->entry);
    if (r->n > 0 && (r->R < 1 || r->R > GRAFT_GRAPH_MAX_R))
        return graft_fail(GRAFT_EFORMAT, "%s: degree R = %d out of range [1, %d]", fn, r->R,
                          GRAFT_GRAPH_MAX_R);
    if (r->n > 0 && (r->entry < 0 || r->entry >= r->n))
        return graft_fail(GRAFT_EFORMAT, "%s: entry %lld out of range [0, %lld)", fn,
                          (long long)r->entry, (long long)r->n);
    r->p.metric = (graft_metric)metric;
    return GRAFT_OK;
}

static int32_t get_i32(const unsigned char* p) { return (int32_t)(uint32_t)graft_get_le(p, 4); }

/* The GRFTGRPH header of `version` (1..3) past the shape; r->p holds the caller's parameters. */
static int parse_graph_header(const unsigned char* hdr, uint32_t version, const char* fn, record* r) {
    graft_gindex_params* p = &r->p;
    p->search.L = get_i32(hdr + 48);
    p->search.probes = get_i32(hdr + 52);
    p->search.visited = get_i32(hdr + 56);
    p->search.merge = get_i32(hdr + 60);
    p->search.rerank = version >= 2 ? get_i32(hdr + 72) : 0;
    p->storage = version >= 2 ? get_i32(hdr + 64) : GRAFT_STORAGE_FP32;
    r->trained = version >= 2 ? get_i32(hdr + 68) : 1;
    if (!graft_storage_name(p->storage) || (version < 3 && p->storage == GRAFT_STORAGE_PQ))
        return graft_fail(GRAFT_EFORMAT, "%s: unknown storage kind %d", fn, p->storage);
    const int compressed = p->storage == GRAFT_STORAGE_SQ8 || p->storage == GRAFT_STORAGE_PQ;
    if (r->trained != 0 && r->trained != 1)
        return graft_fail(GRAFT_EFORMAT, "%s: storage trained flag %d (0 or 1)", fn, r->trained);
    if (!compressed && !r->trained)
        return graft_fail(GRAFT_EFORMAT, "%s: an untrained %s storage", fn,
                          graft_storage_name(p->storage));
    if (r->n > 0 && !r->trained)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors in an untrained %s storage", fn,
                          (long long)r->n, graft_storage_name(p->storage));
    graft_search_params stored = p->search;
    stored.bloom_log2 = 17; /* not stored before version 3 */
    if (version >= 3) {
        const int32_t M = get_i32(hdr + 80);
        if (p->storage == GRAFT_STORAGE_PQ && (M < 1 || M > r->d || r->d % M))
            return graft_fail(GRAFT_EFORMAT, "%s: M = %d does not divide d = %lld", fn, M,
                              (long long)r->d);
        if (p->storage == GRAFT_STORAGE_PQ) p->pq.M = M;
        p->mode = (graft_bang_mode)get_i32(hdr + 84);
        p->search.max_expand = get_i32(hdr + 88);
        p->search.bloom_log2 = stored.bloom_log2 = get_i32(hdr + 92);
        p->gpu_budget = (size_t)graft_get_le(hdr + 96, 8);
        stored = p->search;
    }
    /* The stored search defaults, as a GPU index would check them. */
    if (check_mode(p->storage, p->mode, fn) != GRAFT_OK ||
        check_search(p->storage, &stored, 1, 1, fn) != GRAFT_OK)
        return graft_relabel(GRAFT_EFORMAT, "");
    return GRAFT_OK;
}

/* The graph + PQ index's GRFTBANG version-1 header (graft/graph_index.h documents its bytes) past the shape. */
static int parse_bang_header(const unsigned char* hdr, const char* fn, record* r) {
    graft_gindex_params* p = &r->p;
    const int32_t M = get_i32(hdr + 48);
    r->trained = get_i32(hdr + 80);
    if (M < 1 || M > r->d || r->d % M)
        return graft_fail(GRAFT_EFORMAT, "%s: M = %d does not divide d = %lld", fn, M, (long long)r->d);
    if (r->trained != 0 && r->trained != 1)
        return graft_fail(GRAFT_EFORMAT, "%s: trained flag %d (0 or 1)", fn, r->trained);
    if (!r->trained && r->n > 0)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors in an untrained index", fn, (long long)r->n);
    p->storage = GRAFT_STORAGE_PQ;
    p->pq.M = M;
    p->mode = (graft_bang_mode)get_i32(hdr + 52);
    p->search.L = get_i32(hdr + 56);
    p->search.rerank = get_i32(hdr + 60);
    p->search.max_expand = get_i32(hdr + 64);
    p->search.bloom_log2 = get_i32(hdr + 68);
    p->gpu_budget = (size_t)graft_get_le(hdr + 72, 8);
    if (check_mode(p->storage, p->mode, fn) != GRAFT_OK ||
        check_search(p->storage, &p->search, 1, 1, fn) != GRAFT_OK)
        return graft_relabel(GRAFT_EFORMAT, "");
    return GRAFT_OK;
}

/* The header of either record kind into *r. */
static int read_header(graft_stream* s, const graft_gindex_params* params, const char* fn, record* r) {
    unsigned char hdr[HEADER_V3];
    GRAFT_TRY(graft_stream_get(s, hdr, 8, "magic"));
    const int bang = !memcmp(hdr, BANG_MAGIC, 8);
    if (!bang && memcmp(hdr, GRAFT_GRAPH_MAGIC, 8) != 0) {
        char shown[9];
        for (int i = 0; i < 8; i++) shown[i] = hdr[i] >= 32 && hdr[i] < 127 ? (char)hdr[i] : '?';
        shown[8] = '\0';
        return graft_fail(GRAFT_EFORMAT, "%s: not a graft graph index (magic \"%s\")", fn, shown);
    }
    uint32_t version, hsize;
    GRAFT_TRY(graft_stream_read_header_ex(s, NULL, bang ? 1u : GRAFT_GRAPH_FORMAT_VERSION,
                                          bang ? BANG_HEADER : HEADER_V1, bang ? BANG_HEADER : HEADER_V3,
                                          hdr, &version, &hsize));
    const uint32_t need = bang ? BANG_HEADER : version >= 3 ? HEADER_V3 : version >= 2 ? HEADER_V2 : HEADER_V1;
    if (hsize < need)
        return graft_fail(GRAFT_EFORMAT, "%s: version-%u header of %u bytes (at least %u)", fn,
                          version, hsize, need);
    if (params)
        r->p = *params;
    else
        graft_gindex_params_defaults(&r->p);
    GRAFT_TRY(parse_shape(hdr, fn, r));
    return bang ? parse_bang_header(hdr, fn, r) : parse_graph_header(hdr, version, fn, r);
}

int graft_gindex_read(FILE* f, const graft_gindex_params* params, graft_gindex** out) {
    const char* fn = "graft_gindex_read";
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    graft_stream s = graft_stream_at(f, fn, "graph index");
    record r;
    GRAFT_TRY(read_header(&s, params, fn, &r));
    const int64_t d = r.d, n = r.n;
    const int pq = r.p.storage == GRAFT_STORAGE_PQ, sq8 = r.p.storage == GRAFT_STORAGE_SQ8;
    /* n < 2^31, d <= 2^20, R <= 4096: the sizes overflow only on 32-bit hosts */
    const size_t pbytes = !r.trained ? 0
                          : pq       ? (size_t)GRAFT_PQ_KSUB * (size_t)d * sizeof(float)
                          : sq8      ? (size_t)d * 2 * sizeof(float)
                                     : 0;
    const size_t cbytes = pq ? (size_t)n * (size_t)r.p.pq.M : 0;
    size_t xbytes, gbytes;
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)n, (size_t)r.R * sizeof(int32_t), &gbytes) ||
        xbytes > SIZE_MAX / 2 - gbytes - cbytes - pbytes)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors of dimension %lld overflow the address space",
                          fn, (long long)n, (long long)d);
    GRAFT_TRY(graft_stream_check_room(&s, (uint64_t)(pbytes + cbytes + xbytes + gbytes) + 8));

    float* params_blob = pbytes ? malloc(pbytes) : NULL; /* SQ8 vmin | vdiff, or PQ centroids */
    uint8_t* codes = cbytes ? malloc(cbytes) : NULL;
    float* x = n > 0 ? malloc(xbytes) : NULL;
    graft_graph graph = {n, r.R, n > 0 ? malloc(gbytes) : NULL, r.entry};
    int rc = GRAFT_OK;
    if ((pbytes && !params_blob) || (cbytes && !codes) || (n > 0 && (!x || !graph.nbrs)))
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn,
                        pbytes + cbytes + xbytes + gbytes);
    if (rc == GRAFT_OK && pbytes)
        rc = graft_stream_get_words(&s, params_blob, pbytes, pq ? "codebooks" : "SQ8 parameters");
    if (rc == GRAFT_OK && cbytes) rc = graft_stream_get(&s, codes, cbytes, "codes");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, x, xbytes, "vectors");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, graph.nbrs, gbytes, "graph");
    if (rc == GRAFT_OK) rc = graft_stream_check_checksum(&s);
    /* A record with a valid checksum can still hold bad ids or NaN (written by another tool). */
    graft_pq codebooks = {d, r.p.pq.M, pq ? (int)(d / r.p.pq.M) : 0, params_blob};
    if (rc == GRAFT_OK && pq && pbytes && graft_pq_check(&codebooks, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    if (rc == GRAFT_OK && n > 0 && graft_check_graph_data(n, d, x, &graph, 0, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    graft_gindex* index = NULL;
    if (rc == GRAFT_OK) rc = graft_gindex_new(d, &r.p, &index);
    if (rc == GRAFT_OK && sq8 && pbytes &&
        graft_storage_set_sq8(&index->st, params_blob, params_blob + d) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "graft_gindex_read: ");
    if (rc == GRAFT_OK && pq && pbytes) {
        index->pq = codebooks;
        index->st.trained = 1;
        params_blob = NULL; /* taken */
    }
    free(params_blob);
    if (rc == GRAFT_OK && n > 0) rc = graft_check_graph_data(n, d, x, &graph, index->ctx != NULL, fn); /* GPU's R */
    if (rc == GRAFT_OK && n > 0) {
        rc = adopt_data(index, n, x, codes, &graph, "graft_gindex_read: ");
        x = NULL; /* taken, and freed on failure */
        codes = NULL;
    }
    free(x);
    free(codes);
    graft_graph_free(&graph);
    if (rc != GRAFT_OK) {
        graft_gindex_free(index);
        return rc;
    }
    *out = index;
    return GRAFT_OK;
}
