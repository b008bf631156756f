// C entry points of graft_faiss_c.h, in faiss_c's idiom (try { ... } CATCH_AND_HANDLE).
#include "graft_faiss_c.h"

#include <faiss/IndexHNSW.h>
#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissAssert.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"

namespace {

// Our classes derive from faiss::Index and graft::NamedParameters: a FaissIndex* is always the
// faiss::Index subobject.
FaissIndex* to_c(faiss::Index* index) { return reinterpret_cast<FaissIndex*>(index); }
faiss::Index* from_c(FaissIndex* index) { return reinterpret_cast<faiss::Index*>(index); }

}  // namespace

extern "C" {

int faiss_GraftIndexFlat_new(FaissIndex** p_index, int d, FaissMetricType metric, int device) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_GraftIndexFlat_new: p_index is NULL");
        graft_flat_params p;
        graft_flat_params_defaults(&p);
        p.device = device;
        *p_index = to_c(new graft::GraftIndexFlat(d, static_cast<faiss::MetricType>(metric), &p));
        return 0;
    }
    CATCH_AND_HANDLE
}

FaissIndex* faiss_GraftIndexFlat_cast(FaissIndex* index) {
    auto* g = dynamic_cast<graft::GraftIndexFlat*>(from_c(index));
    return g ? to_c(g) : nullptr;
}

int faiss_GraftIndexGraph_new(FaissIndex** p_index, int d, FaissMetricType metric, int device) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_GraftIndexGraph_new: p_index is NULL");
        GRAFT_REQUIRE(device >= -2,
                      "faiss_GraftIndexGraph_new: device %d (-2 automatic, -1 CPU, >= 0 a CUDA "
                      "device)",
                      device);
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        if (device != -2) p.device = device;
        *p_index = to_c(new graft::GraftIndexGraph(d, static_cast<faiss::MetricType>(metric), &p));
        return 0;
    }
    CATCH_AND_HANDLE
}

FaissIndex* faiss_GraftIndexGraph_cast(FaissIndex* index) {
    auto* g = dynamic_cast<graft::GraftIndexGraph*>(from_c(index));
    return g ? to_c(g) : nullptr;
}

int faiss_graft_export_hnsw(FaissIndex** p_out, const FaissIndex* graft_graph_index) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_out, "faiss_graft_export_hnsw: p_out is NULL");
        auto* g = dynamic_cast<const graft::GraftIndexGraph*>(
                reinterpret_cast<const faiss::Index*>(graft_graph_index));
        FAISS_THROW_IF_NOT_MSG(g, "faiss_graft_export_hnsw: the index is NULL or not a graft graph "
                                  "index (faiss_GraftIndexGraph_new, \"GraftGraph\")");
        *p_out = to_c(graft::export_hnsw(*g));
        return 0;
    }
    CATCH_AND_HANDLE
}

}  // extern "C"
