// graft's exact flat index as a faiss::Index (see graft/flat.h for the semantics).
#pragma once

#include <cstdint>
#include <mutex>

#include <faiss/Index.h>

#include "graft/flat.h"
#include "graft_faiss_common.h"

namespace graft {

struct GraftIndexFlat : faiss::Index, NamedParameters {
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
    // Held by search, reconstruct, add, reset and set_param: set_param replaces `flat`, and the
    // CPU-reference / IDSelector search reads the host vectors that an add reallocates. So any of
    // them may run while other threads search. Not a reader/writer lock: the plugin serializes
    // an index's searches anyway, and glibc's rwlock would starve add and set_param under load.
    mutable std::mutex swap_lock;

    // ---- composition with FAISS (factory, parameters, selectors) ----
    // The parameters the plugin object was created with (device, memory_budget, allow_tf32).
    graft_flat_params flat_params{};
    // Index-level defaults by name: "allow_tf32" (0/1) and "device_budget_mb" (0 = auto). Both
    // take effect on the next add/search: a GPU index re-creates its plugin object with the new
    // values and re-uploads the vectors (on the CPU they are only recorded), waiting for the
    // searches in other threads to finish (swap_lock). Unknown names throw, listing the known ones.
    void set_param(const char* name, double value) override;
    double get_param(const char* name) const override;
    // graft's flat index is append-only: throws a FaissException saying so.
    size_t remove_ids(const faiss::IDSelector& sel) override;
};

// Per-search parameters of a GraftIndexFlat (pass to search(); IndexPreTransform forwards them,
// FAISS 1.7.3's IndexIDMap, IndexShards and IndexRefine refuse any search parameters).
//  - sel (inherited): only ids the selector accepts are searched. Exact: the selected vectors are
//    gathered and searched with graft's CPU reference (also for a GPU index), so results equal
//    IndexFlat with the same selector; slots beyond the selected count hold label -1.
//  - cpu_reference: search with the CPU reference even when the index lives on a GPU.
// A plain faiss::SearchParameters with only `sel` works the same.
struct SearchParametersGraftFlat : faiss::SearchParameters {
    bool cpu_reference = false;
};

}  // namespace graft
