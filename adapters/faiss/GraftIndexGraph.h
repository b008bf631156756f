// graft's graph index as a faiss::Index (see graft/graph_index.h for the semantics): a graph built
// by GRNND on the GPU (or RNN-Descent on the CPU) and searched by the SONG-style GPU kernel (or
// the CPU reference search).
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

    // Trains the storage's codec (SQ8: per-dimension min/max; FP32 and FP16 need none and
    // start trained). Retraining an SQ8 index that holds vectors throws (reset first).
    void train(idx_t n, const float* x) override;
    // Appends the vectors and rebuilds the graph over all of them (graft/graph_index.h says why);
    // a failed add leaves the index as it was.
    void add(idx_t n, const float* x) override;
    // Any k in [1, 1024]; the beam is max(L, k) as in FAISS's HNSW. params: a
    // SearchParametersGraftGraph, or any faiss::SearchParameters for its `sel`.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    void reset() override;
    void reconstruct(idx_t key, float* recons) const override;
    // A graph index cannot drop vertices without rebuilding: throws, saying what to do instead.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    // Index-level parameters by name.
    //  search defaults: "L" (beam width, 1..1024), "probes" (1..8), "visited" (0 hash, 1 Bloom),
    //                   "merge" (0 sort + merge path, 1 insertion), "bloom_log2" (10..24),
    //                   "rerank" (FP16 / SQ8: worklist entries re-ranked exactly; 0 = all, else >= k)
    //  build (used by the next add): "R" (max degree; <= 64 on the GPU), "S", "T1", "T2", "rho"
    //  read-only: "device" (-1 = CPU), "build_seconds" (wall time of the last graph build),
    //             "build_pieces" (how it was built: 1 GRNND, P > 1 GRNND in P pieces, 0 CPU),
    //             "storage" (0 FP32, 1 FP16, 2 SQ8), "gpu_bytes" (device bytes of graph, codes,
    //             FP32 vectors and codec; 0 on the CPU)
    // Values are checked as graft_gindex_set_search_params / set_build_params check them.
    void set_param(const char* name, double value) override;
    double get_param(const char* name) const override;

    graft_gindex* gindex = nullptr;
};

// Per-search parameters of a GraftIndexGraph; -1 = the index's default. `sel` (inherited): only
// ids the selector accepts are returned; the search still walks through every vertex, so recall
// stays close to the unfiltered search's while the selector keeps a fair share of the ids (a
// very selective filter wants a larger L).
struct SearchParametersGraftGraph : faiss::SearchParameters {
    int L = -1;
    int probes = -1;
    int visited = -1;
    int merge = -1;
    int rerank = -1;
};

// A single-level FAISS IndexHNSWFlat over the same vectors and graph (new object, owned by the
// caller): M = ceil(R / 2) so that level 0 holds 2M >= R links per vertex, each row our
// neighbours padded with -1, entry point = our entry, efSearch = our default L. FAISS's HNSW
// search on it is the same best-first search with a beam of efSearch. Later adds to the HNSW
// index go through FAISS's own HNSW insertion at level 0.
faiss::IndexHNSWFlat* export_hnsw(const GraftIndexGraph& index);

}  // namespace graft
