/* The graph index's writers (graft/graph_index.h, "A living index"; gindex_internal.h says how
 * snapshots are shared): adds that insert into the built graph or leave it to be rebuilt, the
 * cost model that chooses, removals as tombstones, consolidation, the pending build, the
 * background rebuild, and the device data they keep up to date. Every function here runs under
 * the index's wlock unless it says otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/index_common.h"
#include "core/threads.h"
#include "core/validate.h"
#include "graph/build.h"
#include "graph/gindex_internal.h"
#include "graph/insert_gpu.h"
#include "storage/decode.h"

/* ---- the cost model ---------------------------------------------------------------------------- */

/* Insertion's cost per vector over a build's per vector (both wall time, the index's defaults:
 * insert_L = max(64, R) then, R = 64). CPU: graft_graph_insert_cpu against RNN-Descent on one thread
 * (the shared 2-core machine's OpenMP timings were dominated by other processes), ten 1% adds
 * into a graph of 90%: sift5k 450-565 us a vector inserted against 375-445 us built, Fashion-MNIST
 * 10k 2.1 ms against 1.6 ms: about 1.3. GPU (H100, bench/studies/bench_living.cpp at 4262bce,
 * dense SIFT, ten 1% adds into 90%, median): 2.19 us a vector inserted against 0.71 us built at 1M
 * (3.1), 1.19 us against 0.71 us at 10M (1.7): 3, the larger, so that the share errs toward
 * rebuilding. The default beam is now max(64, 2 R) (plugin/graph/insert.c): on the GPU the same
 * time a vector (H100, 1M: 4.09% of a full build a 1% add against 4.07%), on the CPU 1.44-1.73x
 * (sift5k, one thread, ten 1% adds: 5.2 ms against 3.0-3.6 ms), so 1.3 x 1.58. */
#define CPU_INSERT_PER_BUILD 2.0
#define GPU_INSERT_PER_BUILD 3.0

double graft_gindex_rebuild_share(int gpu) {
    const double share = 1.0 / (gpu ? GPU_INSERT_PER_BUILD : CPU_INSERT_PER_BUILD);
    return share < 0.05 ? 0.05 : share > 0.5 ? 0.5 : share;
}

static double rebuild_share(const graft_gindex* g, const gsnap* s) {
    return s->p.living.rebuild_share > 0 ? s->p.living.rebuild_share
                                         : graft_gindex_rebuild_share(g->ctx != NULL);
}

/* ---- placement and device data ----------------------------------------------------------------- */

/* A budget argument: 0 means the default, half the device (not the index's stored budget, which
 * callers pass themselves when they mean it). */
static size_t gpu_budget(const gsnap* s, size_t budget) {
    return budget ? budget : graft_gpu_device_memory(s->p.device) / 2;
}

graft_bang_mode gindex_resolve_mode(const graft_gindex* g, const gsnap* s, graft_bang_mode mode,
                                    size_t budget, int64_t n, int R) {
    if (!g->ctx) return GRAFT_BANG_AUTO;
    if (!gindex_is_pq(g)) return GRAFT_BANG_IN_MEMORY; /* the walk's storages are GPU-resident */
    if (mode != GRAFT_BANG_AUTO) return mode;
    budget = gpu_budget(s, budget);
    return graft_bang_dev_resident_bytes(n, g->d, R, s->p.pq.M, 1) <= budget ? GRAFT_BANG_IN_MEMORY
                                                                             : GRAFT_BANG_OUT_OF_CORE;
}

/* A device buffer of `bytes` holding the first `fill` bytes of host src (NULL: nothing). */
static int dev_buffer(graft_gpu_ctx* ctx, size_t bytes, const void* src, size_t fill, gbuf** out) {
    GRAFT_TRY(gbuf_dev(ctx, bytes, out));
    const int rc = src && fill ? graft_gpu_upload(ctx, (*out)->p, src, fill) : GRAFT_OK;
    if (rc != GRAFT_OK) gbuf_set(out, NULL);
    return rc;
}

/* The walk's SQ8 decode as one FMA a dimension (storage/decode.h). */
static int upload_sq8(graft_gpu_ctx* ctx, const graft_storage* st, int64_t d, gbuf** out) {
    float* so = malloc((size_t)d * 2 * sizeof(float));
    if (!so) return GRAFT_ENOMEM;
    graft_sq8_affine(st, so);
    const int rc = dev_buffer(ctx, (size_t)d * 2 * sizeof(float), so, (size_t)d * 2 * sizeof(float), out);
    free(so);
    return rc;
}

/* Resident bytes of n rows in s's device data (what graft_gindex_gpu_bytes reports). */
static size_t resident_bytes(const graft_gindex* g, const gsnap* s, int64_t n) {
    const int R = s->graph.R;
    if (gindex_is_pq(g))
        return graft_bang_dev_resident_bytes(n, g->d, R, s->p.pq.M, s->dev_mode == GRAFT_BANG_IN_MEMORY);
    const size_t vec = snap_codes_only(s) ? 0 : (size_t)g->d * sizeof(float); /* keep_fp32 = 0: none */
    size_t b = (size_t)n * (vec + (size_t)R * sizeof(int32_t) + g->code_size);
    if (g->storage == GRAFT_STORAGE_SQ8) b += (size_t)g->d * 2 * sizeof(float);
    return b;
}

/* The host graph brought up to date with the device's (after GPU inserts). */
int gindex_sync_host(graft_gindex* g, gsnap* t, const char* fn) {
    if (!t->host_stale) return GRAFT_OK;
    const size_t bytes = (size_t)t->n * t->graph.R * sizeof(int32_t);
    gbuf* nb = gbuf_host(bytes);
    if (!nb) return graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes of graph)", fn, bytes);
    const int rc = graft_gpu_download(g->wctx, nb->p, t->dnbrs->p, bytes);
    if (rc != GRAFT_OK) {
        gbuf_unref(nb);
        return graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
    }
    gbuf_set(&t->nbrs, nb);
    t->graph.nbrs = nb->p;
    t->graph.n = t->n;
    t->host_stale = 0;
    return GRAFT_OK;
}

/* gindex_upload, where dx_built (nullable) holds the n vectors on the device already (the build's
 * copy: build below): taken as the placement's when no spare capacity is asked for. */
static int upload_taking(graft_gindex* g, gsnap* s, graft_bang_mode mode, size_t budget, int64_t dcap,
                         gbuf* dx_built, const char* fn);

int gindex_upload(graft_gindex* g, gsnap* s, graft_bang_mode mode, size_t budget, int64_t dcap,
                  const char* fn) {
    return upload_taking(g, s, mode, budget, dcap, NULL, fn);
}

static int upload_taking(graft_gindex* g, gsnap* s, graft_bang_mode mode, size_t budget, int64_t dcap,
                         gbuf* dx_built, const char* fn) {
    graft_gpu_ctx* ctx = g->wctx;
    const int64_t n = s->n, d = g->d;
    const int R = s->graph.R;
    if (dcap < n) dcap = n;
    GRAFT_TRY(gindex_sync_host(g, s, fn)); /* the device's graph is the newest: keep it first */
    snap_drop_device(s);
    int rc = GRAFT_OK;
    const size_t xrow = (size_t)d * sizeof(float), grow_ = (size_t)R * sizeof(int32_t);
    if (gindex_is_pq(g)) {
        budget = gpu_budget(s, budget);
        const int in_memory = mode == GRAFT_BANG_IN_MEMORY;
        const size_t need = graft_bang_dev_resident_bytes(n, d, R, s->p.pq.M, in_memory);
        if (need > budget)
            return graft_fail(GRAFT_EGPU_NOMEM, "%s%s mode keeps %zu bytes on the GPU, over the "
                              "index's GPU budget of %zu bytes%s", fn,
                              in_memory ? "in-memory" : "out-of-core", need, budget,
                              in_memory ? " (out-of-core mode keeps only the codes)" : "");
        const size_t cbytes = (size_t)d * GRAFT_PQ_KSUB * sizeof(float);
        rc = dev_buffer(ctx, cbytes, s->codec->pq.centroids, cbytes, &s->dcent);
        if (rc == GRAFT_OK)
            rc = dev_buffer(ctx, (size_t)dcap * g->code_size, s->codes->p, (size_t)n * g->code_size, &s->dcodes);
        if (rc == GRAFT_OK && in_memory)
            rc = dev_buffer(ctx, (size_t)dcap * grow_, s->graph.nbrs, (size_t)n * grow_, &s->dnbrs);
        if (rc == GRAFT_OK && in_memory)
            rc = dev_buffer(ctx, (size_t)dcap * xrow, s->xb->p, (size_t)n * xrow, &s->dx);
    } else {
        mode = GRAFT_BANG_IN_MEMORY;
        if (snap_codes_only(s))
            ; /* keep_fp32 = 0: codes and graph only; the walk does not re-rank */
        else if (dx_built && dcap == n && dx_built->bytes == (size_t)n * xrow)
            gbuf_set(&s->dx, gbuf_ref(dx_built));
        else
            rc = dev_buffer(ctx, (size_t)dcap * xrow, s->xb->p, (size_t)n * xrow, &s->dx);
        if (rc == GRAFT_OK) rc = dev_buffer(ctx, (size_t)dcap * grow_, s->graph.nbrs, (size_t)n * grow_, &s->dnbrs);
        if (rc == GRAFT_OK && g->code_size)
            rc = dev_buffer(ctx, (size_t)dcap * g->code_size, s->codes->p, (size_t)n * g->code_size, &s->dcodes);
        if (rc == GRAFT_OK && g->storage == GRAFT_STORAGE_SQ8) rc = upload_sq8(ctx, &s->codec->st, d, &s->dsq);
    }
    if (rc != GRAFT_OK) {
        snap_drop_device(s);
        if (rc == GRAFT_ENOMEM) return graft_fail(rc, "%sout of host memory", fn);
        return graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
    }
    s->on_device = 1;
    s->dev_mode = mode;
    s->dcap = dcap;
    s->dev_bytes = resident_bytes(g, s, n);
    return GRAFT_OK;
}

int gindex_encode(graft_gindex* g, const gcodec* c, int64_t n, const float* x, uint8_t* codes,
                  const char* fn) {
    if (!g->code_size || n == 0) return GRAFT_OK;
    if (!gindex_is_pq(g)) {
        graft_storage_encode(&c->st, n, x, codes);
        return GRAFT_OK;
    }
    /* PQ: on the index's GPU (the same codes as the CPU's; test_gpu_bang times both), on the CPU
     * without one or when the GPU is short of memory. */
    if (g->wctx) {
        const int rc = graft_bang_encode_ctx(g->wctx, &c->pq, n, x, codes, fn);
        if (rc != GRAFT_EGPU_NOMEM) return rc;
    }
    return graft_pq_encode(&c->pq, n, x, codes);
}

int gindex_check_codes(const graft_gindex* g, const gcodec* c, int64_t n, const uint8_t* codes,
                       const char* fn) {
    const int64_t bad = graft_storage_first_nonfinite(&c->st, n, codes);
    if (bad == n * c->st.d) return GRAFT_OK; /* also every storage but FP16 */
    return graft_fail(GRAFT_EINVAL, "%srow %lld holds a value outside FP16's range (|x| > 65504); "
                      "with keep_fp32 = 0 the FP16 codes are the only copy of the vectors (scale "
                      "the data, or use SQ8 or keep_fp32 = 1)", fn, (long long)(bad / c->st.d));
}

/* ---- host storage ------------------------------------------------------------------------------ */

/* Bytes of a tombstone bitmap of cap slots (word-padded: the live bitmap is read in words). */
static size_t bitmap_bytes(int64_t cap) { return (size_t)((cap + 63) / 64) * 8; }

/* Room in t's host buffers for `need` slots: when they are full, buffers of twice the capacity
 * (or need) take the rows held; older snapshots keep the old ones. */
static int reserve(graft_gindex* g, gsnap* t, int64_t need, const char* fn) {
    const int keep = !snap_codes_only(t); /* keep_fp32 = 0: codes only */
    if (need <= t->cap && (keep ? t->xb != NULL : t->codes != NULL)) return GRAFT_OK;
    const int64_t cap = t->cap * 2 > need ? t->cap * 2 : need;
    size_t xbytes;
    if (graft_mul_overflow((size_t)cap, (size_t)g->d * sizeof(float), &xbytes))
        return graft_fail(GRAFT_ENOMEM, "%s%lld vectors of dimension %lld overflow", fn,
                          (long long)cap, (long long)g->d);
    gbuf* xb = keep ? gbuf_host(xbytes) : NULL;
    gbuf* codes = g->code_size ? gbuf_host((size_t)cap * g->code_size) : NULL;
    gbuf* dead = t->dead ? gbuf_host(bitmap_bytes(cap)) : NULL;
    if ((keep && !xb) || (g->code_size && !codes) || (t->dead && !dead)) {
        gbuf_unref(xb);
        gbuf_unref(codes);
        gbuf_unref(dead);
        return graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes)", fn,
                          (keep ? xbytes : 0) + (size_t)cap * g->code_size);
    }
    if (t->n) {
        if (xb) graft_copy_rows(xb->p, t->xb->p, t->n, g->d);
        if (codes) memcpy(codes->p, t->codes->p, (size_t)t->n * g->code_size);
        if (dead) memcpy(dead->p, t->dead->p, (size_t)(t->n + 7) / 8);
    }
    gbuf_set(&t->xb, xb);
    gbuf_set(&t->codes, codes);
    if (dead) gbuf_set(&t->dead, dead);
    t->cap = cap;
    return GRAFT_OK;
}

/* Where an add's rows come from: the caller's floats, or its uint8 rows widened to float
 * (graft_gindex_add_u8, which never holds n x d floats beyond the index's own). */
typedef struct {
    const float* f;   /* FP32 rows, or NULL */
    const uint8_t* u; /* uint8 rows when f is NULL */
} rowsrc;

/* Rows of uint8 widened at a time into a scratch buffer when the codes are the only copy
 * (keep_fp32 = 0): 65,536 x d floats (32 MiB at d = 128) however large the add. */
#define U8_CHUNK_ROWS 65536

/* n uint8 rows (n x d) widened into dst (n x d floats); u8 is always finite. */
static void widen_u8(float* dst, const uint8_t* src, int64_t n, int64_t d) {
    const int64_t total = n * d;
    const int t = graft_threads_for(total * (int64_t)sizeof(float));
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (int64_t i = 0; i < total; i++) dst[i] = (float)src[i];
}

/* The m rows of src and their codes into t's slots [t->n, t->n + m), past every snapshot's rows
 * (t->n is not moved), float rows checked finite as they are copied: a failed add leaves the index
 * as it was (t is the caller's clone, released on failure). */
static int append(graft_gindex* g, gsnap* t, int64_t m, const rowsrc* src, const char* fn) {
    GRAFT_TRY(reserve(g, t, t->n + m, fn));
    if (snap_codes_only(t)) {
        /* keep_fp32 = 0: a float batch is encoded straight from the caller's buffer, no FP32 row
         * is kept or copied (an add of any size allocates only its codes); a uint8 batch is
         * widened a bounded chunk at a time. */
        uint8_t* dst = (uint8_t*)t->codes->p + (size_t)t->n * g->code_size;
        if (src->f) {
            GRAFT_TRY(graft_check_finite(src->f, m, g->d, "graft_gindex_add"));
            GRAFT_TRY(gindex_encode(g, t->codec, m, src->f, dst, fn));
            return gindex_check_codes(g, t->codec, m, dst, fn);
        }
        const int64_t rows = m < U8_CHUNK_ROWS ? m : U8_CHUNK_ROWS;
        float* scratch = (float*)malloc((size_t)rows * (size_t)g->d * sizeof(float));
        if (!scratch)
            return graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes)", fn,
                              (size_t)rows * (size_t)g->d * sizeof(float));
        int rc = GRAFT_OK;
        for (int64_t i = 0; i < m && rc == GRAFT_OK; i += rows) {
            const int64_t c = m - i < rows ? m - i : rows;
            widen_u8(scratch, src->u + i * g->d, c, g->d);
            rc = gindex_encode(g, t->codec, c, scratch, dst + (size_t)i * g->code_size, fn);
        }
        free(scratch);
        GRAFT_TRY(rc);
        return gindex_check_codes(g, t->codec, m, dst, fn);
    }
    float* xrows = (float*)t->xb->p + t->n * g->d;
    if (src->f)
        GRAFT_TRY(graft_copy_rows_finite(xrows, src->f, m, g->d, "graft_gindex_add"));
    else
        widen_u8(xrows, src->u, m, g->d); /* straight into the FP32 rows the index keeps */
    /* FP32 keeps no codes: no pointer is formed past NULL (UBSan). */
    uint8_t* dst = g->code_size ? (uint8_t*)t->codes->p + (size_t)t->n * g->code_size : NULL;
    return gindex_encode(g, t->codec, m, src->f ? src->f : xrows, dst, fn);
}

/* t's live slots moved down into new buffers (ids do not change: they were the live slots'
 * ranks), tombstones gone. The graph is the caller's (dropped, or compacted alike). */
static int compact_storage(graft_gindex* g, gsnap* t, const char* fn) {
    if (!t->ndead) return GRAFT_OK;
    const int64_t live = t->n - t->ndead, d = g->d;
    const int keep = t->xb != NULL; /* keep_fp32 = 0: codes only */
    gbuf* xb = keep ? gbuf_host((size_t)(live ? live : 1) * d * sizeof(float)) : NULL;
    gbuf* codes = g->code_size ? gbuf_host((size_t)(live ? live : 1) * g->code_size) : NULL;
    if ((keep && !xb) || (g->code_size && !codes)) {
        gbuf_unref(xb);
        gbuf_unref(codes);
        return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    }
    const float* sx = keep ? t->xb->p : NULL;
    for (int64_t v = 0, j = 0; v < t->n; v++) {
        if (snap_is_dead(t, v)) continue;
        if (xb) memcpy((float*)xb->p + j * d, sx + v * d, (size_t)d * sizeof(float));
        if (codes)
            memcpy((uint8_t*)codes->p + j * g->code_size, (const uint8_t*)t->codes->p + v * g->code_size,
                   g->code_size);
        j++;
    }
    gbuf_set(&t->xb, xb);
    gbuf_set(&t->codes, codes);
    gbuf_set(&t->dead, NULL);
    t->n = t->cap = live;
    g->epoch++;
    return snap_index_tombstones(t);
}

/* Grows t's tombstone bitmap with t->n (new slots live) and indexes it again. */
static int extend_tombstones(gsnap* t) {
    if (!t->dead) return GRAFT_OK;
    if (t->dead->bytes < bitmap_bytes(t->n)) {
        gbuf* dead = gbuf_host(bitmap_bytes(t->cap > t->n ? t->cap : t->n));
        if (!dead) return graft_fail(GRAFT_ENOMEM, "graft_gindex_add: out of host memory");
        memcpy(dead->p, t->dead->p, t->dead->bytes);
        gbuf_set(&t->dead, dead);
    }
    return snap_index_tombstones(t);
}

/* ---- the graph ---------------------------------------------------------------------------------- */

/* t->graph over a copy of its rows with room for `rows` (a search in flight reads the old ones). */
static int copy_graph(gsnap* t, int64_t rows, const char* fn) {
    const size_t rbytes = (size_t)t->graph.R * sizeof(int32_t);
    gbuf* nb = gbuf_host((size_t)rows * rbytes);
    if (!nb) return graft_fail(GRAFT_ENOMEM, "%sout of host memory (%zu bytes of graph)", fn,
                               (size_t)rows * rbytes);
    memcpy(nb->p, t->graph.nbrs, (size_t)t->graph.n * rbytes);
    gbuf_set(&t->nbrs, nb);
    t->graph.nbrs = nb->p;
    return GRAFT_OK;
}

/* What a build of s's n slots reads: the FP32 vectors and, for FP16 and SQ8, the codes, which
 * the build reads instead with build_from = codes or keep_fp32 = 0 (no FP32: x NULL);
 * graft_index_build_graph chooses. */
static graft_build_vectors build_vectors(const graft_gindex* g, const gsnap* s) {
    const int coded = g->storage == GRAFT_STORAGE_FP16 || g->storage == GRAFT_STORAGE_SQ8;
    return (graft_build_vectors){.x = snap_codes_only(s) ? NULL : s->xb->p,
                                 .st = coded ? &s->codec->st : NULL,
                                 .codes = coded ? s->codes->p : NULL};
}

/* Builds the graph of t's slots (its tombstones compacted first). A GPU index whose placement
 * keeps the FP32 vectors on the device (every storage but PQ) uploads them once, before a whole
 * GRNND build, which reads that copy; *dx_out gets it for the placement (upload_taking), NULL
 * otherwise. At 10M x 128 on the H100 the second upload cost 0.94 s of a 7.5 s build, and four
 * shards' builds at once paid it too. A build from codes uploads only the codes: the FP32 copy
 * would double its device memory (the placement uploads it after the build). */
static int build(graft_gindex* g, gsnap* t, gbuf** dx_out, const char* fn) {
    *dx_out = NULL;
    GRAFT_TRY(compact_storage(g, t, fn));
    if (t->n == 0) return GRAFT_OK;
    const size_t xbytes = (size_t)t->n * (size_t)g->d * sizeof(float);
    gbuf* dx = NULL;
    /* keep_fp32 = 0: the codes are all there is (build_vectors' x is NULL), so the build reads
     * them whatever build_from says, and no FP32 copy goes to the device. */
    graft_build_vectors v = build_vectors(g, t);
    const int from_codes = v.st && (!v.x || t->p.build.build_from == GRAFT_BUILD_FROM_CODES);
    if (g->wctx && !gindex_is_pq(g) && !from_codes &&
        t->n <= graft_grnnd_max_vectors(g->d, &t->p.build) &&
        dev_buffer(g->wctx, xbytes, t->xb->p, xbytes, &dx) != GRAFT_OK)
        dx = NULL; /* the build uploads its own, or builds in pieces */
    v.dx = dx ? dx->p : NULL;
    graft_graph gr = {0};
    double seconds;
    graft_pieces_report rep;
    const int rc = graft_index_build_graph(g->ctx != NULL, &v, t->n, g->d, &t->p.build, &gr, &seconds,
                                           &rep);
    if (rc != GRAFT_OK) {
        gbuf_unref(dx);
        return graft_relabel(rc, fn);
    }
    gbuf* nb = gbuf_wrap(gr.nbrs, (size_t)gr.n * gr.R * sizeof(int32_t));
    if (!nb) {
        graft_graph_free(&gr);
        gbuf_unref(dx);
        return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    }
    *dx_out = dx;
    gbuf_set(&t->nbrs, nb);
    t->graph = gr;
    t->since_build = 0;
    t->build_seconds = seconds;
    t->build_rep = rep;
    pthread_mutex_lock(&g->slock);
    g->rep.builds++;
    pthread_mutex_unlock(&g->slock);
    return GRAFT_OK;
}

static int upload_placed(graft_gindex* g, gsnap* t, int64_t dcap, gbuf* dx_built, const char* fn) {
    if (!g->ctx || t->n == 0 || !t->graph.nbrs) return GRAFT_OK;
    const graft_bang_mode mode = gindex_resolve_mode(g, t, t->p.mode, t->p.gpu_budget, t->n, t->graph.R);
    return upload_taking(g, t, mode, t->p.gpu_budget, dcap, dx_built, fn);
}

int gindex_make_ready(graft_gindex* g, const char* fn) {
    gsnap* s = g->cur;
    const int all_removed = s->n > 0 && s->n == s->ndead;
    const int pending = s->n > 0 && !s->graph.nbrs;
    const int upload = g->ctx && s->n > 0 && !s->on_device;
    if (!all_removed && !pending && !upload && !s->host_stale) return GRAFT_OK;
    gsnap* t = snap_clone(s);
    if (!t) return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    int rc = GRAFT_OK;
    gbuf* dx = NULL; /* the build's device copy of the vectors */
    if (all_removed || pending) {
        snap_drop_graph(t);
        rc = build(g, t, &dx, fn);
    } else {
        rc = gindex_sync_host(g, t, fn);
    }
    const double t0 = graft_now_s();
    if (rc == GRAFT_OK && !t->on_device) rc = upload_placed(g, t, t->n, dx, fn);
    gbuf_unref(dx);
    if (rc != GRAFT_OK) {
        snap_release(t);
        return rc;
    }
    if ((all_removed || pending) && getenv("GRAFT_GRNND_PROFILE")) /* beside graph/build_dispatch.c's */
        fprintf(stderr, "graph index of %lld: graph %.3f s, placed on the device in %.3f s\n",
                (long long)t->n, t->build_seconds, graft_now_s() - t0);
    gindex_publish(g, t);
    return GRAFT_OK;
}

/* ---- adds -------------------------------------------------------------------------------------- */

/* The device data of t (on the device, rows [0, n0)) extended by the vectors and codes of the m
 * slots after n0, appended (into device buffers of twice the capacity when full, the rows held
 * copied on the device). The graph is the caller's (upload_graph, or the GPU insert). */
static int device_append(graft_gindex* g, gsnap* t, int64_t n0, int64_t m, const char* fn) {
    graft_gpu_ctx* ctx = g->wctx;
    const int64_t need = n0 + m, d = g->d;
    /* in_memory: the FP32 vectors are on the device (not for out-of-core PQ, nor keep_fp32 = 0) */
    const int in_memory = (!gindex_is_pq(g) || t->dev_mode == GRAFT_BANG_IN_MEMORY) && !snap_codes_only(t);
    const size_t xrow = (size_t)d * sizeof(float);
    int rc = GRAFT_OK;
    if (need > t->dcap) {
        const int64_t dcap = t->dcap * 2 > need ? t->dcap * 2 : need;
        gbuf *dx = NULL, *dcodes = NULL;
        if (in_memory) rc = gbuf_dev(ctx, (size_t)dcap * xrow, &dx);
        if (rc == GRAFT_OK && in_memory) rc = graft_gpu_copy_d2d(ctx, dx->p, t->dx->p, (size_t)n0 * xrow);
        if (rc == GRAFT_OK && g->code_size) rc = gbuf_dev(ctx, (size_t)dcap * g->code_size, &dcodes);
        if (rc == GRAFT_OK && g->code_size)
            rc = graft_gpu_copy_d2d(ctx, dcodes->p, t->dcodes->p, (size_t)n0 * g->code_size);
        if (rc != GRAFT_OK) {
            gbuf_unref(dx);
            gbuf_unref(dcodes);
            return graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
        }
        if (in_memory) gbuf_set(&t->dx, dx);
        if (g->code_size) gbuf_set(&t->dcodes, dcodes);
        t->dcap = dcap;
    }
    if (in_memory)
        rc = graft_gpu_upload(ctx, (char*)t->dx->p + n0 * xrow, (const float*)t->xb->p + n0 * d, (size_t)m * xrow);
    if (rc == GRAFT_OK && g->code_size)
        rc = graft_gpu_upload(ctx, (uint8_t*)t->dcodes->p + n0 * g->code_size,
                              (const uint8_t*)t->codes->p + n0 * g->code_size, (size_t)m * g->code_size);
    if (rc != GRAFT_OK) return graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
    t->dev_bytes = resident_bytes(g, t, need);
    return GRAFT_OK;
}

/* The host graph's rows (t->graph.n of them) into a new device buffer of dcap rows: searches in
 * flight read the old one. Out-of-core PQ keeps no graph on the device. */
static int upload_graph(graft_gindex* g, gsnap* t, const char* fn) {
    if (!t->on_device || (gindex_is_pq(g) && t->dev_mode != GRAFT_BANG_IN_MEMORY)) return GRAFT_OK;
    const size_t rbytes = (size_t)t->graph.R * sizeof(int32_t);
    gbuf* dn = NULL;
    const int rc = dev_buffer(g->wctx, (size_t)t->dcap * rbytes, t->graph.nbrs, (size_t)t->graph.n * rbytes, &dn);
    if (rc != GRAFT_OK) return graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
    gbuf_set(&t->dnbrs, dn);
    t->host_stale = 0;
    return GRAFT_OK;
}

/* Inserts t's slots [t->n, t->n + m) (appended already on the host; on the device too when
 * uploaded) into its graph: on the index's GPU when the graph and vectors are there
 * (gpu/graph_insert.cu, the device's graph rows copied first), else the CPU reference on a copy of
 * the host graph. t->n grows by m. */
static int insert(graft_gindex* g, gsnap* t, int64_t m, int uploaded, int* on_gpu, const char* fn) {
    const int64_t n0 = t->n;
    const int L = t->p.living.insert_L ? t->p.living.insert_L : graft_insert_default_L(t->graph.R);
    /* keep_fp32 = 0: the GPU insert's walk and prune read FP32 device vectors, which the index
     * does not keep: the CPU reference inserts over the codes decoded (a transient n x d buffer),
     * and the device gets the new codes and graph rows. */
    const int gpu = t->on_device && (!gindex_is_pq(g) || t->dev_mode == GRAFT_BANG_IN_MEMORY) &&
                    !snap_codes_only(t);
    *on_gpu = gpu;
    graft_insert_report irep;
    int rc;
    if (gpu) {
        /* Vectors and codes first (the walk reads the new vectors on the device), then the graph. */
        rc = uploaded ? GRAFT_OK : device_append(g, t, n0, m, fn);
        gindex_gpu_graph gd = {t->dx->p, t->dnbrs->p, n0, t->graph.R, t->graph.entry, t->dcap,
                               t->dead ? t->dead->p : NULL};
        gbuf* dn = NULL;
        if (rc == GRAFT_OK) rc = gbuf_dev(g->wctx, (size_t)t->dcap * t->graph.R * sizeof(int32_t), &dn);
        if (rc == GRAFT_OK) {
            gd.out = dn->p;
            rc = graft_gindex_insert_gpu(g->wctx, &gd, g->d, t->p.metric, m, L, NULL, 0, &irep);
            if (rc != GRAFT_OK) rc = graft_relabel(rc, fn);
        } else {
            rc = graft_fail(rc, "%s%s", fn, graft_gpu_last_error());
        }
        if (rc != GRAFT_OK) {
            gbuf_unref(dn);
            return rc;
        }
        gbuf_set(&t->dnbrs, dn);
        t->host_stale = 1; /* the host graph is downloaded when a reader needs it */
        t->graph.n = n0 + m;
    } else {
        GRAFT_TRY(gindex_sync_host(g, t, fn));
        GRAFT_TRY(copy_graph(t, n0 + m, fn));
        float* decoded = NULL;
        const float* x = snap_vectors(t, g->d, n0 + m, &decoded);
        if (!x) return graft_fail(GRAFT_ENOMEM, "%sout of host memory (the codes decoded for the insert)", fn);
        rc = graft_graph_insert_cpu(&t->graph, x, g->d, t->p.metric, m, t->dead ? t->dead->p : NULL, L,
                                    &irep);
        free(decoded);
        if (rc != GRAFT_OK) return graft_relabel(rc, fn);
        if (t->on_device && !uploaded) GRAFT_TRY(device_append(g, t, n0, m, fn));
        GRAFT_TRY(upload_graph(g, t, fn));
    }
    t->n = n0 + m;
    t->since_build += m;
    return GRAFT_OK;
}

static void start_background(graft_gindex* g);

static int add_locked(graft_gindex* g, int64_t m, const rowsrc* x, const char* fn) {
    const double t0 = graft_now_s();
    gsnap* s = g->cur;
    GRAFT_TRY(s->codec->st.trained ? GRAFT_OK
                                   : graft_fail(GRAFT_ESTATE, gindex_is_pq(g)
                                                    ? "%sthe index is not trained; train the PQ "
                                                      "codebooks first (graft_gindex_train, FAISS's "
                                                      "Index::train)"
                                                    : "%sthe storage must be trained before adding "
                                                      "(graft_gindex_train)", fn));
    if (s->n + m > INT32_MAX)
        return graft_fail(GRAFT_EUNSUPPORTED, "%s%lld vectors; a graph index holds at most 2^31 - 1 "
                          "(int32 neighbour ids)", fn, (long long)(s->n + m));
    const graft_living_params lp = s->p.living; /* a copy: publishing t releases s */
    const int64_t held = s->n - s->ndead;
    const double share = rebuild_share(g, s);
    /* Inserting m into a graph of `held` is the cheaper choice while m / (held + m) stays under the
     * share (graft_gindex_rebuild_share); INSERT inserts whatever the batch. */
    /* A graph from elsewhere wider than the inserts take (graph/insert.c) is rebuilt instead. */
    const int built = (s->graph.nbrs != NULL || s->host_stale) && s->graph.R <= GRAFT_GRAPH_INSERT_MAX_R;
    const int do_insert = built && held > 0 && lp.policy != GRAFT_ADD_REBUILD &&
                          (lp.policy == GRAFT_ADD_INSERT || (double)m / (double)(held + m) <= share);
    gsnap* t = snap_clone(s);
    if (!t) return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    int rc = append(g, t, m, x, fn);
    int on_gpu = 0;
    if (rc == GRAFT_OK && do_insert) {
        rc = insert(g, t, m, 0, &on_gpu, fn);
    } else if (rc == GRAFT_OK) {
        snap_drop_graph(t); /* the next search (or build, or write) builds over everything */
        t->n += m;
    }
    if (rc == GRAFT_OK) rc = extend_tombstones(t);
    /* PQ placed by AUTO: the inserts may outgrow the budget of the in-memory placement. */
    if (rc == GRAFT_OK && gindex_is_pq(g) && t->on_device && t->dev_mode == GRAFT_BANG_IN_MEMORY &&
        t->p.mode == GRAFT_BANG_AUTO &&
        gindex_resolve_mode(g, t, t->p.mode, t->p.gpu_budget, t->n, t->graph.R) == GRAFT_BANG_OUT_OF_CORE)
        rc = gindex_upload(g, t, GRAFT_BANG_OUT_OF_CORE, t->p.gpu_budget, t->n, fn);
    if (rc != GRAFT_OK) {
        snap_release(t);
        return rc;
    }
    const int grown = do_insert && lp.policy == GRAFT_ADD_AUTO &&
                      (double)t->since_build > share * (double)(t->n - t->ndead);
    if (grown && !lp.background) snap_drop_graph(t);
    const int verbose = t->p.build.base.verbose;
    const int64_t now_held = t->n;
    gindex_publish(g, t);
    pthread_mutex_lock(&g->slock);
    g->rep.last_add = do_insert ? GRAFT_ADD_INSERT : GRAFT_ADD_REBUILD;
    if (do_insert) {
        g->rep.inserted += m;
        g->rep.insert_batches++;
        g->rep.insert_seconds = graft_now_s() - t0;
        g->rep.on_gpu_inserts = on_gpu;
    }
    pthread_mutex_unlock(&g->slock);
    if (verbose) {
        printf("graft add: %lld vectors in %.2f s, %lld held; %s\n", (long long)m, graft_now_s() - t0,
               (long long)now_held,
               do_insert ? "inserted into the graph" : "the graph is built by the next search");
        fflush(stdout);
    }
    if (grown && lp.background) start_background(g);
    return GRAFT_OK;
}

int graft_gindex_add(graft_gindex* g, int64_t n, const float* x) {
    const char* fn = "graft_gindex_add: ";
    GRAFT_TRY(graft_check_add_args(g != NULL, n, x, "graft_gindex_add"));
    if (n == 0) return GRAFT_OK;
    const rowsrc src = {x, NULL};
    pthread_mutex_lock(&g->wlock);
    const int rc = add_locked(g, n, &src, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_add_u8(graft_gindex* g, int64_t n, const uint8_t* x) {
    const char* fn = "graft_gindex_add_u8: ";
    if (!g || (!x && n > 0)) return graft_fail(GRAFT_EINVAL, "%sNULL argument", fn);
    if (n < 0) return graft_fail(GRAFT_EINVAL, "%sn = %lld < 0", fn, (long long)n);
    if (n == 0) return GRAFT_OK;
    const rowsrc src = {NULL, x};
    pthread_mutex_lock(&g->wlock);
    const int rc = add_locked(g, n, &src, fn);
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

/* ---- removals ---------------------------------------------------------------------------------- */

/* Repair or rebuild. Consolidation repairs, on the CPU, every live row that points at a removed
 * vector: with removals spread at random, a share 1 - (1 - f)^R of them (f removed; R = 64 and
 * f = 10%: all but 0.1%). On the H100 a repaired row cost 3.8 us (1M dense SIFT, 50% removed,
 * 1.88 s on 32 threads) to 4.7 us (10M, 23.5 s), a GPU build 0.71 us a vector (GRNND, 0.71 s and
 * 7.1 s for 1M and 10M): CONSOLIDATE_ROW_PER_BUILD ~5.3 (bench_living at 4262bce). So a GPU index
 * rebuilds its live vectors instead once more than 1 / 5.3 of the rows need repair (f over 0.3%
 * at R = 64), which also gives a fresh build's recall; a CPU index repairs. */
#define CONSOLIDATE_ROW_PER_BUILD 5.3

static int consolidate_rebuilds(const graft_gindex* g, const gsnap* t) {
    if (!g->ctx) return 0;
    const double f = (double)t->ndead / (double)t->n;
    return (1.0 - pow(1.0 - f, t->graph.R)) * CONSOLIDATE_ROW_PER_BUILD > 1.0;
}

static int consolidate_locked(graft_gindex* g, const char* fn) {
    gsnap* s = g->cur;
    if (!s->ndead) return GRAFT_OK;
    const double t0 = graft_now_s();
    gsnap* t = snap_clone(s);
    if (!t) return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    int rc = GRAFT_OK;
    const int64_t live = t->n - t->ndead;
    if (!t->graph.nbrs && !t->host_stale) { /* nothing to repair */
        rc = compact_storage(g, t, fn);
    } else if (live == 0) {
        snap_drop_graph(t);
        rc = compact_storage(g, t, fn);
    } else if (consolidate_rebuilds(g, t)) {
        snap_drop_graph(t);
        gbuf* dx = NULL;
        rc = build(g, t, &dx, fn); /* compacts first */
        if (rc == GRAFT_OK) rc = upload_placed(g, t, live, dx, fn);
        gbuf_unref(dx);
    } else {
        rc = gindex_sync_host(g, t, fn);
        if (rc == GRAFT_OK) rc = copy_graph(t, t->n, fn);
        float* decoded = NULL; /* keep_fp32 = 0: the repair reads the codes decoded (transient) */
        const float* x = rc == GRAFT_OK ? snap_vectors(t, g->d, t->n, &decoded) : NULL;
        if (rc == GRAFT_OK && !x) rc = graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
        if (rc == GRAFT_OK)
            rc = graft_graph_consolidate_cpu(&t->graph, x, g->d, t->p.metric, t->dead->p, NULL);
        free(decoded);
        if (rc != GRAFT_OK) rc = graft_relabel(rc, fn);
        if (rc == GRAFT_OK) rc = compact_storage(g, t, fn);
        if (rc == GRAFT_OK && t->since_build > live) t->since_build = live;
        if (rc == GRAFT_OK && t->on_device) rc = upload_placed(g, t, live, NULL, fn);
    }
    if (rc != GRAFT_OK) {
        snap_release(t);
        return rc;
    }
    gindex_publish(g, t);
    pthread_mutex_lock(&g->slock);
    g->rep.consolidations++;
    g->rep.consolidate_seconds = graft_now_s() - t0;
    pthread_mutex_unlock(&g->slock);
    return GRAFT_OK;
}

int graft_gindex_consolidate(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_consolidate: NULL index");
    pthread_mutex_lock(&g->wlock);
    const int rc = consolidate_locked(g, "graft_gindex_consolidate: ");
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

static int remove_locked(graft_gindex* g, int64_t n, const int64_t* ids, int64_t* removed,
                         const char* fn) {
    gsnap* s = g->cur;
    const int64_t held = s->n - s->ndead;
    if (held == 0 || n == 0) return GRAFT_OK;
    gbuf* dead = gbuf_host(bitmap_bytes(s->cap > s->n ? s->cap : s->n));
    if (!dead) return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    if (s->dead) memcpy(dead->p, s->dead->p, (size_t)(s->n + 7) / 8);
    uint8_t* bits = dead->p;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) { /* ids in the numbering before this call */
        if (ids[i] < 0 || ids[i] >= held) continue;
        const int64_t slot = snap_id_to_slot(s, ids[i]);
        const uint8_t bit = (uint8_t)(1u << (slot & 7));
        if (bits[slot >> 3] & bit) continue;
        bits[slot >> 3] |= bit;
        count++;
    }
    if (count == 0) {
        gbuf_unref(dead);
        return GRAFT_OK;
    }
    gsnap* t = snap_clone(s);
    if (!t) {
        gbuf_unref(dead);
        return graft_fail(GRAFT_ENOMEM, "%sout of host memory", fn);
    }
    gbuf_set(&t->dead, dead);
    int rc = snap_index_tombstones(t);
    /* Without a graph the storage compacts at once: nothing to repair. */
    if (rc == GRAFT_OK && !t->graph.nbrs && !t->host_stale) rc = compact_storage(g, t, fn);
    if (rc != GRAFT_OK) {
        snap_release(t);
        return rc;
    }
    gindex_publish(g, t);
    pthread_mutex_lock(&g->slock);
    g->rep.removed += count;
    pthread_mutex_unlock(&g->slock);
    *removed = count;
    const double share = g->cur->p.living.consolidate_share;
    if (share < 1 && (double)g->cur->ndead > share * (double)g->cur->n) return consolidate_locked(g, fn);
    return GRAFT_OK;
}

int graft_gindex_remove_ids(graft_gindex* g, int64_t n, const int64_t* ids, int64_t* removed) {
    const char* fn = "graft_gindex_remove_ids: ";
    if (!g || (n > 0 && !ids) || n < 0)
        return graft_fail(GRAFT_EINVAL, "%sNULL argument or n = %lld < 0", fn, (long long)n);
    int64_t count = 0;
    pthread_mutex_lock(&g->wlock);
    const int rc = remove_locked(g, n, ids, &count, fn);
    pthread_mutex_unlock(&g->wlock);
    if (removed) *removed = count;
    return rc;
}

/* ---- build, reset ------------------------------------------------------------------------------ */

int graft_gindex_build(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_build: NULL index");
    pthread_mutex_lock(&g->wlock);
    while (g->bg_running) pthread_cond_wait(&g->bg_cv, &g->wlock);
    const int rc = gindex_make_ready(g, "graft_gindex_build: ");
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

int graft_gindex_reset(graft_gindex* g) {
    if (!g) return graft_fail(GRAFT_EINVAL, "graft_gindex_reset: NULL index");
    pthread_mutex_lock(&g->wlock);
    gsnap* t = snap_clone(g->cur);
    int rc = GRAFT_OK;
    if (!t) {
        rc = graft_fail(GRAFT_ENOMEM, "graft_gindex_reset: out of host memory");
    } else {
        snap_drop_graph(t);
        gbuf_set(&t->xb, NULL);
        gbuf_set(&t->codes, NULL);
        gbuf_set(&t->dead, NULL);
        t->n = t->cap = 0;
        rc = snap_index_tombstones(t);
        g->epoch++; /* a background rebuild of the old contents is dropped */
        gindex_publish(g, t);
    }
    pthread_mutex_unlock(&g->wlock);
    return rc;
}

/* ---- the background rebuild -------------------------------------------------------------------- */

/* Installs a graph built over base's slots [0, base->n) into the current snapshot (same epoch:
 * those slots are the same vectors; tombstones may have come since, and slots after them):
 * the slots added meanwhile are inserted into it, then it replaces the current graph. */
static void install_rebuilt(graft_gindex* g, const gsnap* base, graft_graph* gr, double seconds,
                            const graft_pieces_report* brep) {
    const char* fn = "graft_gindex (background rebuild): ";
    gsnap* c = g->cur;
    if (c->n < base->n || !c->graph.nbrs) return; /* the index went pending: a search builds */
    gsnap* t = snap_clone(c);
    gbuf* nb = t ? gbuf_wrap(gr->nbrs, (size_t)gr->n * gr->R * sizeof(int32_t)) : NULL;
    if (!nb) {
        snap_release(t);
        return;
    }
    const int64_t later = c->n - base->n;
    gbuf_set(&t->nbrs, nb);
    t->graph = (graft_graph){base->n, gr->R, nb->p, gr->entry};
    gr->nbrs = NULL; /* taken */
    t->host_stale = 0;
    t->n = base->n;
    /* The device's graph first (the GPU insert of the later slots starts from it; their vectors
     * and codes are on the device already: searches of the current graph read them). */
    int rc = upload_graph(g, t, fn);
    int on_gpu;
    if (rc == GRAFT_OK && later > 0) rc = insert(g, t, later, 1, &on_gpu, fn);
    if (rc != GRAFT_OK) {
        snap_release(t);
        return;
    }
    t->since_build = later;
    t->build_seconds = seconds;
    t->build_rep = *brep;
    gindex_publish(g, t);
    pthread_mutex_lock(&g->slock);
    g->rep.builds++;
    g->rep.background_builds++;
    pthread_mutex_unlock(&g->slock);
}

static void* background_main(void* arg) {
    graft_gindex* g = arg;
    const gsnap* s = g->bg_base;
    graft_graph gr = {0};
    double seconds = 0;
    graft_pieces_report brep;
    /* No lock while it builds: searches and writers go on; base keeps its buffers alive. */
    const graft_build_vectors v = build_vectors(g, s);
    const int rc = graft_index_build_graph(g->ctx != NULL, &v, s->n, g->d, &s->p.build, &gr, &seconds,
                                           &brep);
    pthread_mutex_lock(&g->wlock);
    if (rc == GRAFT_OK && !g->bg_cancel && g->epoch == g->bg_epoch)
        install_rebuilt(g, s, &gr, seconds, &brep);
    graft_graph_free(&gr);
    snap_release(g->bg_base);
    g->bg_base = NULL;
    g->bg_running = 0;
    pthread_mutex_lock(&g->slock);
    g->rep.rebuilding = 0;
    pthread_mutex_unlock(&g->slock);
    pthread_cond_broadcast(&g->bg_cv);
    pthread_mutex_unlock(&g->wlock);
    return NULL;
}

/* A rebuild of the current snapshot's slots in a thread of its own (one at a time). */
static void start_background(graft_gindex* g) {
    if (g->bg_running) return;
    if (g->bg_thread) pthread_join(g->bg, NULL); /* finished: it cleared bg_running */
    g->bg_thread = 0;
    g->bg_base = gindex_acquire(g);
    g->bg_epoch = g->epoch;
    g->bg_cancel = 0;
    g->bg_running = 1;
    if (pthread_create(&g->bg, NULL, background_main, g) != 0) {
        /* No thread: the graph stays as inserted; the next add tries again. */
        snap_release(g->bg_base);
        g->bg_base = NULL;
        g->bg_running = 0;
        return;
    }
    g->bg_thread = 1;
    pthread_mutex_lock(&g->slock);
    g->rep.rebuilding = 1;
    pthread_mutex_unlock(&g->slock);
}

void gindex_stop_background(graft_gindex* g) {
    pthread_mutex_lock(&g->wlock);
    g->bg_cancel = 1;
    while (g->bg_running) pthread_cond_wait(&g->bg_cv, &g->wlock);
    if (g->bg_thread) pthread_join(g->bg, NULL);
    g->bg_thread = 0;
    pthread_mutex_unlock(&g->wlock);
}
