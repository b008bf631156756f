// C entry points of graft_faiss_c.h, in faiss_c's idiom (try { ... } CATCH_AND_HANDLE).
#include "graft_faiss_c.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <exception>
#include <new>
#include <vector>

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/utils/distances.h>
#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/FaissException.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"
// graft_fail: a k-means callback reports its failure as graft's last error (graft/pq.h).
#include "core/error.h"

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

int faiss_GraftIndexGraphPQ_new(FaissIndex** p_index, int d, FaissMetricType metric, int M,
                                int device) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_GraftIndexGraphPQ_new: p_index is NULL");
        GRAFT_REQUIRE(device >= -2,
                      "faiss_GraftIndexGraphPQ_new: device %d (-2 automatic, -1 CPU, >= 0 a CUDA "
                      "device)",
                      device);
        GRAFT_REQUIRE(M >= 0,
                      "faiss_GraftIndexGraphPQ_new: M = %d (code bytes per vector, dividing d; 0 "
                      "= default)",
                      M);
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        p.storage = GRAFT_STORAGE_PQ;
        if (device != -2) p.device = device;
        *p_index = to_c(new graft::GraftIndexGraphPQ(d, M, static_cast<faiss::MetricType>(metric), &p));
        return 0;
    }
    CATCH_AND_HANDLE
}

FaissIndex* faiss_GraftIndexGraphPQ_cast(FaissIndex* index) {
    auto* g = dynamic_cast<graft::GraftIndexGraphPQ*>(from_c(index));
    return g ? to_c(g) : nullptr;
}

int faiss_graft_add_u8(FaissIndex* index, idx_t n, const uint8_t* x) {
    try {
        FAISS_THROW_IF_NOT_MSG(index, "faiss_graft_add_u8: index is NULL");
        auto* g = dynamic_cast<graft::GraftIndexGraph*>(from_c(index));
        FAISS_THROW_IF_NOT_MSG(g, "faiss_graft_add_u8: not a graft graph index (GraftIndexGraph "
                                  "or GraftIndexGraphPQ itself; wrappers such as IndexIDMap are "
                                  "not supported: add the widened floats with faiss_Index_add)");
        g->add_u8(n, x);
        return 0;
    }
    CATCH_AND_HANDLE
}

int graft_faiss_knn(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int64_t k,
                    graft_metric metric, float* D, int64_t* I) {
    try {
        // FAISS's heaps start at (+-FLT_MAX, -1), so k > nb leaves IndexFlat's padding. With
        // nb == 0 and nq >= 20 (its BLAS path) FAISS returns before it sets them up: the
        // padding is written here (tests/stress/test_concurrency saw the last call's results).
        if (nb == 0) {
            const float empty = metric == GRAFT_METRIC_L2 ? FLT_MAX : -FLT_MAX;
            std::fill(D, D + nq * k, empty);
            std::fill(I, I + nq * k, int64_t(-1));
            return GRAFT_OK;
        }
        if (metric == GRAFT_METRIC_L2) {
            faiss::float_maxheap_array_t res = {(size_t)nq, (size_t)k, I, D};
            faiss::knn_L2sqr(xq, xb, (size_t)d, (size_t)nq, (size_t)nb, &res);
        } else {
            faiss::float_minheap_array_t res = {(size_t)nq, (size_t)k, I, D};
            faiss::knn_inner_product(xq, xb, (size_t)d, (size_t)nq, (size_t)nb, &res);
        }
        return GRAFT_OK;
    } catch (const std::bad_alloc&) {
        return graft_fail(GRAFT_ENOMEM, "graft_faiss_knn: out of host memory");
    } catch (const std::exception& e) {
        return graft_fail(GRAFT_EINTERNAL, "graft_faiss_knn: %s", e.what());
    }
}

int graft_faiss_kmeans(void* ctx, int64_t d, int64_t n, int64_t k, const float* x,
                       float* centroids) {
    const char* fn = "graft_faiss_kmeans";
    if (!x || !centroids) return graft_fail(GRAFT_EINVAL, "%s: NULL x or centroids", fn);
    if (d < 1 || k < 1 || n < 0 || d > INT32_MAX || k > INT32_MAX)
        return graft_fail(GRAFT_EINVAL, "%s: bad sizes d=%lld n=%lld k=%lld", fn, (long long)d,
                          (long long)n, (long long)k);
    try {
        faiss::ClusteringParameters cp;  // niter 25, seed 1234: FAISS's ProductQuantizer's own
        // FAISS reads min_points_per_centroid only to warn below 39 points per centroid, once per
        // sub-space; graft_pq_train documents that advice instead of printing it M times.
        cp.min_points_per_centroid = 1;
        if (ctx) cp = *static_cast<const faiss::ClusteringParameters*>(ctx);
        faiss::Clustering clus((int)d, (int)k, cp);
        faiss::IndexFlatL2 assign((graft::idx_t)d);
        clus.train((graft::idx_t)n, x, assign);
        FAISS_THROW_IF_NOT_MSG(clus.centroids.size() == (size_t)(d * k),
                               "k-means returned the wrong number of centroids");
        std::copy(clus.centroids.begin(), clus.centroids.end(), centroids);
        return GRAFT_OK;
    } catch (const faiss::FaissException& e) {
        return graft_fail(GRAFT_EINVAL, "%s: FAISS k-means failed: %s", fn, e.what());
    } catch (const std::bad_alloc&) {
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory (%lld points, k = %lld)", fn,
                          (long long)n, (long long)k);
    } catch (const std::exception& e) {
        return graft_fail(GRAFT_EINTERNAL, "%s: %s", fn, e.what());
    }
}

namespace {

const graft::GraftIndexGraph* graph_to_export(FaissIndex** p_out, const FaissIndex* index,
                                              const char* fn) {
    FAISS_THROW_IF_NOT_FMT(p_out, "%s: p_out is NULL", fn);
    auto* g = dynamic_cast<const graft::GraftIndexGraph*>(reinterpret_cast<const faiss::Index*>(index));
    FAISS_THROW_IF_NOT_FMT(g, "%s: the index is NULL or not a graft graph index "
                              "(faiss_GraftIndexGraph_new, \"GraftGraph\")", fn);
    return g;
}

}  // namespace

int faiss_graft_export_hnsw(FaissIndex** p_out, const FaissIndex* graft_graph_index) {
    try {
        auto* g = graph_to_export(p_out, graft_graph_index, "faiss_graft_export_hnsw");
        *p_out = to_c(graft::export_hnsw(*g));
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_export_hnsw_cagra(FaissIndex** p_out, const FaissIndex* graft_graph_index) {
    try {
        auto* g = graph_to_export(p_out, graft_graph_index, "faiss_graft_export_hnsw_cagra");
        *p_out = to_c(graft::export_hnsw_cagra(*g));
        return 0;
    }
    CATCH_AND_HANDLE
}

}  // extern "C"
