#include "GraftIndexGraph.h"
#include "hnsw_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/IDSelector.h>

namespace graft {

GraftIndexGraph::GraftIndexGraph(idx_t d, faiss::MetricType metric, const graft_gindex_params* params)
        : faiss::Index(d, metric) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    if (params) p = *params;
    p.metric = to_graft_metric(metric);
    throw_if_error(graft_gindex_new(d, &p, &gindex), "GraftIndexGraph");
    is_trained = graft_gindex_is_trained(gindex);
}

GraftIndexGraph::GraftIndexGraph(graft_gindex* owned)
        : faiss::Index(graft_gindex_d(owned),
                       graft_gindex_metric(owned) == GRAFT_METRIC_L2 ? faiss::METRIC_L2
                                                                     : faiss::METRIC_INNER_PRODUCT),
          gindex(owned) {
    FAISS_THROW_IF_NOT_MSG(owned, "GraftIndexGraph: NULL plugin index");
    ntotal = graft_gindex_ntotal(owned);
    is_trained = graft_gindex_is_trained(owned);
}

GraftIndexGraph::~GraftIndexGraph() { graft_gindex_free(gindex); }

void GraftIndexGraph::train(idx_t n, const float* x) {
    throw_if_error(graft_gindex_train(gindex, n, x), "GraftIndexGraph::train");
    is_trained = graft_gindex_is_trained(gindex);
}

void GraftIndexGraph::add(idx_t n, const float* x) {
    throw_if_error(graft_gindex_add(gindex, n, x), "GraftIndexGraph::add");
    ntotal = graft_gindex_ntotal(gindex);
}

void GraftIndexGraph::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                             const faiss::SearchParameters* params) const {
    graft_search_params p = graft_gindex_get_params(gindex).search;
    if (auto* gp = dynamic_cast<const SearchParametersGraftGraph*>(params)) {
        // -1 keeps the index's value; anything else is checked by the search.
        if (gp->L != -1) p.L = gp->L;
        if (gp->probes != -1) p.probes = gp->probes;
        if (gp->visited != -1) p.visited = gp->visited;
        if (gp->merge != -1) p.merge = gp->merge;
        if (gp->rerank != -1) p.rerank = gp->rerank;
    }
    static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS idx_t must be 64-bit");
    search_filtered(
            params ? params->sel : nullptr, p, [&] { return graft_gindex_ntotal(gindex); },
            [&](const auto& q) {
                return graft_gindex_search(gindex, n, x, k, &q, distances,
                                        reinterpret_cast<int64_t*>(labels), nullptr);
            },
            "GraftIndexGraph::search");
}

void GraftIndexGraph::reset() {
    throw_if_error(graft_gindex_reset(gindex), "GraftIndexGraph::reset");
    ntotal = 0;
}

void GraftIndexGraph::reconstruct(idx_t key, float* recons) const {
    copy_row(graft_gindex_vectors(gindex), graft_gindex_ntotal(gindex), d, key, recons,
             "GraftIndexGraph::reconstruct");
}

size_t GraftIndexGraph::remove_ids(const faiss::IDSelector& /*sel*/) {
    FAISS_THROW_MSG(
            "GraftIndexGraph::remove_ids: graft's graph index cannot remove vectors (the graph "
            "would need a rebuild); rebuild it without them, or skip them at search time with an "
            "IDSelector (SearchParameters::sel)");
}

// ---- named parameters --------------------------------------------------------------------------

namespace {

const char* const kKnown =
        "search: L, probes, visited, merge, bloom_log2, rerank; filtered search: "
        "filter_exact_below; build (next add): R, S, T1, T2, rho; "
        "read-only: device, build_seconds, build_pieces, storage, gpu_bytes, and the last search's "
        "filter_path, filter_passing, filter_selectivity, filter_threshold, filter_L, filter_redone";

int* search_field(graft_search_params& s, const std::string& name) {
    if (name == "L") return &s.L;
    if (name == "probes") return &s.probes;
    if (name == "visited") return &s.visited;
    if (name == "merge") return &s.merge;
    if (name == "bloom_log2") return &s.bloom_log2;
    if (name == "rerank") return &s.rerank;
    return nullptr;
}

}  // namespace

void GraftIndexGraph::set_param(const char* name, double value) {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexGraph::set_param: name is NULL");
    const std::string n = name;
    graft_gindex_params p = graft_gindex_get_params(gindex);
    if (int* f = search_field(p.search, n)) {
        *f = param_as_int("GraftIndexGraph", name, value);
        throw_if_error(graft_gindex_set_search_params(gindex, &p.search), "GraftIndexGraph::set_param");
        return;
    }
    if (n == "filter_exact_below") {
        p.search.filter_exact_below = filter_threshold_value("GraftIndexGraph", value);
        throw_if_error(graft_gindex_set_search_params(gindex, &p.search), "GraftIndexGraph::set_param");
        return;
    }
    GRAFT_REQUIRE(!is_filter_report_param(n), "GraftIndexGraph: '%s' is read-only (what the last search did)",
                  name);
    int* f = build_field(p.build.base, n);
    if (f || n == "rho") {
        if (f)
            *f = param_as_int("GraftIndexGraph", name, value);
        else
            p.build.base.rho = (float)value;
        throw_if_error(graft_gindex_set_build_params(gindex, &p.build), "GraftIndexGraph::set_param");
        return;
    }
    GRAFT_REQUIRE(n != "device" && n != "build_seconds" && n != "build_pieces" && n != "storage" &&
                          n != "gpu_bytes",
                  "GraftIndexGraph: '%s' is read-only (the device and the storage are fixed at "
                  "creation: faiss_GraftIndexGraph_new, or factory strings \"GraftGraph,cpu\" / "
                  "\"GraftGraph,gpu=N\" / \"GraftGraph,SQ8\")",
                  name);
    FAISS_THROW_FMT("GraftIndexGraph: unknown parameter '%s' (%s)", name, kKnown);
}

double GraftIndexGraph::get_param(const char* name) const {
    FAISS_THROW_IF_NOT_MSG(name, "GraftIndexGraph::get_param: name is NULL");
    const std::string n = name;
    graft_gindex_params p = graft_gindex_get_params(gindex);
    if (int* f = search_field(p.search, n)) return *f;
    if (int* f = build_field(p.build.base, n)) return *f;
    if (n == "rho") return p.build.base.rho;
    if (n == "filter_exact_below") return p.search.filter_exact_below;
    if (is_filter_report_param(n)) {
        graft_filter_report r;
        throw_if_error(graft_gindex_last_filter(gindex, &r), "GraftIndexGraph::get_param");
        double v = 0;
        filter_report_param(r, n, &v);
        return v;
    }
    if (n == "device") return graft_gindex_device(gindex);
    if (n == "build_seconds") return graft_gindex_build_seconds(gindex);
    if (n == "build_pieces") return graft_gindex_build_pieces(gindex);
    if (n == "storage") return p.storage;
    if (n == "gpu_bytes") return (double)graft_gindex_gpu_bytes(gindex);
    FAISS_THROW_FMT("GraftIndexGraph: unknown parameter '%s' (%s)", name, kKnown);
}

// ---- export to FAISS HNSW ----------------------------------------------------------------------

faiss::IndexHNSWFlat* export_hnsw(const GraftIndexGraph& index) {
    return export_hnsw(index.gindex, index.metric_type);
}

}  // namespace graft
