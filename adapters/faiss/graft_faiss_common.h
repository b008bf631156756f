// What graft's faiss::Index subclasses share (graft_faiss_common.cpp): the bridge from graft's
// status codes to FAISS exceptions, the metric mapping, IDSelectors as graft's filter bitmap, and
// the named-parameter interface that faiss_graft_set_param / faiss_graft_get_param reach through
// FAISS's wrappers.
#pragma once

#include <cstdint>
#include <vector>

#include <faiss/MetricType.h>
#include <faiss/impl/FaissAssert.h>

#include <string>

#include "faiss_compat.h"
#include "graft/graft.h"
#include "graft/graph.h"

namespace faiss {
struct IDSelector;
struct Index;
}

namespace graft {

// Throws a faiss::FaissException saying so when the FAISS this process runs is not the one graft
// was built against (a libfaiss of another version found at load time): graft's classes and FAISS's
// would disagree on FAISS's object layouts. Checked once; every graft index constructor calls it.
// A FAISS that says its version (faiss::get_version: 1.15 does) must say the one built against; one
// that does not is taken for it when that one does not say it either (FAISS 1.7.3).
void require_faiss_runtime();

// Throws faiss::FaissException carrying graft's status name and message when rc != GRAFT_OK,
// so faiss_c returns its usual error code and faiss_get_last_error() reads graft's message.
void throw_if_error(int rc, const char* where);

// METRIC_L2 and METRIC_INNER_PRODUCT; any other metric throws, naming it.
graft_metric to_graft_metric(faiss::MetricType metric);

// The ids `sel` accepts among [0, n), as graft's search filter (graft_search_params.allowed,
// graft_bang_params.allowed: FAISS's IDSelectorBitmap layout, bit i & 7 of byte i >> 3), built
// once per search call. FAISS's IDSelectorRange, Bitmap, Batch, Array, Not and All, and (FAISS
// >= 1.7.4) And, Or and XOr of those, are converted without calling is_member per id (Batch and
// Array cost their own size, not n); any other selector (a user's, IDSelectorTranslated of an
// IDMap) is asked id by id.
std::vector<uint8_t> selector_bitmap(const faiss::IDSelector& sel, int64_t n);

// The filtered search's read-only parameters of the last search (graft_filter_report):
// "filter_path" (0 none, 1 exact, 2 walk), "filter_passing", "filter_selectivity",
// "filter_threshold" (the selectivity below which the search went exact), "filter_L" (the walk's
// beam), "filter_redone" (queries redone exactly). False for other names.
bool filter_report_param(const graft_filter_report& r, const std::string& name, double* out);
bool is_filter_report_param(const std::string& name);

// "filter_exact_below": < 0 the cost model, [0, 1] a fixed selectivity threshold; throws
// otherwise, naming cls.
double filter_threshold_value(const char* cls, double value);

// search(p) with p's filter (allowed, allowed_n) made from `sel` (none when NULL) over the
// index's ntotal() ids of now, made again when the search finds it stale (GRAFT_ESTATE: an add in
// another thread grew the index meanwhile). At least one bit, so that an empty index's filter is
// not NULL (= no filter). Throws on any other failure.
template <class Params, class NTotal, class Search>
void search_filtered(const faiss::IDSelector* sel, Params& p, NTotal ntotal, Search search,
                     const char* where) {
    for (int attempt = 0;; attempt++) {
        std::vector<uint8_t> allowed;
        if (sel) {
            int64_t bits = ntotal() > 1 ? ntotal() : 1;
            allowed = selector_bitmap(*sel, bits);
            p.allowed = allowed.data();
            p.allowed_n = bits;
        }
        int rc = search(p);
        if (rc == GRAFT_ESTATE && sel && attempt < 16) continue;
        throw_if_error(rc, where);
        return;
    }
}

// `value` of the integer parameter `name` of class `cls` (set_param's double); throws naming
// both unless it is an integer of magnitude below 1e9.
int param_as_int(const char* cls, const char* name, double value);

// The integer GRNND build parameter `name` of b ("R", "S", "T1", "T2"), nullptr for others: the
// build parameters graft's graph indexes take by name.
int* build_field(graft_rnnd_params& b, const std::string& name);
// The real-valued ones ("rho", "delta", "alpha"), nullptr for others.
float* build_real_field(graft_rnnd_params& b, const std::string& name);

// Index-level parameters by name (see each index's set_param). Unknown names throw, listing the
// known ones.
struct NamedParameters {
    virtual ~NamedParameters() = default;
    virtual void set_param(const char* name, double value) = 0;
    virtual double get_param(const char* name) const = 0;
};

// A face above graft_faiss (adapters/mpi) makes the indexes of description strings that start
// with its prefix and a comma ("MPI,GraftGraph,cpu"): it registers its maker when its library
// loads, and faiss_graft_index_factory (so Python's graft.index_factory too) hands it such
// strings whole. graft_faiss itself knows nothing of what is behind a prefix.
using PrefixMaker = faiss::Index* (*)(int d, const char* description, faiss::MetricType metric);
void register_factory_prefix(const char* prefix, PrefixMaker make);

}  // namespace graft

// FAISS_THROW_IF_NOT_FMT without the "Error: 'cond' failed:" prefix: the message reads alone.
#define GRAFT_REQUIRE(cond, ...)                   \
    do {                                           \
        if (!(cond)) FAISS_THROW_FMT(__VA_ARGS__); \
    } while (0)
