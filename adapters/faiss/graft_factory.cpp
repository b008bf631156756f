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

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"
#include "GraftIndexShards.h"
#include "graft_faiss_c.h"

namespace {

const char* const kAccepted =
        "graft accepts \"GraftFlat\" (exact), \"GraftGraph\" / \"GraftGraphR\" (graph index of "
        "max degree R, e.g. GraftGraph32) and \"GraftGraph,PQ<M>\" / \"GraftGraphR,PQ<M>\" (graph "
        "+ PQ index for data larger than the GPU, M code bytes per vector dividing d, e.g. "
        "GraftGraph32,PQ16; trained before adding), \"GraftGraph,FP16\" / \"GraftGraph,SQ8\" "
        "(the graph index walking FP16 or 8-bit scalar-quantized vectors, re-ranked exactly; SQ8 "
        "trained before adding; \"GraftGraph,SQ8,keep_fp32=0\" keeps the codes only, no FP32 "
        "copy and no re-rank), on GPU 0 when one is visible, else the CPU "
        "reference; \"GraftFlat,cpu\" and \"GraftFlat,gpu=N\" (the same for the others) choose "
        "the device, \"GraftGraph,L=NN\" the search beam, \"GraftGraph,T1=6,T2=15\" the graph "
        "build (S=N, T1=N, T2=N, rho=X, delta=X, alpha=X, fill=1; \"GraftGraph,SQ8,build_from=codes\" "
        "builds from the FP16 / SQ8 codes), \"GraftGraph,PQ16,ooc\" / \",inmem\" "
        "force the PQ index's memory mode (out-of-core / in-memory) and \",budget=MiB\" its GPU "
        "budget; \",gpus=all\", \",gpus=0-3\" or \",gpus=0,1\" spread the index over those GPUs "
        "(one shard per listed GPU; a GPU may repeat), \",shards=N\" makes N shards on the "
        "chosen device (\"GraftGraph,shards=2,cpu\"), and \",replicas\" after either makes "
        "full replicas instead of shards; optionally after FAISS vector-transform prefixes "
        "(\"PCA64,GraftGraph\", \"OPQ16_64,GraftFlat\", \"OPQ32_128,GraftGraph,PQ32\" or its form "
        "\"GraftGraph,OPQ32,PQ32\", \"L2norm,GraftFlat\", ...) or \"IDMap,\" / \"IDMap2,\", and "
        "optionally followed by \",RFlat\", \",IDMap\" or \",IDMap2\"";

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

// "123" -> 123; false unless `s` is 1 to max_digits decimal digits.
bool parse_digits(const std::string& s, size_t max_digits, long long* out) {
    if (s.empty() || s.size() > max_digits || s.find_first_not_of("0123456789") != std::string::npos)
        return false;
    *out = std::stoll(s);
    return true;
}

// "123" -> 123; false unless `s` is 1 to 5 decimal digits.
bool parse_small_int(const std::string& s, int* out) {
    long long v;
    if (!parse_digits(s, 5, &v)) return false;
    *out = (int)v;
    return true;
}

bool starts_with(const std::string& s, const char* prefix) {
    return s.compare(0, std::strlen(prefix), prefix) == 0;
}

// A two-valued option NAME=ON|OFF (OFF the default) given at most once (`given`: the spec's field,
// < 0 while unset): whether ON was chosen; anything else, or a repeat, is refused.
bool two_way(const std::string& c, const std::string& desc, const char* name, const char* on,
             const char* what_on, const char* off, int given) {
    const std::string a = std::string(name) + "=" + on, b = std::string(name) + "=" + off;
    GRAFT_REQUIRE(given < 0 && (c == a || c == b),
                  "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use %s (%s) or "
                  "%s (the default), once; %s",
                  c.c_str(), desc.c_str(), a.c_str(), what_on, b.c_str(), kAccepted);
    return c == a;
}

// "0.002", "1", ".5" -> the value; false unless `s` is a plain non-negative decimal.
bool parse_real(const std::string& s, double* out) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789.") != std::string::npos ||
        s.find('.') != s.rfind('.') || s == ".")
        return false;
    *out = std::strtod(s.c_str(), nullptr);
    return true;
}

// "S=32", "T1=6", "T2=15", "rho=0.6", "delta=0.002", "alpha=1.2": a GRNND build option.
bool is_build_option(const std::string& c) {
    for (const char* name : {"S=", "T1=", "T2=", "rho=", "delta=", "alpha="})
        if (starts_with(c, name)) return true;
    return false;
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
    GRAFT_REQUIRE(parse_small_int(c.substr(4), device),
                  "faiss_graft_index_factory: bad device option '%s' in \"%s\": "
                  "use gpu=N with N a device number; %s",
                  c.c_str(), desc.c_str(), kAccepted);
    return true;
}

constexpr int kMaxShards = 256;  // one per GPU, or a few per GPU: far more would be a typo

// "all", "0-3", "0,1,1": the devices, one shard each (a device may repeat: two shards on one GPU).
void parse_gpu_list(const std::string& list, const std::string& desc, std::vector<int>* out) {
    if (list == "all") {
        int n = graft_gpu_count();
        GRAFT_REQUIRE(n > 0,
                      "faiss_graft_index_factory: \"%s\": gpus=all, but no CUDA device is visible "
                      "(CPU shards are \"shards=N,cpu\"); %s",
                      desc.c_str(), kAccepted);
        for (int i = 0; i < n; i++) out->push_back(i);
        return;
    }
    for (const std::string& item : split_commas(list)) {
        size_t dash = item.find('-');
        int a = -1, b = -1;
        bool ok = dash == std::string::npos
                          ? parse_small_int(item, &a) && (b = a, true)
                          : parse_small_int(item.substr(0, dash), &a) &&
                                    parse_small_int(item.substr(dash + 1), &b) && a <= b;
        GRAFT_REQUIRE(ok && b - a < kMaxShards && (int)out->size() + (b - a) < kMaxShards,
                      "faiss_graft_index_factory: bad GPU list \"gpus=%s\" in \"%s\": use "
                      "gpus=all, a range gpus=0-3 or a list gpus=0,1 (a device may repeat: gpus=0,0 "
                      "is two shards on GPU 0), at most %d entries; %s",
                      list.c_str(), desc.c_str(), kMaxShards, kAccepted);
        for (int g = a; g <= b; g++) out->push_back(g);
    }
}

// One graft component of a description ("GraftFlat", "GraftGraph64", "GraftGraph32,PQ16") with
// its options.
struct GraftSpec {
    bool graph = false;
    int device = -2;  // -2: GPU 0 when one is visible, else the CPU
    int R = 0;        // graph: max degree, 0 = default
    int L = 0;        // graph: search beam, 0 = default
    int probes = 0;   // graph without PQ: vertices expanded a step, 0 = default
    int search_mode = -1;  // graph without PQ: GRAFT_SEARCH_*, -1 = default (auto)
    int walks = 0;    // graph without PQ: the multi mode's walks a query, 0 = default
    std::vector<std::pair<std::string, double>> build;  // graph: GRNND's S=, T1=, T2=, rho=, delta=, alpha=
    int init_exact = -1;  // graph: init=exact (1) / init=random (0), -1 = default
    int build_from = -1;  // graph: build_from=codes (1) / build_from=fp32 (0), -1 = default
    int fill = -1;        // graph: fill=1 (rows filled to R) / fill=0, -1 = default
    int M = 0;        // graph + PQ: code bytes per vector; 0 = a graph index without PQ
    int storage = GRAFT_STORAGE_FP32;  // graph: what the walk reads (",FP16", ",SQ8")
    int keep_fp32 = -1;  // graph, FP16 / SQ8: keep_fp32=0|1 (0: the codes only), -1 = default (1)
    int mode = -1;    // graph + PQ: graft_bang_mode, -1 = default (automatic)
    long long budget_mib = -1;  // graph + PQ: GPU budget in MiB, -1 = default
    std::vector<int> gpus;      // gpus=LIST: one shard per entry, on that device
    int shards = 0;             // shards=N: N shards on `device`
    bool replicas = false;      // replicas instead of shards
    std::string desc;           // the whole description, for messages

    // The index: one graft index, or shards / replicas of them, one per device.
    faiss::Index* make(int d, faiss::MetricType metric) const {
        if (gpus.empty() && shards == 0) return make_one(d, metric, device);
        std::vector<int> devs = gpus;
        if (devs.empty()) devs.assign(shards, device);
        std::unique_ptr<faiss::ThreadedIndex<faiss::Index>> t;
        if (replicas)
            t.reset(new graft::GraftIndexReplicas(d, metric));
        else
            t.reset(new graft::GraftIndexShards(d, metric));
        graft::faiss_compat::owns_indices(*t) = true;
        for (int dev : devs) {
            // Shards sharing a GPU share its memory: a graph + PQ shard's default resident budget
            // (half the device) is split between them, so that AUTO mode picks out-of-core where
            // all of them in-memory would not fit.
            const long long same = std::count(devs.begin(), devs.end(), dev);
            GraftSpec one_spec = *this;
            if (M > 0 && budget_mib < 0 && same > 1 && dev >= 0)
                one_spec.budget_mib = (long long)(graft_gpu_memory(dev) >> 20) / (2 * same);
            std::unique_ptr<faiss::Index> one(one_spec.make_one(d, metric, dev));
            t->addIndex(one.get());
            one.release();
        }
        return t.release();
    }

    // The build options as given; the index's set_build_params checks their ranges.
    void apply_build(graft_rnnd_params* b) const {
        for (const auto& o : build) {
            if (int* f = graft::build_field(*b, o.first))
                *f = (int)o.second;
            else
                *graft::build_real_field(*b, o.first) = (float)o.second;
        }
    }

    faiss::Index* make_one(int d, faiss::MetricType metric, int device) const {
        if (M > 0) {
            // d is the dimension graft's index sees (after any transform prefix).
            GRAFT_REQUIRE(d % M == 0,
                          "faiss_graft_index_factory: \"%s\": PQ%d: M must divide d, the "
                          "dimension graft's index sees (d = %d; each of the M sub-quantizers "
                          "codes d / M dimensions), e.g. PQ%d",
                          desc.c_str(), M, d, graft_pq_default_M(d));
            graft_gindex_params p;
            graft_gindex_params_defaults(&p);
            p.storage = GRAFT_STORAGE_PQ;
            if (device != -2) p.device = device;
            if (R > 0) p.build.base.R = R;
            apply_build(&p.build.base);
            if (init_exact >= 0) p.build.init_exact = init_exact;
            if (build_from >= 0) p.build.build_from = build_from;  // codes: the core refuses PQ
            if (fill >= 0) p.build.fill = fill;
            if (L > 0) p.search.L = L;
            if (mode >= 0) p.mode = (graft_bang_mode)mode;
            if (budget_mib >= 0) p.gpu_budget = (size_t)budget_mib << 20;
            return new graft::GraftIndexGraphPQ(d, M, metric, &p);
        }
        if (!graph) {
            graft_flat_params p;
            graft_flat_params_defaults(&p);
            if (device != -2) p.device = device;
            return new graft::GraftIndexFlat(d, metric, &p);
        }
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        if (device != -2) p.device = device;
        if (R > 0) p.build.base.R = R;
        apply_build(&p.build.base);
        if (init_exact >= 0) p.build.init_exact = init_exact;
        if (build_from >= 0) p.build.build_from = build_from;
        if (fill >= 0) p.build.fill = fill;
        if (L > 0) p.search.L = L;
        if (probes > 0) p.search.probes = probes;
        if (walks > 0) p.search.walks = walks, p.search.mode = GRAFT_SEARCH_MULTI;  // walks=N: multi
        if (search_mode >= 0) p.search.mode = search_mode;
        p.storage = storage;
        if (keep_fp32 >= 0) p.keep_fp32 = keep_fp32;
        return new graft::GraftIndexGraph(d, metric, &p);
    }
};

// "GraftFlat", "GraftGraph", "GraftGraphR" -> spec.
void parse_graft_name(const std::string& c, const std::string& desc, GraftSpec* spec) {
    const std::string g = "GraftGraph";
    if (c == "GraftFlat") return;
    spec->graph = c.compare(0, g.size(), g) == 0;
    GRAFT_REQUIRE(spec->graph && (c.size() == g.size() || (parse_small_int(c.substr(g.size()), &spec->R) &&
                                                           spec->R >= 1)),
                  "faiss_graft_index_factory: unknown graft index \"%s\" in \"%s\"; %s", c.c_str(),
                  desc.c_str(), kAccepted);
}

// "PQ16" or "PQ16x8" -> M = 16 (`c` starts with "PQ").
void parse_pq(const std::string& c, const std::string& desc, int* M) {
    std::string m = c.substr(2);
    if (m.size() > 2 && m.compare(m.size() - 2, 2, "x8") == 0) m.resize(m.size() - 2);
    GRAFT_REQUIRE(parse_small_int(m, M) && *M >= 1,
                  "faiss_graft_index_factory: bad PQ component '%s' in \"%s\": use PQ<M> (or "
                  "PQ<M>x8: graft's codes are 8 bits per sub-quantizer), M >= 1 dividing d; %s",
                  c.c_str(), desc.c_str(), kAccepted);
}

faiss::Index* graft_factory(int d, const std::string& desc, faiss::MetricType metric,
                            size_t graft_at) {
    std::vector<std::string> comps = split_commas(desc);
    GraftSpec spec;
    spec.desc = desc;
    parse_graft_name(comps[graft_at], desc, &spec);
    size_t j = graft_at + 1;
    if (j < comps.size() && starts_with(comps[j], "PQ")) {
        GRAFT_REQUIRE(spec.graph,
                      "faiss_graft_index_factory: \"%s\": %s takes no PQ (the graph + PQ index is "
                      "\"GraftGraph,%s\"); %s",
                      desc.c_str(), comps[graft_at].c_str(), comps[j].c_str(), kAccepted);
        parse_pq(comps[j], desc, &spec.M);
        j++;
    } else if (j < comps.size() && (comps[j] == "FP16" || comps[j] == "SQfp16" || comps[j] == "SQ8")) {
        GRAFT_REQUIRE(spec.graph,
                      "faiss_graft_index_factory: \"%s\": %s takes no storage (FP16 and SQ8 are "
                      "storages of the graph index, \"GraftGraph,%s\"); %s",
                      desc.c_str(), comps[graft_at].c_str(), comps[j].c_str(), kAccepted);
        spec.storage = comps[j] == "SQ8" ? GRAFT_STORAGE_SQ8 : GRAFT_STORAGE_FP16;
        j++;
    }
    const bool pq = spec.M > 0;
    bool have_device = false, have_L = false, have_budget = false;
    for (; j < comps.size(); j++) {
        const std::string& c = comps[j];
        int dev;
        if (parse_device_option(c, desc, &dev)) {
            GRAFT_REQUIRE(!have_device, "faiss_graft_index_factory: \"%s\" names the device twice; %s",
                          desc.c_str(), kAccepted);
            spec.device = dev;
            have_device = true;
        } else if (spec.graph && starts_with(c, "L=")) {
            GRAFT_REQUIRE(!have_L && parse_small_int(c.substr(2), &spec.L) && spec.L >= 1,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use L=NN "
                          "once, NN the search beam width (1..1024); %s",
                          c.c_str(), desc.c_str(), kAccepted);
            have_L = true;
        } else if (spec.graph && !pq && starts_with(c, "probes=")) {
            GRAFT_REQUIRE(spec.probes == 0 && parse_small_int(c.substr(7), &spec.probes) &&
                                  spec.probes >= 1 && spec.probes <= 8,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use "
                          "probes=N once, N the vertices the walk expands a step (1..8); %s",
                          c.c_str(), desc.c_str(), kAccepted);
        } else if (spec.graph && !pq && starts_with(c, "search_mode=")) {
            const std::string v = c.substr(12);
            const int m = v == "auto" ? GRAFT_SEARCH_AUTO : v == "single" ? GRAFT_SEARCH_SINGLE
                          : v == "multi" ? GRAFT_SEARCH_MULTI : -1;
            GRAFT_REQUIRE(spec.search_mode < 0 && m >= 0,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use "
                          "search_mode=auto|single|multi once (one walk a query or several); %s",
                          c.c_str(), desc.c_str(), kAccepted);
            spec.search_mode = m;
        } else if (spec.graph && !pq && starts_with(c, "walks=")) {
            GRAFT_REQUIRE(spec.walks == 0 && parse_small_int(c.substr(6), &spec.walks) &&
                                  spec.walks >= 2 && spec.walks <= 64,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use "
                          "walks=N once, N the multi mode's walks a query (2..64); %s",
                          c.c_str(), desc.c_str(), kAccepted);
        } else if (spec.graph && is_build_option(c)) {
            const std::string name = c.substr(0, c.find('='));
            double v = 0;
            const bool real = name == "rho" || name == "delta" || name == "alpha";
            int iv = 0;
            const bool ok = real ? parse_real(c.substr(name.size() + 1), &v)
                                 : parse_small_int(c.substr(name.size() + 1), &iv);
            if (!real) v = iv;
            bool repeated = false;
            for (const auto& o : spec.build) repeated |= o.first == name;
            GRAFT_REQUIRE(ok && !repeated,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": the "
                          "graph build's S=N, T1=N, T2=N (non-negative integers), rho=X, delta=X, "
                          "alpha=X (reals), each once (docs/factory-strings.md); %s",
                          c.c_str(), desc.c_str(), kAccepted);
            spec.build.emplace_back(name, v);
        } else if (spec.graph && starts_with(c, "keep_fp32=")) {
            GRAFT_REQUIRE(!pq && spec.storage != GRAFT_STORAGE_FP32,
                          "faiss_graft_index_factory: \"%s\": keep_fp32= belongs to the FP16 and SQ8 "
                          "storages (\"GraftGraph,SQ8,keep_fp32=0\": the codes are the only copy of "
                          "the vectors)%s; %s",
                          desc.c_str(), pq ? ", not to PQ" : ", not to FP32 (its vectors are its codes)",
                          kAccepted);
            spec.keep_fp32 = two_way(c, desc, "keep_fp32", "0", "the codes only: no FP32 copy on the "
                                     "host or the GPU, no exact re-rank", "1", spec.keep_fp32) ? 0 : 1;
        } else if (spec.graph && starts_with(c, "init=")) {
            spec.init_exact = two_way(c, desc, "init", "exact", "each vertex starts from its exact R "
                                      "nearest: the oracle graph, n^2 d work", "random", spec.init_exact);
        } else if (spec.graph && starts_with(c, "fill=")) {
            spec.fill = two_way(c, desc, "fill", "1", "the graph's rows filled to R with two-hop "
                                "neighbours: fewer steps a query, more distances a step", "0", spec.fill);
        } else if (spec.graph && starts_with(c, "build_from=")) {
            spec.build_from = two_way(c, desc, "build_from", "codes", "an FP16 or SQ8 index builds its "
                                      "graph from its codes, \"GraftGraph,SQ8,build_from=codes\"",
                                      "fp32", spec.build_from);
        } else if (c == "ooc" || c == "inmem" || starts_with(c, "budget=")) {
            GRAFT_REQUIRE(pq,
                          "faiss_graft_index_factory: \"%s\": option '%s' belongs to the graph + "
                          "PQ index (\"GraftGraph,PQ<M>,%s\"), not to %s; %s",
                          desc.c_str(), c.c_str(), c.c_str(), comps[graft_at].c_str(), kAccepted);
            if (c[0] == 'b') {
                GRAFT_REQUIRE(!have_budget && parse_digits(c.substr(7), 8, &spec.budget_mib),
                              "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": "
                              "use budget=MiB once, the GPU memory the index may keep resident in "
                              "MiB (0 = half the device); %s",
                              c.c_str(), desc.c_str(), kAccepted);
                have_budget = true;
            } else {
                GRAFT_REQUIRE(spec.mode < 0,
                              "faiss_graft_index_factory: \"%s\" names the memory mode twice "
                              "(ooc or inmem, once); %s",
                              desc.c_str(), kAccepted);
                spec.mode = c == "ooc" ? GRAFT_BANG_OUT_OF_CORE : GRAFT_BANG_IN_MEMORY;
            }
        } else if (starts_with(c, "gpus=")) {
            GRAFT_REQUIRE(spec.gpus.empty(),
                          "faiss_graft_index_factory: \"%s\" names gpus= twice; %s",
                          desc.c_str(), kAccepted);
            // "gpus=0,1": the list's further entries are components of their own.
            std::string list = c.substr(5);
            while (j + 1 < comps.size() && !comps[j + 1].empty() &&
                   comps[j + 1].find_first_not_of("0123456789-") == std::string::npos)
                list += "," + comps[++j];
            parse_gpu_list(list, desc, &spec.gpus);
        } else if (starts_with(c, "shards=")) {
            GRAFT_REQUIRE(spec.shards == 0 && parse_small_int(c.substr(7), &spec.shards) &&
                                  spec.shards >= 1 && spec.shards <= kMaxShards,
                          "faiss_graft_index_factory: bad or repeated option '%s' in \"%s\": use "
                          "shards=N once, 1 <= N <= %d shards on the chosen device; %s",
                          c.c_str(), desc.c_str(), kMaxShards, kAccepted);
        } else if (c == "replicas") {
            GRAFT_REQUIRE(!spec.replicas, "faiss_graft_index_factory: \"%s\" names replicas twice; %s",
                          desc.c_str(), kAccepted);
            spec.replicas = true;
        } else {
            break;
        }
    }
    GRAFT_REQUIRE(spec.gpus.empty() || (spec.shards == 0 && !have_device),
                  "faiss_graft_index_factory: \"%s\": gpus=LIST places one shard on each listed "
                  "GPU; it takes neither shards=N nor cpu / gpu=N (shards=N,gpu=N makes N shards on "
                  "GPU N); %s",
                  desc.c_str(), kAccepted);
    GRAFT_REQUIRE(!spec.replicas || !spec.gpus.empty() || spec.shards > 0,
                  "faiss_graft_index_factory: \"%s\": replicas of what? \"replicas\" goes with "
                  "gpus=LIST (one replica per GPU) or shards=N (N replicas); %s",
                  desc.c_str(), kAccepted);
    for (size_t s = j; s < comps.size(); s++) {
        GRAFT_REQUIRE((!starts_with(comps[s], "PQ") && comps[s] != "FP16" && comps[s] != "SQ8" &&
                       comps[s] != "SQfp16") || !spec.graph,
                      "faiss_graft_index_factory: \"%s\": %s must directly follow %s, once "
                      "(\"GraftGraph32,PQ16,cpu\", \"GraftGraph,SQ8,L=64\"); %s",
                      desc.c_str(), comps[s].c_str(), comps[graft_at].c_str(), kAccepted);
        GRAFT_REQUIRE(comps[s] == "RFlat" || comps[s] == "IDMap" || comps[s] == "IDMap2",
                      "faiss_graft_index_factory: \"%s\" after %s in \"%s\" is neither a graft "
                      "option (cpu, gpu=N%s) nor a FAISS suffix graft composes with; %s",
                      comps[s].c_str(), comps[graft_at].c_str(), desc.c_str(),
                      pq ? ", L=NN, S=N, T1=N, T2=N, rho=X, delta=X, alpha=X, init=exact, build_from=fp32, fill=1, ooc, inmem, budget=MiB, gpus=LIST, shards=N, replicas"
                         : spec.graph ? ", L=NN, probes=N, search_mode=auto|single|multi, walks=N, S=N, T1=N, T2=N, rho=X, delta=X, alpha=X, init=exact, build_from=codes, fill=1, keep_fp32=0|1 (FP16, SQ8), gpus=LIST, shards=N, replicas"
                                      : ", gpus=LIST, shards=N, replicas",
                      kAccepted);
    }

    if (graft_at == 0 && j == comps.size()) return spec.make(d, metric);

    // Let FAISS build the wrappers around a plain "Flat" standing where graft's index stands, then
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
                "faiss_graft_index_factory: FAISS could not build \"%s\" (%s "
                "standing in as Flat) for \"%s\": %s",
                stand_in.c_str(), comps[graft_at].c_str(), desc.c_str(), e.what());
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
                  "faiss_graft_index_factory: could not place %s in \"%s\"; %s",
                  comps[graft_at].c_str(), desc.c_str(), kAccepted);
    faiss::Index* g = spec.make(cur->d, cur->metric_type);
    delete cur;
    *slot = g;
    // The wrappers took is_trained from the Flat standing in; an untrained graft index (graph +
    // PQ) leaves them untrained, so that faiss_Index_is_trained and their add checks tell the
    // truth. Their train() passes down and sets it again.
    for (faiss::Index* w = root.get(); w && w != g && !g->is_trained;) {
        w->is_trained = false;
        if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(w))
            w = pt->index;
        else if (auto* m = dynamic_cast<faiss::IndexIDMap*>(w))
            w = m->index;
        else if (auto* r = dynamic_cast<faiss::IndexRefine*>(w))
            w = r->base_index;
        else
            w = nullptr;
    }
    return root.release();
}

// Every graft index (GraftIndexFlat, GraftIndexGraph, GraftIndexGraphPQ) inside `index`, looking
// through the wrappers FAISS's ParameterSpace looks through (IndexIDMap/IDMap2, IndexPreTransform,
// IndexShards/IndexReplicas, IndexRefine).
void find_graft(faiss::Index* index, std::vector<graft::NamedParameters*>* out) {
    if (!index) return;
    if (auto* g = dynamic_cast<graft::NamedParameters*>(index)) {
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

std::vector<graft::NamedParameters*> graft_indexes(FaissIndex* index, const char* fn) {
    GRAFT_REQUIRE(index, "%s: index is NULL", fn);
    std::vector<graft::NamedParameters*> found;
    find_graft(reinterpret_cast<faiss::Index*>(index), &found);
    GRAFT_REQUIRE(!found.empty(),
                  "%s: no graft index inside this index (graft's parameters are those of "
                  "GraftIndexFlat, GraftIndexGraph and GraftIndexGraphPQ; FAISS's own go through "
                  "faiss_ParameterSpace_set_index_parameter)",
                  fn);
    return found;
}

// The shards / replicas inside `index` (through IDMap/IDMap2 and IndexPreTransform), or nullptr.
faiss::ThreadedIndex<faiss::Index>* find_threaded(faiss::Index* index) {
    for (faiss::Index* cur = index; cur;) {
        if (auto* t = dynamic_cast<faiss::ThreadedIndex<faiss::Index>*>(cur)) return t;
        if (auto* m = dynamic_cast<faiss::IndexIDMap*>(cur))
            cur = m->index;
        else if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(cur))
            cur = pt->index;
        else
            return nullptr;
    }
    return nullptr;
}

// The registered prefixes (graft_faiss_common.h), read by every factory call: a function-local
// static, so that a face's registration at its library's load finds it constructed.
std::vector<std::pair<std::string, graft::PrefixMaker>>& prefix_makers() {
    static std::vector<std::pair<std::string, graft::PrefixMaker>> makers;
    return makers;
}

}  // namespace

void graft::register_factory_prefix(const char* prefix, PrefixMaker make) {
    prefix_makers().emplace_back(std::string(prefix) + ",", make);
}

extern "C" {

int faiss_graft_shard_count(const FaissIndex* index, int* count) {
    try {
        FAISS_THROW_IF_NOT_MSG(index && count, "faiss_graft_shard_count: NULL argument");
        auto* t = find_threaded(const_cast<faiss::Index*>(reinterpret_cast<const faiss::Index*>(index)));
        *count = t ? t->count() : 1;
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_get_shard_param(const FaissIndex* index, int shard, const char* name, double* value) {
    try {
        const char* fn = "faiss_graft_get_shard_param";
        FAISS_THROW_IF_NOT_MSG(index && name && value, "faiss_graft_get_shard_param: NULL argument");
        auto* t = find_threaded(const_cast<faiss::Index*>(reinterpret_cast<const faiss::Index*>(index)));
        GRAFT_REQUIRE(t, "%s: not a sharded or replicated index (faiss_graft_get_param reads a single one)",
                      fn);
        GRAFT_REQUIRE(shard >= 0 && shard < t->count(), "%s: shard %d of %d", fn, shard, t->count());
        *value = graft_indexes(reinterpret_cast<FaissIndex*>(t->at(shard)), fn)[0]->get_param(name);
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_index_factory(FaissIndex** p_index, int d, const char* description,
                              FaissMetricType metric) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_graft_index_factory: p_index is NULL");
        FAISS_THROW_IF_NOT_MSG(description, "faiss_graft_index_factory: description is NULL");
        std::string desc = description;
        for (const auto& pm : prefix_makers())
            if (starts_with(desc, pm.first.c_str())) {
                *p_index = reinterpret_cast<FaissIndex*>(
                        pm.second(d, description, static_cast<faiss::MetricType>(metric)));
                return 0;
            }
        GRAFT_REQUIRE(!starts_with(desc, "MPI,"),
                      "faiss_graft_index_factory: \"%s\": an index across MPI ranks needs graft's "
                      "MPI adapter (libgraft_mpi, CMake target graft::mpi; built where CMake finds "
                      "MPI): link it (docs/mpi.md)",
                      description);
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
        // "GraftGraph,OPQ32,PQ32" is "OPQ32,GraftGraph,PQ32": FAISS's OPQMatrix as the
        // pre-transform (an orthonormal rotation keeps L2 and inner products, so the exact
        // re-rank in the rotated space is exact in the original one).
        if (graft_at + 2 < comps.size() && starts_with(comps[graft_at + 1], "OPQ") &&
            starts_with(comps[graft_at + 2], "PQ")) {
            std::swap(comps[graft_at], comps[graft_at + 1]);
            graft_at++;
            desc.clear();
            for (size_t i = 0; i < comps.size(); i++) desc += (i ? "," : "") + comps[i];
        }
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
        std::vector<graft::NamedParameters*> found = graft_indexes(index, "faiss_graft_get_param");
        *value = found[0]->get_param(name);
        // Sharded: the device and host bytes of all shards, and the longest build (they ran at
        // once); the vectors inserted, removed and not consolidated, summed over the shards (a
        // replicated index holds each vector in every replica: shard 0's).
        if (name && find_threaded(reinterpret_cast<faiss::Index*>(index))) {
            const std::string n = name;
            const bool sharded = dynamic_cast<faiss::IndexShards*>(find_threaded(reinterpret_cast<faiss::Index*>(index)));
            const bool counted = sharded && (n == "inserted" || n == "removed" || n == "tombstones");
            if (n == "gpu_bytes" || n == "host_bytes" || n == "build_seconds" || counted)
                for (size_t i = 1; i < found.size(); i++) {
                    const double v = found[i]->get_param(name);
                    *value = n == "build_seconds" ? std::max(*value, v) : *value + v;
                }
        }
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_consolidate(FaissIndex* index) {
    try {
        const char* fn = "faiss_graft_consolidate";
        int graphs = 0;
        for (auto* g : graft_indexes(index, fn))
            if (auto* gi = dynamic_cast<graft::GraftIndexGraph*>(g)) {
                gi->consolidate();
                graphs++;
            }
        GRAFT_REQUIRE(graphs > 0, "%s: no graft graph index inside this index (a flat index removes "
                      "at once: nothing to consolidate)", fn);
        // Wrappers keep their own ntotal, which consolidation does not change (ids were
        // renumbered by the removals).
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
