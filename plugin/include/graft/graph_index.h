/* graft: the graph index — vectors + a fixed-degree graph built by GRNND on the GPU (or the CPU
 * reference RNN-Descent), searched on a storage of the vectors, FAISS's IndexHNSW shape (one graph,
 * a pluggable storage; ../shared/DESIGN.md):
 *   storage FP32, FP16, SQ8 (graft/storage.h): the SONG-style walk (graft/graph.h), on the GPU one
 *     kernel templated on the storage; GPU-resident (graph, codes and FP32 vectors on the device);
 *   storage PQ<M> (graft/pq.h): BANG's pipeline (graft/bang.h) on the PQ codes; placed by `mode`
 *     and `gpu_budget`: in-memory (graph, vectors and codes on the GPU) or out-of-core (codes on
 *     the GPU, graph and FP32 vectors in host memory, gathered each iteration).
 * Compressed storages re-rank the final candidates exactly with the FP32 copy (search.rerank),
 * unless keep_fp32 = 0 makes their codes the only copy (FP16, SQ8: no FP32 on the host or the
 * device, no re-rank; docs/memory.md).
 * The FAISS face is adapters/faiss/GraftIndexGraph (GraftIndexGraphPQ picks the PQ storage).
 *
 * Life cycle, as FAISS's indexes: train (SQ8 ranges, PQ codebooks) before the first add; the
 * first adds append the vectors and encode them, and the graph over all of them is built once, by
 * the first search after them (or graft_gindex_build, or write): GRNND on the GPU while the vectors
 * and its pools (2 n R 8 bytes) fit the device (or the build's memory_budget), else GRNND in
 * pieces that fit, merged (graft_graph_build_pieces); without a GPU RNN-Descent on the CPU. So
 * data added in chunks before the first search costs one build. A graph built elsewhere
 * (DiskANN's Vamana, graft_vamana_read) comes in through graft_gindex_set_data. Search before the
 * first add returns only -1 labels, as FAISS's indexes do on an empty index.
 *
 * A living index (docs/adding-and-removing.md). Once a graph is built:
 *   - an add inserts its vectors into the graph (graft/graph.h, "A living graph": a batched walk,
 *     the build's pruning rule, reverse edges), on the index's GPU for the GPU-resident
 *     placements, or leaves the graph to be rebuilt by the next search when that is cheaper;
 *     graft_living_params.policy chooses, and graft_gindex_living_report says what happened;
 *   - when the vectors inserted since the last build pass a share of the index (the cost model's,
 *     graft_gindex_rebuild_share, or rebuild_share), the graph is rebuilt in the background, and
 *     searches go on against the current graph until the new one (with the adds made meanwhile
 *     inserted into it) replaces it;
 *   - graft_gindex_remove_ids removes vectors with FAISS's contract: the remaining vectors are
 *     renumbered in order at once (ids stay 0 .. ntotal - 1, as IndexFlat's: IndexIDMap and
 *     IndexIDMap2 compose); inside, a removed vector is a tombstone that every search reads as a
 *     filter (the walk passes through it, no result holds it) until graft_gindex_consolidate
 *     repairs the rows that point at it and compacts the storage, which a removal does by itself
 *     past consolidate_share;
 *   - capacity grows by doubling, on the host and on the device: an add copies none of the rows
 *     before it, except the graph's rows (copied once an add, so that searches in flight keep
 *     reading the graph they started on).
 * Concurrency: searches read an immutable snapshot of the index (vectors, codes, graph,
 * tombstones, parameters) and never wait for a writer; a writer (add, remove, consolidate, reset,
 * train, set_*, the background rebuild's installation) works on its own copy of what it changes
 * and publishes it when it is done, so that a search sees the state before a write or after it,
 * never a mix. One writer at a time. Pointers handed out by the accessors below stay valid until
 * the next write.
 */
#ifndef GRAFT_GRAPH_INDEX_H
#define GRAFT_GRAPH_INDEX_H

#include <stdio.h>

#include "graft/bang.h"
#include "graft/graph.h"
#include "graft/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an add does to a built graph (graft_living_params.policy). */
enum {
    GRAFT_ADD_AUTO = 0,    /* insert while inserting is the cheaper choice (the batch and the vectors
                              inserted since the last build stay under the rebuild share), rebuild
                              otherwise: the batch's own share over it defers the graph to the
                              next search (as GRAFT_ADD_REBUILD), the inserted vectors' share over
                              it rebuilds in the background */
    GRAFT_ADD_INSERT = 1,  /* always insert (never rebuild by itself) */
    GRAFT_ADD_REBUILD = 2  /* never insert: the next search builds the graph over everything */
};

typedef struct graft_living_params {
    int policy;               /* GRAFT_ADD_AUTO (default), GRAFT_ADD_INSERT or GRAFT_ADD_REBUILD */
    int insert_L;             /* beam of an insert's walk, 0 (default) = graft_insert_default_L(R),
                                 else 1..1024 */
    double rebuild_share;     /* AUTO's share; < 0 (default): the cost model's
                                 (graft_gindex_rebuild_share), else in (0, 1] */
    double consolidate_share; /* a removal that leaves more tombstones than this share of the
                                 vectors held consolidates (default 0.25); >= 1: only when
                                 graft_gindex_consolidate is called */
    int background;           /* AUTO's rebuild of an index grown by inserts: 1 (default) in a
                                 background thread (searches go on meanwhile), 0 by the next
                                 search */
} graft_living_params;

typedef struct graft_gindex_params {
    graft_metric metric;        /* GRAFT_METRIC_L2 (default) or GRAFT_METRIC_INNER_PRODUCT */
    int device;                 /* CUDA device that builds and searches; -1: the CPU references
                                   (RNN-Descent + CPU search). Default: 0 when a GPU is visible */
    graft_grnnd_params build;   /* graph construction (build.base on the CPU); build.base.metric
                                   and build.device are taken from metric and device */
    graft_search_params search; /* default search parameters (a search may pass its own);
                                   search.device is taken from device */
    int storage;                /* what the search reads (graft/storage.h): GRAFT_STORAGE_FP32
                                   (default), _FP16, _SQ8 or _PQ (trained by graft_gindex_train
                                   before the first add). The graph is built from the FP32 vectors
                                   (FP16 / SQ8: from the codes with build.build_from =
                                   GRAFT_BUILD_FROM_CODES or keep_fp32 = 0); compressed storages
                                   re-rank the final candidates with them (search.rerank; none
                                   with keep_fp32 = 0) */
    graft_pq_params pq;         /* PQ storage: M (0 = graft_pq_default_M), training sample and the
                                   k-means (required for training: the FAISS adapter passes
                                   FAISS's) */
    graft_bang_mode mode;       /* placement on a GPU. PQ: GRAFT_BANG_AUTO (default; in-memory
                                   when codes + graph + vectors fit gpu_budget, else out-of-core),
                                   IN_MEMORY or OUT_OF_CORE. FP32/FP16/SQ8 are GPU-resident
                                   (AUTO or IN_MEMORY; OUT_OF_CORE is GRAFT_EUNSUPPORTED) */
    size_t gpu_budget;          /* PQ: device bytes the index keeps resident (codes, and in-memory
                                   also graph and vectors); 0 = half the device's memory. Codes
                                   that do not fit are an error (GRAFT_EGPU_NOMEM) */
    graft_cpu_knn_fn cpu_knn;   /* the filtered search's exact path on the CPU (graft/graph.h,
                                   "Filtered search"): NULL (default) is graft_knn_cpu; the FAISS
                                   adapter passes FAISS's brute force, as for GraftFlat */
    graft_living_params living; /* adds and removals on a built graph */
    int keep_fp32;              /* 1 (default): the index keeps the FP32 vectors beside the
                                   storage's codes (host, and the device for the re-rank). 0
                                   (FP16 and SQ8 only): the codes are the only copy, on the host and
                                   on the device (docs/memory.md): an add encodes its batch and
                                   keeps no FP32; the build reads the codes decoded; searches
                                   rank by the codes' distances, with no exact re-rank
                                   (search.rerank is forced to 0); reconstruct returns the
                                   decoded vector; graft_gindex_vectors returns NULL. FP32
                                   storage: GRAFT_EINVAL (its vectors are its storage); PQ:
                                   GRAFT_EUNSUPPORTED. Fixed once the index holds vectors
                                   (graft_gindex_set_keep_fp32) */
} graft_gindex_params;

void graft_gindex_params_defaults(graft_gindex_params* params);

typedef struct graft_gindex graft_gindex;

/* New empty index of dimension d in [1, 2^20]. params may be NULL (defaults). Errors: GRAFT_EINVAL
 * (bad d or parameters), GRAFT_ENODEVICE (device >= 0 and no such device). */
int graft_gindex_new(int64_t d, const graft_gindex_params* params, graft_gindex** out);
void graft_gindex_free(graft_gindex* index);

/* Sets keep_fp32 (graft_gindex_params) of an index that holds no vectors yet (a storage choice,
 * like the storage itself). 0 forces the default search's rerank to 0. Errors: GRAFT_EINVAL
 * (NULL, keep not 0 or 1, 0 for the FP32 storage, an index that holds vectors or slots: reset it
 * first), GRAFT_EUNSUPPORTED (0 for PQ); the index is then unchanged. */
int graft_gindex_set_keep_fp32(graft_gindex* index, int keep);

/* Trains the storage's codec on n vectors (SQ8: per-dimension min/max, FAISS's QT_8bit; PQ: the
 * codebooks, graft_pq_train's errors; FP32 and FP16 learn nothing and accept any call).
 * GRAFT_ESTATE: retraining an SQ8 or PQ index that holds vectors (their codes would go stale;
 * reset first, as FAISS refuses it too). GRAFT_EINVAL: NaN/Inf, n < 1. On failure the index is
 * unchanged. */
int graft_gindex_train(graft_gindex* index, int64_t n, const float* x);
/* 1 when adds are allowed (FP32, FP16, or a trained SQ8 / PQ). */
int graft_gindex_is_trained(const graft_gindex* index);
/* The storage's codec (kind, SQ8 parameters), owned by the index. */
const graft_storage* graft_gindex_storage(const graft_gindex* index);
/* PQ storage: installs a copy of codebooks trained elsewhere (another index's graft_gindex_pq),
 * as training would: what sharded and replicated indexes do, so that every shard trains once and
 * all code the same way. Errors: GRAFT_EINVAL for another storage, a pq that graft_pq_check
 * refuses or whose d or M differs from the index's; GRAFT_ESTATE for a non-empty index. */
int graft_gindex_set_pq(graft_gindex* index, const graft_pq* pq);
/* PQ storage: the codebooks; NULL before training and for other storages. */
const graft_pq* graft_gindex_pq(const graft_gindex* index);
/* The codes of the compressed storages (one a slot, graft_gindex_slots: code bytes each; PQ: M);
 * NULL for FP32. */
const uint8_t* graft_gindex_codes(const graft_gindex* index);
/* Device bytes the index holds resident for its contents (graph, codes, FP32 vectors for the walk
 * or the re-rank unless keep_fp32 = 0, codec parameters); 0 on the CPU, when empty or while a build is pending. */
size_t graft_gindex_gpu_bytes(const graft_gindex* index);
/* Host bytes the index holds for its contents: the buffers of the FP32 vectors and the codes
 * (their capacity: up to twice the vectors held after adds, which grow it by doubling), the graph's
 * rows, the tombstone bitmaps and the codec (SQ8 ranges, PQ codebooks); not the search and build
 * buffers (docs/memory.md, "Transient memory") nor older snapshots that searches in flight still
 * read. 0 for NULL. */
size_t graft_gindex_host_bytes(const graft_gindex* index);

/* The memory model (docs/memory.md): what an index of n vectors holds, per_vector n + fixed bytes,
 * on the host (what graft_gindex_host_bytes reads once the graph is built, with the capacity equal
 * to n and no tombstones: one add, set_data or a file) or on the GPU (what graft_gindex_gpu_bytes
 * reads). */
typedef enum graft_memory_side { GRAFT_MEMORY_HOST = 0, GRAFT_MEMORY_GPU = 1 } graft_memory_side;
typedef struct graft_memory_model {
    size_t per_vector; /* FP32 vector, code, graph row, as the side keeps them */
    size_t fixed;      /* the codec: SQ8's ranges, PQ's codebooks */
} graft_memory_model;
/* The model of a graph index of dimension d and degree R with this storage (PQ: M code bytes) and
 * placement (GPU side; PQ: GRAFT_BANG_IN_MEMORY or OUT_OF_CORE, AUTO depends on the budget and is
 * refused; the other storages are in-memory: AUTO or IN_MEMORY). Host:
 *   FP32 4 d + 4 R, FP16 6 d + 4 R, SQ8 5 d + 4 R (+ 8 d fixed), PQ 4 d + M + 4 R (+ 1024 d fixed)
 * (every storage keeps the FP32 vectors on the host: the build, re-rank and I/O read them); GPU:
 *   the same for FP32, FP16, SQ8 and in-memory PQ; out-of-core PQ M (+ 1024 d fixed).
 * Errors: GRAFT_EINVAL (NULL out, d < 1, R < 1, unknown side, storage or placement, PQ without
 * M in [1, d]); GRAFT_EUNSUPPORTED (OUT_OF_CORE for a storage other than PQ). */
int graft_gindex_memory_model(graft_memory_side side, int storage, graft_bang_mode placement,
                              int64_t d, int R, int M, graft_memory_model* out);
/* The same for keep_fp32 (graft_gindex_params): 1 is graft_gindex_memory_model; 0 (FP16 and SQ8)
 * drops the FP32 vectors from both sides: host and GPU code + 4 R a vector (FP16 2 d + 4 R, SQ8
 * d + 4 R, + 8 d fixed). Errors as graft_gindex_memory_model's, and GRAFT_EINVAL for keep_fp32
 * not 0 or 1 or 0 with the FP32 storage, GRAFT_EUNSUPPORTED for 0 with PQ (as graft_gindex_new). */
int graft_gindex_memory_model_ex(graft_memory_side side, int storage, graft_bang_mode placement,
                                 int keep_fp32, int64_t d, int R, int M, graft_memory_model* out);
/* per_vector n + fixed. */
static inline size_t graft_memory_model_bytes(const graft_memory_model* m, int64_t n) {
    return m->per_vector * (size_t)n + m->fixed;
}

/* Adds n vectors (copied) as ids ntotal .. ntotal + n - 1 and encodes them. Before the first
 * graph the graph over all vectors is built by the next search, graft_gindex_build or write;
 * once a graph is built, living.policy decides whether they are inserted into it now or the graph
 * is rebuilt (above). An untrained SQ8 or PQ index: GRAFT_ESTATE. NaN/Inf or a failed add leave
 * the index as it was. */
int graft_gindex_add(graft_gindex* index, int64_t n, const float* x);
/* graft_gindex_add of the vectors (float)x[i] (n x d uint8: bvecs, u8bin), one add as it is (one
 * snapshot, the same living.policy), without ever holding n x d floats of its own: with
 * keep_fp32 = 1 the rows are widened straight into the FP32 vectors the index keeps anyway; with
 * keep_fp32 = 0 (FP16, SQ8: codes only) 65,536 rows at a time are widened into a scratch buffer
 * and encoded. Errors: GRAFT_EINVAL (NULL index, NULL x with n > 0, n < 0), graft_gindex_add's;
 * a failed add leaves the index as it was. */
int graft_gindex_add_u8(graft_gindex* index, int64_t n, const uint8_t* x);
/* Removes the vectors whose ids (in [0, ntotal); others are ignored, repeats count once) are
 * listed, FAISS's remove_ids: the remaining ones are renumbered in order at once, and *removed
 * (may be NULL) gets how many went. They become tombstones until consolidation (above); a removal
 * past living.consolidate_share consolidates before it returns. Errors: GRAFT_EINVAL (NULL ids
 * with n > 0, n < 0), a consolidation's; on failure nothing is removed. */
int graft_gindex_remove_ids(graft_gindex* index, int64_t n, const int64_t* ids, int64_t* removed);
/* Repairs the graph rows that point at removed vectors and compacts the vectors, codes, graph and
 * device data (graft_graph_consolidate_cpu); nothing to do without tombstones. Ids do not change
 * (they were renumbered by the removals). Errors: GRAFT_ENOMEM, GRAFT_EGPU_NOMEM (the upload of
 * the compacted data); the index is then unchanged. */
int graft_gindex_consolidate(graft_gindex* index);

/* What the adds and removals did (counters since the index was made or read). */
typedef struct graft_living_report {
    int last_add;               /* the last add's way: GRAFT_ADD_INSERT (inserted), GRAFT_ADD_REBUILD
                                   (appended, graph left to the next search or build), 0 none */
    int rebuilding;             /* 1 while a background rebuild runs */
    double rebuild_share;       /* the share AUTO applies: rebuild_share or the cost model's */
    int64_t inserted;           /* vectors inserted into a built graph */
    int64_t insert_batches;     /* adds that inserted */
    int64_t since_build;        /* vectors the current graph holds by insertion (0 after a build) */
    int64_t builds;             /* graph builds: by a search, graft_gindex_build, write or in the
                                   background */
    int64_t background_builds;  /* ... of them in the background and installed */
    int64_t removed;            /* vectors removed */
    int64_t tombstones;         /* removed vectors not consolidated yet */
    int64_t consolidations;     /* consolidations that compacted something */
    double insert_seconds;      /* wall time of the last insert (the add's whole call) */
    double consolidate_seconds; /* wall time of the last consolidation */
    int on_gpu_inserts;         /* 1 when inserts run on the index's GPU (GPU-resident placements),
                                   0 on the CPU reference (CPU indexes, out-of-core PQ) */
} graft_living_report;
int graft_gindex_living_report(const graft_gindex* index, graft_living_report* report);

/* The cost model beside the build: inserting m vectors into a graph of n costs m c_insert,
 * rebuilding costs (n + m) c_build, so inserting is the cheaper choice while m / (n + m) stays
 * under c_build / c_insert (measured per vector: plugin/graph/insert.c). The share for a GPU
 * index (gpu = 1) or a CPU one, clamped to [0.05, 0.5]. */
double graft_gindex_rebuild_share(int gpu);
/* Builds the graph over the vectors added since the last build and puts the device data of the
 * placement on the GPU; nothing to do when no add is pending. A search does the same first; call
 * this to build at a time of your choosing (and time it apart). It also waits for a background
 * rebuild to be installed, so that nothing runs behind the index when it returns. Errors: the
 * build's (graft_grnnd_build_gpu, graft_rnnd_build_cpu) and the upload's (GRAFT_EGPU_NOMEM); the
 * vectors and codes stay, and a later call tries again. */
int graft_gindex_build(graft_gindex* index);
/* Removes every vector, code and the graph (a trained codec stays, as FAISS's reset). */
int graft_gindex_reset(graft_gindex* index);

/* k nearest of each query, FAISS layout (graft_graph_search_cpu_ex's results; PQ:
 * graft_bang_search_cpu's). params NULL = the index's defaults; L is widened to k. A pending
 * build runs first. Thread-safe: searches, add, reset and set_*_params of one index may run in
 * different threads at once; the index's lock serializes them (tests/stress/test_concurrency).
 * A filter (params->allowed) with allowed_n set shorter than the index: GRAFT_ESTATE. With a
 * filter, k results whenever at least k ids pass (graft/graph.h, "Filtered search"); report
 * (may be NULL) gets the filtered search's choice in report->filter on the CPU too. */
int graft_gindex_search(const graft_gindex* index, int64_t nq, const float* xq, int64_t k,
                        const graft_search_params* params, float* D, int64_t* I,
                        graft_search_report* report);

/* The vectors the index holds (removed ones not counted). */
int64_t graft_gindex_ntotal(const graft_gindex* index);
int64_t graft_gindex_d(const graft_gindex* index);
graft_metric graft_gindex_metric(const graft_gindex* index);
int graft_gindex_device(const graft_gindex* index);   /* -1 on the CPU */
/* Vector `id` (in [0, ntotal)) into out (d floats): the stored FP32 vector, whatever the storage;
 * with keep_fp32 = 0 the decoded code (FAISS's convention for lossy indexes, as
 * IndexScalarQuantizer::reconstruct). GRAFT_EINVAL for NULL or an id out of range. */
int graft_gindex_reconstruct(const graft_gindex* index, int64_t id, float* out);
/* The storage's slots, owned by the index (valid until the next write): graft_gindex_slots of them,
 * removed vectors included until consolidation. Without tombstones (graft_gindex_living_report's
 * tombstones = 0), slot i is id i; call graft_gindex_consolidate first to make it so. */
int64_t graft_gindex_slots(const graft_gindex* index);
/* slots x d; NULL when keep_fp32 = 0 (graft_gindex_codes and graft_gindex_reconstruct instead) */
const float* graft_gindex_vectors(const graft_gindex* index);
/* The graph over the slots; NULL while empty or while a build is pending (graft_gindex_build).
 * After inserts on the GPU the host copy is brought up to date first (a download). */
const graft_graph* graft_gindex_graph(const graft_gindex* index);
/* 1 while adds wait for the graph build that the next search, graft_gindex_build or write runs
 * (the index holds vectors and no graph), else 0. Cheap: it reads no graph. */
int graft_gindex_build_pending(const graft_gindex* index);
graft_gindex_params graft_gindex_get_params(const graft_gindex* index);
/* Replaces the default search parameters (validated as a search would). */
int graft_gindex_set_search_params(graft_gindex* index, const graft_search_params* params);
/* Replaces the build parameters used by the next build. */
int graft_gindex_set_build_params(graft_gindex* index, const graft_grnnd_params* params);
/* Replaces the adds' and removals' parameters (graft_living_params; GRAFT_EINVAL for bad ones). */
int graft_gindex_set_living_params(graft_gindex* index, const graft_living_params* params);
/* Seconds the last graph build took (wall), 0 before the first and while one is pending. */
double graft_gindex_build_seconds(const graft_gindex* index);
/* How the last graph was built: 1 GRNND on the GPU, P > 1 GRNND in P pieces (the data's pools did
 * not fit the device or the build's memory_budget), 0 RNN-Descent on the CPU; -1 before the first
 * build, while one is pending, after reset and for a graph given by set_data or read from a file. */
int graft_gindex_build_pieces(const graft_gindex* index);
/* The last build's breakdown: pieces as above, the largest piece, and for builds in pieces the
 * partition, the pieces' builds and the rows' merges in seconds (graft/graph.h). */
int graft_gindex_build_report(const graft_gindex* index, graft_pieces_report* report);
/* The placement searches use now: IN_MEMORY or OUT_OF_CORE on a GPU (PQ's AUTO resolved against
 * the budget for the current contents; the other storages are IN_MEMORY), AUTO on the CPU. */
graft_bang_mode graft_gindex_mode(const graft_gindex* index);
/* Changes the placement and GPU budget (moves the device data accordingly; while a build is
 * pending, the build's upload applies them). FP32/FP16/SQ8: OUT_OF_CORE is GRAFT_EUNSUPPORTED. */
int graft_gindex_set_mode(graft_gindex* index, graft_bang_mode mode, size_t gpu_budget);
/* How the last successful search on this index went with its filter (graft/graph.h, "Filtered
 * search"): path, passing ids, selectivity, threshold, beam, queries redone. Zeroes before the
 * first search. With several threads searching, the last one to finish. */
int graft_gindex_last_filter(const graft_gindex* index, graft_filter_report* out);

/* Takes n vectors and a graph over them built elsewhere (a file, another builder), replacing the
 * index's contents; both are copied (and encoded for a compressed storage). The graph must be n
 * rows of ids in [-1, n) with entry in [0, n). GRAFT_EINVAL otherwise, GRAFT_ESTATE for an
 * untrained SQ8 index; index unchanged. */
int graft_gindex_set_data(graft_gindex* index, int64_t n, const float* x, const graft_graph* graph);
/* Takes a graph built elsewhere over the vectors this index already holds (graph->n == its
 * slots, graft_gindex_slots: ntotal without tombstones),
 * e.g. by another index over the same vectors: replicas build once and the others take the graph
 * (adapters/faiss/GraftIndexShards.h). The rows are copied and the device data of the placement
 * uploaded; a pending build is no longer pending (build_seconds 0, build pieces -1: a graph
 * given). Checked as set_data checks; index unchanged on failure. Cheaper than set_data for
 * that: neither the vectors nor their codes are copied again. */
int graft_gindex_set_graph(graft_gindex* index, const graft_graph* graph);

/* Graph index format, versions 4 and 5 (little-endian), one record for every storage:
 *     0   8  magic "GRFTGRPH"
 *     8   4  uint32 format version (4; 5 for an index with keep_fp32 = 0; versions 1 to 3 still
 *            load)
 *     12  4  uint32 header size in bytes (152 in versions 4 and 5, 104 in 3, 80 in 2, 64 in 1)
 *     16  8  int64 d
 *     24  8  int64 slots (n: the vectors held, tombstones included)
 *     32  4  int32 metric
 *     36  4  int32 R (0 when n = 0)
 *     40  8  int64 entry
 *     48  4  int32 search L
 *     52  4  int32 search probes
 *     56  4  int32 search visited kind
 *     60  4  int32 search merge kind
 *     --- version 2 from here; version 1 ends the header at 64 and means FP32, rerank 0
 *     64  4  int32 storage kind (graft_storage_kind)
 *     68  4  int32 storage trained (0 / 1)
 *     72  4  int32 search rerank
 *     76  4  reserved (0)
 *     --- version 3 from here; version 2 ends the header at 80
 *     80  4  int32 PQ M (0 for the other storages)
 *     84  4  int32 placement mode (graft_bang_mode)
 *     88  4  int32 search max_expand
 *     92  4  int32 search bloom_log2
 *     96  8  uint64 GPU budget
 *     --- version 4 from here; version 3 ends the header at 104
 *     104 8  int64 tombstones (removed vectors not consolidated; ntotal = n - tombstones)
 *     112 8  int64 vectors inserted into the graph since it was built
 *     120 4  int32 living.policy      124 4 int32 living.insert_L
 *     128 8  float64 living.rebuild_share     136 8 float64 living.consolidate_share
 *     144 4  int32 living.background
 *     148 4  version 4: reserved (0); version 5: int32 keep_fp32 (0: the codes are the only copy
 *            of the vectors; a writer writes version 5 only then, so that a reader before it
 *            refuses such a record as a newer version instead of misreading it)
 *     152 SQ8 trained: d float32 vmin, then d float32 vdiff; PQ trained: 256*d float32 centroids
 *         (M x 256 x d/M) then n*M uint8 codes; then n*d*4 float32 vectors (keep_fp32 = 0: n
 *         FP16 / SQ8 codes instead, 2 d or d bytes each); then n*R*4 int32 graph rows (with
 *         keep_fp32 = 1 the FP16 / SQ8 codes are not stored: encoding is deterministic and
 *         cheap, and the reader encodes the vectors again); then, with tombstones, (n + 7) / 8 bytes of
 *         their bitmap (bit s & 7 of byte s >> 3: slot s removed)
 *     ... 8  uint64 FNV-1a checksum of every byte before it (graft_io_checksum)
 * write builds a pending graph first (the file holds one over every vector). read also loads
 * the graph + PQ index's GRFTBANG version-1 records (below) as the PQ storage.
 * Errors as graft_flat_write / graft_flat_read (GRAFT_EIO, GRAFT_EFORMAT with the byte offset of a
 * truncation, checksum mismatch, newer version, out-of-range sizes or ids, a tombstone bitmap
 * that does not count its tombstones or removes every vector). params of read: NULL
 * = defaults (its pq.kmeans is kept for later training); metric, storage, M, placement, the
 * search defaults and the living parameters stored in the file come from the file. */
#define GRAFT_GRAPH_MAGIC "GRFTGRPH"
/* The record of the graph + PQ index before it became this index's PQ storage (graft_bindex,
 * removed); graft_gindex_read loads it, nothing writes it any more. Version 1, little-endian:
 *     0   8  magic "GRFTBANG"       8 4 uint32 version (1)    12 4 uint32 header size (88)
 *     16  8  int64 d                24 8 int64 n              32 4 int32 metric
 *     36  4  int32 R                40 8 int64 entry          48 4 int32 M
 *     52  4  int32 mode             56 4 int32 search L       60 4 int32 search rerank
 *     64  4  int32 max_expand       68 4 int32 bloom_log2     72 8 uint64 GPU budget
 *     80  4  int32 trained          84 4 reserved
 *     88  256*d*4 float32 centroids (trained only); n*M uint8 codes; n*d*4 float32 vectors;
 *         n*R*4 int32 graph rows; 8 uint64 FNV-1a checksum */
#define GRAFT_BANG_MAGIC "GRFTBANG"
#define GRAFT_GRAPH_FORMAT_VERSION 5u /* the newest version written (5 only for keep_fp32 = 0) */
int graft_gindex_write(const graft_gindex* index, FILE* f);
int graft_gindex_read(FILE* f, const graft_gindex_params* params, graft_gindex** out);

#ifdef __cplusplus
}
#endif
#endif
