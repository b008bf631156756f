/* The graph index (graft/graph_index.h), one object for every storage: host copies of the vectors,
 * the storage's codes and the graph (reconstruct, I/O, CPU search, out-of-core gathering) and, on
 * a GPU, the device data of its placement: the walk's (plugin/graph/graph_gpu.h) for FP32 / FP16 /
 * SQ8, BANG's (plugin/graph/bang_gpu.h) for PQ. Both live in immutable snapshots
 * (gindex_internal.h); this file holds the object, training, searches, parameters and the
 * GRFTGRPH record (and the reader of the graph + PQ index's GRFTBANG version-1 records, through the
 * shared helpers of io_stream.h). The writers that change the contents are in gindex_living.c, the
 * buffers and snapshots both use in gindex_snap.c. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/index_common.h"
#include "core/validate.h"
#include "graph/build.h"
#include "graph/gindex_internal.h"
#include "io/io_stream.h"

#define HEADER_V1 64u  /* bytes of the version-1 record header, magic included */
#define HEADER_V2 80u  /* version 2: storage kind, trained, rerank, reserved */
#define HEADER_V3 104u /* version 3: PQ M, placement, max_expand, bloom_log2, GPU budget */
#define HEADER_V4 152u /* version 4: tombstones, inserts since the build, the living parameters */
#define BANG_MAGIC "GRFTBANG"
#define BANG_HEADER 88u /* the graph + PQ index's record, version 1 */

/* ---- parameters -------------------------------------------------------------------------------- */

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
    p->living.policy = GRAFT_ADD_AUTO;
    p->living.insert_L = 0;
    p->living.rebuild_share = -1.0;
    p->living.consolidate_share = 0.25;
    p->living.background = 1;
    p->keep_fp32 = 1;
    tie_params(p);
}

/* keep_fp32 for this storage (graft_gindex_params). */
static int check_keep_fp32(int storage, int keep, const char* fn) {
    if (keep != 0 && keep != 1)
        return graft_fail(GRAFT_EINVAL, "%s: keep_fp32 = %d (1: FP32 vectors beside the codes, 0: "
                          "the codes only)", fn, keep);
    if (keep) return GRAFT_OK;
    if (storage == GRAFT_STORAGE_FP32)
        return graft_fail(GRAFT_EINVAL, "%s: keep_fp32 = 0 needs a compressed storage (FP16 or "
                          "SQ8): the FP32 storage's vectors are its codes", fn);
    if (storage == GRAFT_STORAGE_PQ)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s: keep_fp32 = 0 is not supported for the PQ "
                          "storage (BANG re-ranks and places out-of-core from the FP32 vectors); "
                          "use FP16 or SQ8", fn);
    return GRAFT_OK;
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

/* Build parameters for this storage (gpu: GRNND's limits too). build_from = codes reads an FP16 or
 * SQ8 storage's codes; GRNND has no PQ decode, and a graph of PQ's coarse reconstructions would
 * cost recall that the re-rank cannot win back, so a PQ index refuses it. */
static int check_build(int storage, const graft_grnnd_params* b, int gpu, const char* fn) {
    GRAFT_TRY(graft_check_build_params(b, gpu, fn));
    if (storage == GRAFT_STORAGE_PQ && b->build_from == GRAFT_BUILD_FROM_CODES)
        return graft_fail(GRAFT_EINVAL, "%s: build_from = codes needs an FP16 or SQ8 storage; a PQ "
                          "index builds its graph from the FP32 vectors", fn);
    return GRAFT_OK;
}

static int check_living(const graft_living_params* l, const char* fn) {
    if (l->policy != GRAFT_ADD_AUTO && l->policy != GRAFT_ADD_INSERT && l->policy != GRAFT_ADD_REBUILD)
        return graft_fail(GRAFT_EINVAL, "%s: unknown add policy %d (GRAFT_ADD_AUTO = 0, "
                          "GRAFT_ADD_INSERT = 1, GRAFT_ADD_REBUILD = 2)", fn, l->policy);
    if (l->insert_L < 0 || l->insert_L > 1024)
        return graft_fail(GRAFT_EINVAL, "%s: insert_L = %d (0 = the default, else 1..1024)", fn,
                          l->insert_L);
    if (!(l->rebuild_share < 0 || (l->rebuild_share > 0 && l->rebuild_share <= 1)))
        return graft_fail(GRAFT_EINVAL, "%s: rebuild_share = %g (negative: the cost model; else in "
                          "(0, 1])", fn, l->rebuild_share);
    if (!(l->consolidate_share >= 0))
        return graft_fail(GRAFT_EINVAL, "%s: consolidate_share = %g (>= 0; >= 1: only when "
                          "consolidate is called)", fn, l->consolidate_share);
    if (l->background != 0 && l->background != 1)
        return graft_fail(GRAFT_EINVAL, "%s: background = %d (0 or 1)", fn, l->background);
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
    GRAFT_TRY(check_keep_fp32(p.storage, p.keep_fp32, fn));
    if (p.storage == GRAFT_STORAGE_PQ) {
        if (p.pq.M == 0) p.pq.M = graft_pq_default_M(d);
        if (p.pq.M < 1 || p.pq.M > d || d % p.pq.M)
            return graft_fail(GRAFT_EINVAL, "%s: M = %d sub-quantizers must divide the dimension "
                              "d = %lld (e.g. M = %d)", fn, p.pq.M, (long long)d,
                              graft_pq_default_M(d));
    }
    tie_params(&p);
    GRAFT_TRY(check_build(p.storage, &p.build, p.device >= 0, fn));
    GRAFT_TRY(check_default_search(p.storage, &p.search, fn));
    if (!p.keep_fp32) p.search.rerank = 0; /* no FP32 to re-rank from: the codes' distances */
    GRAFT_TRY(check_living(&p.living, fn));
    gcodec* c = codec_new();
    if (!c) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    int rc = graft_storage_init(&c->st, p.storage, d);
    if (rc != GRAFT_OK) {
        codec_unref(c);
        return rc;
    }
    graft_gindex* g = calloc(1, sizeof *g);
    gsnap* s = snap_new();
    if (!g || !s) {
        free(g);
        free(s);
        codec_unref(c);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    s->p = p;
    s->codec = c;
    g->d = d;
    g->storage = p.storage;
    g->code_size = p.storage == GRAFT_STORAGE_PQ     ? (size_t)p.pq.M
                   : p.storage == GRAFT_STORAGE_FP32 ? 0
                                                     : graft_storage_code_size(p.storage, d);
    g->cur = s;
    pthread_mutex_init(&g->wlock, NULL);
    pthread_mutex_init(&g->slock, NULL);
    pthread_mutex_init(&g->glock, NULL);
    pthread_cond_init(&g->bg_cv, NULL);
    if (p.device >= 0) {
        rc = graft_gpu_ctx_create(p.device, graft_index_scratch_cap(p.device), &g->ctx);
        if (rc == GRAFT_OK) rc = graft_gpu_ctx_create(p.device, graft_index_scratch_cap(p.device), &g->wctx);
        if (rc == GRAFT_OK && gindex_is_pq(g)) rc = graft_bang_dev_open(g->ctx, &g->bpipe);
        g->bpipe_open = rc == GRAFT_OK && gindex_is_pq(g);
        g->gpipe.ctx = g->ctx;
        if (rc != GRAFT_OK) {
            rc = graft_fail(rc, "%s: device %d: %s", fn, p.device, graft_gpu_last_error());
            graft_gindex_free(g);
            return rc;
        }
    }
    *out = g;
    return GRAFT_OK;
}

void graft_gindex_free(graft_gindex* g) {
    if (!g) return;
    gindex_stop_background(g);
    snap_release(g->cur);
    graft_graph_dev_release(&g->gpipe); /* the search buffers; the resident arrays were the snapshots' */
    if (g->bpipe_open) graft_bang_dev_release(&g->bpipe);
    graft_filter_dev_release(g->ctx, &g->fdev);
    if (g->ctx) graft_gpu_ctx_destroy(g->ctx);
    if (g->wctx) graft_gpu_ctx_destroy(g->wctx);
    pthread_mutex_destroy(&g->wlock);
    pthread_mutex_destroy(&g->slock);
    pthread_mutex_destroy(&g->glock);
    pthread_cond_destroy(&g->bg_cv);
    free(g);
}

static int publish_params(graft_gindex* g, const graft_gindex_params* p, const char* fn);

/* ---- training ---------------------------------------------------------------------------------- */

/* fn: the caller's message prefix ("graft_gindex_add: "). */
static int require_trained(const gsnap* s, const char* fn) {
    if (s->codec->st.trained) return GRAFT_OK;
    if (s->codec->st.kind == GRAFT_STORAGE_PQ)
        return graft_fail(GRAFT_ESTATE, "%sthe index is not trained; train the PQ codebooks first "
                          "(graft_gindex_train, FAISS's Index::train)", fn);
    return graft_fail(GRAFT_ESTATE, "%sthe %s storage must be trained before adding "
                      "(graft_gindex_train)", fn, graft_storage_name(s->codec->st.kind));
}

/* A new snapshot of the current one with codec c (taken). */
static int publish_codec(graft_gindex* g, gcodec* c, const char* fn) {
    gsnap* t = snap_clone(g->cur);
    if (!t) {
        codec_unref(c);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    codec_unref(t->codec);
    t->codec = c;
    gindex_publish(g, t);
    return GRAFT_OK;
}

static int train_locked(graft_gindex* g, int64_t n, const float* x, const char* fn) {
    const gsnap* s = g->cur;
    const int64_t held = s->n - s->ndead;
    if ((g->storage == GRAFT_STORAGE_SQ8 || gindex_is_pq(g)) && s->n > 0)
        return graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors whose %s codes would go "
                          "stale; reset it before training again", fn, (long long)held,
                          graft_storage_name(g->storage));
    gcodec* c = codec_new();
    if (!c) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    int rc = graft_storage_copy(&c->st, &s->codec->st);
    if (rc == GRAFT_OK && gindex_is_pq(g)) {
        rc = graft_pq_train(g->d, n, x, &s->p.pq, &c->pq);
        if (rc == GRAFT_OK) c->st.trained = 1;
    } else if (rc == GRAFT_OK) {
        rc = graft_storage_train(&c->st, n, x);
    }
    if (rc != GRAFT_OK) {
        codec_unref(c);
        return rc;
    }
    return publish_codec(g, c, fn);
}

int graft_gindex_train(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_train";
    /* x and n are checked once, by the trainer that takes them (graft_pq_train,
     * graft_storage_train). */
    if (!g) return graft_fail(GRAFT_EINVAL, "%s: NULL index", fn);
    pthread_mutex_lock(&g->wlock);
    const int rc = train_locked(g, n, x, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_set_pq(graft_gindex* g, const graft_pq* pq) {
    const char* fn = "graft_gindex_set_pq";
    if (!g || !pq) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    if (!gindex_is_pq(g))
        return graft_fail(GRAFT_EINVAL, "%s: the index's storage is %s, not PQ", fn,
                          graft_storage_name(g->storage));
    GRAFT_TRY(graft_pq_check(pq, fn));
    const graft_gindex_params p = graft_gindex_get_params(g);
    /* M is fixed at creation: the codes are sized by it. */
    if (pq->d != g->d || pq->M != p.pq.M)
        return graft_fail(GRAFT_EINVAL, "%s: codebooks of d = %lld, M = %d for an index of d = %lld, "
                          "M = %d", fn, (long long)pq->d, pq->M, (long long)g->d, p.pq.M);
    const size_t bytes = (size_t)pq->M * GRAFT_PQ_KSUB * pq->dsub * sizeof(float);
    gcodec* c = codec_new();
    float* cent = malloc(bytes);
    if (!c || !cent) {
        free(c);
        free(cent);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, bytes);
    }
    memcpy(cent, pq->centroids, bytes);
    c->pq = (graft_pq){.d = pq->d, .M = pq->M, .dsub = pq->dsub, .centroids = cent};
    pthread_mutex_lock(&g->wlock);
    int rc = graft_storage_copy(&c->st, &g->cur->codec->st);
    c->st.trained = 1;
    if (rc == GRAFT_OK && g->cur->n > 0)
        rc = graft_fail(GRAFT_ESTATE, "%s: the index holds %lld vectors encoded with the current "
                        "codebooks; reset it before installing others", fn,
                        (long long)(g->cur->n - g->cur->ndead));
    if (rc == GRAFT_OK) {
        rc = publish_codec(g, c, fn);
        c = NULL;
    }
    pthread_mutex_unlock(&g->wlock);
    codec_unref(c);
    return rc;
}

int graft_gindex_set_keep_fp32(graft_gindex* g, int keep) {
    const char* fn = "graft_gindex_set_keep_fp32";
    if (!g) return graft_fail(GRAFT_EINVAL, "%s: NULL index", fn);
    GRAFT_TRY(check_keep_fp32(g->storage, keep, fn));
    pthread_mutex_lock(&g->wlock);
    graft_gindex_params p = g->cur->p;
    int rc = GRAFT_OK;
    if (p.keep_fp32 != keep) {
        /* The vectors held were stored the other way: a storage choice is made before the first
         * add (or after reset). */
        if (g->cur->n > 0)
            rc = graft_fail(GRAFT_EINVAL, "%s: the index holds %lld vectors stored with keep_fp32 = "
                            "%d; set keep_fp32 before the first add (or reset first)", fn,
                            (long long)(g->cur->n - g->cur->ndead), p.keep_fp32);
        p.keep_fp32 = keep;
        if (!keep) p.search.rerank = 0;
        if (rc == GRAFT_OK) rc = publish_params(g, &p, fn);
    }
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_is_trained(const graft_gindex* cg) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) return 0;
    gsnap* s = gindex_acquire(g);
    const int t = s->codec->st.trained;
    snap_release(s);
    return t;
}

/* ---- search ------------------------------------------------------------------------------------ */

/* The device data of a snapshot seen through the index's search buffers: the walk's and BANG's
 * host drivers (graph_gpu.c, bang_gpu.c) take one struct of both. After the search, everything
 * but the snapshot's arrays goes back to the index (buffers the search grew). glock held. */
static graft_graph_dev walk_view(graft_gindex* g, const gsnap* s) {
    graft_graph_dev v = g->gpipe;
    v.ctx = g->ctx;
    v.x = s->dx ? s->dx->p : NULL; /* NULL with keep_fp32 = 0: the walk does not re-rank */
    v.nbrs = s->dnbrs->p;
    v.n = s->n;
    v.d = g->d;
    v.entry = s->graph.entry;
    v.R = s->graph.R;
    v.storage = g->storage;
    v.codes = s->dcodes ? s->dcodes->p : NULL;
    v.sq = s->dsq ? s->dsq->p : NULL;
    v.bytes = s->dev_bytes;
    return v;
}

static void walk_keep(graft_gindex* g, const graft_graph_dev* v) {
    g->gpipe = *v;
    g->gpipe.x = NULL;
    g->gpipe.nbrs = NULL;
    g->gpipe.codes = NULL;
    g->gpipe.sq = NULL;
}

static graft_bang_dev bang_view(graft_gindex* g, const gsnap* s) {
    graft_bang_dev v = g->bpipe;
    v.n = s->n;
    v.d = g->d;
    v.entry = s->graph.entry;
    v.R = s->graph.R;
    v.M = s->p.pq.M;
    v.metric = s->p.metric;
    v.in_memory = s->dev_mode == GRAFT_BANG_IN_MEMORY;
    v.centroids = s->dcent->p;
    v.codes = s->dcodes->p;
    v.nbrs = v.in_memory ? s->dnbrs->p : NULL;
    v.x = v.in_memory ? s->dx->p : NULL;
    v.resident_bytes = s->dev_bytes;
    return v;
}

static void bang_keep(graft_gindex* g, const graft_bang_dev* v) {
    g->bpipe = *v;
    g->bpipe.centroids = NULL;
    g->bpipe.codes = NULL;
    g->bpipe.nbrs = NULL;
    g->bpipe.x = NULL;
    g->bpipe.host_nbrs = NULL;
    g->bpipe.host_x = NULL;
}

/* The graph search of a filtered search (graft_filter_walk_fn) with beam L: the storage's walk,
 * or for PQ BANG's, with at least L expansions so that a widened beam is walked. */
typedef struct walk_arg {
    graft_gindex* g;
    const gsnap* s;
    const float* xq;
    int64_t nq, k;
    const graft_search_params* p;
    graft_search_report* report;
} walk_arg;

static int walk(void* arg, int L, float* D, int64_t* I) {
    const walk_arg* w = arg;
    graft_gindex* g = w->g;
    const gsnap* s = w->s;
    const gcodec* c = s->codec;
    const float* xb = s->xb ? s->xb->p : NULL; /* NULL: codes only, no re-rank (PQ keeps xb) */
    const uint8_t* codes = s->codes ? s->codes->p : NULL;
    graft_search_params p = *w->p;
    p.L = L;
    int rc;
    if (gindex_is_pq(g)) {
        if (p.max_expand && p.max_expand < L) p.max_expand = L;
        if (!g->ctx)
            return graft_bang_search_cpu_unchecked(&s->graph, &c->pq, codes, xb, g->d, s->p.metric,
                                                   w->xq, w->nq, w->k, &p, D, I);
        graft_bang_dev v = bang_view(g, s);
        rc = graft_bang_dev_search(&v, s->graph.nbrs, xb, w->xq, w->nq, w->k, &p, D, I, w->report);
        bang_keep(g, &v);
        return rc;
    }
    if (!g->ctx)
        return graft_graph_search_cpu_store(&s->graph, xb, &c->st, codes, g->d, s->p.metric, w->xq,
                                            w->nq, w->k, &p, D, I, w->report);
    graft_graph_dev v = walk_view(g, s);
    rc = graft_graph_dev_search(&v, s->p.metric, w->xq, w->nq, w->k, &p, D, I, w->report);
    walk_keep(g, &v);
    return rc;
}

/* The filter of a search in slots: the live slots, and of those the ids the caller's filter lets
 * through (ids are the live slots' ranks). NULL without tombstones (the caller's filter is
 * already in slots); *owned: a buffer to free. */
static const uint8_t* slot_filter(const gsnap* s, const uint8_t* allowed, uint8_t** owned) {
    *owned = NULL;
    if (!s->ndead) return allowed;
    if (!allowed) return s->live->p;
    uint8_t* f = calloc((size_t)words_of(s->n), 8);
    if (!f) return NULL;
    int64_t id = 0;
    for (int64_t slot = 0; slot < s->n; slot++) {
        if (snap_is_dead(s, slot)) continue;
        if (allowed[id >> 3] >> (id & 7) & 1) f[slot >> 3] |= (uint8_t)(1u << (slot & 7));
        id++;
    }
    *owned = f;
    return f;
}

static int search_snapshot(graft_gindex* g, const gsnap* s, int64_t nq, const float* xq, int64_t k,
                           const graft_search_params* params, float* D, int64_t* I,
                           graft_search_report* report, const char* fn) {
    graft_search_params p = params ? *params : s->p.search;
    p.device = s->p.device; /* the index's device decides, whatever the caller's struct says */
    /* The worklist holds the results, so it is at least k wide (and BANG expands so many): FAISS's
     * HNSW searches with max(efSearch, k) the same way. */
    if (p.L < k) {
        p.L = (int)k;
        if (p.max_expand && p.max_expand < p.L) p.max_expand = p.L;
    }
    if (g->storage == GRAFT_STORAGE_FP32) p.rerank = 0; /* exact already: nothing to re-rank */
    /* keep_fp32 = 0: no FP32 copy to re-rank from; the results' distances are the codes'. */
    if (snap_codes_only(s)) p.rerank = 0;
    const int64_t held = s->n - s->ndead;
    GRAFT_TRY(check_search(g->storage, &p, k, g->ctx != NULL, fn));
    GRAFT_TRY(graft_check_filter_len(p.allowed, p.allowed_n, held, fn));
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    /* The queries' values are checked once, where they are read: by the walks (the GPU's as it
     * copies them into pinned memory), by the filtered search's exact path, or here when the index
     * is empty. */
    if (held == 0) {
        int rc = graft_check_finite(xq, nq, g->d, "graft_gindex_search: queries");
        if (rc == GRAFT_OK) graft_fill_empty(nq, k, s->p.metric, D, I);
        return rc;
    }
    uint8_t* owned;
    const uint8_t* allowed = slot_filter(s, p.allowed, &owned);
    if (s->ndead && !allowed) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    const float* dev_x = !s->on_device || !s->dx ? NULL
                         : gindex_is_pq(g) ? (s->dev_mode == GRAFT_BANG_IN_MEMORY ? s->dx->p : NULL)
                                           : s->dx->p;
    /* keep_fp32 = 0: the exact path decodes the passing rows (no x, no x_dev). */
    graft_filter_data dt = {s->p.metric, s->n, g->d, s->graph.R, s->xb ? s->xb->p : NULL, dev_x,
                            g->ctx, &g->fdev, s->p.cpu_knn,
                            snap_codes_only(s) ? &s->codec->st : NULL,
                            snap_codes_only(s) ? s->codes->p : NULL};
    p.allowed = allowed; /* the walks read the filter in slots */
    p.allowed_n = s->n;
    walk_arg w = {g, s, xq, nq, k, &p, report};
    graft_filter_report fr;
    if (g->ctx) pthread_mutex_lock(&g->glock);
    int rc = graft_filtered_search(&dt, allowed, p.L, p.filter_exact_below, xq, nq, k, D, I, walk, &w,
                                   &fr, fn);
    if (g->ctx) pthread_mutex_unlock(&g->glock);
    free(owned);
    if (rc != GRAFT_OK) return rc;
    if (s->ndead) { /* slots to ids */
        const int64_t total = nq * k;
#pragma omp parallel for schedule(static) if (total > 65536)
        for (int64_t i = 0; i < total; i++)
            if (I[i] >= 0) I[i] = snap_slot_to_id(s, I[i]);
    }
    pthread_mutex_lock(&g->slock);
    g->last_filter = fr;
    pthread_mutex_unlock(&g->slock);
    if (report) report->filter = fr;
    return GRAFT_OK;
}

/* What a search needs of the current snapshot: a graph over every slot, and on a GPU its device
 * data. */
static int search_ready(const graft_gindex* g, const gsnap* s) {
    return s->n == s->ndead || (s->graph.nbrs && (!g->ctx || s->on_device));
}

int graft_gindex_search(const graft_gindex* cg, int64_t nq, const float* xq, int64_t k,
                        const graft_search_params* params, float* D, int64_t* I,
                        graft_search_report* report) {
    const char* fn = "graft_gindex_search";
    graft_gindex* g = (graft_gindex*)cg; /* the pending build and the search buffers are the
                                            mutable part */
    /* The boundary: the call's arguments are checked here, once, and the parameters in
     * search_snapshot; the walks below trust them. */
    GRAFT_TRY(graft_check_search_call(g != NULL, nq, xq, k, D, I, fn));
    gsnap* s = gindex_acquire(g);
    if (!search_ready(g, s)) {
        /* A build (or an upload) is pending: the search runs it as a writer, then searches the
         * snapshot it published before any other writer can replace it. */
        snap_release(s);
        pthread_mutex_lock(&g->wlock);
        int rc = gindex_make_ready(g, "graft_gindex_search: ");
        s = rc == GRAFT_OK ? gindex_acquire(g) : NULL;
        pthread_mutex_unlock(&g->wlock);
        if (rc != GRAFT_OK) return rc;
    }
    const int rc = search_snapshot(g, s, nq, xq, k, params, D, I, report, fn);
    snap_release(s);
    return rc;
}

/* ---- accessors and parameters ------------------------------------------------------------------ */

/* Reads of the current snapshot: a reference held for the read. The pointers handed out stay
 * valid while the index holds the snapshot (until the next write). */
#define WITH_SNAP(g, s, expr)             \
    do {                                  \
        gsnap* s = gindex_acquire(g);     \
        expr;                             \
        snap_release(s);                  \
    } while (0)

int64_t graft_gindex_ntotal(const graft_gindex* cg) {
    int64_t n = 0;
    if (cg) WITH_SNAP((graft_gindex*)cg, s, n = s->n - s->ndead);
    return n;
}
int64_t graft_gindex_slots(const graft_gindex* cg) {
    int64_t n = 0;
    if (cg) WITH_SNAP((graft_gindex*)cg, s, n = s->n);
    return n;
}
int64_t graft_gindex_d(const graft_gindex* g) { return g ? g->d : 0; }
graft_metric graft_gindex_metric(const graft_gindex* g) {
    graft_metric m = GRAFT_METRIC_L2;
    if (g) WITH_SNAP((graft_gindex*)g, s, m = s->p.metric);
    return m;
}
int graft_gindex_device(const graft_gindex* g) {
    int dev = -1;
    if (g && g->ctx) WITH_SNAP((graft_gindex*)g, s, dev = s->p.device);
    return dev;
}
const float* graft_gindex_vectors(const graft_gindex* g) {
    const float* x = NULL;
    if (g) WITH_SNAP((graft_gindex*)g, s, x = s->xb ? s->xb->p : NULL);
    return x;
}
const uint8_t* graft_gindex_codes(const graft_gindex* g) {
    const uint8_t* c = NULL;
    if (g) WITH_SNAP((graft_gindex*)g, s, c = s->codes ? s->codes->p : NULL);
    return c;
}
const graft_pq* graft_gindex_pq(const graft_gindex* g) {
    const graft_pq* pq = NULL;
    if (g) WITH_SNAP((graft_gindex*)g, s, pq = s->codec->pq.centroids ? &s->codec->pq : NULL);
    return pq;
}
const graft_storage* graft_gindex_storage(const graft_gindex* g) {
    const graft_storage* st = NULL;
    if (g) WITH_SNAP((graft_gindex*)g, s, st = &s->codec->st);
    return st;
}

const graft_graph* graft_gindex_graph(const graft_gindex* cg) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) return NULL;
    gsnap* s = gindex_acquire(g);
    if (s->host_stale) { /* the device's graph is newer: bring the host's up to date */
        snap_release(s);
        pthread_mutex_lock(&g->wlock);
        const int rc = gindex_make_ready(g, "graft_gindex_graph: ");
        s = gindex_acquire(g);
        pthread_mutex_unlock(&g->wlock);
        if (rc != GRAFT_OK) {
            snap_release(s);
            return NULL;
        }
    }
    const graft_graph* gr = s->graph.nbrs ? &s->graph : NULL;
    snap_release(s);
    return gr;
}

int graft_gindex_build_pending(const graft_gindex* g) {
    int pending = 0;
    if (g) WITH_SNAP((graft_gindex*)g, s, pending = s->n > s->ndead && !s->graph.nbrs);
    return pending;
}

int graft_gindex_reconstruct(const graft_gindex* cg, int64_t id, float* out) {
    const char* fn = "graft_gindex_reconstruct";
    graft_gindex* g = (graft_gindex*)cg;
    if (!g || !out) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    gsnap* s = gindex_acquire(g);
    const int64_t held = s->n - s->ndead;
    int rc = GRAFT_OK;
    if (id < 0 || id >= held)
        rc = graft_fail(GRAFT_EINVAL, "%s: key %lld not in [0, %lld)", fn, (long long)id, (long long)held);
    else if (snap_codes_only(s))
        snap_decode_rows(s, g->d, snap_id_to_slot(s, id), 1, out);
    else
        memcpy(out, (const float*)s->xb->p + snap_id_to_slot(s, id) * g->d, (size_t)g->d * sizeof(float));
    snap_release(s);
    return rc;
}

double graft_gindex_build_seconds(const graft_gindex* g) {
    double t = 0;
    if (g) WITH_SNAP((graft_gindex*)g, s, t = s->graph.nbrs ? s->build_seconds : 0);
    return t;
}
int graft_gindex_build_pieces(const graft_gindex* g) {
    int p = -1;
    if (g) WITH_SNAP((graft_gindex*)g, s, p = s->graph.nbrs ? s->build_rep.pieces : -1);
    return p;
}

int graft_gindex_build_report(const graft_gindex* g, graft_pieces_report* rep) {
    if (!g || !rep) return graft_fail(GRAFT_EINVAL, "graft_gindex_build_report: NULL argument");
    WITH_SNAP((graft_gindex*)g, s,
              *rep = s->graph.nbrs ? s->build_rep : (graft_pieces_report){.pieces = -1});
    return GRAFT_OK;
}

graft_bang_mode graft_gindex_mode(const graft_gindex* cg) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g || !g->ctx) return GRAFT_BANG_AUTO;
    graft_bang_mode m;
    WITH_SNAP(g, s,
              m = s->on_device ? s->dev_mode
                               : gindex_resolve_mode(g, s, s->p.mode, s->p.gpu_budget, s->n - s->ndead,
                                                     s->p.build.base.R));
    return m;
}

size_t graft_gindex_gpu_bytes(const graft_gindex* g) {
    size_t b = 0;
    if (g) WITH_SNAP((graft_gindex*)g, s, b = s->on_device ? s->dev_bytes : 0);
    return b;
}

static size_t gbuf_bytes(const gbuf* b) { return b ? b->bytes : 0; }

/* The buffers s holds on the host, as allocated (capacity included), and its codec. */
static size_t snap_host_bytes(const graft_gindex* g, const gsnap* s) {
    size_t b = gbuf_bytes(s->xb) + gbuf_bytes(s->codes) + gbuf_bytes(s->nbrs) + gbuf_bytes(s->dead) +
               gbuf_bytes(s->live) + gbuf_bytes(s->rank);
    const gcodec* c = s->codec;
    if (g->storage == GRAFT_STORAGE_SQ8 && c->st.vmin) b += (size_t)g->d * 2 * sizeof(float);
    if (gindex_is_pq(g) && c->pq.centroids) b += (size_t)g->d * GRAFT_PQ_KSUB * sizeof(float);
    return b;
}

size_t graft_gindex_host_bytes(const graft_gindex* g) {
    size_t b = 0;
    if (g) WITH_SNAP((graft_gindex*)g, s, b = snap_host_bytes(g, s));
    return b;
}

int graft_gindex_last_filter(const graft_gindex* cg, graft_filter_report* out) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g || !out) return graft_fail(GRAFT_EINVAL, "graft_gindex_last_filter: NULL argument");
    pthread_mutex_lock(&g->slock);
    *out = g->last_filter;
    pthread_mutex_unlock(&g->slock);
    return GRAFT_OK;
}

int graft_gindex_living_report(const graft_gindex* cg, graft_living_report* out) {
    graft_gindex* g = (graft_gindex*)cg;
    if (!g || !out) return graft_fail(GRAFT_EINVAL, "graft_gindex_living_report: NULL argument");
    pthread_mutex_lock(&g->slock);
    *out = g->rep;
    const graft_living_params l = g->cur->p.living;
    out->rebuild_share = l.rebuild_share > 0 ? l.rebuild_share : graft_gindex_rebuild_share(g->ctx != NULL);
    pthread_mutex_unlock(&g->slock);
    return GRAFT_OK;
}

graft_gindex_params graft_gindex_get_params(const graft_gindex* cg) {
    graft_gindex_params p;
    graft_gindex* g = (graft_gindex*)cg;
    if (!g) {
        graft_gindex_params_defaults(&p);
        return p;
    }
    WITH_SNAP(g, s, p = s->p);
    return p;
}

/* A new snapshot of the current one whose parameters are p (checked by the caller). */
static int publish_params(graft_gindex* g, const graft_gindex_params* p, const char* fn) {
    gsnap* t = snap_clone(g->cur);
    if (!t) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    t->p = *p;
    gindex_publish(g, t);
    return GRAFT_OK;
}

int graft_gindex_set_search_params(graft_gindex* g, const graft_search_params* params) {
    const char* fn = "graft_gindex_set_search_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->wlock);
    graft_gindex_params p = g->cur->p;
    p.search = *params;
    p.search.device = p.device;
    int rc = check_default_search(g->storage, &p.search, fn);
    if (!p.keep_fp32) p.search.rerank = 0; /* nothing to re-rank from (get_params says so) */
    if (rc == GRAFT_OK) rc = publish_params(g, &p, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_set_build_params(graft_gindex* g, const graft_grnnd_params* params) {
    const char* fn = "graft_gindex_set_build_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->wlock);
    graft_gindex_params p = g->cur->p;
    p.build = *params;
    tie_params(&p);
    int rc = check_build(g->storage, &p.build, g->ctx != NULL, fn);
    if (rc == GRAFT_OK) rc = publish_params(g, &p, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_set_living_params(graft_gindex* g, const graft_living_params* params) {
    const char* fn = "graft_gindex_set_living_params";
    if (!g || !params) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    GRAFT_TRY(check_living(params, fn));
    pthread_mutex_lock(&g->wlock);
    graft_gindex_params p = g->cur->p;
    p.living = *params;
    const int rc = publish_params(g, &p, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_set_mode(graft_gindex* g, graft_bang_mode mode, size_t budget) {
    const char* fn = "graft_gindex_set_mode: ";
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_set_mode: NULL index");
    GRAFT_TRY(check_mode(g->storage, mode, "graft_gindex_set_mode"));
    pthread_mutex_lock(&g->wlock);
    gsnap* s = g->cur;
    graft_gindex_params p = s->p;
    p.mode = mode;
    p.gpu_budget = budget;
    int rc = GRAFT_OK;
    /* Without a graph the next build's upload applies them. */
    if (g->ctx && s->graph.nbrs && gindex_is_pq(g)) {
        const graft_bang_mode m = gindex_resolve_mode(g, s, mode, budget, s->n, s->graph.R);
        if (!s->on_device || m != s->dev_mode || budget != s->p.gpu_budget) {
            /* The old device data goes first: two copies of a near-budget index may not fit (a
             * search in flight holds it until it returns). A failed upload then puts the old
             * mode back (which fitted before); without one, the next search uploads. */
            const graft_bang_mode old = s->dev_mode;
            const size_t old_budget = s->p.gpu_budget;
            const int was_on = s->on_device;
            gsnap* t = snap_clone(s);
            rc = t ? gindex_sync_host(g, t, fn) : graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
            if (rc != GRAFT_OK) {
                snap_release(t);
                pthread_mutex_unlock(&g->wlock);
                return rc;
            }
            snap_drop_device(t);
            gsnap* bare = snap_clone(t);
            if (bare) gindex_publish(g, bare);
            rc = gindex_upload(g, t, m, budget, t->n, fn);
            if (rc == GRAFT_OK)
                t->p = p;
            else if (was_on && gindex_upload(g, t, old, old_budget, t->n, fn) == GRAFT_OK)
                rc = graft_relabel(rc, ""); /* the first failure's message */
            gindex_publish(g, t);
            pthread_mutex_unlock(&g->wlock);
            return rc;
        }
    }
    rc = publish_params(g, &p, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

/* Replaces the contents with x (malloc'd n x d, taken; NULL with keep_fp32 = 0 when codes are
 * given; freed once encoded with keep_fp32 = 0), their codes (malloc'd and taken; NULL: encoded
 * here), graph (taken), tombstones `dead` (malloc'd bitmap of n bits, taken; NULL: none)
 * and since_build; all are freed on failure, and the index is then unchanged. Checked by the
 * caller; fn is the message prefix ("graft_gindex_set_data: "). */
static int adopt_data(graft_gindex* g, int64_t n, float* x, uint8_t* codes, graft_graph* graph,
                      uint8_t* dead, int64_t since_build, const char* fn) {
    pthread_mutex_lock(&g->wlock);
    gsnap* s = g->cur;
    int rc = require_trained(s, fn);
    gsnap* t = rc == GRAFT_OK ? snap_clone(s) : NULL;
    if (rc == GRAFT_OK && !t) rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    if (rc == GRAFT_OK && g->code_size && !codes) {
        codes = malloc((size_t)n * g->code_size);
        if (!codes)
            rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes of codes)", fn,
                            (size_t)n * g->code_size);
        else
            rc = gindex_encode(g, s->codec, n, x, codes, fn);
        if (rc == GRAFT_OK && snap_codes_only(s)) rc = gindex_check_codes(g, s->codec, n, codes, fn);
    }
    if (rc == GRAFT_OK && snap_codes_only(s)) { /* the codes are the vectors now */
        free(x);
        x = NULL;
    }
    gbuf *bx = NULL, *bc = NULL, *bg = NULL, *bd = NULL;
    if (rc == GRAFT_OK) { /* the arrays, taken */
        bx = x ? gbuf_wrap(x, (size_t)n * g->d * sizeof(float)) : NULL;
        bc = codes ? gbuf_wrap(codes, (size_t)n * g->code_size) : NULL;
        bg = gbuf_wrap(graph->nbrs, (size_t)n * graph->R * sizeof(int32_t));
        bd = dead ? gbuf_wrap(dead, (size_t)(n + 7) / 8) : NULL;
        if ((x && !bx) || !bg || (codes && !bc) || (dead && !bd)) {
            free(bx), free(bc), free(bg), free(bd);
            bx = bc = bg = bd = NULL;
            rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
        }
    }
    if (rc != GRAFT_OK) {
        snap_release(t);
        pthread_mutex_unlock(&g->wlock);
        free(x);
        free(codes);
        free(dead);
        graft_graph_free(graph);
        return rc;
    }
    snap_drop_graph(t);
    gbuf_set(&t->xb, bx);
    gbuf_set(&t->codes, bc);
    gbuf_set(&t->dead, bd);
    t->n = t->cap = n;
    t->nbrs = bg;
    t->graph = (graft_graph){n, graph->R, graph->nbrs, graph->entry};
    memset(graph, 0, sizeof *graph);
    t->since_build = since_build;
    rc = snap_index_tombstones(t);
    if (rc == GRAFT_OK && g->ctx) {
        const graft_bang_mode mode = gindex_resolve_mode(g, t, t->p.mode, t->p.gpu_budget, t->n, t->graph.R);
        rc = gindex_upload(g, t, mode, t->p.gpu_budget, t->n, fn);
    }
    if (rc == GRAFT_OK) {
        g->epoch++;
        gindex_publish(g, t);
    } else {
        snap_release(t);
    }
    pthread_mutex_unlock(&g->wlock);
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
    return adopt_data(g, n, xc, NULL, &gc, NULL, 0, "graft_gindex_set_data: ");
}

int graft_gindex_set_graph(graft_gindex* g, const graft_graph* graph) {
    const char* fn = "graft_gindex_set_graph";
    if (!g || !graph) return graft_fail(GRAFT_EINVAL, "%s: NULL argument", fn);
    pthread_mutex_lock(&g->wlock);
    gsnap* s = g->cur;
    int rc = s->n == 0 ? graft_fail(GRAFT_EINVAL, "%s: the index holds no vectors", fn)
             : s->xb   ? graft_check_graph_data(s->n, g->d, s->xb->p, graph, g->ctx != NULL, fn)
                       : graft_check_graph_rows(s->n, graph, g->ctx != NULL, fn); /* codes only */
    const size_t row = (size_t)graph->R * sizeof(int32_t);
    gbuf* nb = rc == GRAFT_OK ? gbuf_host((size_t)graph->n * row) : NULL;
    if (rc == GRAFT_OK && !nb)
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn, (size_t)graph->n * row);
    gsnap* t = rc == GRAFT_OK ? snap_clone(s) : NULL;
    if (rc == GRAFT_OK && !t) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    if (rc == GRAFT_OK) {
        /* On all cores: the copy into fresh pages is bound by their faults (GBs at scale). */
        const int64_t rows = graph->n;
        int32_t* dst = nb->p;
#pragma omp parallel for schedule(static)
        for (int64_t v = 0; v < rows; v++) memcpy(dst + v * graph->R, graph->nbrs + v * graph->R, row);
        snap_drop_graph(t); /* build_seconds 0, pieces -1: a graph given */
        t->nbrs = nb;
        nb = NULL;
        t->graph = (graft_graph){rows, graph->R, t->nbrs->p, graph->entry};
        if (g->ctx) {
            const graft_bang_mode mode = gindex_resolve_mode(g, t, t->p.mode, t->p.gpu_budget, t->n, t->graph.R);
            rc = gindex_upload(g, t, mode, t->p.gpu_budget, t->n, "graft_gindex_set_graph: ");
        }
    }
    if (rc == GRAFT_OK)
        gindex_publish(g, t);
    else
        snap_release(t);
    gbuf_unref(nb);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

/* ---- the GRFTGRPH record (and the GRFTBANG reader) --------------------------------------------- */

static int write_snapshot(const graft_gindex* g, const gsnap* sn, FILE* f) {
    const int64_t n = sn->n;
    const int R = n > 0 ? sn->graph.R : 0, pq = gindex_is_pq(g);
    const graft_gindex_params* p = &sn->p;
    const graft_search_params* sp = &p->search;
    const graft_storage* st = &sn->codec->st;
    const int codes_only = snap_codes_only(sn);
    unsigned char hdr[HEADER_V4];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, GRAFT_GRAPH_MAGIC, 8);
    /* Version 5 only for keep_fp32 = 0 (codes in place of the vectors): a reader of version 4
     * refuses it as newer, and every other record stays readable by it. */
    graft_put_le(hdr + 8, codes_only ? 5u : 4u, 4);
    graft_put_le(hdr + 12, HEADER_V4, 4);
    graft_put_le(hdr + 16, (uint64_t)g->d, 8);
    graft_put_le(hdr + 24, (uint64_t)n, 8);
    graft_put_le(hdr + 32, (uint32_t)p->metric, 4);
    graft_put_le(hdr + 36, (uint32_t)R, 4);
    graft_put_le(hdr + 40, (uint64_t)(n > 0 ? sn->graph.entry : 0), 8);
    graft_put_le(hdr + 48, (uint32_t)sp->L, 4);
    graft_put_le(hdr + 52, (uint32_t)sp->probes, 4);
    graft_put_le(hdr + 56, (uint32_t)sp->visited, 4);
    graft_put_le(hdr + 60, (uint32_t)sp->merge, 4);
    graft_put_le(hdr + 64, (uint32_t)st->kind, 4);
    graft_put_le(hdr + 68, (uint32_t)st->trained, 4);
    graft_put_le(hdr + 72, (uint32_t)sp->rerank, 4);
    graft_put_le(hdr + 80, (uint32_t)(pq ? p->pq.M : 0), 4);
    graft_put_le(hdr + 84, (uint32_t)p->mode, 4);
    graft_put_le(hdr + 88, (uint32_t)sp->max_expand, 4);
    graft_put_le(hdr + 92, (uint32_t)sp->bloom_log2, 4);
    graft_put_le(hdr + 96, (uint64_t)p->gpu_budget, 8);
    graft_put_le(hdr + 104, (uint64_t)sn->ndead, 8);
    graft_put_le(hdr + 112, (uint64_t)sn->since_build, 8);
    graft_put_le(hdr + 120, (uint32_t)p->living.policy, 4);
    graft_put_le(hdr + 124, (uint32_t)p->living.insert_L, 4);
    uint64_t bits;
    memcpy(&bits, &p->living.rebuild_share, 8);
    graft_put_le(hdr + 128, bits, 8);
    memcpy(&bits, &p->living.consolidate_share, 8);
    graft_put_le(hdr + 136, bits, 8);
    graft_put_le(hdr + 144, (uint32_t)p->living.background, 4);
    if (codes_only) graft_put_le(hdr + 148, 0u, 4); /* version 5's keep_fp32 (version 4: reserved 0) */
    graft_stream s = graft_stream_at(f, "graft_gindex_write", "graph index");
    GRAFT_TRY(graft_stream_put(&s, hdr, sizeof hdr));
    if (st->kind == GRAFT_STORAGE_SQ8 && st->trained) {
        GRAFT_TRY(graft_stream_put_words(&s, st->vmin, (size_t)g->d * sizeof(float)));
        GRAFT_TRY(graft_stream_put_words(&s, st->vdiff, (size_t)g->d * sizeof(float)));
    }
    /* the index holds every array: their sizes do not overflow */
    if (pq && st->trained)
        GRAFT_TRY(graft_stream_put_words(&s, sn->codec->pq.centroids,
                                         (size_t)GRAFT_PQ_KSUB * (size_t)g->d * sizeof(float)));
    if (n > 0) {
        if (pq || codes_only) GRAFT_TRY(graft_stream_put(&s, sn->codes->p, (size_t)n * g->code_size));
        if (!codes_only)
            GRAFT_TRY(graft_stream_put_words(&s, sn->xb->p, (size_t)n * (size_t)g->d * sizeof(float)));
        GRAFT_TRY(graft_stream_put_words(&s, sn->graph.nbrs, (size_t)n * (size_t)R * sizeof(int32_t)));
    }
    if (sn->ndead) GRAFT_TRY(graft_stream_put(&s, sn->dead->p, (size_t)(n + 7) / 8));
    return graft_stream_put_checksum(&s);
}

int graft_gindex_write(const graft_gindex* cg, FILE* f) {
    if (!cg || !f) return graft_fail(GRAFT_EINVAL, "graft_gindex_write: NULL argument");
    graft_gindex* g = (graft_gindex*)cg; /* a pending graph is built first: the file holds one */
    pthread_mutex_lock(&g->wlock);
    int rc = gindex_make_ready(g, "graft_gindex_write: ");
    gsnap* s = rc == GRAFT_OK ? gindex_acquire(g) : NULL;
    pthread_mutex_unlock(&g->wlock);
    if (rc == GRAFT_OK) rc = write_snapshot(g, s, f);
    snap_release(s);
    return rc;
}

/* What a record's header says, whichever kind and version. */
typedef struct record {
    int64_t d, n, entry, ndead, since_build;
    int R, trained; /* and r.p.keep_fp32: 0 only in version 5 */
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
    r->ndead = r->since_build = 0;
    return GRAFT_OK;
}

static int32_t get_i32(const unsigned char* p) { return (int32_t)(uint32_t)graft_get_le(p, 4); }

static double get_f64(const unsigned char* p) {
    const uint64_t bits = graft_get_le(p, 8);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

/* The GRFTGRPH header of `version` (1..4) past the shape; r->p holds the caller's parameters. */
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
    if (version >= 4) {
        r->ndead = (int64_t)graft_get_le(hdr + 104, 8);
        r->since_build = (int64_t)graft_get_le(hdr + 112, 8);
        p->living.policy = get_i32(hdr + 120);
        p->living.insert_L = get_i32(hdr + 124);
        p->living.rebuild_share = get_f64(hdr + 128);
        p->living.consolidate_share = get_f64(hdr + 136);
        p->living.background = get_i32(hdr + 144);
        if (r->ndead < 0 || r->ndead > r->n)
            return graft_fail(GRAFT_EFORMAT, "%s: %lld tombstones among %lld vectors", fn,
                              (long long)r->ndead, (long long)r->n);
        if (r->since_build < 0 || r->since_build > r->n)
            return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors inserted since the build among %lld",
                              fn, (long long)r->since_build, (long long)r->n);
        if (check_living(&p->living, fn) != GRAFT_OK) return graft_relabel(GRAFT_EFORMAT, "");
    }
    p->keep_fp32 = version >= 5 ? get_i32(hdr + 148) : 1;
    if (check_keep_fp32(p->storage, p->keep_fp32, fn) != GRAFT_OK) return graft_relabel(GRAFT_EFORMAT, "");
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
    p->keep_fp32 = 1;
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
    unsigned char hdr[HEADER_V4];
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
                                          bang ? BANG_HEADER : HEADER_V1, bang ? BANG_HEADER : HEADER_V4,
                                          hdr, &version, &hsize));
    const uint32_t need = bang           ? BANG_HEADER
                          : version >= 4 ? HEADER_V4
                          : version >= 3 ? HEADER_V3
                          : version >= 2 ? HEADER_V2
                                         : HEADER_V1;
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
    const int codes_only = !r.p.keep_fp32; /* version 5: codes in place of the vectors */
    /* n < 2^31, d <= 2^20, R <= 4096: the sizes overflow only on 32-bit hosts */
    const size_t pbytes = !r.trained ? 0
                          : pq       ? (size_t)GRAFT_PQ_KSUB * (size_t)d * sizeof(float)
                          : sq8      ? (size_t)d * 2 * sizeof(float)
                                     : 0;
    const size_t cbytes = pq           ? (size_t)n * (size_t)r.p.pq.M
                          : codes_only ? (size_t)n * graft_storage_code_size(r.p.storage, d)
                                       : 0;
    const size_t dbytes = r.ndead ? (size_t)(n + 7) / 8 : 0;
    size_t xbytes, gbytes;
    if (graft_mul_overflow((size_t)n, codes_only ? 0 : (size_t)d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)n, (size_t)r.R * sizeof(int32_t), &gbytes) ||
        xbytes > SIZE_MAX / 2 - gbytes - cbytes - pbytes - dbytes)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld vectors of dimension %lld overflow the address space",
                          fn, (long long)n, (long long)d);
    GRAFT_TRY(graft_stream_check_room(&s, (uint64_t)(pbytes + cbytes + xbytes + gbytes + dbytes) + 8));

    float* params_blob = pbytes ? malloc(pbytes) : NULL; /* SQ8 vmin | vdiff, or PQ centroids */
    uint8_t* codes = cbytes ? malloc(cbytes) : NULL;
    float* x = n > 0 && xbytes ? malloc(xbytes) : NULL;
    uint8_t* dead = dbytes ? malloc(dbytes) : NULL;
    graft_graph graph = {n, r.R, n > 0 ? malloc(gbytes) : NULL, r.entry};
    int rc = GRAFT_OK;
    if ((pbytes && !params_blob) || (cbytes && !codes) || (n > 0 && ((xbytes && !x) || !graph.nbrs)) ||
        (dbytes && !dead))
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%zu bytes)", fn,
                        pbytes + cbytes + xbytes + gbytes + dbytes);
    if (rc == GRAFT_OK && pbytes)
        rc = graft_stream_get_words(&s, params_blob, pbytes, pq ? "codebooks" : "SQ8 parameters");
    if (rc == GRAFT_OK && cbytes) rc = graft_stream_get(&s, codes, cbytes, "codes");
    if (rc == GRAFT_OK && n > 0 && x) rc = graft_stream_get_words(&s, x, xbytes, "vectors");
    if (rc == GRAFT_OK && n > 0) rc = graft_stream_get_words(&s, graph.nbrs, gbytes, "graph");
    if (rc == GRAFT_OK && dbytes) rc = graft_stream_get(&s, dead, dbytes, "tombstones");
    if (rc == GRAFT_OK) rc = graft_stream_check_checksum(&s);
    /* A record with a valid checksum can still hold bad ids, NaN or a bitmap that does not count
     * its tombstones (written by another tool). */
    graft_pq codebooks = {d, r.p.pq.M, pq ? (int)(d / r.p.pq.M) : 0, params_blob};
    if (rc == GRAFT_OK && pq && pbytes && graft_pq_check(&codebooks, fn) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    if (rc == GRAFT_OK && n > 0 &&
        (x ? graft_check_graph_data(n, d, x, &graph, 0, fn) : graft_check_graph_rows(n, &graph, 0, fn)) != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    if (rc == GRAFT_OK && dbytes) {
        int64_t set = 0;
        for (size_t b = 0; b < dbytes; b++) set += __builtin_popcount(dead[b]);
        const int past = (n & 7) && (dead[dbytes - 1] >> (n & 7)) != 0;
        if (set != r.ndead || past || set == n)
            rc = graft_fail(GRAFT_EFORMAT, "%s: the tombstone bitmap holds %lld bits%s for %lld "
                            "tombstones of %lld vectors", fn, (long long)set,
                            past ? " (some past the vectors)" : "", (long long)r.ndead, (long long)n);
    }
    graft_gindex* index = NULL;
    if (rc == GRAFT_OK) rc = graft_gindex_new(d, &r.p, &index);
    if (rc == GRAFT_OK && (pbytes || sq8)) { /* the codec, before any vector */
        gcodec* c = codec_new();
        rc = c ? graft_storage_copy(&c->st, &index->cur->codec->st) : GRAFT_ENOMEM;
        if (rc == GRAFT_ENOMEM) rc = graft_fail(rc, "%s: out of host memory", fn);
        if (rc == GRAFT_OK && sq8 && pbytes &&
            graft_storage_set_sq8(&c->st, params_blob, params_blob + d) != GRAFT_OK)
            rc = graft_relabel(GRAFT_EFORMAT, "graft_gindex_read: ");
        if (rc == GRAFT_OK && pq && pbytes) {
            c->pq = codebooks;
            c->st.trained = 1;
            params_blob = NULL; /* taken */
        }
        if (rc == GRAFT_OK) {
            codec_unref(index->cur->codec);
            index->cur->codec = c;
        } else {
            codec_unref(c);
        }
    }
    free(params_blob);
    if (rc == GRAFT_OK && n > 0) /* the GPU's R */
        rc = x ? graft_check_graph_data(n, d, x, &graph, index->ctx != NULL, fn)
               : graft_check_graph_rows(n, &graph, index->ctx != NULL, fn);
    /* FP16 codes only: no Inf among them (an add refuses values past FP16's range). */
    if (rc == GRAFT_OK && n > 0 && codes_only &&
        gindex_check_codes(index, index->cur->codec, n, codes, "graft_gindex_read: ") != GRAFT_OK)
        rc = graft_relabel(GRAFT_EFORMAT, "");
    if (rc == GRAFT_OK && n > 0) {
        rc = adopt_data(index, n, x, codes, &graph, dead, r.since_build, "graft_gindex_read: ");
        x = NULL; /* taken, and freed on failure */
        codes = NULL;
        dead = NULL;
    }
    free(x);
    free(codes);
    free(dead);
    graft_graph_free(&graph);
    if (rc != GRAFT_OK) {
        graft_gindex_free(index);
        return rc;
    }
    *out = index;
    return GRAFT_OK;
}
