/* The graph index's shared buffers and snapshots (gindex_internal.h says how they are shared):
 * the reference-counted buffers, the codec, the snapshots and their tombstone index, and the
 * current snapshot's acquire and publish. The lowest of the graph index's files: graph_index.c
 * (the object, searches, parameters, records) and gindex_living.c (the writers) call it, and it
 * calls neither. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_memory.h"
#include "graph/gindex_internal.h"
#include "storage/decode.h"

gbuf* gbuf_host(size_t bytes) {
    gbuf* b = malloc(sizeof *b);
    void* p = calloc(bytes ? bytes : 1, 1);
    if (!b || !p) {
        free(b);
        free(p);
        return NULL;
    }
    graft_host_huge_pages(p, bytes); /* a large calloc is fresh zero pages: nothing touched yet */
    atomic_init(&b->refs, 1);
    b->p = p;
    b->bytes = bytes;
    b->ctx = NULL;
    return b;
}

int gbuf_dev(graft_gpu_ctx* ctx, size_t bytes, gbuf** out) {
    gbuf* b = malloc(sizeof *b);
    if (!b) return GRAFT_ENOMEM;
    void* p = NULL;
    const int rc = graft_gpu_malloc(ctx, &p, bytes ? bytes : 256);
    if (rc != GRAFT_OK) {
        free(b);
        return rc;
    }
    atomic_init(&b->refs, 1);
    b->p = p;
    b->bytes = bytes;
    b->ctx = ctx;
    *out = b;
    return GRAFT_OK;
}

gbuf* gbuf_wrap(void* p, size_t bytes) {
    gbuf* b = malloc(sizeof *b);
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    b->p = p;
    b->bytes = bytes;
    b->ctx = NULL;
    return b;
}

gbuf* gbuf_ref(gbuf* b) {
    if (b) atomic_fetch_add(&b->refs, 1);
    return b;
}

void gbuf_unref(gbuf* b) {
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
    if (b->ctx)
        graft_gpu_free(b->ctx, b->p);
    else
        free(b->p);
    free(b);
}

void gbuf_set(gbuf** slot, gbuf* b) {
    gbuf_unref(*slot);
    *slot = b;
}

gcodec* codec_ref(gcodec* c) {
    if (c) atomic_fetch_add(&c->refs, 1);
    return c;
}

void codec_unref(gcodec* c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    graft_storage_free(&c->st);
    graft_pq_free(&c->pq);
    free(c);
}

gcodec* codec_new(void) {
    gcodec* c = calloc(1, sizeof *c);
    if (c) atomic_init(&c->refs, 1);
    return c;
}

gsnap* snap_new(void) {
    gsnap* s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    s->build_rep = (graft_pieces_report){.pieces = -1};
    return s;
}

gsnap* snap_clone(const gsnap* s) {
    gsnap* t = malloc(sizeof *t);
    if (!t) return NULL;
    memcpy(t, s, sizeof *t);
    atomic_init(&t->refs, 1);
    codec_ref(t->codec);
    gbuf* const bufs[] = {t->xb, t->codes, t->nbrs, t->dead, t->live, t->rank,
                          t->dx, t->dnbrs, t->dcodes, t->dsq, t->dcent};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gbuf_ref(bufs[i]);
    return t;
}

void snap_drop_device(gsnap* s) {
    gbuf_set(&s->dx, NULL);
    gbuf_set(&s->dnbrs, NULL);
    gbuf_set(&s->dcodes, NULL);
    gbuf_set(&s->dsq, NULL);
    gbuf_set(&s->dcent, NULL);
    s->on_device = 0;
    s->dcap = 0;
    s->dev_bytes = 0;
}

void snap_drop_graph(gsnap* s) {
    snap_drop_device(s);
    gbuf_set(&s->nbrs, NULL);
    memset(&s->graph, 0, sizeof s->graph);
    s->host_stale = 0;
    s->since_build = 0;
    s->build_seconds = 0;
    s->build_rep = (graft_pieces_report){.pieces = -1};
}

void snap_release(gsnap* s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    snap_drop_graph(s);
    gbuf_unref(s->xb);
    gbuf_unref(s->codes);
    gbuf_unref(s->dead);
    gbuf_unref(s->live);
    gbuf_unref(s->rank);
    codec_unref(s->codec);
    free(s);
}

void snap_decode_rows(const gsnap* s, int64_t d, int64_t first, int64_t n, float* out) {
    const size_t cs = graft_storage_code_size(s->codec->st.kind, d);
    graft_storage_decode_rows(&s->codec->st, n, (const uint8_t*)s->codes->p + (size_t)first * cs, out);
}

const float* snap_vectors(const gsnap* s, int64_t d, int64_t n, float** owned) {
    *owned = NULL;
    if (!snap_codes_only(s)) return s->xb->p;
    float* x = malloc((size_t)(n ? n : 1) * (size_t)d * sizeof(float));
    if (!x) return NULL;
    if (n) snap_decode_rows(s, d, 0, n, x);
    *owned = x;
    return x;
}

static uint64_t word_at(const uint8_t* bits, int64_t w) {
    uint64_t v;
    memcpy(&v, bits + w * 8, 8); /* little-endian: bit i of the word is bit i & 7 of byte i >> 3 */
    return v;
}

int snap_index_tombstones(gsnap* s) {
    gbuf_set(&s->live, NULL);
    gbuf_set(&s->rank, NULL);
    s->ndead = 0;
    if (!s->dead || s->n == 0) {
        gbuf_set(&s->dead, NULL);
        return GRAFT_OK;
    }
    const int64_t nw = words_of(s->n);
    gbuf* live = gbuf_host((size_t)nw * 8);
    gbuf* rank = gbuf_host((size_t)(nw + 1) * sizeof(int64_t));
    if (!live || !rank) {
        gbuf_unref(live);
        gbuf_unref(rank);
        return graft_fail(GRAFT_ENOMEM, "graft_gindex: out of host memory (tombstones of %lld slots)",
                          (long long)s->n);
    }
    const uint8_t* dead = s->dead->p;
    uint8_t* lv = live->p;
    const int64_t nbytes = (s->n + 7) / 8;
    for (int64_t b = 0; b < nbytes; b++) lv[b] = (uint8_t)~dead[b];
    if (s->n & 7) lv[nbytes - 1] &= (uint8_t)((1u << (s->n & 7)) - 1u);
    int64_t* rk = rank->p;
    int64_t c = 0;
    for (int64_t w = 0; w < nw; w++) {
        rk[w] = c;
        c += __builtin_popcountll(word_at(lv, w));
    }
    rk[nw] = c;
    s->ndead = s->n - c;
    if (s->ndead == 0) {
        gbuf_unref(live);
        gbuf_unref(rank);
        gbuf_set(&s->dead, NULL);
        return GRAFT_OK;
    }
    s->live = live;
    s->rank = rank;
    return GRAFT_OK;
}

int64_t snap_slot_to_id(const gsnap* s, int64_t slot) {
    if (!s->ndead) return slot;
    const int64_t w = slot >> 6;
    const uint64_t below = word_at(s->live->p, w) & ((1ull << (slot & 63)) - 1ull);
    return ((const int64_t*)s->rank->p)[w] + __builtin_popcountll(below);
}

int64_t snap_id_to_slot(const gsnap* s, int64_t id) {
    if (!s->ndead) return id;
    const int64_t* rk = s->rank->p;
    int64_t lo = 0, hi = words_of(s->n) - 1; /* the last word whose rank is <= id holds it */
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (rk[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t word = word_at(s->live->p, lo);
    for (int64_t r = id - rk[lo]; r > 0; r--) word &= word - 1;
    return lo * 64 + __builtin_ctzll(word);
}

gsnap* gindex_acquire(graft_gindex* g) {
    pthread_mutex_lock(&g->slock);
    gsnap* s = g->cur;
    atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&g->slock);
    return s;
}

void gindex_publish(graft_gindex* g, gsnap* s) {
    pthread_mutex_lock(&g->slock);
    gsnap* old = g->cur;
    g->cur = s;
    g->rep.tombstones = s->ndead;
    g->rep.since_build = s->since_build;
    pthread_mutex_unlock(&g->slock);
    snap_release(old);
}
