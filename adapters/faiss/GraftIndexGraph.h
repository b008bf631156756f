// graft's graph index as a faiss::Index (see graft/graph_index.h for the semantics): a graph built
// by GRNND on the GPU (or RNN-Descent on the CPU) over a storage of the vectors, FAISS's IndexHNSW
// shape: FP32 / FP16 / SQ8 searched by the SONG-style GPU kernel (or the CPU reference walk), PQ
// by BANG's pipeline, GPU-resident or out-of-core. One class for every storage; GraftIndexGraphPQ
// (GraftIndexGraphPQ.h) only picks the PQ storage in its constructor, as faiss::IndexHNSWPQ does.
#pragma once

#include <cstdint>

#include <faiss/Index.h>

#include "graft/graph_index.h"
#include "graft_faiss_common.h"

namespace faiss {
struct IndexHNSWFlat;
}

namespace graft {

struct GraftIndexGraph : faiss::Index, NamedParameters {
    // A new empty index; params nullptr = defaults (GPU 0 when one is visible, else the CPU).
    explicit GraftIndexGraph(idx_t d, faiss::MetricType metric = faiss::METRIC_L2,
                             const graft_gindex_params* params = nullptr);
    // Takes ownership of an existing plugin index (e.g. from graft_gindex_read).
    explicit GraftIndexGraph(graft_gindex* owned);
    ~GraftIndexGraph() override;
    GraftIndexGraph(const GraftIndexGraph&) = delete;
    GraftIndexGraph& operator=(const GraftIndexGraph&) = delete;

    // Trains the storage's codec (SQ8: per-dimension min/max; PQ: the codebooks, FAISS's k-means
    // per sub-space; FP32 and FP16 need none and start trained). Retraining an SQ8 or PQ index
    // that holds vectors throws (reset first).
    void train(idx_t n, const float* x) override;
    // Adds the vectors (ids ntotal, ntotal + 1, ...) and encodes them. Before the first search the
    // graph is built once over all adds; after it, an add inserts into the graph or leaves it to be
    // rebuilt, as the "add_policy" says (graft/graph_index.h, docs/adding-and-removing.md). A
    // failed add leaves the index as it was.
    void add(idx_t n, const float* x) override;
    // add() of the vectors (float)x[i] (n x d uint8), without n x d floats on the host
    // (graft_gindex_add_u8).
    void add_u8(idx_t n, const uint8_t* x);
    // Any k in [1, 1024]; the beam is max(L, k) as in FAISS's HNSW. params: a
    // SearchParametersGraftGraph or SearchParametersGraftGraphPQ, or any faiss::SearchParameters
    // for its `sel`.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    // Drops the vectors, codes and graph; a trained codec stays (is_trained stays true).
    void reset() override;
    // The stored FP32 vector (exact, whatever the storage); with keep_fp32 = 0 the decoded code
    // (FAISS's convention for lossy indexes, as IndexScalarQuantizer's).
    void reconstruct(idx_t key, float* recons) const override;
    // FAISS's remove_ids: returns the number removed; the remaining vectors are renumbered in
    // order (as IndexFlat's), so IndexIDMap / IndexIDMap2 compose. The removed vectors stay in the
    // graph as tombstones that no search returns until consolidate() (automatic past
    // "consolidate_share").
    size_t remove_ids(const faiss::IDSelector& sel) override;
    // Repairs the rows that point at removed vectors and compacts the storage.
    void consolidate();

    // Index-level parameters by name, one table for every storage; a name that does not apply
    // to the index's storage is unknown to it.
    //  search defaults: "L" (beam width, 1..1024), "bloom_log2" (10..24), "rerank" (compressed
    //                   storages: entries re-ranked exactly; 0 = all, else >= k; reads 0 and is
    //                   ignored with keep_fp32 = 0: nothing to re-rank from);
    //  storage: "keep_fp32" (FP16 / SQ8: 1 keeps the FP32 vectors beside the codes, 0 the codes
    //                   only: no exact re-rank, reconstruct decodes; set before the first add;
    //                   graft/graph_index.h)
    //                   FP32 / FP16 / SQ8: "probes" (1..8), "visited" (0 hash, 1 Bloom),
    //                   "merge" (0 sort + merge path, 1 insertion), "search_mode" (GPU walks:
    //                   0 auto, 1 single, 2 multi), "walks" (multi's walks a query, 0 = auto);
    //                   PQ: "max_expand" (0 = 2 L + 64, else L..8192)
    //  filtered search: "filter_exact_below"
    //  PQ placement: "mode" (0 auto, 1 in-memory, 2 out-of-core), "gpu_budget" (bytes the index
    //                keeps resident on the GPU, 0 = half the device); both move the device data
    //  build (used by the next build): "R" (max degree; <= 64 on the GPU), "S", "T1", "T2", "rho",
    //                   "delta" (convergence: graft/graph.h), "alpha" (the pruning's slack),
    //                   "init_exact" (1: start from the
    //                   exact R nearest, the oracle graph), "build_from" (0: the FP32 vectors,
    //                   1: an FP16 / SQ8 index's codes; a PQ index refuses 1), "fill" (1: the
    //                   rows filled to R with two-hop neighbours after the build)
    //  adds and removals (graft_living_params): "add_policy" (0 auto, 1 insert, 2 rebuild),
    //                   "insert_L" (0 = default), "rebuild_share" (< 0: the cost model),
    //                   "consolidate_share", "background" (0 / 1)
    //  read-only: what the adds and removals did (graft_living_report): "inserted",
    //             "insert_batches", "since_build", "builds", "background_builds", "rebuilding",
    //             "removed", "tombstones", "consolidations", "insert_seconds",
    //             "consolidate_seconds", "last_add" (1 inserted, 2 graph left to rebuild),
    //             "rebuild_share_applied", "gpu_inserts" (1: inserts run on the GPU);
    //             "device" (-1 = CPU), "build_seconds" (wall time of the last graph build),
    //             "build_rounds" (GRNND's inner rounds in it; 0 for pieces, the CPU, a given graph),
    //             "build_linked" (vertices without an in-edge the build linked in; 0 for a given graph),
    //             "build_pieces" (how it was built: 1 GRNND, P > 1 GRNND in P pieces, 0 CPU,
    //             -1 a graph given: set_data, a file, a replica's copy), "build_pending" (1 while
    //             adds wait for the graph build the next search or write runs, else 0),
    //             "storage" (0 FP32, 1 FP16, 2 SQ8, 3 PQ), "gpu_bytes" (device bytes held
    //             resident; 0 on the CPU), "host_bytes" (host bytes of vectors, codes, graph,
    //             tombstones, codec; docs/memory.md), the last search's filter_* report;
    //             PQ: "M" (code bytes per vector), "active_mode" (the placement searches use
    //             now: 1 in-memory, 2 out-of-core; 0 on the CPU)
    // Values are checked as graft_gindex_set_search_params / set_build_params / set_mode check
    // them; a refused value leaves the index as it was.
    void set_param(const char* name, double value) override;
    double get_param(const char* name) const override;

    graft_gindex* gindex = nullptr;

  protected:
    // The class name in messages: "GraftIndexGraphPQ" for the PQ storage (its FAISS face).
    const char* name() const;
    // FAISS's `verbose` (a field the user sets at any time) into the build's parameters b (the
    // index's now), before each call that may add or build: with it the adds and builds print
    // their progress (the graph build a line a round, the pieces a line a piece) on stdout, as
    // FAISS's indexes do.
    void sync_verbose(graft_grnnd_params b) const;
    // Before an add (op: its name in messages): FAISS's trained check, then sync_verbose.
    void before_add(const char* op) const;
};

// Per-search parameters of a GraftIndexGraph; -1 = the index's default. `sel` (inherited): only
// ids the selector accepts are returned; the search still walks through every vertex, so recall
// stays close to the unfiltered search's while the selector keeps a fair share of the ids (a
// very selective filter wants a larger L).
struct SearchParametersGraftGraph : faiss::SearchParameters {
    int L = -1;
    int probes = -1;   // FP32 / FP16 / SQ8
    int visited = -1;  // FP32 / FP16 / SQ8
    int merge = -1;    // FP32 / FP16 / SQ8
    int rerank = -1;
    int max_expand = -1;  // PQ
    int search_mode = -1;  // FP32 / FP16 / SQ8 on the GPU: 0 auto, 1 single, 2 multi
    int walks = -1;        // the multi mode's walks a query (0 = auto)
};

// A single-level FAISS IndexHNSWFlat over the same vectors and graph (new object, owned by the
// caller): M = ceil(R / 2) so that level 0 holds 2M >= R links per vertex, each row our
// neighbours padded with -1, entry point = our entry, efSearch = our default L. FAISS's HNSW
// search on it is the same best-first search with a beam of efSearch. Later adds to the HNSW
// index go through FAISS's own HNSW insertion at level 0.
faiss::IndexHNSWFlat* export_hnsw(const GraftIndexGraph& index);

// The same graph as FAISS's IndexHNSWCagra (FAISS >= 1.9; throws on an older FAISS, saying so):
// FAISS's type for a graph built on the GPU (GpuIndexCagra::copyTo), here base_level_only, so
// that FAISS searches level 0 alone from the best of num_base_level_search_entrypoints (32) random
// vertices instead of our entry point, and refuses adds. New object, owned by the caller.
faiss_compat::IndexHNSWCagra* export_hnsw_cagra(const GraftIndexGraph& index);

}  // namespace graft
