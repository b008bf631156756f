// What graft's faiss::Index subclasses share (graft_faiss_common.h).
#include "graft_faiss_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

// Weak: absent from older FAISS (1.7.3), and then NULL.
namespace faiss {
std::string get_version() __attribute__((weak));
}

namespace graft {

void require_faiss_runtime() {
    static const std::string problem = []() -> std::string {
        const bool says = &faiss::get_version != nullptr;
        const std::string running = says ? faiss::get_version() : "";
        if (says ? running == GRAFT_FAISS_BUILT_VERSION : !GRAFT_FAISS_HAS_GET_VERSION) return "";
        return std::string("graft was built against FAISS " GRAFT_FAISS_BUILT_VERSION
                           ", but this process runs ") +
               (says ? "FAISS " + running : "an older FAISS (one without faiss::get_version)") +
               ": rebuild graft against the FAISS the program links (cmake "
               "-DCMAKE_PREFIX_PATH=<its prefix>), or make the program load FAISS " GRAFT_FAISS_BUILT_VERSION;
    }();
    if (!problem.empty()) throw faiss::FaissException(problem);
}

void throw_if_error(int rc, const char* where) {
    if (rc == GRAFT_OK) return;
    std::string msg = std::string("graft ") + graft_status_name(rc) + " in " + where + ": " +
                      graft_last_error();
    throw faiss::FaissException(msg);
}

graft_metric to_graft_metric(faiss::MetricType m) {
    if (m == faiss::METRIC_L2) return GRAFT_METRIC_L2;
    if (m == faiss::METRIC_INNER_PRODUCT) return GRAFT_METRIC_INNER_PRODUCT;
    FAISS_THROW_FMT("graft supports METRIC_L2 and METRIC_INNER_PRODUCT, not metric %d", (int)m);
}

namespace {

void set_bit(std::vector<uint8_t>& bits, int64_t i, int64_t n) {
    if (i >= 0 && i < n) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

// set_bit from several threads: ids of one byte may come from different threads.
void set_bit_atomic(std::vector<uint8_t>& bits, int64_t i, int64_t n) {
    if (i >= 0 && i < n) __atomic_fetch_or(&bits[i >> 3], (uint8_t)(1u << (i & 7)), __ATOMIC_RELAXED);
}

// Large id lists are read by all threads: a Batch's hash set of 500k ids takes ~30 ms on one
// core (a cache miss a node), which was most of a filtered 10k-query search on the H100.
constexpr size_t kParallelIds = 1 << 14;

}  // namespace

// The bitmaps of lhs and rhs (each converted as selector_bitmap converts it) joined byte by byte.
// Both bitmaps hold no bits at or past n, and op keeps it so (a ^ b, a | b, a & b of zeros is 0).
template <class Op>
static void combine(std::vector<uint8_t>& bits, const faiss::IDSelector& lhs,
                    const faiss::IDSelector& rhs, int64_t n, Op op) {
    bits = selector_bitmap(lhs, n);
    std::vector<uint8_t> r = selector_bitmap(rhs, n);
    for (size_t i = 0; i < bits.size(); i++) bits[i] = op(bits[i], r[i]);
}

std::vector<uint8_t> selector_bitmap(const faiss::IDSelector& sel, int64_t n) {
    std::vector<uint8_t> bits((size_t)(n + 7) / 8, 0);
    if (auto* r = dynamic_cast<const faiss::IDSelectorRange*>(&sel)) {
        for (int64_t i = std::max<int64_t>(r->imin, 0); i < std::min<int64_t>(r->imax, n); i++)
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    } else if (auto* b = dynamic_cast<const faiss::IDSelectorBitmap*>(&sel)) {
        std::memcpy(bits.data(), b->bitmap, std::min(bits.size(), b->n));
        if (n & 7 && b->n >= bits.size()) bits.back() &= (uint8_t)((1u << (n & 7)) - 1u);
    } else if (auto* bt = dynamic_cast<const faiss::IDSelectorBatch*>(&sel)) {
        const auto& set = bt->set;
        if (set.size() < kParallelIds) {
            for (idx_t id : set) set_bit(bits, id, n);
        } else {
            const int64_t buckets = (int64_t)set.bucket_count();
#pragma omp parallel for schedule(dynamic, 4096)
            for (int64_t b = 0; b < buckets; b++)
                for (auto it = set.begin((size_t)b); it != set.end((size_t)b); ++it) set_bit_atomic(bits, *it, n);
        }
    } else if (auto* a = dynamic_cast<const faiss::IDSelectorArray*>(&sel)) {
#pragma omp parallel for schedule(static) if (a->n >= kParallelIds)
        for (int64_t j = 0; j < (int64_t)a->n; j++) set_bit_atomic(bits, a->ids[j], n);
    } else if (auto* no = dynamic_cast<const faiss::IDSelectorNot*>(&sel)) {
        bits = selector_bitmap(*no->sel, n);
        for (auto& byte : bits) byte = (uint8_t)~byte;
        if (n & 7) bits.back() &= (uint8_t)((1u << (n & 7)) - 1u); /* no ids past n */
    } else if (dynamic_cast<const faiss::IDSelectorAll*>(&sel)) {
        std::fill(bits.begin(), bits.end(), (uint8_t)0xff);
        if (n & 7) bits.back() &= (uint8_t)((1u << (n & 7)) - 1u);
    } else if (auto* both = dynamic_cast<const faiss_compat::IDSelectorAnd*>(&sel)) {
        combine(bits, *both->lhs, *both->rhs, n, [](uint8_t a, uint8_t b) { return a & b; });
    } else if (auto* either = dynamic_cast<const faiss_compat::IDSelectorOr*>(&sel)) {
        combine(bits, *either->lhs, *either->rhs, n, [](uint8_t a, uint8_t b) { return a | b; });
    } else if (auto* one = dynamic_cast<const faiss_compat::IDSelectorXOr*>(&sel)) {
        combine(bits, *one->lhs, *one->rhs, n, [](uint8_t a, uint8_t b) { return a ^ b; });
    } else {
        for (int64_t i = 0; i < n; i++)
            if (sel.is_member(i)) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    return bits;
}

bool is_filter_report_param(const std::string& name) {
    return name == "filter_path" || name == "filter_passing" || name == "filter_selectivity" ||
           name == "filter_threshold" || name == "filter_L" || name == "filter_redone";
}

bool filter_report_param(const graft_filter_report& r, const std::string& name, double* out) {
    if (name == "filter_path") *out = r.path;
    else if (name == "filter_passing") *out = (double)r.passing;
    else if (name == "filter_selectivity") *out = r.selectivity;
    else if (name == "filter_threshold") *out = r.exact_below;
    else if (name == "filter_L") *out = r.L;
    else if (name == "filter_redone") *out = (double)r.redone;
    else return false;
    return true;
}

double filter_threshold_value(const char* cls, double value) {
    GRAFT_REQUIRE(value <= 1.0, "%s: filter_exact_below takes a selectivity in [0, 1] (exact "
                  "search below it) or a negative value (the cost model decides), got %g", cls, value);
    return value;
}

int param_as_int(const char* cls, const char* name, double value) {
    GRAFT_REQUIRE(std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e9,
                  "%s: parameter %s takes an integer, got %g", cls, name, value);
    return (int)value;
}

int* build_field(graft_rnnd_params& b, const std::string& name) {
    if (name == "R") return &b.R;
    if (name == "S") return &b.S;
    if (name == "T1") return &b.T1;
    if (name == "T2") return &b.T2;
    return nullptr;
}

float* build_real_field(graft_rnnd_params& b, const std::string& name) {
    if (name == "rho") return &b.rho;
    if (name == "delta") return &b.delta;
    if (name == "alpha") return &b.alpha;
    return nullptr;
}

}  // namespace graft
