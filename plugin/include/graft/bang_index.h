/* graft: the graph + PQ index, for data that does not fit in GPU memory (BANG,
 * ../shared/papers/bang-billion-scale-single-gpu.txt). Full vectors and a fixed-degree graph in
 * host memory, PQ codes on the GPU; searched by graft/bang.h's search, with the graph and vectors
 * on the GPU too when they fit the index's GPU budget (in-memory mode) or gathered from host
 * memory each iteration (out-of-core mode). The FAISS face is adapters/faiss/GraftIndexGraphPQ.
 *
 * Life cycle, as FAISS's PQ indexes: train (the PQ codebooks) before the first add; add appends
 * the vectors and encodes them; the graph over all of them is built once, by the first search
 * after the adds (or graft_bindex_build, or write): GRNND on the GPU while the vectors and two
 * build pools fit the device, else GRNND in pieces that fit; without a GPU RNN-Descent on the
 * CPU. So data added in chunks (how data larger than memory arrives) costs one build, not one per
 * chunk; a graph is rebuilt over everything, not extended (graft/graph_index.h says why). A graph
 * built elsewhere (e.g. DiskANN's Vamana, graft_vamana_read) comes in through
 * graft_bindex_set_data.
 */
#ifndef GRAFT_BANG_INDEX_H
#define GRAFT_BANG_INDEX_H

#include <stdio.h>

#include "graft/bang.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_bindex_params {
    graft_metric metric;       /* GRAFT_METRIC_L2 (default) or GRAFT_METRIC_INNER_PRODUCT */
    int device;                /* CUDA device; -1: CPU only (RNN-Descent build, CPU reference
                                  search). Default 0 when a GPU is visible */
    graft_bang_mode mode;      /* GRAFT_BANG_AUTO (default), IN_MEMORY or OUT_OF_CORE */
    size_t gpu_budget;         /* device bytes the index keeps resident (codes, and in-memory also
                                  graph and vectors); 0 = half the device's memory. AUTO picks
                                  in-memory when everything fits it; codes that do not fit are
                                  an error (GRAFT_EGPU_NOMEM) */
    graft_pq_params pq;        /* M, training sample, k-means (required: the FAISS adapter passes
                                  FAISS's) */
    graft_grnnd_params build;  /* graph construction; metric and device taken from the above */
    graft_bang_params search;  /* default search parameters; device taken from the above */
} graft_bindex_params;

void graft_bindex_params_defaults(graft_bindex_params* params);

typedef struct graft_bindex graft_bindex;

/* New empty, untrained index of dimension d in [1, 2^20]. params NULL = defaults (then training
 * fails for want of a k-means). Errors: GRAFT_EINVAL (bad d, M not dividing d, bad parameters),
 * GRAFT_ENODEVICE. */
int graft_bindex_new(int64_t d, const graft_bindex_params* params, graft_bindex** out);
void graft_bindex_free(graft_bindex* index);

/* Trains the PQ codebooks on n vectors (graft_pq_train's errors). Allowed only while the index is
 * empty (GRAFT_ESTATE otherwise: retraining would invalidate the stored codes). */
int graft_bindex_train(graft_bindex* index, int64_t n, const float* x);
int graft_bindex_is_trained(const graft_bindex* index);
/* Installs a copy of codebooks trained elsewhere (another index's graft_bindex_pq), as training
 * would: what sharded and replicated indexes do, so that every shard trains once and all code
 * the same way. Errors: GRAFT_EINVAL for a pq that graft_pq_check refuses or whose d or M differs
 * from the index's; GRAFT_ESTATE for a non-empty index (as graft_bindex_train). */
int graft_bindex_set_pq(graft_bindex* index, const graft_pq* pq);

/* Appends n vectors (copied) and encodes them; the graph over all vectors is built by the next
 * search, graft_bindex_build or write. GRAFT_ESTATE before training. A failed add leaves the index
 * as it was. */
int graft_bindex_add(graft_bindex* index, int64_t n, const float* x);
/* Builds the graph over the vectors added since the last build and puts the device data of the
 * mode on the GPU; nothing to do when no add is pending. A search does the same first; call this
 * to build at a time of your choosing (and time it apart). Errors: the build's
 * (graft_grnnd_build_gpu, graft_rnnd_build_cpu) and the upload's (GRAFT_EGPU_NOMEM over the
 * budget); the vectors and codes stay, and a later call tries again. */
int graft_bindex_build(graft_bindex* index);
/* Removes every vector, code and the graph; the codebooks stay (FAISS's reset). */
int graft_bindex_reset(graft_bindex* index);

/* Replaces the contents with n vectors and a graph over them built elsewhere (both copied; the
 * vectors are encoded with the trained codebooks). Checks as graft_gindex_set_data, GRAFT_ESTATE
 * before training. */
int graft_bindex_set_data(graft_bindex* index, int64_t n, const float* x, const graft_graph* graph);

/* k nearest of each query, FAISS layout (graft_bang_search_cpu's results). params NULL = the
 * index's defaults; L is widened to k. k in [1, 1024]. An empty index gives -1 labels.
 * Thread-safe: searches, add, reset, set_mode and set_*_params of one index may run in different
 * threads at once; the index's lock serializes them (tests/stress/test_concurrency). A filter
 * (params->allowed) with allowed_n set shorter than the index: GRAFT_ESTATE. With a filter, k
 * results whenever at least k ids pass (graft/graph.h, "Filtered search"). report may be NULL. */
int graft_bindex_search(const graft_bindex* index, int64_t nq, const float* xq, int64_t k,
                        const graft_bang_params* params, float* D, int64_t* I,
                        graft_bang_report* report);

int64_t graft_bindex_ntotal(const graft_bindex* index);
int64_t graft_bindex_d(const graft_bindex* index);
graft_metric graft_bindex_metric(const graft_bindex* index);
int graft_bindex_device(const graft_bindex* index);          /* -1 on the CPU */
/* The mode searches use now: IN_MEMORY or OUT_OF_CORE on a GPU (AUTO resolved against the
 * budget for the current contents), AUTO on the CPU. */
graft_bang_mode graft_bindex_mode(const graft_bindex* index);
const float* graft_bindex_vectors(const graft_bindex* index);    /* ntotal x d */
const uint8_t* graft_bindex_codes(const graft_bindex* index);    /* ntotal x M */
const graft_pq* graft_bindex_pq(const graft_bindex* index);      /* NULL before training */
/* NULL while empty or while a build is pending (graft_bindex_build) */
const graft_graph* graft_bindex_graph(const graft_bindex* index);
graft_bindex_params graft_bindex_get_params(const graft_bindex* index);
int graft_bindex_set_search_params(graft_bindex* index, const graft_bang_params* params);
int graft_bindex_set_build_params(graft_bindex* index, const graft_grnnd_params* params);
/* Changes the memory mode and GPU budget (moves the device data accordingly; while a build is
 * pending, the build's upload applies them). */
int graft_bindex_set_mode(graft_bindex* index, graft_bang_mode mode, size_t gpu_budget);
/* The last graph build's wall clock (0 while one is pending). */
double graft_bindex_build_seconds(const graft_bindex* index);
/* As graft_gindex_build_pieces: 1 GRNND, P > 1 GRNND in P pieces, 0 CPU, -1 no build (or one
 * pending). */
int graft_bindex_build_pieces(const graft_bindex* index);
/* The last build's breakdown: pieces as above, the largest piece, and for builds in pieces the
 * partition, the pieces' builds and the rows' merges in seconds (graft/graph.h); a build in one
 * piece or on the CPU has its wall time in build_seconds. */
int graft_bindex_build_report(const graft_bindex* index, graft_pieces_report* report);
/* The last successful search's filtered-search choice (graft_gindex_last_filter's). */
int graft_bindex_last_filter(const graft_bindex* index, graft_filter_report* out);
/* Device bytes the index holds resident (codes, codebooks, and in-memory graph + vectors). */
size_t graft_bindex_gpu_bytes(const graft_bindex* index);

/* Graph + PQ index format, version 1 (little-endian):
 *     0   8  magic "GRFTBANG"
 *     8   4  uint32 format version (1)
 *     12  4  uint32 header size in bytes (88 in version 1)
 *     16  8  int64 d
 *     24  8  int64 ntotal (n)
 *     32  4  int32 metric
 *     36  4  int32 R (0 when n = 0)
 *     40  8  int64 entry (0 when n = 0)
 *     48  4  int32 M (code bytes per vector, trained or not)
 *     52  4  int32 mode
 *     56  4  int32 search L
 *     60  4  int32 search rerank
 *     64  4  int32 search max_expand
 *     68  4  int32 search bloom_log2
 *     72  8  uint64 GPU budget
 *     80  4  int32 trained (1: the codebooks follow; 0: none, and n = 0)
 *     84  4  reserved (0)
 *     88  256*d*4 float32 centroids (trained only); n*M uint8 codes; n*d*4 float32 vectors;
 *         n*R*4 int32 graph rows
 *     ... 8  uint64 FNV-1a checksum of every byte before it
 * write builds a pending graph first (the file holds one over every vector).
 * Errors as graft_gindex_read/write. params of read: NULL = defaults (its pq.kmeans is kept for
 * later training); metric, M, mode, budget and search defaults come from the file. */
#define GRAFT_BANG_MAGIC "GRFTBANG"
#define GRAFT_BANG_FORMAT_VERSION 1u
int graft_bindex_write(const graft_bindex* index, FILE* f);
int graft_bindex_read(FILE* f, const graft_bindex_params* params, graft_bindex** out);

#ifdef __cplusplus
}
#endif
#endif
