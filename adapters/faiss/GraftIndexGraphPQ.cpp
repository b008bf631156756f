#include "GraftIndexGraphPQ.h"

#include "graft_faiss_c.h"

namespace graft {

namespace {

graft_gindex_params pq_params(int M, const graft_gindex_params* params) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    if (params) p = *params;
    p.storage = GRAFT_STORAGE_PQ;
    GRAFT_REQUIRE(M >= 0, "GraftIndexGraphPQ: M = %d (sub-quantizers, >= 1; 0 = default)", M);
    if (M > 0) p.pq.M = M;
    p.pq.kmeans = graft_faiss_kmeans;
    p.pq.kmeans_ctx = nullptr;  // FAISS's default ClusteringParameters
    return p;
}

// The temporary lives to the end of the full expression: the base constructor's call.
const graft_gindex_params* address(const graft_gindex_params& p) { return &p; }

}  // namespace

GraftIndexGraphPQ::GraftIndexGraphPQ(idx_t d, int M, faiss::MetricType metric,
                                     const graft_gindex_params* params)
        : GraftIndexGraph(d, metric, address(pq_params(M, params))) {}

GraftIndexGraphPQ::GraftIndexGraphPQ(graft_gindex* owned) : GraftIndexGraph(owned) {
    FAISS_THROW_IF_NOT_MSG(graft_gindex_storage(owned)->kind == GRAFT_STORAGE_PQ,
                           "GraftIndexGraphPQ: the plugin index's storage is not PQ");
}

}  // namespace graft
