// What graft's faiss::Index subclasses share (graft_faiss_common.h).
#include "graft_faiss_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

namespace graft {

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

std::vector<uint8_t> selector_bitmap(const faiss::IDSelector& sel, int64_t n) {
    std::vector<uint8_t> bits((size_t)(n + 7) / 8, 0);
    if (auto* r = dynamic_cast<const faiss::IDSelectorRange*>(&sel)) {
        for (int64_t i = std::max<int64_t>(r->imin, 0); i < std::min<int64_t>(r->imax, n); i++)
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    } else if (auto* b = dynamic_cast<const faiss::IDSelectorBitmap*>(&sel)) {
        std::memcpy(bits.data(), b->bitmap, std::min(bits.size(), b->n));
    } else {
        for (int64_t i = 0; i < n; i++)
            if (sel.is_member(i)) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    return bits;
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

void copy_row(const float* x, int64_t ntotal, int64_t d, int64_t key, float* recons, const char* where) {
    GRAFT_REQUIRE(recons, "%s: recons is NULL", where);
    GRAFT_REQUIRE(key >= 0 && key < ntotal, "%s: key %lld not in [0, %lld)", where, (long long)key,
                  (long long)ntotal);
    std::memcpy(recons, x + key * d, sizeof(float) * (size_t)d);
}

}  // namespace graft
