#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"
#include "graft_faiss_c.h"
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
    require_faiss_runtime();
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    if (params) p = *params;
    p.metric = to_graft_metric(metric);
    if (!p.cpu_knn) p.cpu_knn = graft_faiss_knn;  // the filtered exact path: FAISS's brute force
    throw_if_error(graft_gindex_new(d, &p, &gindex), p.storage == GRAFT_STORAGE_PQ ? "GraftIndexGraphPQ"
                                                                                  : "GraftIndexGraph");
    is_trained = graft_gindex_is_trained(gindex);
}

GraftIndexGraph::GraftIndexGraph(graft_gindex* owned)
        : faiss::Index(owned ? graft_gindex_d(owned) : 0,
                       !owned || graft_gindex_metric(owned) == GRAFT_METRIC_L2 ? faiss::METRIC_L2
                                                                               : faiss::METRIC_INNER_PRODUCT),
          gindex(owned) {
    FAISS_THROW_IF_NOT_MSG(owned, "GraftIndexGraph: NULL plugin index");
    require_faiss_runtime();
    ntotal = graft_gindex_ntotal(owned);
    is_trained = graft_gindex_is_trained(owned);
}

GraftIndexGraph::~GraftIndexGraph() { graft_gindex_free(gindex); }

const char* GraftIndexGraph::name() const {
    return graft_gindex_storage(gindex)->kind == GRAFT_STORAGE_PQ ? "GraftIndexGraphPQ" : "GraftIndexGraph";
}

void GraftIndexGraph::sync_verbose(graft_grnnd_params b) const {
    if ((b.base.verbose != 0) == verbose) return;
    b.base.verbose = verbose ? 1 : 0;
    throw_if_error(graft_gindex_set_build_params(gindex, &b), (std::string(name()) + ": verbose").c_str());
}

void GraftIndexGraph::train(idx_t n, const float* x) {
    sync_verbose(graft_gindex_get_params(gindex).build);
    throw_if_error(graft_gindex_train(gindex, n, x), (std::string(name()) + "::train").c_str());
    is_trained = graft_gindex_is_trained(gindex);
}

void GraftIndexGraph::before_add(const char* op) const {
    // FAISS's own check (IndexPQ, IndexIVF), with the way out in the message.
    GRAFT_REQUIRE(is_trained || graft_gindex_storage(gindex)->kind != GRAFT_STORAGE_PQ,
                  "GraftIndexGraphPQ::%s: the index is not trained: call train() first (it "
                  "learns the PQ codebooks, at least %d vectors, as for FAISS's IndexPQ)",
                  op, GRAFT_PQ_KSUB);
    sync_verbose(graft_gindex_get_params(gindex).build);
}

void GraftIndexGraph::add(idx_t n, const float* x) {
    before_add("add");
    throw_if_error(graft_gindex_add(gindex, n, x), (std::string(name()) + "::add").c_str());
    ntotal = graft_gindex_ntotal(gindex);
}

void GraftIndexGraph::add_u8(idx_t n, const uint8_t* x) {
    before_add("add_u8");
    throw_if_error(graft_gindex_add_u8(gindex, n, x), (std::string(name()) + "::add_u8").c_str());
    ntotal = graft_gindex_ntotal(gindex);
}

void GraftIndexGraph::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                             const faiss::SearchParameters* params) const {
    const graft_gindex_params now = graft_gindex_get_params(gindex);
    sync_verbose(now.build);  // a search after adds builds the graph
    graft_search_params p = now.search;
    // -1 keeps the index's value; anything else is checked by the search (fields of the other
    // storages' searches are ignored).
    if (auto* gp = dynamic_cast<const SearchParametersGraftGraph*>(params)) {
        if (gp->L != -1) p.L = gp->L;
        if (gp->probes != -1) p.probes = gp->probes;
        if (gp->visited != -1) p.visited = gp->visited;
        if (gp->merge != -1) p.merge = gp->merge;
        if (gp->rerank != -1) p.rerank = gp->rerank;
        if (gp->max_expand != -1) p.max_expand = gp->max_expand;
        if (gp->search_mode != -1) p.mode = gp->search_mode;
        if (gp->walks != -1) p.walks = gp->walks;
    } else if (auto* qp = dynamic_cast<const SearchParametersGraftGraphPQ*>(params)) {
        if (qp->L != -1) p.L = qp->L;
        if (qp->rerank != -1) p.rerank = qp->rerank;
        if (qp->max_expand != -1) p.max_expand = qp->max_expand;
    }
    static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS idx_t must be 64-bit");
    search_filtered(
            params ? params->sel : nullptr, p, [&] { return graft_gindex_ntotal(gindex); },
            [&](const auto& q) {
                return graft_gindex_search(gindex, n, x, k, &q, distances,
                                        reinterpret_cast<int64_t*>(labels), nullptr);
            },
            (std::string(name()) + "::search").c_str());
}

void GraftIndexGraph::reset() {
    throw_if_error(graft_gindex_reset(gindex), (std::string(name()) + "::reset").c_str());
    ntotal = 0;
}

void GraftIndexGraph::reconstruct(idx_t key, float* recons) const {
    const std::string where = std::string(name()) + "::reconstruct";
    GRAFT_REQUIRE(recons, "%s: recons is NULL", where.c_str());
    throw_if_error(graft_gindex_reconstruct(gindex, key, recons), where.c_str());
}

size_t GraftIndexGraph::remove_ids(const faiss::IDSelector& sel) {
    const std::string where = std::string(name()) + "::remove_ids";
    const int64_t n = graft_gindex_ntotal(gindex);
    // The selector's members among the ids of now (its fast paths: Range, Batch, Array, ...).
    const std::vector<uint8_t> bits = selector_bitmap(sel, n);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < n; i++)
        if (bits[i >> 3] >> (i & 7) & 1) ids.push_back(i);
    int64_t removed = 0;
    throw_if_error(graft_gindex_remove_ids(gindex, (int64_t)ids.size(), ids.data(), &removed),
                   where.c_str());
    ntotal = graft_gindex_ntotal(gindex);
    return (size_t)removed;
}

void GraftIndexGraph::consolidate() {
    throw_if_error(graft_gindex_consolidate(gindex), (std::string(name()) + "::consolidate").c_str());
    ntotal = graft_gindex_ntotal(gindex);
}

// ---- named parameters: one table; the storage decides which names apply -----------------------

namespace {

const char* const kKnownWalk =
        "search: L, probes, visited, merge, bloom_log2, rerank; storage (before the first add): "
        "keep_fp32 (FP16 / SQ8); filtered search: "
        "filter_exact_below; build (next build): R, S, T1, T2, rho, delta, alpha, init_exact, build_from, fill; adds and removals: add_policy, "
        "insert_L, rebuild_share, consolidate_share, background; "
        "read-only: device, build_seconds, build_rounds, build_linked, build_pieces, build_pending, storage, gpu_bytes, "
        "host_bytes, the last search's "
        "filter_path, filter_passing, filter_selectivity, filter_threshold, filter_L, filter_redone, "
        "and the adds' and removals' inserted, insert_batches, since_build, builds, "
        "background_builds, rebuilding, removed, tombstones, consolidations, insert_seconds, "
        "consolidate_seconds, last_add, rebuild_share_applied, gpu_inserts";
const char* const kKnownPQ =
        "search: L, rerank, max_expand, bloom_log2; memory: mode, gpu_budget, keep_fp32 (1 only); "
        "build (the next graph "
        "build): R, S, T1, T2, rho, delta, alpha, init_exact, build_from, fill; filtered search: filter_exact_below; adds and removals: "
        "add_policy, insert_L, rebuild_share, consolidate_share, background; read-only: M, device, "
        "active_mode, build_seconds, build_rounds, build_linked, build_pieces, build_pending, storage, gpu_bytes, "
        "host_bytes, the last search's "
        "filter_path, filter_passing, filter_selectivity, filter_threshold, filter_L, filter_redone, "
        "and the adds' and removals' inserted, insert_batches, since_build, builds, "
        "background_builds, rebuilding, removed, tombstones, consolidations, insert_seconds, "
        "consolidate_seconds, last_add, rebuild_share_applied, gpu_inserts";

// What the adds and removals did (graft_living_report) by name; false for other names.
bool living_report_param(const graft_living_report& r, const std::string& n, double* out) {
    if (n == "inserted") *out = (double)r.inserted;
    else if (n == "insert_batches") *out = (double)r.insert_batches;
    else if (n == "since_build") *out = (double)r.since_build;
    else if (n == "builds") *out = (double)r.builds;
    else if (n == "background_builds") *out = (double)r.background_builds;
    else if (n == "rebuilding") *out = r.rebuilding;
    else if (n == "removed") *out = (double)r.removed;
    else if (n == "tombstones") *out = (double)r.tombstones;
    else if (n == "consolidations") *out = (double)r.consolidations;
    else if (n == "insert_seconds") *out = r.insert_seconds;
    else if (n == "consolidate_seconds") *out = r.consolidate_seconds;
    else if (n == "last_add") *out = r.last_add;
    else if (n == "rebuild_share_applied") *out = r.rebuild_share;
    else if (n == "gpu_inserts") *out = r.on_gpu_inserts;
    else return false;
    return true;
}

// The adds' and removals' parameters by name (graft_living_params), nullptr for others.
double* living_double(graft_living_params& l, const std::string& n) {
    if (n == "rebuild_share") return &l.rebuild_share;
    if (n == "consolidate_share") return &l.consolidate_share;
    return nullptr;
}
int* living_int(graft_living_params& l, const std::string& n) {
    if (n == "add_policy") return &l.policy;
    if (n == "insert_L") return &l.insert_L;
    if (n == "background") return &l.background;
    return nullptr;
}

int* search_field(graft_search_params& s, const std::string& name, bool pq) {
    if (name == "L") return &s.L;
    if (name == "bloom_log2") return &s.bloom_log2;
    if (name == "rerank") return &s.rerank;
    if (pq) return name == "max_expand" ? &s.max_expand : nullptr;
    if (name == "probes") return &s.probes;
    if (name == "visited") return &s.visited;
    if (name == "merge") return &s.merge;
    if (name == "search_mode") return &s.mode;
    if (name == "walks") return &s.walks;
    return nullptr;
}

}  // namespace

void GraftIndexGraph::set_param(const char* name_, double value) {
    const char* cls = name();
    FAISS_THROW_IF_NOT_FMT(name_, "%s::set_param: name is NULL", cls);
    const std::string fn = std::string(cls) + "::set_param";
    const std::string n = name_;
    graft_gindex_params p = graft_gindex_get_params(gindex);
    const bool pq = p.storage == GRAFT_STORAGE_PQ;
    if (int* f = search_field(p.search, n, pq)) {
        *f = param_as_int(cls, name_, value);
        throw_if_error(graft_gindex_set_search_params(gindex, &p.search), fn.c_str());
        return;
    }
    if (n == "keep_fp32") {
        // The core checks it: 0 or 1, FP16 / SQ8 only for 0, before the first add.
        throw_if_error(graft_gindex_set_keep_fp32(gindex, param_as_int(cls, name_, value)), fn.c_str());
        return;
    }
    if (n == "filter_exact_below") {
        p.search.filter_exact_below = filter_threshold_value(cls, value);
        throw_if_error(graft_gindex_set_search_params(gindex, &p.search), fn.c_str());
        return;
    }
    GRAFT_REQUIRE(!is_filter_report_param(n), "%s: '%s' is read-only (what the last search did)", cls,
                  name_);
    if (int* f = living_int(p.living, n)) {
        *f = param_as_int(cls, name_, value);
        throw_if_error(graft_gindex_set_living_params(gindex, &p.living), fn.c_str());
        return;
    }
    if (double* f = living_double(p.living, n)) {
        *f = value;
        throw_if_error(graft_gindex_set_living_params(gindex, &p.living), fn.c_str());
        return;
    }
    {
        graft_living_report r{};
        double unused;
        GRAFT_REQUIRE(!living_report_param(r, n, &unused),
                      "%s: '%s' is read-only (what the adds and removals did)", cls, name_);
    }
    int* f = n == "init_exact" ? &p.build.init_exact
             : n == "build_from" ? &p.build.build_from  // 0 fp32, 1 codes
             : n == "fill"       ? &p.build.fill        // 0 pruned rows, 1 rows filled to R
                                 : build_field(p.build.base, n);
    float* r = build_real_field(p.build.base, n);
    if (f || r) {
        if (f)
            *f = param_as_int(cls, name_, value);
        else
            *r = (float)value;
        throw_if_error(graft_gindex_set_build_params(gindex, &p.build), fn.c_str());
        return;
    }
    if (pq && n == "mode") {
        // The core checks the value (graft_gindex_set_mode): 0 auto, 1 in-memory, 2 out-of-core.
        const int mode = param_as_int(cls, name_, value);
        throw_if_error(graft_gindex_set_mode(gindex, (graft_bang_mode)mode, p.gpu_budget), fn.c_str());
        return;
    }
    if (pq && n == "gpu_budget") {
        // Bytes; doubles hold every integer up to 2^53 (8 PiB) exactly.
        GRAFT_REQUIRE(std::isfinite(value) && value >= 0 && value == std::floor(value) &&
                              value <= 9007199254740992.0,
                      "%s: gpu_budget takes a whole number of bytes (0 = half the device), got %g",
                      cls, value);
        throw_if_error(graft_gindex_set_mode(gindex, p.mode, (size_t)value), fn.c_str());
        return;
    }
    if (pq)
        GRAFT_REQUIRE(n != "M" && n != "device" && n != "active_mode" && n != "build_seconds" &&
                              n != "build_rounds" && n != "build_linked" && n != "build_pieces" && n != "build_pending" && n != "gpu_bytes" &&
                              n != "host_bytes" && n != "storage",
                      "GraftIndexGraphPQ: '%s' is read-only (M and the device are fixed at "
                      "creation: faiss_GraftIndexGraphPQ_new, or factory strings "
                      "\"GraftGraph,PQ16,cpu\" / \"GraftGraph,PQ16,gpu=N\"; the memory mode is "
                      "set through \"mode\")",
                      name_);
    else
        GRAFT_REQUIRE(n != "device" && n != "build_seconds" && n != "build_rounds" &&
                              n != "build_linked" && n != "build_pieces" &&
                              n != "build_pending" && n != "storage" && n != "gpu_bytes" &&
                              n != "host_bytes",
                      "GraftIndexGraph: '%s' is read-only (the device and the storage are fixed at "
                      "creation: faiss_GraftIndexGraph_new, or factory strings \"GraftGraph,cpu\" / "
                      "\"GraftGraph,gpu=N\" / \"GraftGraph,SQ8\")",
                      name_);
    FAISS_THROW_FMT("%s: unknown parameter '%s' (%s)", cls, name_, pq ? kKnownPQ : kKnownWalk);
}

double GraftIndexGraph::get_param(const char* name_) const {
    const char* cls = name();
    FAISS_THROW_IF_NOT_FMT(name_, "%s::get_param: name is NULL", cls);
    const std::string n = name_;
    graft_gindex_params p = graft_gindex_get_params(gindex);
    const bool pq = p.storage == GRAFT_STORAGE_PQ;
    if (int* f = search_field(p.search, n, pq)) return *f;
    if (int* f = build_field(p.build.base, n)) return *f;
    if (n == "init_exact") return p.build.init_exact;
    if (n == "build_from") return p.build.build_from;
    if (n == "fill") return p.build.fill;
    if (float* f = build_real_field(p.build.base, n)) return *f;
    if (n == "filter_exact_below") return p.search.filter_exact_below;
    if (is_filter_report_param(n)) {
        graft_filter_report r;
        throw_if_error(graft_gindex_last_filter(gindex, &r), (std::string(cls) + "::get_param").c_str());
        double v = 0;
        filter_report_param(r, n, &v);
        return v;
    }
    if (int* f = living_int(p.living, n)) return *f;
    if (double* f = living_double(p.living, n)) return *f;
    {
        graft_living_report r;
        throw_if_error(graft_gindex_living_report(gindex, &r), (std::string(cls) + "::get_param").c_str());
        double v = 0;
        if (living_report_param(r, n, &v)) return v;
    }
    if (n == "device") return graft_gindex_device(gindex);
    if (n == "build_seconds") return graft_gindex_build_seconds(gindex);
    if (n == "build_rounds" || n == "build_linked") {  // the last build's report
        graft_pieces_report r;
        throw_if_error(graft_gindex_build_report(gindex, &r), (std::string(cls) + "::get_param").c_str());
        return n == "build_linked" ? (double)r.linked : r.pieces == 1 ? r.rounds : 0;
    }
    if (n == "build_pieces") return graft_gindex_build_pieces(gindex);
    if (n == "build_pending") return graft_gindex_build_pending(gindex);
    if (n == "storage") return p.storage;
    if (n == "keep_fp32") return p.keep_fp32;
    if (n == "gpu_bytes") return (double)graft_gindex_gpu_bytes(gindex);
    if (n == "host_bytes") return (double)graft_gindex_host_bytes(gindex);
    if (pq && n == "mode") return p.mode;
    if (pq && n == "gpu_budget") return (double)p.gpu_budget;
    if (pq && n == "M") return p.pq.M;
    if (pq && n == "active_mode") return graft_gindex_mode(gindex);
    FAISS_THROW_FMT("%s: unknown parameter '%s' (%s)", cls, name_, pq ? kKnownPQ : kKnownWalk);
}

// ---- export to FAISS HNSW ----------------------------------------------------------------------

faiss::IndexHNSWFlat* export_hnsw(const GraftIndexGraph& index) {
    return export_hnsw(index.gindex, index.metric_type);
}

faiss_compat::IndexHNSWCagra* export_hnsw_cagra(const GraftIndexGraph& index) {
    return export_hnsw_cagra(index.gindex, index.metric_type);
}

}  // namespace graft
