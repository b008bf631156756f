// graft's graph + PQ index (BANG) as a faiss::Index (see graft/bang_index.h for the semantics):
// full vectors and a fixed-degree graph in host memory, PQ codes on the GPU; searched on PQ
// distances and re-ranked exactly, with the graph and vectors on the GPU too when they fit its
// budget (in-memory mode) or gathered from host memory (out-of-core mode). For data whose graph
// and vectors do not fit the GPU; GraftIndexGraph is the index for data that does.
#pragma once

#include <cstdint>

#include <faiss/Index.h>

#include "graft/graph_index.h"
#include "graft_faiss_common.h"

namespace graft {

struct GraftIndexGraphPQ : faiss::Index, NamedParameters {
    // A new empty, untrained index with M sub-quantizers (code bytes per vector; must divide d;
    // 0 = params->pq.M, whose default is graft_pq_default_M(d)). params nullptr = defaults (GPU 0
    // when one is visible, else the CPU). The PQ k-means is always FAISS's (graft_faiss_kmeans).
    explicit GraftIndexGraphPQ(idx_t d, int M = 0, faiss::MetricType metric = faiss::METRIC_L2,
                               const graft_gindex_params* params = nullptr);
    // Takes ownership of an existing plugin index (e.g. from graft_gindex_read).
    explicit GraftIndexGraphPQ(graft_gindex* owned);
    ~GraftIndexGraphPQ() override;
    GraftIndexGraphPQ(const GraftIndexGraphPQ&) = delete;
    GraftIndexGraphPQ& operator=(const GraftIndexGraphPQ&) = delete;

    // Learns the PQ codebooks (FAISS's k-means per sub-space, at most pq.max_train points
    // sampled). As in FAISS's IndexPQ, training comes before the first add; unlike it, a
    // non-empty index cannot be retrained (its codes would go stale): reset() first.
    void train(idx_t n, const float* x) override;
    // Appends the vectors and encodes them; the next search (or write) builds the graph over all
    // of them, once however many adds came before (graft/bang_index.h). A failed add leaves the
    // index as it was.
    void add(idx_t n, const float* x) override;
    // Any k in [1, 1024]; the worklist is max(L, k). params: a SearchParametersGraftGraphPQ, or
    // any faiss::SearchParameters for its `sel`.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    // Drops the vectors, codes and graph; the codebooks stay (is_trained stays true).
    void reset() override;
    // The stored full vector (exact), not the PQ reconstruction FAISS's IndexPQ returns.
    void reconstruct(idx_t key, float* recons) const override;
    // A graph index cannot drop vertices without rebuilding: throws, saying what to do instead.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    // Index-level parameters by name.
    //  search defaults: "L" (worklist width, 1..1024), "rerank" (0 = every expanded vertex, else
    //                   >= k), "max_expand" (0 = 2 L + 64, else L..8192), "bloom_log2" (10..24)
    //  memory: "mode" (0 auto, 1 in-memory, 2 out-of-core), "gpu_budget" (bytes the index keeps
    //          resident on the GPU, 0 = half the device); both move the device data at once
    //  build (used by the next graph build): "R" (max degree; <= 64 on the GPU), "S", "T1", "T2", "rho"
    //  read-only: "M" (code bytes per vector), "device" (-1 = CPU), "active_mode" (the mode
    //             searches use now: 1 in-memory, 2 out-of-core; 0 on the CPU), "build_seconds",
    //             "build_pieces" (1 GRNND, P > 1 GRNND in P pieces, 0 CPU), "gpu_bytes" (device
    //             bytes held resident)
    // Values are checked as graft_gindex_set_search_params / set_build_params / set_mode check
    // them; a refused value leaves the index as it was.
    void set_param(const char* name, double value) override;
    double get_param(const char* name) const override;

    graft_gindex* bindex = nullptr;
};

// Per-search parameters of a GraftIndexGraphPQ (graft/bang.h); -1 = the index's default. `sel`
// (inherited): only ids the selector accepts are returned; the walk still passes through every
// vertex, so a very selective filter wants a larger L.
struct SearchParametersGraftGraphPQ : faiss::SearchParameters {
    int L = -1;
    int rerank = -1;
    int max_expand = -1;
};

}  // namespace graft
