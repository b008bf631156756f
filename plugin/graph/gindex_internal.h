/* Plugin-internal: the graph index's object (graft/graph_index.h), shared by graph_index.c (the
 * object, searches, parameters, records) and gindex_living.c (the writers: adds, removals,
 * consolidation, builds, the background rebuild), over gindex_snap.c (the buffers and snapshots
 * below: both call it, it calls neither; graph_index.c calls gindex_living.c, never the other way).
 *
 * Searches read an immutable snapshot (gsnap): the vectors, codes, graph, tombstones, parameters
 * and device data of one state of the index. A writer holds `wlock`, makes a new snapshot that
 * shares what did not change, and publishes it under `slock` (a pointer swap); a reader takes the
 * current snapshot's reference under `slock` and releases it when done. The arrays are reference-
 * counted buffers (gbuf): a snapshot's rows below its n never change once published; a writer
 * appends past the newest snapshot's n in place (older snapshots never read there) and copies what
 * it changes below it (the graph's rows, the tombstone bitmap). */
#ifndef GRAFT_GINDEX_INTERNAL_H
#define GRAFT_GINDEX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "graft/graph_index.h"
#include "graph/bang_gpu.h"
#include "graph/filtered_search.h"
#include "graph/graph_gpu.h"

/* A buffer shared by the snapshots that read it, freed with its last reference: host memory
 * (ctx NULL) or device memory freed through ctx. */
typedef struct gbuf {
    atomic_long refs;
    void* p;
    size_t bytes;
    graft_gpu_ctx* ctx;
} gbuf;

/* A zeroed host buffer (NULL when out of memory). */
gbuf* gbuf_host(size_t bytes);
/* A device buffer on ctx's device (contents undefined); graft_gpu_malloc's status. */
int gbuf_dev(graft_gpu_ctx* ctx, size_t bytes, gbuf** out);
/* A host buffer over p (malloc'd, taken on success; NULL when out of memory, p untouched). */
gbuf* gbuf_wrap(void* p, size_t bytes);
gbuf* gbuf_ref(gbuf* b);
void gbuf_unref(gbuf* b);
/* *slot = b (a reference the caller hands over), releasing the old one. */
void gbuf_set(gbuf** slot, gbuf* b);

/* The storage's codec: its descriptor (SQ8 ranges) and the PQ codebooks. Fixed while the index
 * holds vectors (training needs an empty index), shared by reference. */
typedef struct gcodec {
    atomic_long refs;
    graft_storage st;
    graft_pq pq; /* PQ: centroids NULL until trained */
} gcodec;

/* A zeroed codec with one reference (NULL when out of memory); a reference taken; one released
 * (the codec freed with its last). */
gcodec* codec_new(void);
gcodec* codec_ref(gcodec* c);
void codec_unref(gcodec* c);

typedef struct gsnap {
    atomic_long refs;
    graft_gindex_params p; /* metric and device tied into p.build and p.search */
    gcodec* codec;
    int64_t n;        /* slots: vectors held, tombstones included */
    int64_t cap;      /* rows xb and codes have room for */
    gbuf* xb;         /* cap x d float32; NULL when p.keep_fp32 = 0 (the codes are the vectors) */
    gbuf* codes;      /* cap x code_size (compressed storages) */
    gbuf* nbrs;       /* the graph's rows (room for its own count of rows); NULL while empty or while
                         a build is pending */
    graft_graph graph; /* {n, R, nbrs->p, entry} when built, zeroed otherwise */
    int host_stale;   /* the device graph is newer than nbrs (GPU inserts): downloaded on demand */
    int64_t ndead;    /* tombstones */
    gbuf* dead;       /* bitmap of removed slots (bit s & 7 of byte s >> 3), zero past n; NULL when
                         ndead = 0 */
    gbuf* live;       /* its complement over the n slots (the walks' filter); NULL when ndead = 0 */
    gbuf* rank;       /* int64 per 64-slot word: live slots before it (slot -> id); with dead */
    int64_t since_build; /* slots inserted into the graph since it was built */
    double build_seconds;
    graft_pieces_report build_rep;
    /* device data (a GPU index), rows [0, n) of capacity dcap */
    int on_device;
    graft_bang_mode dev_mode;
    int64_t dcap;
    gbuf *dx, *dnbrs, *dcodes, *dsq, *dcent; /* dx NULL when p.keep_fp32 = 0 */
    size_t dev_bytes; /* resident bytes of the n rows and the codec (what graft_gindex_gpu_bytes says) */
} gsnap;

/* 1 when the storage's codes are the only copy of the vectors (graft_gindex_params.keep_fp32 =
 * 0, FP16 and SQ8): no xb on the host, no dx on the device. */
static inline int snap_codes_only(const gsnap* s) { return !s->p.keep_fp32; }
/* Rows [first, first + n) of s's codes decoded into out (n x d floats; OpenMP over the rows):
 * what a vector is when the codes are its only copy. */
void snap_decode_rows(const gsnap* s, int64_t d, int64_t first, int64_t n, float* out);
/* Rows [0, n) as FP32: s's xb itself (*owned NULL), or with codes only a transient decode
 * (*owned: the malloc'd buffer, the caller frees it). NULL when out of memory. */
const float* snap_vectors(const gsnap* s, int64_t d, int64_t n, float** owned);

/* A zeroed snapshot with one reference. NULL when out of memory. */
gsnap* snap_new(void);
/* A copy sharing every buffer (references taken), one reference. NULL when out of memory. */
gsnap* snap_clone(const gsnap* s);
void snap_release(gsnap* s);
/* Drops the graph (and the device data, which holds it): a build is pending. */
void snap_drop_graph(gsnap* s);
void snap_drop_device(gsnap* s);
/* Recomputes live and rank from dead over n slots (ndead counted again). GRAFT_ENOMEM. */
int snap_index_tombstones(gsnap* s);
/* The id of live slot `slot`, the slot of id `id` (in [0, n - ndead)). */
int64_t snap_slot_to_id(const gsnap* s, int64_t slot);
int64_t snap_id_to_slot(const gsnap* s, int64_t id);
/* 64-bit words of a bitmap of n bits (the live bitmap is kept word-padded). */
static inline int64_t words_of(int64_t n) { return (n + 63) / 64; }
static inline int snap_is_dead(const gsnap* s, int64_t slot) {
    return s->dead && (((const uint8_t*)s->dead->p)[slot >> 3] >> (slot & 7) & 1);
}

struct graft_gindex {
    int64_t d;
    size_t code_size;      /* bytes of one code; 0 for FP32 (the walk reads xb), M for PQ */
    int storage;           /* graft_storage_kind, fixed at creation */
    pthread_mutex_t wlock; /* one writer at a time */
    pthread_mutex_t slock; /* cur, the counters and last_filter: held for a few instructions */
    pthread_mutex_t glock; /* the search context: its stream, scratch, gpipe, bpipe and fdev */
    pthread_cond_t bg_cv;  /* signalled (under wlock) when a background rebuild ends */
    gsnap* cur;
    graft_gpu_ctx* ctx;    /* searches (under glock) */
    graft_gpu_ctx* wctx;   /* the writers' device work (under wlock), so that searches need not wait */
    graft_graph_dev gpipe; /* the walk's search buffers; the resident arrays come from a snapshot */
    graft_bang_dev bpipe;  /* BANG's pipeline objects and buffers, idem */
    int bpipe_open;
    graft_filter_dev fdev; /* the filtered search's exact path */
    graft_filter_report last_filter;
    graft_living_report rep; /* under slock */
    /* the background rebuild (gindex_living.c) */
    pthread_t bg;
    int bg_thread;   /* bg is a thread to join */
    int bg_running;  /* it has not installed (or dropped) its graph yet */
    int bg_cancel;   /* the index is going away: drop the result */
    int64_t epoch;   /* bumped by every write that renumbers the slots (reset, consolidation,
                        set_data, a compaction): a rebuild of another epoch is dropped */
    int64_t bg_epoch;
    gsnap* bg_base;  /* the snapshot the rebuild builds over */
};

static inline int gindex_is_pq(const graft_gindex* g) { return g->storage == GRAFT_STORAGE_PQ; }

/* The current snapshot with a reference (release with snap_release). */
gsnap* gindex_acquire(graft_gindex* g);
/* Under wlock: s (its reference handed over) becomes the current snapshot. */
void gindex_publish(graft_gindex* g, gsnap* s);

/* ---- gindex_living.c: the writers' shared steps (wlock held) ---- */

/* The graph built when pending (tombstones compacted first), the host graph brought up to date
 * from the device, and the device data of the placement uploaded when missing: the current
 * snapshot is then what a search needs. fn: the message prefix ("graft_gindex_search: "). */
int gindex_make_ready(graft_gindex* g, const char* fn);
/* The device data of s (graph, vectors, codes, codec) for placement `mode` under `budget` (0 =
 * half the device), into s's device fields, capacity dcap rows. On failure s holds none. */
int gindex_upload(graft_gindex* g, gsnap* s, graft_bang_mode mode, size_t budget, int64_t dcap,
                  const char* fn);
/* The placement of n slots with a graph of degree R under (mode, budget). */
graft_bang_mode gindex_resolve_mode(const graft_gindex* g, const gsnap* s, graft_bang_mode mode,
                                    size_t budget, int64_t n, int R);
/* The host graph of t brought up to date with its device graph when GPU inserts made it stale
 * (a download into a new buffer). */
int gindex_sync_host(graft_gindex* g, gsnap* t, const char* fn);
/* Encodes n vectors into codes (wlock held: the PQ encode runs on wctx). */
int gindex_encode(graft_gindex* g, const gcodec* c, int64_t n, const float* x, uint8_t* codes,
                  const char* fn);
/* keep_fp32 = 0: GRAFT_EINVAL (naming the row) when one of n fresh FP16 codes is out of range
 * (an FP32 value past 65504 became Inf, and the codes are the only copy); other storages pass. */
int gindex_check_codes(const graft_gindex* g, const gcodec* c, int64_t n, const uint8_t* codes,
                       const char* fn);
/* Stops and waits for a running background rebuild (wlock NOT held). */
void gindex_stop_background(graft_gindex* g);

#endif
