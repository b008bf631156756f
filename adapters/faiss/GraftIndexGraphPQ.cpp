#include <algorithm>
#include "GraftIndexGraphPQ.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "graft_faiss_c.h"

namespace graft {

namespace {

faiss::MetricType to_faiss_metric(graft_metric m) {
    return m == GRAFT_METRIC_L2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
}

}  // namespace

GraftIndexGraphPQ::GraftIndexGraphPQ(idx_t d, int M, faiss::MetricType metric,
                                     const graft_gindex_params* params)
        : faiss::Index(d, metric) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.storage = GRAFT_STORAGE_PQ;
    if (params) p = *params;
    p.metric = to_graft_metric(metric);
    GRAFT_REQUIRE(M >= 0, "GraftIndexGraphPQ: M = %d (sub-quantizers, >= 1; 0 = default)", M);
    if (M > 0) p.pq.M = M;
    p.pq.kmeans = graft_faiss_kmeans;
    p.pq.kmeans_ctx = nullptr;  // FAISS's default ClusteringParameters
    throw_if_error(graft_gindex_new(d, &p, &bindex), "GraftIndexGraphPQ");
    is_trained = graft_gindex_is_trained(bindex);
}

GraftIndexGraphPQ::GraftIndexGraphPQ(graft_gindex* owned)
        : faiss::Index(owned ? graft_gindex_d(owned) : 0,
                       owned ? to_faiss_metric(graft_gindex_metric(owned)) : faiss::METRIC_L2),
          bindex(owned) {
    FAISS_THROW_IF_NOT_MSG(owned, "GraftIndexGraphPQ: NULL plugin index");
    ntotal = graft_gindex_ntotal(owned);
    is_trained = graft_gindex_is_trained(owned);
}

GraftIndexGraphPQ::~GraftIndexGraphPQ() { graft_gindex_free(bindex); }

void GraftIndexGraphPQ::train(idx_t n, const float* x) {
    throw_if_error(graft_gindex_train(bindex, n, x), "GraftIndexGraphPQ::train");
    is_trained = graft_gindex_is_trained(bindex);
}

void GraftIndexGraphPQ::add(idx_t n, const float* x) {
    // FAISS's own check (IndexPQ, IndexIVF), with the way out in the message.
    GRAFT_REQUIRE(is_trained,
                  "GraftIndexGraphPQ::add: the index is not trained: call train() first (it "
                  "learns the PQ codebooks, at least %d vectors, as for FAISS's IndexPQ)",
                  GRAFT_PQ_KSUB);
    throw_if_error(graft_gindex_add(bindex, n, x), "GraftIndexGraphPQ::add");
    ntotal = graft_gindex_ntotal(bindex);
}

void GraftIndexGraphPQ::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                               const faiss::SearchParameters* params) const {
    graft_bang_params p = graft_gindex_get_params(bindex).search;
    if (auto* gp = dynamic_cast<const SearchParametersGraftGraphPQ*>(params)) {
        // -1 keeps the index's value; anything else is checked by the search.
        if (gp->L != -1) p.L = gp->L;
        if (gp->rerank != -1) p.rerank = gp->rerank;
        if (gp->max_expand != -1) p.max_expand = gp->max_expand;
    }
    static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS idx_t must be 64-bit");
    search_filtered(
            params ? params->sel : nullptr, p, [&] { return graft_gindex_ntotal(bindex); },
            [&](const auto& q) {
                return graft_gindex_search(bindex, n, x, k, &q, distances,
                                        reinterpret_cast<int64_t*>(labels), nullptr);
            },
            "GraftIndexGraphPQ::search");
}

void GraftIndexGraphPQ::reset() {
    throw_if_error(graft_gindex_reset(bindex), "GraftIndexGraphPQ::reset");
    ntotal = 0;
}

void GraftIndexGraphPQ::reconstruct(idx_t key, float* recons) const {
    copy_row(graft_gindex_vectors(bindex), graft_gindex_ntotal(bindex), d, key, recons,
             "GraftIndexGraphPQ::reconstruct");
}

size_t GraftIndexGraphPQ::remove_ids(const faiss::IDSelector& /*sel*/) {
    FAISS_THROW_MSG(
            "GraftIndexGraphPQ::remove_ids: graft's graph + PQ index cannot remove vectors (the "
            "graph would need a rebuild); rebuild it without them (reset() keeps the codebooks), "
            "or skip them at search time with an IDSelector (SearchParameters::sel)");
}

// ---- named parameters --------------------------------------------------------------------------

namespace {

const char* const kKnown =
        "search: L, rerank, max_expand, bloom_log2; memory: mode, gpu_budget; build (the next graph build): "
        "R, S, T1, T2, rho; filtered search: filter_exact_below; read-only: M, device, active_mode, build_seconds, build_pieces, gpu_bytes, and the last "
        "search's filter_path, filter_passing, filter_selectivity, filter_threshold, filter_L, "
        "filter_redone";

int* search_field(graft_bang_params& s, const std::string& name) {
    if (name == "L") return &s.L;
    if (name == "rerank") return &s.rerank;
    if (name == "max_expand") return &s.max_expand;
    if (name == "bloom_log2") return &s.bloom_log2;
    return nullptr;
}

}  // namespace

void GraftIndexGraphPQ::set_param(const char* name, double value) {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexGraphPQ::set_param: name is NULL");
    const char* fn = "GraftIndexGraphPQ::set_param";
    const std::string n = name;
    graft_gindex_params p = graft_gindex_get_params(bindex);
    if (int* f = search_field(p.search, n)) {
        *f = param_as_int("GraftIndexGraphPQ", name, value);
        throw_if_error(graft_gindex_set_search_params(bindex, &p.search), fn);
        return;
    }
    if (n == "filter_exact_below") {
        p.search.filter_exact_below = filter_threshold_value("GraftIndexGraphPQ", value);
        throw_if_error(graft_gindex_set_search_params(bindex, &p.search), fn);
        return;
    }
    GRAFT_REQUIRE(!is_filter_report_param(n), "GraftIndexGraphPQ: '%s' is read-only (what the last search did)",
                  name);
    int* f = build_field(p.build.base, n);
    if (f || n == "rho") {
        if (f)
            *f = param_as_int("GraftIndexGraphPQ", name, value);
        else
            p.build.base.rho = (float)value;
        throw_if_error(graft_gindex_set_build_params(bindex, &p.build), fn);
        return;
    }
    if (n == "mode") {
        const int mode = param_as_int("GraftIndexGraphPQ", name, value);
        GRAFT_REQUIRE(mode >= GRAFT_BANG_AUTO && mode <= GRAFT_BANG_OUT_OF_CORE,
                      "GraftIndexGraphPQ: mode %d (0 auto, 1 in-memory, 2 out-of-core)", mode);
        throw_if_error(graft_gindex_set_mode(bindex, (graft_bang_mode)mode, p.gpu_budget), fn);
        return;
    }
    if (n == "gpu_budget") {
        // Bytes; doubles hold every integer up to 2^53 (8 PiB) exactly.
        GRAFT_REQUIRE(std::isfinite(value) && value >= 0 && value == std::floor(value) &&
                              value <= 9007199254740992.0,
                      "GraftIndexGraphPQ: gpu_budget takes a whole number of bytes (0 = half "
                      "the device), got %g",
                      value);
        throw_if_error(graft_gindex_set_mode(bindex, p.mode, (size_t)value), fn);
        return;
    }
    GRAFT_REQUIRE(n != "M" && n != "device" && n != "active_mode" && n != "build_seconds" &&
                          n != "build_pieces" && n != "gpu_bytes",
                  "GraftIndexGraphPQ: '%s' is read-only (M and the device are fixed at creation: "
                  "faiss_GraftIndexGraphPQ_new, or factory strings \"GraftGraph,PQ16,cpu\" / "
                  "\"GraftGraph,PQ16,gpu=N\"; the memory mode is set through \"mode\")",
                  name);
    FAISS_THROW_FMT("GraftIndexGraphPQ: unknown parameter '%s' (%s)", name, kKnown);
}

double GraftIndexGraphPQ::get_param(const char* name) const {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexGraphPQ::get_param: name is NULL");
    const std::string n = name;
    graft_gindex_params p = graft_gindex_get_params(bindex);
    if (int* f = search_field(p.search, n)) return *f;
    if (int* f = build_field(p.build.base, n)) return *f;
    if (n == "rho") return p.build.base.rho;
    if (n == "filter_exact_below") return p.search.filter_exact_below;
    if (is_filter_report_param(n)) {
        graft_filter_report r;
        throw_if_error(graft_gindex_last_filter(bindex, &r), "GraftIndexGraphPQ::get_param");
        double v = 0;
        filter_report_param(r, n, &v);
        return v;
    }
    if (n == "mode") return p.mode;
    if (n == "gpu_budget") return (double)p.gpu_budget;
    if (n == "M") {
        const graft_pq* pq = graft_gindex_pq(bindex);
        return pq ? pq->M : p.pq.M ? p.pq.M : graft_pq_default_M(d);
    }
    if (n == "device") return graft_gindex_device(bindex);
    if (n == "active_mode") return graft_gindex_mode(bindex);
    if (n == "build_seconds") return graft_gindex_build_seconds(bindex);
    if (n == "build_pieces") return graft_gindex_build_pieces(bindex);
    if (n == "gpu_bytes") return (double)graft_gindex_gpu_bytes(bindex);
    FAISS_THROW_FMT("GraftIndexGraphPQ: unknown parameter '%s' (%s)", name, kKnown);
}

}  // namespace graft
