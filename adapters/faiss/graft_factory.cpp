// FAISS composition entry points of graft_faiss_c.h: the index factory that understands graft's
// strings and hands every other string to faiss_index_factory unchanged, named parameters that
// reach graft indexes inside FAISS wrappers, and selector search for faiss_c 1.7.3 (whose C API
// has no SearchParameters).
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexRefine.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/impl/ThreadedIndex.h>
#include <faiss/index_factory.h>

#include <memory>
#include <string>
#include <vector>

#include "GraftIndexFlat.h"
#include "graft_faiss_c.h"

// FAISS_THROW_IF_NOT_FMT without the "Error: 'cond' failed:" prefix: the message reads alone.
#define GRAFT_REQUIRE(cond, ...)                   \
    do {                                           \
        if (!(cond)) FAISS_THROW_FMT(__VA_ARGS__); \
    } while (0)

namespace {

const char* const kAccepted =
        "graft accepts \"GraftFlat\" (GPU 0 when one is visible, else the CPU reference), "
        "\"GraftFlat,cpu\" and \"GraftFlat,gpu=N\", optionally after FAISS vector-transform "
        "prefixes (\"PCA64,GraftFlat\", \"OPQ16_64,GraftFlat\", \"L2norm,GraftFlat\", ...) or "
        "\"IDMap,\" / \"IDMap2,\", and optionally followed by \",RFlat\", \",IDMap\" or "
        "\",IDMap2\"";

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t comma = s.find(',', start);
        out.push_back(
                s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

// "cpu", "gpu", "gpu=N" -> device; false when `c` is not a device option.
bool parse_device_option(const std::string& c, const std::string& desc, int* device) {
    if (c == "cpu") {
        *device = -1;
        return true;
    }
    if (c == "gpu") {
        *device = 0;
        return true;
    }
    if (c.compare(0, 4, "gpu=") != 0) return false;
    std::string num = c.substr(4);
    GRAFT_REQUIRE(!num.empty() && num.size() < 6 &&
                          num.find_first_not_of("0123456789") == std::string::npos,
                  "faiss_graft_index_factory: bad device option '%s' in \"%s\": "
                  "use gpu=N with N a device number; %s",
                  c.c_str(), desc.c_str(), kAccepted);
    *device = std::stoi(num);
    return true;
}

faiss::Index* graft_factory(int d, const std::string& desc, faiss::MetricType metric,
                            size_t graft_at) {
    std::vector<std::string> comps = split_commas(desc);
    GRAFT_REQUIRE(comps[graft_at] == "GraftFlat",
                  "faiss_graft_index_factory: unknown graft index \"%s\" in \"%s\"; %s",
                  comps[graft_at].c_str(), desc.c_str(), kAccepted);
    graft_flat_params params;
    graft_flat_params_defaults(&params);
    size_t j = graft_at + 1;
    bool have_device = false;
    for (int dev; j < comps.size() && parse_device_option(comps[j], desc, &dev); j++) {
        GRAFT_REQUIRE(!have_device, "faiss_graft_index_factory: \"%s\" names the device twice; %s",
                      desc.c_str(), kAccepted);
        params.device = dev;
        have_device = true;
    }
    for (size_t s = j; s < comps.size(); s++)
        GRAFT_REQUIRE(comps[s] == "RFlat" || comps[s] == "IDMap" || comps[s] == "IDMap2",
                      "faiss_graft_index_factory: \"%s\" after GraftFlat in \"%s\" is "
                      "neither a graft option (cpu, gpu=N) nor a FAISS suffix graft "
                      "composes with; %s",
                      comps[s].c_str(), desc.c_str(), kAccepted);

    if (graft_at == 0 && j == comps.size()) return new graft::GraftIndexFlat(d, metric, &params);

    // Let FAISS build the wrappers around a plain "Flat" standing where GraftFlat stands, then
    // swap that IndexFlat for graft's. Every wrapper index_factory builds owns its sub-index.
    std::string stand_in;
    for (size_t i = 0; i < comps.size(); i++) {
        if (i > graft_at && i < j) continue;  // graft's options
        if (!stand_in.empty()) stand_in += ",";
        stand_in += i == graft_at ? "Flat" : comps[i];
    }
    std::unique_ptr<faiss::Index> root;
    try {
        root.reset(faiss::index_factory(d, stand_in.c_str(), metric));
    } catch (const std::exception& e) {
        FAISS_THROW_FMT(
                "faiss_graft_index_factory: FAISS could not build \"%s\" (GraftFlat "
                "standing in as Flat) for \"%s\": %s",
                stand_in.c_str(), desc.c_str(), e.what());
    }
    faiss::Index** slot = nullptr;
    faiss::Index* cur = root.get();
    for (;;) {
        if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(cur)) {
            slot = &pt->index;
        } else if (auto* m = dynamic_cast<faiss::IndexIDMap*>(cur)) {
            slot = &m->index;
        } else if (auto* r = dynamic_cast<faiss::IndexRefine*>(cur)) {
            slot = &r->base_index;
        } else {
            break;
        }
        cur = *slot;
    }
    GRAFT_REQUIRE(slot && dynamic_cast<faiss::IndexFlat*>(cur),
                  "faiss_graft_index_factory: could not place GraftFlat in \"%s\"; %s",
                  desc.c_str(), kAccepted);
    auto* g = new graft::GraftIndexFlat(cur->d, cur->metric_type, &params);
    delete cur;
    *slot = g;
    return root.release();
}

// Every GraftIndexFlat inside `index`, looking through the wrappers FAISS's ParameterSpace looks
// through (IndexIDMap/IDMap2, IndexPreTransform, IndexShards/IndexReplicas, IndexRefine).
void find_graft(faiss::Index* index, std::vector<graft::GraftIndexFlat*>* out) {
    if (!index) return;
    if (auto* g = dynamic_cast<graft::GraftIndexFlat*>(index)) {
        out->push_back(g);
    } else if (auto* m = dynamic_cast<faiss::IndexIDMap*>(index)) {
        find_graft(m->index, out);
    } else if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(index)) {
        find_graft(pt->index, out);
    } else if (auto* t = dynamic_cast<faiss::ThreadedIndex<faiss::Index>*>(index)) {
        for (int i = 0; i < t->count(); i++) find_graft(t->at(i), out);
    } else if (auto* r = dynamic_cast<faiss::IndexRefine*>(index)) {
        find_graft(r->base_index, out);
        find_graft(r->refine_index, out);
    }
}

std::vector<graft::GraftIndexFlat*> graft_indexes(FaissIndex* index, const char* fn) {
    GRAFT_REQUIRE(index, "%s: index is NULL", fn);
    std::vector<graft::GraftIndexFlat*> found;
    find_graft(reinterpret_cast<faiss::Index*>(index), &found);
    GRAFT_REQUIRE(!found.empty(),
                  "%s: no graft index inside this index (graft's parameters are "
                  "allow_tf32, device_budget_mb; FAISS's own go through "
                  "faiss_ParameterSpace_set_index_parameter)",
                  fn);
    return found;
}

}  // namespace

extern "C" {

int faiss_graft_index_factory(FaissIndex** p_index, int d, const char* description,
                              FaissMetricType metric) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_graft_index_factory: p_index is NULL");
        FAISS_THROW_IF_NOT_MSG(description, "faiss_graft_index_factory: description is NULL");
        std::string desc = description;
        if (desc.find("Graft") == std::string::npos)  // not graft's: FAISS's factory, unchanged
            return faiss_index_factory(p_index, d, description, metric);
        GRAFT_REQUIRE(desc.find('(') == std::string::npos,
                      "faiss_graft_index_factory: \"%s\": a graft index cannot be nested in "
                      "parentheses (IVF quantizers, Refine(...)); %s",
                      description, kAccepted);
        std::vector<std::string> comps = split_commas(desc);
        size_t graft_at = comps.size();
        for (size_t i = 0; i < comps.size() && graft_at == comps.size(); i++)
            if (comps[i].compare(0, 5, "Graft") == 0) graft_at = i;
        GRAFT_REQUIRE(graft_at < comps.size(),
                      "faiss_graft_index_factory: unknown graft index in \"%s\"; %s", description,
                      kAccepted);
        *p_index = reinterpret_cast<FaissIndex*>(
                graft_factory(d, desc, static_cast<faiss::MetricType>(metric), graft_at));
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_set_param(FaissIndex* index, const char* name, double value) {
    try {
        for (auto* g : graft_indexes(index, "faiss_graft_set_param")) g->set_param(name, value);
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_get_param(FaissIndex* index, const char* name, double* value) {
    try {
        FAISS_THROW_IF_NOT_MSG(value, "faiss_graft_get_param: value is NULL");
        *value = graft_indexes(index, "faiss_graft_get_param")[0]->get_param(name);
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_search_with_selector(const FaissIndex* index, idx_t n, const float* x, idx_t k,
                                     const FaissIDSelector* sel, float* distances, idx_t* labels) {
    try {
        FAISS_THROW_IF_NOT_MSG(index, "faiss_graft_search_with_selector: index is NULL");
        faiss::SearchParameters params;
        params.sel = reinterpret_cast<faiss::IDSelector*>(const_cast<FaissIDSelector*>(sel));
        reinterpret_cast<const faiss::Index*>(index)->search(n, x, k, distances, labels,
                                                             sel ? &params : nullptr);
        return 0;
    }
    CATCH_AND_HANDLE
}

}  // extern "C"
