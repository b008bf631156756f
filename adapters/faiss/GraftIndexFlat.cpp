#include "GraftIndexFlat.h"

#include <string>

#include <faiss/impl/FaissAssert.h>

namespace graft {

void throw_if_error(int rc, const char* where) {
    if (rc == GRAFT_OK) return;
    std::string msg = std::string("graft ") + graft_status_name(rc) + " in " + where + ": " +
                      graft_last_error();
    throw faiss::FaissException(msg);
}

static graft_metric to_graft(faiss::MetricType m) {
    if (m == faiss::METRIC_L2) return GRAFT_METRIC_L2;
    if (m == faiss::METRIC_INNER_PRODUCT) return GRAFT_METRIC_INNER_PRODUCT;
    FAISS_THROW_FMT("graft supports METRIC_L2 and METRIC_INNER_PRODUCT, not metric %d", (int)m);
}

GraftIndexFlat::GraftIndexFlat(idx_t d, faiss::MetricType metric, const graft_flat_params* params)
        : faiss::Index(d, metric) {
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    if (params) p = *params;
    p.metric = to_graft(metric);
    throw_if_error(graft_flat_new(d, &p, &flat), "GraftIndexFlat");
    is_trained = true;
}

GraftIndexFlat::~GraftIndexFlat() { graft_flat_free(flat); }

void GraftIndexFlat::add(idx_t n, const float* x) {
    throw_if_error(graft_flat_add(flat, n, x), "GraftIndexFlat::add");
    ntotal = graft_flat_ntotal(flat);
}

void GraftIndexFlat::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                            const faiss::SearchParameters* params) const {
    FAISS_THROW_IF_NOT_MSG(!params || !params->sel, "GraftIndexFlat: IDSelector not supported yet");
    static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS idx_t must be 64-bit");
    throw_if_error(graft_flat_search(flat, n, x, k, distances, reinterpret_cast<int64_t*>(labels)),
                   "GraftIndexFlat::search");
}

void GraftIndexFlat::reset() {
    throw_if_error(graft_flat_reset(flat), "GraftIndexFlat::reset");
    ntotal = 0;
}

void GraftIndexFlat::reconstruct(idx_t key, float* recons) const {
    throw_if_error(graft_flat_reconstruct(flat, key, recons), "GraftIndexFlat::reconstruct");
}

}  // namespace graft
