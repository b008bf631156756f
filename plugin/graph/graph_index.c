/* The graph index (graft/graph_index.h): a host copy of the vectors and of the graph (reconstruct,
 * I/O, CPU search) and, when it lives on a GPU, both kept on the device between searches
 * (plugin/graph/graph_gpu.h). Also its GRFTGRPH record, through the shared helpers of io_stream.h. */
#define _POSIX_C_SOURCE 200809L
#include "graft/graph_index.h"

#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_gpu.h"
#include "core/index_common.h"
#include "io/io_stream.h"
#include "core/validate.h"
#include "graph/filtered_search.h"

#define HEADER_V1 64u        /* bytes of the version-1 record header, magic included */
#define HEADER_V2 80u        /* version 2: storage kind, trained, rerank, reserved */

struct graft_gindex {
    int64_t d, ntotal, capacity;
    graft_gindex_params p; /* metric and device copied into p.build and p.search (tie_params) */
    float* xb;             /* capacity x d, host */
    graft_storage st;      /* the walk's storage (kind p.storage) */
    uint8_t* codes;        /* compressed storages: capacity codes, host (CPU walk, I/O, upload) */
    size_t code_size;      /* bytes of one code; 0 for FP32 (the walk reads xb) */
    graft_graph graph;     /* ntotal rows; nbrs NULL while ntotal == 0 */
    double build_seconds;
    int build_pieces; /* pieces of the last build (graft_index_build_graph's report); -1: none */
    /* GPU state; `lock` serializes GPU work (one stream, one scratch arena) so that concurrent
     * searches are safe, as FAISS requires of const search. */
    pthread_mutex_t lock;
    graft_gpu_ctx* ctx;
    graft_graph_dev dev;
    int on_device; /* dev holds the current graph and vectors */
    graft_filter_dev fdev;           /* the filtered search's exact path (device buffers) */
    graft_filter_report last_filter; /* of the last successful search */
};

static void tie_params(graft_gindex_params* p) {
    p->build.base.metric = p->metric;
    p->build.device = p->device;
    p->search.device = p->device;
}

void graft_gindex_params_defaults(graft_gindex_params* p) {
    if (!p) return;
    p->metric = GRAFT_METRIC_L2;
    p->device = graft_gpu_available() ? 0 : -1;
    graft_grnnd_params_defaults(&p->build);
    graft_search_params_defaults(&p->search);
    p->storage = GRAFT_STORAGE_FP32;
    tie_params(p);
}

/* Default search parameters: those of a search with k = 1, the GPU-only fields included on any
 * index (they are written to files, which a GPU index may read), and no filter (a bitmap of n
 * bits cannot outlive the next add). */
static int check_default_search(const graft_search_params* s, const char* fn) {
    GRAFT_TRY(graft_check_search_params(s, 1, 1, fn));
    if (s->allowed)
        return graft_fail(GRAFT_EINVAL, "%s: a default filter (allowed) is not kept; pass it to "
                          "each search", fn);
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
    tie_params(&p);
    GRAFT_TRY(graft_check_build_params(&p.build, p.device >= 0, fn));
    GRAFT_TRY(check_default_search(&p.search, fn));
    graft_storage st;
    GRAFT_TRY(graft_storage_init(&st, p.storage, d));
    graft_gindex* g = calloc(1, sizeof *g);
    if (!g) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    g->d = d;
    g->p = p;
    g->st = st;
    g->code_size = p.storage == GRAFT_STORAGE_FP32 ? 0 : graft_storage_code_size(p.storage, d);
    g->build_pieces = -1;
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

/* Drops the graph and its device copy (vectors stay with the caller). */
static void drop_graph(graft_gindex* g) {
    if (g->on_device) graft_graph_dev_release(&g->dev);
    g->on_device = 0;
    graft_graph_free(&g->graph);
}

void graft_gindex_free(graft_gindex* g) {
    if (!g) return;
    drop_graph(g);
    graft_filter_dev_release(g->ctx, &g->fdev);
    if (g->ctx) graft_gpu_ctx_destroy(g->ctx);
    pthread_mutex_destroy(&g->lock);
    free(g->xb);
    free(g->codes);
    graft_storage_free(&g->st);
    free(g);
}

/* Makes `graph` (over the first n vectors of xb) the index's graph: uploads it when the index
 * lives on a GPU, then releases the previous one. On failure the index is unchanged and graph
 * stays the caller's. */
static int install_graph(graft_gindex* g, int64_t n, graft_graph* graph, const char* fn) {
    graft_graph_dev dev;
    if (g->ctx) {
        int rc = graft_graph_dev_upload_store(g->ctx, graph, g->xb, &g->st, g->codes, g->d, &dev);
        if (rc != GRAFT_OK) return graft_relabel(rc, fn);
    }
    drop_graph(g);
    g->graph = *graph;
    memset(graph, 0, sizeof *graph);
    if (g->ctx) {
        g->dev = dev;
        g->on_device = 1;
    }
    g->ntotal = n;
    return GRAFT_OK;
}

static int reserve(graft_gindex* g, int64_t need, const char* fn) {
    if (need <= g->capacity) return GRAFT_OK;
    int64_t cap = g->capacity * 2 > need ? g->capacity * 2 : need;
    size_t bytes;
    if (graft_mul_overflow((size_t)cap, (size_t)g->d * sizeof(float), &bytes))
        return graft_fail(GRAFT_ENOMEM, "%s: %lld vectors of dimension %lld overflow", fn,
                          (long long)cap, (long long)g->d);
    float* xb = realloc(g->xb, bytes); /* keeps the first ntotal: a failed add loses nothing */
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

static int add_locked(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_add: ";
    const int64_t need = g->ntotal + n;
    if (need > INT32_MAX)
        return graft_fail(GRAFT_EUNSUPPORTED, "graft_gindex_add: %lld vectors; a graph index holds at "
                          "most 2^31 - 1 (int32 neighbour ids)", (long long)need);
    if (!g->st.trained)
        return graft_fail(GRAFT_ESTATE, "graft_gindex_add: the %s storage must be trained before "
                          "adding (graft_gindex_train)", graft_storage_name(g->st.kind));
    GRAFT_TRY(reserve(g, need, "graft_gindex_add"));
    /* Past ntotal: invisible until install_graph succeeds. */
    graft_copy_rows(g->xb + g->ntotal * g->d, x, n, g->d);
    if (g->code_size) graft_storage_encode(&g->st, n, x, g->codes + (size_t)g->ntotal * g->code_size);
    graft_graph graph = {0};
    double seconds;
    graft_pieces_report rep;
    int rc = graft_index_build_graph(g->ctx != NULL, g->xb, need, g->d, &g->p.build, &graph, &seconds,
                                     &rep);
    if (rc != GRAFT_OK) return graft_relabel(rc, fn);
    rc = install_graph(g, need, &graph, fn);
    if (rc != GRAFT_OK) {
        graft_graph_free(&graph);
        return rc;
    }
    g->build_seconds = seconds;
    g->build_pieces = rep.pieces;
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

int graft_gindex_reset(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_reset: NULL index");
    pthread_mutex_lock(&g->lock);
    drop_graph(g);
    g->ntotal = 0;
    g->build_pieces = -1;
    pthread_mutex_unlock(&g->lock);
    return GRAFT_OK;
}

/* The graph search of a filtered search (graft_filter_walk_fn) with beam L. */
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
    if (g->ctx) return graft_graph_dev_search(&g->dev, g->p.metric, w->xq, w->nq, w->k, &p, D, I, w->report);
    return graft_graph_search_cpu_store(&g->graph, g->xb, &g->st, g->codes, g->d, g->p.metric, w->xq,
                                        w->nq, w->k, &p, D, I);
}

static int search_locked(graft_gindex* g, int64_t nq, const float* xq, int64_t k,
                         const graft_search_params* params, float* D, int64_t* I,
                         graft_search_report* report, const char* fn) {
    graft_search_params p = params ? *params : g->p.search;
    p.device = g->p.device; /* the index's device decides, whatever the caller's struct says */
    /* The worklist holds the results, so it is at least k wide: FAISS's HNSW searches with
     * max(efSearch, k) the same way. */
    if (p.L < k) p.L = (int)k;
    if (g->st.kind == GRAFT_STORAGE_FP32) p.rerank = 0; /* exact already: nothing to re-rank */
    GRAFT_TRY(graft_check_search_params(&p, k, g->ctx != NULL, fn));
    GRAFT_TRY(graft_check_filter_len(p.allowed, p.allowed_n, g->ntotal, fn));
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    /* The searches check the queries for NaN/Inf themselves (once: a second pass over a batch
     * costs an OpenMP region and a read of every query); an empty index checks them here. */
    if (g->ntotal == 0) {
        int rc = graft_check_finite(xq, nq, g->d, "graft_gindex_search: queries");
        if (rc == GRAFT_OK) graft_fill_empty(nq, k, g->p.metric, D, I);
        return rc;
    }
    const graft_filter_data dt = {g->p.metric, g->ntotal, g->d, g->graph.R, g->xb,
                                  g->on_device ? g->dev.x : NULL, g->ctx, &g->fdev};
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
    graft_gindex* g = (graft_gindex*)cg; /* the lock and the device buffers are the mutable part */
    GRAFT_TRY(graft_check_search_call(g != NULL, nq, xq, k, D, I, fn));
    /* Everything under the lock, the default parameters included: set_search_params and add may
     * run in other threads (the contract in graft/graph_index.h). */
    pthread_mutex_lock(&g->lock);
    int rc = search_locked(g, nq, xq, k, params, D, I, report, fn);
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int64_t graft_gindex_ntotal(const graft_gindex* g) { return g ? g->ntotal : 0; }
int64_t graft_gindex_d(const graft_gindex* g) { return g ? g->d : 0; }
graft_metric graft_gindex_metric(const graft_gindex* g) { return g ? g->p.metric : GRAFT_METRIC_L2; }
int graft_gindex_device(const graft_gindex* g) { return g && g->ctx ? g->p.device : -1; }
const float* graft_gindex_vectors(const graft_gindex* g) { return g ? g->xb : NULL; }
const graft_graph* graft_gindex_graph(const graft_gindex* g) {
    return g && g->ntotal > 0 ? &g->graph : NULL;
}
double graft_gindex_build_seconds(const graft_gindex* g) { return g ? g->build_seconds : 0.0; }
const graft_storage* graft_gindex_storage(const graft_gindex* g) { return g ? &g->st : NULL; }
int graft_gindex_is_trained(const graft_gindex* g) { return g && g->st.trained; }

size_t graft_gindex_gpu_bytes(const graft_gindex* cg) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) return 0;
    pthread_mutex_lock(&g->lock);
    const size_t b = g->on_device ? g->dev.bytes : 0;
    pthread_mutex_unlock(&g->lock);
    return b;
}

int graft_gindex_train(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_train";
    if (!g || !x || n < 1) return graft_fail(GRAFT_EINVAL, "%s: NULL argument or n < 1", fn);
    pthread_mutex_lock(&g->lock);
    int rc = GRAFT_OK;
    if (g->st.kind == GRAFT_STORAGE_SQ8 && g->ntotal > 0)
        rc = graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors whose SQ8 codes would go "
                        "stale; reset it before training again", fn, (long long)g->ntotal);
    graft_storage t;
    if (rc == GRAFT_OK) rc = graft_storage_copy(&t, &g->st);
    if (rc == GRAFT_OK) {
        rc = graft_storage_train(&t, n, x);
        if (rc == GRAFT_OK) {
            graft_storage_free(&g->st);
            g->st = t;
        } else {
            graft_storage_free(&t);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}
int graft_gindex_build_pieces(const graft_gindex* g) { return g ? g->build_pieces : -1; }

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
    GRAFT_TRY(check_default_search(&s, fn));
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

/* Replaces the contents with x (malloc'd n x d, taken) and graph (taken); both are freed on
 * failure, and the index is then unchanged. Checked by the caller. */
static int adopt_data(graft_gindex* g, int64_t n, float* x, graft_graph* graph, const char* fn) {
    pthread_mutex_lock(&g->lock);
    uint8_t* codes = NULL;
    int rc = GRAFT_OK;
    if (!g->st.trained)
        rc = graft_fail(GRAFT_ESTATE, "%sthe %s storage must be trained first", fn,
                        graft_storage_name(g->st.kind));
    if (rc == GRAFT_OK && g->code_size) {
        codes = malloc((size_t)n * g->code_size);
        if (!codes)
            rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes of codes)", fn,
                            (size_t)n * g->code_size);
        else
            graft_storage_encode(&g->st, n, x, codes);
    }
    float* old_x = g->xb;
    uint8_t* old_codes = g->codes;
    const int64_t old_n = g->ntotal, old_cap = g->capacity;
    if (rc == GRAFT_OK) {
        g->xb = x;
        g->codes = codes;
        rc = install_graph(g, n, graph, fn);
    }
    if (rc == GRAFT_OK) {
        g->capacity = n;
        g->build_seconds = 0;
        g->build_pieces = -1;
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
    return adopt_data(g, n, xc, &gc, "graft_gindex_set_data: ");
}

/* ---- the GRFTGRPH record ----------------------------------------------------------------------- */

int graft_gindex_write(const graft_gindex* g, FILE* f) {
    if (!g || !f) return graft_fail(GRAFT_EINVAL, "graft_gindex_write: NULL argument");
    const int64_t n = g->ntotal;
    const int R = n > 0 ? g->graph.R : 0;
    const graft_search_params* sp = &g->p.search;
    unsigned char hdr[HEADER_V2];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, GRAFT_GRAPH_MAGIC, 8);
    graft_put_le(hdr + 8, GRAFT_GRAPH_FORMAT_VERSION, 4);
    graft_put_le(hdr + 12, HEADER_V2, 4);
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
    graft_stream s = graft_stream_at(f, "graft_gindex_write", "graph index");
    GRAFT_TRY(graft_stream_put(&s, hdr, sizeof hdr));
    if (g->st.kind == GRAFT_STORAGE_SQ8 && g->st.trained) {
        GRAFT_TRY(graft_stream_put_words(&s, g->st.vmin, (size_t)g->d * sizeof(float)));
        GRAFT_TRY(graft_stream_put_words(&s, g->st.vdiff, (size_t)g->d * sizeof(float)));
    }
    /* the index holds both arrays: their sizes do not overflow */
    GRAFT_TRY(graft_stream_put_words(&s, g->xb, (size_t)n * (size_t)g->d * sizeof(float)));
    GRAFT_TRY(graft_stream_put_words(&s, g->graph.nbrs, (size_t)n * (size_t)R * sizeof(int32_t)));
    return graft_stream_put_checksum(&s);
}

/* The fields of a version-1 or -2 header that are not sizes, checked; GRAFT_EFORMAT naming the
 * bad one. */
static int parse_header(const unsigned char* hdr, uint32_t version, const graft_gindex_params* base,
                        const char* fn, int64_t* d, int64_t* n, int* R, int64_t* entry,
                        graft_gindex_params* p, int* trained) {
    *d = (int64_t)graft_get_le(hdr + 16, 8);
    *n = (int64_t)graft_get_le(hdr + 24, 8);
    const int32_t metric = (int32_t)(uint32_t)graft_get_le(hdr + 32, 4);
    *R = (int32_t)(uint32_t)graft_get_le(hdr + 36, 4);
    *entry = (int64_t)graft_get_le(hdr + 40, 8);
    if (*d < 1 || *d > (1 << 20))
        return graft_fail(GRAFT_EFORMAT, "%s: dimension %lld out of range [1, 2^20]", fn, (long long)*d);
    if (*n < 0 || *n > INT32_MAX)
        return graft_fail(GRAFT_EFORMAT, "%s: ntotal %lld out of range [0, 2^31)", fn, (long long)*n);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EFORMAT, "%s: unknown metric %d", fn, (int)metric);
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
        graft_gindex_params_defaults(p);
    p->metric = (graft_metric)metric;
    p->search.L = (int32_t)(uint32_t)graft_get_le(hdr + 48, 4);
    p->search.probes = (int32_t)(uint32_t)graft_get_le(hdr + 52, 4);
    p->search.visited = (int32_t)(uint32_t)graft_get_le(hdr + 56, 4);
    p->search.merge = (int32_t)(uint32_t)graft_get_le(hdr + 60, 4);
    p->search.rerank = version >= 2 ? (int32_t)(uint32_t)graft_get_le(hdr + 72, 4) : 0;
    p->storage = version >= 2 ? (int32_t)(uint32_t)graft_get_le(hdr + 64, 4) : GRAFT_STORAGE_FP32;
    if (!graft_storage_name(p->storage))
        return graft_fail(GRAFT_EFORMAT, "%s: unknown storage kind %d", fn, p->storage);
    *trained = version >= 2 ? (int32_t)(uint32_t)graft_get_le(hdr + 68, 4) : 1;
    if (*trained != 0 && *trained != 1)
        return graft_fail(GRAFT_EFORMAT, "%s: storage trained flag %d (0 or 1)", fn, *trained);
    if (p->storage != GRAFT_STORAGE_SQ8 && !*trained)
        return graft_fail(GRAFT_EFORMAT, "%s: an untrained %s storage", fn,
                          graft_storage_name(p->storage));
    if (*n > 0 && !*trained)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors in an untrained SQ8 storage", fn,
                          (long long)*n);
    /* The stored search defaults, as a GPU index would check them (bloom_log2 is not stored). */
    graft_search_params stored = p->search;
    stored.bloom_log2 = 17;
    if (graft_check_search_params(&stored, 1, 1, fn) != GRAFT_OK) return graft_relabel(GRAFT_EFORMAT, "");
    return GRAFT_OK;
}

int graft_gindex_read(FILE* f, const graft_gindex_params* params, graft_gindex** out) {
    const char* fn = "graft_gindex_read";
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    unsigned char hdr[HEADER_V2];
    graft_stream s = graft_stream_at(f, fn, "graph index");
    uint32_t version, hsize;
    GRAFT_TRY(graft_stream_read_header_ex(&s, GRAFT_GRAPH_MAGIC, GRAFT_GRAPH_FORMAT_VERSION,
                                          HEADER_V1, HEADER_V2, hdr, &version, &hsize));
    if (version >= 2 && hsize < HEADER_V2)
        return graft_fail(GRAFT_EFORMAT, "%s: version-2 header of %u bytes (at least %u)", fn, hsize,
                          HEADER_V2);
    int64_t d, n, entry;
    int R, trained = 1;
    graft_gindex_params p;
    GRAFT_TRY(parse_header(hdr, version, params, fn, &d, &n, &R, &entry, &p, &trained));
    float* sq = NULL; /* SQ8: vmin | vdiff */
    if (p.storage == GRAFT_STORAGE_SQ8 && trained) {
        GRAFT_TRY(graft_stream_check_room(&s, (uint64_t)d * 8));
        sq = malloc((size_t)d * 2 * sizeof(float));
        if (!sq) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        int rc = graft_stream_get_words(&s, sq, (size_t)d * 2 * sizeof(float), "SQ8 parameters");
        if (rc != GRAFT_OK) {
            free(sq);
            return rc;
        }
    }
    size_t xbytes, gbytes; /* n < 2^31, d <= 2^20, R <= 4096: overflows only on 32-bit hosts */
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)n, (size_t)R * sizeof(int32_t), &gbytes) ||
        xbytes > SIZE_MAX - 8 - gbytes)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors of dimension %lld overflow the address space",
                          fn, (long long)n, (long long)d);
    int rc = graft_stream_check_room(&s, (uint64_t)(xbytes + gbytes) + 8);
    if (rc != GRAFT_OK) {
        free(sq);
        return rc;
    }

    float* x = n > 0 ? malloc(xbytes) : NULL;
    graft_graph graph = {n, R, n > 0 ? malloc(gbytes) : NULL, entry};
    if (n > 0 && (!x || !graph.nbrs))
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu + %zu bytes)", fn, xbytes, gbytes);
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, x, xbytes, "vectors");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, graph.nbrs, gbytes, "graph");
    if (rc == GRAFT_OK) rc = graft_stream_check_checksum(&s);
    /* A record with a valid checksum can still hold bad ids or NaN (written by another tool). */
    if (rc == GRAFT_OK && n > 0 && graft_check_graph_data(n, d, x, &graph, 0, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    graft_gindex* index = NULL;
    if (rc == GRAFT_OK) rc = graft_gindex_new(d, &p, &index);
    if (rc == GRAFT_OK && sq && graft_storage_set_sq8(&index->st, sq, sq + d) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "graft_gindex_read: ");
    free(sq);
    if (rc == GRAFT_OK && n > 0) rc = graft_check_graph_data(n, d, x, &graph, index->ctx != NULL, fn); /* GPU's R */
    if (rc == GRAFT_OK && n > 0) {
        rc = adopt_data(index, n, x, &graph, "graft_gindex_read: ");
        x = NULL; /* taken, and freed on failure */
    }
    free(x);
    graft_graph_free(&graph);
    if (rc != GRAFT_OK) {
        graft_gindex_free(index);
        return rc;
    }
    *out = index;
    return GRAFT_OK;
}
