#include "GraftIndexFlat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/IDSelector.h>

#include "graft_faiss_c.h"

namespace graft {

GraftIndexFlat::GraftIndexFlat(idx_t d, faiss::MetricType metric, const graft_flat_params* params)
        : faiss::Index(d, metric) {
    require_faiss_runtime();
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    if (params) p = *params;
    p.metric = to_graft_metric(metric);
    if (!p.cpu_knn) p.cpu_knn = graft_faiss_knn;  // on the CPU: FAISS's IndexFlat search itself
    throw_if_error(graft_flat_new(d, &p, &flat), "GraftIndexFlat");
    flat_params = p;
    is_trained = true;
}

GraftIndexFlat::~GraftIndexFlat() { graft_flat_free(flat); }

void GraftIndexFlat::add(idx_t n, const float* x) {
    std::lock_guard<std::mutex> hold(swap_lock);
    throw_if_error(graft_flat_add(flat, n, x), "GraftIndexFlat::add");
    ntotal = graft_flat_ntotal(flat);
}

static bool is_cpu_reference(const faiss::SearchParameters* params);
static void search_cpu(const GraftIndexFlat* index, idx_t n, const float* x,
                       idx_t k, float* distances, idx_t* labels,
                       const faiss::IDSelector* sel);

void GraftIndexFlat::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                            const faiss::SearchParameters* params) const {
    std::lock_guard<std::mutex> hold(swap_lock);
    if (params && (params->sel || is_cpu_reference(params))) {
        search_cpu(this, n, x, k, distances, labels, params->sel);
        return;
    }
    static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS idx_t must be 64-bit");
    throw_if_error(graft_flat_search(flat, n, x, k, distances, reinterpret_cast<int64_t*>(labels)),
                   "GraftIndexFlat::search");
}

void GraftIndexFlat::reset() {
    std::lock_guard<std::mutex> hold(swap_lock);
    throw_if_error(graft_flat_reset(flat), "GraftIndexFlat::reset");
    ntotal = 0;
}

void GraftIndexFlat::reconstruct(idx_t key, float* recons) const {
    std::lock_guard<std::mutex> hold(swap_lock);
    throw_if_error(graft_flat_reconstruct(flat, key, recons), "GraftIndexFlat::reconstruct");
}

// ---- composition with FAISS: search parameters, selectors, named parameters ------------------

static bool is_cpu_reference(const faiss::SearchParameters* params) {
    auto* gp = dynamic_cast<const SearchParametersGraftFlat*>(params);
    return gp && gp->cpu_reference;
}

// Exact search with the CPU reference over the host copy of the vectors; with a selector, over
// the selected ids only (a contiguous IDSelectorRange is searched in place, any other selector
// gathers the vectors it accepts), labels mapped back to the index's ids.
static void search_cpu(const GraftIndexFlat* index, idx_t n, const float* x,
                       idx_t k, float* distances, idx_t* labels,
                       const faiss::IDSelector* sel) {
    const char* where = "GraftIndexFlat::search (CPU reference / IDSelector)";
    GRAFT_REQUIRE(k >= 1, "%s: k must be >= 1, got %lld", where, (long long)k);
    GRAFT_REQUIRE(n >= 0, "%s: n = %lld < 0", where, (long long)n);
    if (n == 0) return;
    GRAFT_REQUIRE(x && distances && labels, "%s: NULL argument", where);
    const int64_t d = index->d, nb = graft_flat_ntotal(index->flat);
    for (int64_t i = 0; i < n * d; i++)
        GRAFT_REQUIRE(std::isfinite(x[i]), "%s: query %lld holds NaN or Inf", where,
                      (long long)(i / d));
    const float* xb = graft_flat_vectors(index->flat);
    const graft_metric metric = graft_flat_metric(index->flat);
    int64_t* I = reinterpret_cast<int64_t*>(labels);
    if (!sel) {
        throw_if_error(graft_knn_cpu(xb, nb, x, n, d, k, metric, -1, distances, I), where);
        return;
    }
    int64_t offset = 0, ns = 0;
    std::vector<int64_t> ids;
    std::vector<float> xs;
    const float* base = xb;
    if (auto* r = dynamic_cast<const faiss::IDSelectorRange*>(sel)) {
        offset = std::max<int64_t>(r->imin, 0);
        ns = std::max<int64_t>(std::min<int64_t>(r->imax, nb) - offset, 0);
        base = ns > 0 ? xb + offset * d : nullptr;
    } else {
        for (int64_t i = 0; i < nb; i++)
            if (sel->is_member(i)) ids.push_back(i);
        ns = (int64_t)ids.size();
        xs.resize((size_t)ns * d);
        for (int64_t j = 0; j < ns; j++)
            std::memcpy(&xs[(size_t)j * d], xb + ids[j] * d, sizeof(float) * d);
        base = xs.data();
    }
    throw_if_error(graft_knn_cpu(base, ns, x, n, d, k, metric, -1, distances, I), where);
    for (int64_t i = 0; i < n * k; i++)
        if (I[i] >= 0) I[i] = ids.empty() ? I[i] + offset : ids[I[i]];
}

void GraftIndexFlat::set_param(const char* name, double value) {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexFlat::set_param: name is NULL");
    const std::string n = name;
    graft_flat_params p = flat_params;
    if (n == "allow_tf32") {
        GRAFT_REQUIRE(value == 0 || value == 1, "GraftIndexFlat: allow_tf32 must be 0 or 1, got %g",
                      value);
        p.allow_tf32 = (int)value;
    } else if (n == "exact_path") {
        GRAFT_REQUIRE(value == 0 || value == 1 || value == 2 || value == 3 || value == 4 || value == 5,
                      "GraftIndexFlat: exact_path must be 0 (auto), 1 (fp32), 2 (tf32 certified), "
                      "3 (int8), 4 (fp16 certified) or 5 (fp16 fused), got %g", value);
        p.exact_path = (int)value;
    } else if (n == "device_budget_mb") {
        GRAFT_REQUIRE(std::isfinite(value) && value >= 0 && value <= 1e9,
                      "GraftIndexFlat: device_budget_mb must be in [0, 1e9] (0 = auto), got %g",
                      value);
        p.memory_budget = (size_t)(value * 1048576.0);
    } else if (n == "device") {
        FAISS_THROW_MSG(
                "GraftIndexFlat: 'device' is fixed at creation (faiss_GraftIndexFlat_new, or "
                "factory strings \"GraftFlat,cpu\" / \"GraftFlat,gpu=N\"); it can be read, not "
                "set");
    } else {
        FAISS_THROW_FMT(
                "GraftIndexFlat: unknown parameter '%s' (settable: allow_tf32, exact_path, "
                "device_budget_mb; readable: device, fp32_fallbacks, last_path, host_bytes)",
                name);
    }
    std::lock_guard<std::mutex> hold(swap_lock);
    if (graft_flat_device(flat) >= 0 &&
        (p.allow_tf32 != flat_params.allow_tf32 || p.memory_budget != flat_params.memory_budget ||
         p.exact_path != flat_params.exact_path)) {
        // The plugin fixes these at creation: re-create it on the same device and re-add.
        graft_flat* nf = nullptr;
        throw_if_error(graft_flat_new(d, &p, &nf), "GraftIndexFlat::set_param");
        int rc = graft_flat_add(nf, graft_flat_ntotal(flat), graft_flat_vectors(flat));
        if (rc != GRAFT_OK) {
            graft_flat_free(nf);
            throw_if_error(rc, "GraftIndexFlat::set_param");
        }
        graft_flat_free(flat);
        flat = nf;
    }
    flat_params = p;
}

double GraftIndexFlat::get_param(const char* name) const {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexFlat::get_param: name is NULL");
    std::lock_guard<std::mutex> hold(swap_lock);
    const std::string n = name;
    if (n == "allow_tf32") return flat_params.allow_tf32;
    if (n == "device_budget_mb") return (double)flat_params.memory_budget / 1048576.0;
    if (n == "device") return graft_flat_device(flat);
    if (n == "host_bytes") return (double)graft_flat_host_bytes(flat);
    int64_t fallbacks = 0;
    int path = graft_flat_exact_path(flat, &fallbacks);
    if (n == "exact_path") return path;  // the path in use, auto resolved
    if (n == "fp32_fallbacks") return (double)fallbacks;
    if (n == "last_path") return graft_flat_last_path(flat);
    FAISS_THROW_FMT(
            "GraftIndexFlat: unknown parameter '%s' (known: allow_tf32, exact_path, "
            "device_budget_mb, device, fp32_fallbacks, last_path, host_bytes)",
            name);
}

size_t GraftIndexFlat::remove_ids(const faiss::IDSelector& /*sel*/) {
    FAISS_THROW_MSG(
            "GraftIndexFlat::remove_ids: graft's flat index is append-only and cannot "
            "remove vectors; rebuild it without them, or skip them at search time with an "
            "IDSelector (SearchParameters::sel)");
}

}  // namespace graft
