/* graft: the graph index — vectors + a fixed-degree graph built by GRNND on the GPU (or the CPU
 * reference RNN-Descent), searched by the SONG-style GPU kernel (or the CPU reference search).
 * The FAISS face of this object is adapters/faiss/GraftIndexGraph.
 *
 * Adding: every add rebuilds the graph over all stored vectors (GRNND on 1M x 128 takes 0.64 s on
 * an H100, and a rebuild gives the same quality as one build over everything, where inserting
 * into a graph built for other data degrades it). Data whose GRNND pools (2 n R 8 bytes beside
 * the vectors) do not fit the device (or the build's memory_budget) is built by GRNND in pieces
 * that fit, merged (graft_graph_build_pieces); without a GPU, by RNN-Descent on the CPU. Search before the first add returns only -1 labels, as FAISS's indexes do on an
 * empty index.
 */
#ifndef GRAFT_GRAPH_INDEX_H
#define GRAFT_GRAPH_INDEX_H

#include <stdio.h>

#include "graft/graph.h"
#include "graft/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_gindex_params {
    graft_metric metric;        /* GRAFT_METRIC_L2 (default) or GRAFT_METRIC_INNER_PRODUCT */
    int device;                 /* CUDA device that builds and searches; -1: the CPU references
                                   (RNN-Descent + CPU search). Default: 0 when a GPU is visible */
    graft_grnnd_params build;   /* graph construction (build.base on the CPU); build.base.metric
                                   and build.device are taken from metric and device */
    graft_search_params search; /* default search parameters (a search may pass its own);
                                   search.device is taken from device */
    int storage;                /* what the search walk reads (graft/storage.h): GRAFT_STORAGE_FP32
                                   (default), _FP16 or _SQ8 (trained by graft_gindex_train before
                                   the first add). The graph is built from the FP32 vectors
                                   whatever the storage; compressed storages re-rank the final
                                   candidates with them (search.rerank) */
} graft_gindex_params;

void graft_gindex_params_defaults(graft_gindex_params* params);

typedef struct graft_gindex graft_gindex;

/* New empty index of dimension d in [1, 2^20]. params may be NULL (defaults). Errors: GRAFT_EINVAL
 * (bad d or parameters), GRAFT_ENODEVICE (device >= 0 and no such device). */
int graft_gindex_new(int64_t d, const graft_gindex_params* params, graft_gindex** out);
void graft_gindex_free(graft_gindex* index);

/* Trains the storage's codec on n vectors (SQ8: per-dimension min/max, FAISS's QT_8bit; FP32 and
 * FP16 learn nothing and accept any call). GRAFT_ESTATE: retraining an SQ8 index that holds
 * vectors (their codes would go stale; reset first, as FAISS refuses it too). GRAFT_EINVAL: NaN/Inf,
 * n < 1. On failure the index is unchanged. */
int graft_gindex_train(graft_gindex* index, int64_t n, const float* x);
/* 1 when adds are allowed (FP32, FP16, or a trained SQ8). */
int graft_gindex_is_trained(const graft_gindex* index);
/* The storage's codec (kind, SQ8 parameters), owned by the index. */
const graft_storage* graft_gindex_storage(const graft_gindex* index);
/* Device bytes the index holds for its contents (graph, codes, FP32 vectors for the walk or the
 * re-rank, codec parameters); 0 on the CPU or when empty. */
size_t graft_gindex_gpu_bytes(const graft_gindex* index);

/* Appends n vectors (copied) and rebuilds the graph over all of them. NaN/Inf or a failed build
 * leave the index as it was. An untrained SQ8 index: GRAFT_ESTATE. */
int graft_gindex_add(graft_gindex* index, int64_t n, const float* x);
/* Removes every vector and the graph (an SQ8 codec stays trained). */
int graft_gindex_reset(graft_gindex* index);

/* k nearest of each query, FAISS layout (graft_graph_search_cpu_ex's results). params NULL = the
 * index's defaults. Thread-safe: searches, add, reset and set_*_params of one index may run in
 * different threads at once; the index's lock serializes them (tests/stress/test_concurrency).
 * A filter (params->allowed) with allowed_n set shorter than the index: GRAFT_ESTATE. With a
 * filter, k results whenever at least k ids pass (graft/graph.h, "Filtered search"); report
 * (may be NULL) gets the filtered search's choice in report->filter on the CPU too. */
int graft_gindex_search(const graft_gindex* index, int64_t nq, const float* xq, int64_t k,
                        const graft_search_params* params, float* D, int64_t* I,
                        graft_search_report* report);

int64_t graft_gindex_ntotal(const graft_gindex* index);
int64_t graft_gindex_d(const graft_gindex* index);
graft_metric graft_gindex_metric(const graft_gindex* index);
int graft_gindex_device(const graft_gindex* index);   /* -1 on the CPU */
const float* graft_gindex_vectors(const graft_gindex* index); /* ntotal x d, owned by the index */
const graft_graph* graft_gindex_graph(const graft_gindex* index); /* NULL before the first add */
graft_gindex_params graft_gindex_get_params(const graft_gindex* index);
/* Replaces the default search parameters (validated as a search would). */
int graft_gindex_set_search_params(graft_gindex* index, const graft_search_params* params);
/* Replaces the build parameters used by the next add. */
int graft_gindex_set_build_params(graft_gindex* index, const graft_grnnd_params* params);
/* Seconds the last graph build took (wall), 0 before the first. */
double graft_gindex_build_seconds(const graft_gindex* index);
/* How the last graph was built: 1 GRNND on the GPU, P > 1 GRNND in P pieces (the data's pools did
 * not fit the device or the build's memory_budget), 0 RNN-Descent on the CPU; -1 before the first
 * build, after reset and for a graph given by set_data or read from a file. */
int graft_gindex_build_pieces(const graft_gindex* index);
/* How the last successful search on this index went with its filter (graft/graph.h, "Filtered
 * search"): path, passing ids, selectivity, threshold, beam, queries redone. Zeroes before the
 * first search. With several threads searching, the last one to finish. */
int graft_gindex_last_filter(const graft_gindex* index, graft_filter_report* out);

/* Takes n vectors and a graph over them built elsewhere (a file, another builder), replacing the
 * index's contents; both are copied (and encoded for a compressed storage). The graph must be n
 * rows of ids in [-1, n) with entry in [0, n). GRAFT_EINVAL otherwise, GRAFT_ESTATE for an
 * untrained SQ8 index; index unchanged. */
int graft_gindex_set_data(graft_gindex* index, int64_t n, const float* x, const graft_graph* graph);

/* Graph index format, version 2 (little-endian):
 *     0   8  magic "GRFTGRPH"
 *     8   4  uint32 format version (2; version-1 records still load)
 *     12  4  uint32 header size in bytes (80 in version 2, 64 in version 1)
 *     16  8  int64 d
 *     24  8  int64 ntotal (n)
 *     32  4  int32 metric
 *     36  4  int32 R (0 when ntotal = 0)
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
 *     80  SQ8 trained only: d float32 vmin, then d float32 vdiff
 *         then n*d*4 float32 vectors; then n*R*4 int32 graph rows (the codes are not stored:
 *         encoding is deterministic, and the reader encodes the vectors again)
 *     ... 8  uint64 FNV-1a checksum of every byte before it (graft_io_checksum)
 * Errors as graft_flat_write / graft_flat_read (GRAFT_EIO, GRAFT_EFORMAT with the byte offset of a
 * truncation, checksum mismatch, newer version, out-of-range sizes or ids). params of read: NULL
 * = defaults; metric, storage and the search defaults stored in the file come from the file. */
#define GRAFT_GRAPH_MAGIC "GRFTGRPH"
#define GRAFT_GRAPH_FORMAT_VERSION 2u
int graft_gindex_write(const graft_gindex* index, FILE* f);
int graft_gindex_read(FILE* f, const graft_gindex_params* params, graft_gindex** out);

#ifdef __cplusplus
}
#endif
#endif
