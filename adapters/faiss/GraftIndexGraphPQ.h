// graft's graph index with the PQ storage (BANG) as a faiss::Index: GraftIndexGraph whose
// constructor picks the PQ storage, as faiss::IndexHNSWPQ picks IndexPQ under IndexHNSW. Full
// vectors and the graph in host memory, PQ codes on the GPU; searched on PQ distances and
// re-ranked exactly, with the graph and vectors on the GPU too when they fit its budget
// (in-memory) or gathered from host memory (out-of-core). For data whose graph and vectors do not
// fit the GPU. Everything but the constructors is GraftIndexGraph's (graft/graph_index.h).
#pragma once

#include "GraftIndexGraph.h"

namespace graft {

struct GraftIndexGraphPQ : GraftIndexGraph {
    // A new empty, untrained index with M sub-quantizers (code bytes per vector; must divide d;
    // 0 = params->pq.M, whose default is graft_pq_default_M(d)). params nullptr = defaults (GPU 0
    // when one is visible, else the CPU); its storage is PQ whatever it says. The PQ k-means is
    // always FAISS's (graft_faiss_kmeans). As in FAISS's IndexPQ, train() comes before the first
    // add; unlike it, a non-empty index cannot be retrained (its codes would go stale).
    explicit GraftIndexGraphPQ(idx_t d, int M = 0, faiss::MetricType metric = faiss::METRIC_L2,
                               const graft_gindex_params* params = nullptr);
    // Takes ownership of an existing plugin index with the PQ storage (e.g. from graft_gindex_read).
    explicit GraftIndexGraphPQ(graft_gindex* owned);
};

// Per-search parameters of the PQ storage's search (graft/bang.h); -1 = the index's default.
// SearchParametersGraftGraph carries the same fields. `sel` (inherited): only ids the selector
// accepts are returned; the walk still passes through every vertex, so a very selective filter
// wants a larger L.
struct SearchParametersGraftGraphPQ : faiss::SearchParameters {
    int L = -1;
    int rerank = -1;
    int max_expand = -1;
};

}  // namespace graft
