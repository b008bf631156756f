/* graft for FAISS's C API: constructors that hand graft indexes out as FaissIndex*.
 *
 * Everything else goes through the usual faiss_c calls (faiss_Index_add, faiss_Index_search,
 * faiss_Index_reset, faiss_Index_free, faiss_IndexIDMap_new, ...). Same conventions as faiss_c:
 * out-parameter first, int status back (0 on success, negative on error), the message in
 * faiss_get_last_error(). The returned index is owned by the caller (faiss_Index_free).
 */
#ifndef GRAFT_FAISS_C_H
#define GRAFT_FAISS_C_H

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/faiss_c.h>
#include <stdint.h>
#include <stdio.h>

#include "graft/graft.h"
#include "graft_faiss_version.h" /* GRAFT_FAISS_BUILT_VERSION: the FAISS graft was built against */

#ifdef __cplusplus
extern "C" {
#endif

/* Exact k-NN index (IndexFlat semantics) searched on the GPU: cuBLAS distance GEMM + quick
 * multi-select. device -1 searches with the CPU reference. Any k works (FAISS GPU stops at 2048). */
int faiss_GraftIndexFlat_new(FaissIndex** p_index, int d, FaissMetricType metric, int device);

/* Tells whether index is a graft flat index (NULL when not), like faiss_IndexFlat_cast. */
FaissIndex* faiss_GraftIndexFlat_cast(FaissIndex* index);

/* Graph index (graft/graph_index.h): a fixed-degree graph built by GRNND on the GPU over a
 * storage of the vectors (FP32 here; FP16 / SQ8 / PQ through the factory strings below, PQ also
 * through faiss_GraftIndexGraphPQ_new), FP32 / FP16 / SQ8 searched by a SONG-style GPU kernel;
 * device -1 uses the CPU references (RNN-Descent + best-first search), -2 picks GPU 0 when one is
 * visible, else the CPU. The adds before the first search are built into one graph by that
 * search; later adds insert into the graph (or leave it to be rebuilt: "add_policy"), and
 * faiss_Index_remove_ids removes vectors with FAISS's contract, the rest renumbered in order
 * (docs/adding-and-removing.md; faiss_graft_consolidate below). k in [1, 1024]; the search beam is
 * max(L, k). Parameters: faiss_graft_set_param below. */
int faiss_GraftIndexGraph_new(FaissIndex** p_index, int d, FaissMetricType metric, int device);

/* Tells whether index is a graft graph index, of any storage (NULL when not). */
FaissIndex* faiss_GraftIndexGraph_cast(FaissIndex* index);

/* Graph index with the PQ storage (graft/graph_index.h; BANG): full vectors and the graph in host memory, PQ
 * codes (M bytes per vector) on the GPU; searched on PQ distances with exact re-ranking, with the
 * graph and vectors on the GPU too while they fit its budget ("mode" below). For data larger than
 * the GPU. As FAISS's IndexPQ it needs faiss_Index_train (the codebooks, at least 256 vectors;
 * FAISS's k-means) before the first add, which fails otherwise; adds append and encode, the next
 * search builds the graph once.
 * M must divide d (0 = the default, the largest divisor of d not above d / 4). device as
 * faiss_GraftIndexGraph_new. k in [1, 1024]; the worklist is max(L, k). */
int faiss_GraftIndexGraphPQ_new(FaissIndex** p_index, int d, FaissMetricType metric, int M,
                                int device);

/* Tells whether index is a graft graph index with the PQ storage (NULL when not). */
FaissIndex* faiss_GraftIndexGraphPQ_cast(FaissIndex* index);

/* faiss_Index_add of the vectors (float)x[i] (n x d uint8: bvecs, u8bin) to a graft graph index
 * (GraftIndexGraph or GraftIndexGraphPQ, any storage) without widening them all to FP32 on the
 * host (graft_gindex_add_u8: the rows go straight into the index's FP32 copy, or with
 * keep_fp32 = 0 through a bounded chunk into the codes). Only the graft index itself: another
 * index, or a graft index behind a wrapper (IndexIDMap/IDMap2, IndexPreTransform, shards), fails
 * with a message (use faiss_Index_add there). Errors as faiss_Index_add's (NULL x with n > 0,
 * n < 0, an untrained PQ index); a failed add leaves the index as it was. */
int faiss_graft_add_u8(FaissIndex* index, idx_t n, const uint8_t* x);

/* FAISS's k-means (faiss::Clustering over an IndexFlatL2), in the shape of graft/pq.h's
 * graft_kmeans_fn: clusters n points x (n x d) into k centroids (k x d, written). ctx: NULL for
 * FAISS's default ClusteringParameters (25 iterations, seed 1234, at most 256 points per centroid
 * sampled) without its warning below 39 points per centroid (printed once per sub-space), or
 * from C++ a const faiss::ClusteringParameters*.
 * Returns 0, or a negative graft status (GRAFT_EINVAL for FAISS's refusals, e.g. n < k or NaN
 * input; GRAFT_ENOMEM) with FAISS's message in graft_last_error(). Thread-safe. Plugin users
 * pass it as graft_pq_params.kmeans; the graft FAISS indexes use it themselves. */
int graft_faiss_kmeans(void* ctx, int64_t d, int64_t n, int64_t k, const float* x,
                       float* centroids);

/* FAISS's brute-force k-NN (faiss::knn_L2sqr / knn_inner_product, what IndexFlat::search runs),
 * with graft_flat_params.cpu_knn's signature: graft's flat index searches with it on the CPU
 * (GraftIndexFlat sets it).
 * Returns 0 or a negative graft status with the message in graft_last_error(). */
int graft_faiss_knn(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int64_t k,
                    graft_metric metric, float* D, int64_t* I);

/* A new single-level FAISS IndexHNSWFlat (owned by the caller, faiss_Index_free) holding the same
 * vectors and graph as the graft graph index: M = ceil(R / 2), level 0 rows = our rows padded
 * with -1, entry point = our entry, efSearch = our L. Searchable and serializable with stock
 * FAISS (faiss_Index_search, faiss_write_index) where graft is not installed. Fails when
 * graft_graph_index is not a graft graph index. */
int faiss_graft_export_hnsw(FaissIndex** p_out, const FaissIndex* graft_graph_index);

/* The same graph as FAISS's IndexHNSWCagra (FAISS >= 1.9; fails on an older FAISS, saying so):
 * FAISS's type for a graph built on the GPU, here with base_level_only set: FAISS searches level 0
 * alone, from the best of num_base_level_search_entrypoints (32) random vertices, and refuses
 * adds. Serializable with faiss_write_index. */
int faiss_graft_export_hnsw_cagra(FaissIndex** p_out, const FaissIndex* graft_graph_index);

/* ---- composing with FAISS (adapters/faiss/graft_factory.cpp) ---------------------------------- */

/* faiss_index_factory that also knows graft's strings: a drop-in for it (same arguments, same
 * ownership), so a faiss_c pipeline switches to graft by changing its description string.
 *   "GraftFlat"          exact flat index on GPU 0 when graft_gpu_available(), else the CPU
 *   "GraftFlat,cpu"      ... on the CPU reference
 *   "GraftFlat,gpu=N"    ... on CUDA device N (fails when there is no such device)
 *   "GraftGraph"         graph index (faiss_GraftIndexGraph_new), max degree R = 64, same devices
 *   "GraftGraphR"        ... max degree R ("GraftGraph32"; at most 64 on the GPU)
 *   "GraftGraph,PQ<M>"   graph + PQ index (faiss_GraftIndexGraphPQ_new), M code bytes per vector,
 *   "GraftGraphR,PQ<M>"  M dividing d ("GraftGraph32,PQ16"; "PQ16x8" is accepted, codes are 8-bit);
 *                        needs faiss_Index_train before adding
 *   "GraftGraph,FP16"    graph index whose search walks FP16 copies of the vectors (2 d bytes a
 *   "GraftGraph,SQ8"     vector) or FAISS QT_8bit codes (d bytes, per-dimension min/max, needs
 *                        faiss_Index_train before adding; "SQfp16" = "FP16"), re-ranking the
 *                        final candidates with the FP32 vectors ("rerank"); "GraftGraph32,SQ8,
 *                        gpu=0,L=64" with the options below; ",keep_fp32=0" after FP16 or SQ8
 *                        keeps the codes as the only copy of the vectors (no FP32 on the host
 *                        or the GPU, no exact re-rank, reconstruct decodes; docs/memory.md)
 *   ",cpu" / ",gpu=N" after any of them choose the device; ",L=NN" after GraftGraph[,PQ<M>] the
 *                        search beam ("GraftGraph32,cpu,L=96"); after GraftGraph,PQ<M>: ",ooc"
 *                        (out-of-core: graph and vectors stay in host memory), ",inmem" (all on
 *                        the GPU) and ",budget=MiB" (GPU memory the index keeps resident;
 *                        without ooc/inmem, in-memory is chosen when everything fits it)
 *   ",gpus=LIST"         after any of them: one index per listed GPU, as a graft::GraftIndexShards
 *                        (a threaded faiss::IndexShards, GraftIndexShards.h): adds split evenly,
 *                        every shard's graph built on its own GPU at once, searches on all shards
 *                        at once, merged; ids as a single index gives them (add order). LIST:
 *                        "all", a range "0-3", a list "0,1" (a device may repeat: "gpus=0,0" is
 *                        two shards on GPU 0)
 *   ",shards=N"          N shards on the chosen device ("GraftGraph,shards=2,cpu")
 *   ",replicas"          with gpus= or shards=: full replicas (graft::GraftIndexReplicas, a
 *                        faiss::IndexReplicas), every add to all, a search's queries split over
 *                        them. Graph + PQ shards and replicas train once and share the codebooks
 * Any of them may follow FAISS vector-transform prefixes ("PCA64,GraftFlat", "OPQ16_64,GraftFlat",
 * "L2norm,GraftFlat"; "GraftGraph,OPQ32,PQ32" is read as "OPQ32,GraftGraph,PQ32") or "IDMap," / "IDMap2,", and be followed by ",RFlat", ",IDMap", ",IDMap2":
 * FAISS builds those wrappers and graft's index takes the place of their inner Flat (wrappers over
 * an untrained graph + PQ index start untrained; their faiss_Index_train trains it). Every string
 * without a component starting with "Graft" goes to faiss_index_factory unchanged ("Flat",
 * "HNSW32", "IVF64,Flat", ...). Other "Graft..." strings (and a PQ<M> not dividing the dimension
 * graft's index sees) fail with a message naming the string and listing these forms. metric:
 * METRIC_L2 or METRIC_INNER_PRODUCT for graft indexes. */
int faiss_graft_index_factory(FaissIndex** p_index, int d, const char* description,
                              FaissMetricType metric);

/* Repairs the graph rows that point at removed vectors and compacts the storage of every graft
 * graph index inside `index` (looked up as faiss_graft_set_param does); ids do not change. A
 * removal does it by itself past "consolidate_share". Fails when there is no graft graph index
 * inside. */
int faiss_graft_consolidate(FaissIndex* index);

/* Index-level parameters of every graft index inside `index` (looked up through IndexIDMap/IDMap2,
 * IndexPreTransform, IndexShards/IndexReplicas and IndexRefine, like faiss_ParameterSpace does):
 *   "allow_tf32"        0/1: TF32 tensor cores in the GPU distance GEMM, approximate (default 0)
 *   "exact_path"        GPU path of the (exact) search: 0 auto (default: 5 on a GPU; graft/flat.h
 *                       says why), 1 FP32 GEMM, 2 TF32 tensor cores with a certified error
 *                       bound and FP32 re-ranking, 3 INT8 tensor cores for integer data in
 *                       [0, 255] or [-128, 127] (exact outright; other data fails the search),
 *                       4 FP16 tensor cores on scaled vectors with a certified error bound and
 *                       FP32 re-ranking (as 2, half the distance bytes), 5 as 4 with the
 *                       first selection fused into the GEMM (no distance matrix; 4 where it
 *                       does not apply);
 *                       reads back the path in use (auto resolved; 1 on the CPU)
 *   "fp32_fallbacks"    read-only: queries so far whose certificate failed (searched in FP32)
 *   "last_path"         read-only: the path the last search took (1 to 5; 1 on the CPU)
 *   "device_budget_mb"  GPU scratch budget in MiB, 0 = auto (a quarter of the device, <= 8 GiB)
 *   "device"            read-only: the CUDA device, -1 for the CPU (fixed at creation)
 *   "host_bytes"        read-only: host bytes of the stored vectors (capacity x d x 4)
 * on a flat index: a new value takes effect on the next add/search: a GPU index re-creates its
 * device state and re-uploads its vectors (waiting for searches in other threads); a CPU
 * index only records it. On a graph index (checked as graft_gindex_set_search_params /
 * set_build_params check them; safe while other threads search it):
 *   "L", "probes", "visited", "merge", "bloom_log2", "rerank", "search_mode", "walks"
 *                                                      default search parameters (graft/graph.h;
 *                                                      rerank: FP16 / SQ8 only, 0 = the whole
 *                                                      worklist, else >= k)
 *   "R", "S", "T1", "T2", "rho"                       graph construction, used by the next add
 *   "device", "build_seconds", "build_pieces"          read-only (wall time of the last build; how
 *                                                      it was built: 1 GRNND, P > 1 GRNND in P
 *                                                      pieces, 0 on the CPU, -1 none)
 *   "filter_exact_below"                              filtered search (graft/graph.h, "Filtered
 *                                                      search"): exact over the passing ids below
 *                                                      this selectivity in [0, 1]; negative
 *                                                      (default): the cost model decides
 *   "filter_path", "filter_passing", "filter_selectivity", "filter_threshold", "filter_L",
 *   "filter_redone"                                    read-only: what the last search did (path
 *                                                      0 none, 1 exact, 2 walk; the threshold
 *                                                      applied; the walk's beam; queries redone)
 *   "keep_fp32"                                       FP16 / SQ8: 0 keeps the codes only (no FP32
 *                                                      copy, no re-rank: "rerank" reads 0), 1 (the
 *                                                      default) the FP32 vectors too; set before
 *                                                      the first add
 *   "storage", "gpu_bytes", "host_bytes"               read-only (0 FP32, 1 FP16, 2 SQ8; device
 *                                                      bytes of graph, codes, FP32 vectors, codec;
 *                                                      host bytes of the same: docs/memory.md)
 * On a graph index with the PQ storage (one table: names of the other storages are unknown to it):
 *   "L", "rerank", "max_expand", "bloom_log2"          default search parameters (graft/bang.h)
 *   "mode" (0 auto, 1 in-memory, 2 out-of-core), "gpu_budget" (bytes; 0 = half the device)
 *                                                      memory placement, applied at once
 *   "R", "S", "T1", "T2", "rho"                       graph construction, used by the next build
 *   "M", "device", "active_mode", "build_seconds", "build_pieces", "gpu_bytes", "host_bytes"
 *                                                      read-only (active_mode: the mode searches
 *                                                      use now, 1 or 2; 0 on the CPU)
 *   "filter_exact_below" and the "filter_*" read-outs  as on a graph index
 * On both graph indexes, the adds and removals (graft/graph_index.h's graft_living_params):
 *   "add_policy"        0 auto (default: insert while the cost model says it is cheaper than a
 *                       rebuild, rebuild in the background past its share), 1 always insert,
 *                       2 never insert (the next search rebuilds over everything)
 *   "insert_L", "rebuild_share", "consolidate_share", "background"
 *                       an insert's walk beam (0 = default), AUTO's share (< 0: the cost model),
 *                       the tombstone share past which a removal consolidates, AUTO's rebuilds
 *                       in the background (1) or by the next search (0)
 *   "inserted", "insert_batches", "since_build", "builds", "background_builds", "rebuilding",
 *   "removed", "tombstones", "consolidations", "insert_seconds", "consolidate_seconds",
 *   "last_add" (1 inserted, 2 left to rebuild), "rebuild_share_applied", "gpu_inserts"
 *                       read-only: what the adds and removals did (sharded indexes: "inserted",
 *                       "removed" and "tombstones" summed over the shards)
 * Every name applies to every graft index found; one that an index does not know fails. Unknown names, bad values and an index without a graft index inside fail with a message.
 * FAISS's own faiss_ParameterSpace_set_index_parameter does not know these names: on a graft
 * index it fails ("could not set parameter ..."), except for "verbose"; use these instead. */
int faiss_graft_set_param(FaissIndex* index, const char* name, double value);
int faiss_graft_get_param(FaissIndex* index, const char* name, double* value);

/* Sharded and replicated indexes (factory ",gpus=LIST" / ",shards=N" / ",replicas", a GRFTSHRD
 * record, or FAISS's IndexShards / IndexReplicas; looked up through IndexIDMap/IDMap2 and
 * IndexPreTransform). faiss_graft_set_param sets every shard and faiss_graft_get_param reads
 * shard 0, except "gpu_bytes" and "host_bytes" (the sums over the shards) and "build_seconds"
 * (the longest: the shards build at once); these read one shard, e.g. its "device", or the PQ
 * index's "gpu_bytes" (the device memory each shard holds). faiss_graft_shard_count gives 1 for an index that is neither. */
int faiss_graft_shard_count(const FaissIndex* index, int* count);
int faiss_graft_get_shard_param(const FaissIndex* index, int shard, const char* name, double* value);

/* index->search restricted to the ids `sel` accepts (faiss::SearchParameters::sel; FAISS 1.7.3's
 * C API has no SearchParameters). sel == NULL: a plain search. Works on graft flat indexes (exact,
 * equal to IndexFlat with the same selector; searched with the CPU reference even on a GPU), on
 * graft graph and graph + PQ indexes (on their device; k results whenever at least k ids pass:
 * exact over the passing ids or a walk with a widened beam, graft/graph.h), on IndexPreTransform
 * over them, on graft's sharded and replicated indexes (",gpus=" / ",shards=": the selector sees
 * their ids), and on every FAISS index whose search takes a selector (IndexFlat, IndexIVF*);
 * FAISS 1.7.3's IndexIDMap, IndexShards and IndexRefine refuse it with an error. */
int faiss_graft_search_with_selector(const FaissIndex* index, idx_t n, const float* x, idx_t k,
                                     const FaissIDSelector* sel, float* distances, idx_t* labels);

/* ---- index I/O (adapters/faiss/graft_io.cpp) -------------------------------------------------- */

/* Drop-ins for faiss_write_index / faiss_read_index that also know graft indexes, so one call
 * saves or loads any index:
 *  - a graft flat index is written as graft's versioned, checksummed GRFTFLAT record
 *    (graft/io.h documents the bytes), a graft graph index as its GRFTGRPH record
 *    (graft/graph_index.h, version 3, every storage PQ included; the graph + PQ index's older
 *    GRFTBANG records still load, as the PQ storage);
 *  - an IndexIDMap or IndexIDMap2 whose inner index is a graft index is written as a
 *    GRFTIDMP record (magic, uint32 version 1, uint32 kind 1 = IDMap / 2 = IDMap2, int64 n,
 *    n int64 ids, uint64 FNV-1a checksum; little-endian) followed by the inner graft record;
 *  - every other index goes to faiss::write_index, unchanged (a graft index inside another
 *    FAISS wrapper, e.g. IndexPreTransform, fails there: FAISS cannot serialize it).
 * Reading peeks the first 8 bytes: graft's records load into a graft index (GPU 0 when
 * graft_gpu_available(), else the CPU; io_flags are ignored for them), anything else goes to
 * faiss::read_index with io_flags. A FILE* is read from its current position and left just after
 * the record; a non-seekable stream (pipe) gets the 8 bytes back through ungetc. Read errors
 * (missing file, truncation with the byte offset, checksum mismatch, a newer format version, sizes
 * out of range) return non-zero with the message in faiss_get_last_error() and leave *p_out
 * untouched. The _fname writers remove a partially written regular file on failure. */
int faiss_graft_write_index(const FaissIndex* idx, FILE* f);
int faiss_graft_write_index_fname(const FaissIndex* idx, const char* fname);
int faiss_graft_read_index(FILE* f, int io_flags, FaissIndex** p_out);
int faiss_graft_read_index_fname(const char* fname, int io_flags, FaissIndex** p_out);
/* faiss_graft_read_index with graft records loaded onto `device` (-1: the CPU reference, >= 0:
 * that CUDA device, -2: automatic as above). FAISS records are read as FAISS reads them. */
int faiss_graft_read_index_device(FILE* f, int io_flags, int device, FaissIndex** p_out);
/* Sharded and replicated indexes (graft::GraftIndexShards / GraftIndexReplicas, or FAISS's
 * IndexShards (successive_ids) / IndexReplicas whose shards are all graft indexes) are written as
 * a GRFTSHRD record: magic, uint32 version 1, uint32 kind (1 shards, 2 replicas), uint32 nshard,
 * uint32 0, int64 next id; for shards, per shard an int64 count and that many (int64 local,
 * int64 global) id runs (GraftIndexShards.h); uint64 FNV-1a checksum; then each shard's own graft
 * record. The readers above load it as written (every shard on the automatic device); these
 * place it: `placement` is NULL or "" (as written), "cpu", "gpu=N", "gpus=all", "gpus=0-3" or
 * "gpus=0,1" (shard i onto the (i mod count)-th listed device: fewer or more GPUs than shards),
 * optionally with ",shards=N": the vectors are spread over N shards (ids kept; graphs built again,
 * PQ codebooks kept; N = 1 gives a single index, and a single index's record read with shards=N
 * gives N shards). Bad placements fail with a message. */
int faiss_graft_read_index_placed(FILE* f, int io_flags, const char* placement, FaissIndex** p_out);
int faiss_graft_read_index_placed_fname(const char* fname, int io_flags, const char* placement,
                                        FaissIndex** p_out);

#ifdef __cplusplus
}
#endif
#endif
