// graft's exact flat index as a faiss::Index (see graft/flat.h for the semantics).
#pragma once

#include <cstdint>

#include <faiss/Index.h>

#include "graft/flat.h"

namespace graft {

// Throws faiss::FaissException carrying graft's status name and message when rc != GRAFT_OK,
// so faiss_c returns its usual error code and faiss_get_last_error() reads graft's message.
void throw_if_error(int rc, const char* where);

struct GraftIndexFlat : faiss::Index {
    explicit GraftIndexFlat(idx_t d, faiss::MetricType metric = faiss::METRIC_L2,
                            const graft_flat_params* params = nullptr);
    ~GraftIndexFlat() override;
    GraftIndexFlat(const GraftIndexFlat&) = delete;
    GraftIndexFlat& operator=(const GraftIndexFlat&) = delete;

    void add(idx_t n, const float* x) override;
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    void reset() override;
    void reconstruct(idx_t key, float* recons) const override;

    graft_flat* flat = nullptr;
};

}  // namespace graft
