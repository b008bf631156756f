// graft-bench: graft or FAISS (or GGNN), on your data, in one command.
//
//   graft-bench --base B --query Q [--gt G] [--k 10] [--metric l2|ip]
//               --index "GraftGraph" --index "HNSW32" --index "IVF4096,Flat@gpu" ...
//               [--sweep "L=16,32,64,128"] [--batch 10000] [--out DIR] [--plot]
//               [--selectivity 0.5,0.1,0.01,0.001,0.0001 [--filter-modes auto,walk,exact]]
//
// Every index is built (train + add, timed), then searched over its natural sweep (L for graft's
// graph indexes, efSearch for HNSW, nprobe for IVF, tau for GGNN; --sweep KNOB=V,... replaces the
// values of the indexes that sweep KNOB) at each --batch size, and at batch 1 for the p50/p99
// latency. Recall@k is against exact ground truth: --gt, the HDF5 file's neighbors, or computed
// (graft's flat index on the GPUs, FAISS's IndexFlat on the CPU) and cached in DIR. Records go to
// DIR/graft-bench.jsonl (DESIGN.md, "Benchmark records"), the chart (--plot) to
// DIR/recall-qps-<dataset>.svg and .png.
//
// The summary (one a --batch size) reads each index off its recall-QPS Pareto frontier at that
// batch (bench/frontier.h): the QPS at each recall bar (0.90, 0.95, 0.99) interpolated between
// the two frontier points around it, log QPS linear in recall, marked "~" in the table and
// "interpolated": true in its summary record (which names the two points). So that a coarse sweep does not decide the comparison, each sweep is
// refined after its coarse values (--refine GAP, default 0.02; 0: off): the knob is bisected
// between the points around each bar until their recalls are at most GAP apart, halved while the
// lowest point lies more than GAP above a bar, and doubled while no point reaches one. Refined
// points are searched at the --batch sizes only (no batch-1 latency, no --selectivity filters).
//
// --selectivity S1,S2,...: after each configuration's unfiltered search, the same search with a
// random faiss::IDSelectorBatch of round(S n) ids (at least one) for each S, scored against the
// exact filtered ground truth (the exact k-NN among the passing vectors); records carry
// params.selectivity (1 for the unfiltered baseline). FAISS CPU indexes get the selector through
// SearchParameters (SearchParametersIVF for IVF); FAISS GPU 1.7.3, HNSW and NSG take none and are
// searched unfiltered only. graft's graph indexes are searched once per --filter-modes entry:
// auto (the cost model's choice), walk (filter_exact_below = 0), exact (= 1); their records say
// which path the search took (params.path) and the walk's beam.
// Several GPUs (docs/multi-gpu.md): graft's ",gpus=LIST" (",replicas") and FAISS's "@gpus=N"
// ("@gpus=N,replicas") indexes' records carry params.gpus and params.shards or params.replicas; on
// a CUDA machine every record carries gpu_bytes_per_device (each device's peak use over the
// index's run, cudaMemGetInfo), and graft's graph shards gpu_bytes_per_shard (each shard's own
// resident bytes).
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include <faiss/AutoTune.h>
#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexNSG.h>
#include <map>
#include <faiss/impl/IDSelector.h>
#include <faiss/IndexReplicas.h>
#include <faiss/clone_index.h>
#ifdef GRAFT_BENCH_FAISS_GPU
#include <faiss/gpu/GpuAutoTune.h>
#include <faiss/gpu/GpuCloner.h>
#include <faiss/gpu/StandardGpuResources.h>
#endif

#include "bench_record.h"
#include "graft/flat.h"
#include "graft/graph.h"
#include "GraftIndexGraph.h"
#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include <faiss/c_api/error_c.h>
#include "frontier.h"
#include "hdf5_dataset.h"
#include "recall_qps_chart.h"
#ifdef GRAFT_BENCH_GGNN
#include "ggnn_peer.h"
#endif
#ifdef GRAFT_BENCH_CAGRA
#include "cagra_peer.h"
#endif

namespace {

using bench::Dataset;
using bench::now_s;

// ---- command line ---------------------------------------------------------------------------------

struct Sweep {
    std::string knob;
    std::vector<double> values;
};

struct Options {
    std::string base, query, gt, name, out_dir = "graft-bench-out", gt_cache, commit = "unknown", run_id, device;
    int64_t k = 10;
    std::string metric = "l2";
    std::vector<std::string> indexes;
    std::vector<Sweep> sweeps;          // --sweep overrides, by knob
    std::vector<int64_t> batches = {10000};
    int64_t latency_queries = 1000;     // batch-1 latency over this many queries (0: none)
    double min_time_s = 0.5;            // each timed search repeats until it took this long (3 runs at most)
    double deadline_s = 1e9;
    int threads = 0;
    int scale = 0;                      // --scale C: the base grown to C cell-permuted copies
    int64_t repeat = 1;                 // the queries repeated to fill the largest --batch
    bool plot = false;
    double refine_gap = 0.02;           // --refine: the adaptive sweep's recall gap (0: off)
    std::vector<double> selectivities;            // --selectivity: filtered searches (empty: none)
    std::vector<std::string> filter_modes = {"auto"};  // graft's paths under a filter
    int64_t graph_sample = 0;                     // --graph-recall N: sampled vertices (0: off)
};

const char* kUsage =
    "usage: graft-bench --base FILE --query FILE [--gt FILE] [--k 10] [--metric l2|ip]\n"
    "                   --index DESC [--index DESC ...] [--sweep KNOB=V1,V2,...] [--batch N[,N...]]\n"
    "                   [--out DIR] [--plot] [--name DATASET] [--gt-cache DIR] [--latency-queries N]\n"
    "                   [--min-time S] [--threads N] [--deadline S] [--commit C] [--run-id R]\n"
    "                   [--selectivity S1,S2,... [--filter-modes auto,walk,exact]]\n"
    "                   [--scale C] [--refine GAP] [--graph-recall N]\n"
    "  files: .fvecs .bvecs .ivecs .fbin .u8bin .ibin, IDX images (.gz), or an ann-benchmarks .hdf5\n"
    "         (--base F.hdf5 alone: train, test and neighbors come from it)\n"
    "  DESC:  a graft or FAISS factory string (GraftFlat, GraftGraph, \"GraftGraph,PQ32\", HNSW32,\n"
    "         \"IVF4096,Flat\", ...); DESC@gpu puts a FAISS index on GPU 0, DESC@gpus=N sharded on\n"
    "         GPUs 0..N-1 and DESC@gpus=N,replicas replicated on them (FAISS's\n"
    "         index_cpu_to_gpu_multiple, shard = true / false; trained once on GPU 0, the training\n"
    "         reused by later --index of the same DESC); graft's \",gpus=0-3\" shards its index\n"
    "         itself (\",gpus=0-3,replicas\": replicas); GGNN[<k_build>] is GGNN;\n"
    "         CAGRA[<graph_degree>][,algo=single|multi|auto][,width=W][,graph=graft] is cuVS's CAGRA\n"
    "         (graph=graft: CAGRA's search on graft's default graph); \"GraftGraph,graph=cagra\":\n"
    "         graft's search on CAGRA's graph (rows sorted by distance, entry nearest the mean)\n"
    "  --scale C: a d = 128 SIFT base grown to C cell-permuted copies (bench_bang --scale's data;\n"
    "         queries permuted as copy q mod C), each value then moved by a seeded -1/0/0/+1 (kept\n"
    "         in 0..255 for uint8 data) so that no two copies are equal; recall counts an id at the\n"
    "         query's k-th exact distance as found (ties; records: params.recall_ties); the ground\n"
    "         truth is computed (on every GPU, in blocks), --gt is refused\n"
    "  --batch N larger than the query count repeats the queries to fill it (records: params.repeat)\n"
    "  KNOB:  L (graft graph indexes), efSearch (HNSW), nprobe (IVF), tau (GGNN), itopk (CAGRA)\n"
    "  --graph-recall N: the graph's quality beside each graft graph index's records: of N sampled\n"
    "         vertices, the share of each one's k exact nearest neighbours that its graph row holds\n"
    "         (params.graph_recall), GRNND's rounds (params.build_rounds) and the vertices the\n"
    "         build linked (params.build_linked: those no row held)\n"
    "  --refine GAP: after the sweep, more knob values until each recall bar (0.90, 0.95, 0.99)\n"
    "         lies between two points at most GAP apart in recall (default 0.02; 0: the sweep as given)\n";

bool parse(int argc, char** argv, Options* o) {
    auto fail = [](const std::string& msg) {
        fprintf(stderr, "graft-bench: %s\n%s", msg.c_str(), kUsage);
        return false;
    };
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            printf("%s", kUsage);
            exit(0);
        }
        if (a == "--plot") {
            o->plot = true;
            continue;
        }
        if (i + 1 >= argc) return fail(a + ": needs a value (or is unknown)");
        const std::string v = argv[++i];
        std::vector<double> nums;
        if (a == "--base") o->base = v;
        else if (a == "--query") o->query = v;
        else if (a == "--gt") o->gt = v;
        else if (a == "--name") o->name = v;
        else if (a == "--out") o->out_dir = v;
        else if (a == "--gt-cache") o->gt_cache = v;
        else if (a == "--commit") o->commit = v;
        else if (a == "--run-id") o->run_id = v;
        else if (a == "--index") o->indexes.push_back(v);
        else if (a == "--metric") {
            if (v != "l2" && v != "ip") return fail("--metric: " + v + ", need l2 or ip");
            o->metric = v;
        } else if (a == "--k") {
            o->k = atoll(v.c_str());
            if (o->k < 1 || o->k > 1024) return fail("--k: " + v + ", need 1..1024");
        } else if (a == "--sweep") {
            const size_t eq = v.find('=');
            Sweep s;
            if (eq == std::string::npos || eq == 0 || !bench::split_numbers(v.substr(eq + 1), &s.values))
                return fail("--sweep: " + v + ", need KNOB=V1,V2,... (non-negative numbers)");
            s.knob = v.substr(0, eq);
            o->sweeps.push_back(s);
        } else if (a == "--batch") {
            if (!bench::split_numbers(v, &nums)) return fail("--batch: " + v + ", need N[,N...]");
            o->batches.clear();
            for (double n : nums) {
                if (n < 1 || n != std::floor(n)) return fail("--batch: " + v + ", need positive integers");
                o->batches.push_back((int64_t)n);
            }
        } else if (a == "--latency-queries") o->latency_queries = atoll(v.c_str());
        else if (a == "--min-time") o->min_time_s = atof(v.c_str());
        else if (a == "--deadline") o->deadline_s = atof(v.c_str());
        else if (a == "--threads") o->threads = atoi(v.c_str());
        else if (a == "--selectivity") {
            if (!bench::split_numbers(v, &o->selectivities) ||
                std::any_of(o->selectivities.begin(), o->selectivities.end(), [](double x) { return x <= 0 || x > 1; }))
                return fail("--selectivity: " + v + ", need fractions in (0, 1]");
        } else if (a == "--filter-modes") {
            o->filter_modes.clear();
            for (size_t i = 0; i <= v.size();) {
                size_t j = v.find(',', i);
                if (j == std::string::npos) j = v.size();
                const std::string m = v.substr(i, j - i);
                if (m != "auto" && m != "walk" && m != "exact")
                    return fail("--filter-modes: " + v + ", need auto, walk and/or exact");
                o->filter_modes.push_back(m);
                i = j + 1;
            }
        }
        else if (a == "--graph-recall") {
            o->graph_sample = atoll(v.c_str());
            if (o->graph_sample < 1) return fail("--graph-recall: " + v + ", need a positive vertex count");
        } else if (a == "--refine") {
            char* end = nullptr;
            o->refine_gap = strtod(v.c_str(), &end);
            if (v.empty() || *end || !(o->refine_gap >= 0 && o->refine_gap < 1))
                return fail("--refine: " + v + ", need a recall gap in [0, 1) (0: off)");
        }
        else if (a == "--scale") {
            o->scale = atoi(v.c_str());
            if (o->scale < 1 || o->scale > 2000) return fail("--scale: " + v + ", need 1..2000 copies");
        }
        else return fail("unknown option " + a);
    }
    if (o->base.empty()) return fail("--base is required");
    if (o->indexes.empty()) return fail("at least one --index is required");
    return true;
}

// ---- progress on a terminal -----------------------------------------------------------------------

// A one-line status on stderr, rewritten in place, only when stderr is a terminal: a pipe or a log
// file gets nothing from it.
class Status {
   public:
    static bool on() {
        static const bool tty = isatty(STDERR_FILENO);
        return tty;
    }
    static void show(const std::string& line) {
        if (!on()) return;
        std::lock_guard<std::mutex> g(mu());
        fprintf(stderr, "\r\033[K%s", line.c_str());
        fflush(stderr);
    }
    static void clear() {
        if (!on()) return;
        std::lock_guard<std::mutex> g(mu());
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }

   private:
    static std::mutex& mu() {
        static std::mutex m;
        return m;
    }
};

// For a call that reports nothing while it runs (a build): after a second, the elapsed time every
// half second, until the ticker goes out of scope.
class Ticker {
   public:
    explicit Ticker(std::string what) : what_(std::move(what)), t0_(now_s()) {
        if (Status::on()) thread_ = std::thread([this] { run(); });
    }
    ~Ticker() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
        Status::clear();
    }

   private:
    void run() {
        std::unique_lock<std::mutex> g(mu_);
        while (!cv_.wait_for(g, std::chrono::milliseconds(500), [this] { return stop_; })) {
            const double t = now_s() - t0_;
            if (t < 1) continue;
            char s[32];
            snprintf(s, sizeof s, " ... %.0f s", t);
            Status::show(what_ + s);
        }
    }
    std::string what_;
    double t0_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

// ---- data -----------------------------------------------------------------------------------------

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_hdf5(const std::string& p) { return ends_with(p, ".hdf5") || ends_with(p, ".h5"); }

// Fashion-MNIST / MNIST IDX images (Debian's dataset-fashion-mnist): "...-idx3-ubyte[.gz]".
bool is_idx(const std::string& p) { return p.find("idx3-ubyte") != std::string::npos; }

std::string basename_of(const std::string& p) {
    const size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool read_vectors(const std::string& path, std::vector<float>* x, int64_t* n, int64_t* d, std::string* err) {
    if (is_hdf5(path)) return bench::hdf5_read_f32(path, "train", x, n, d, err);
    float* p = nullptr;
    const int rc = is_idx(path) ? graft_fmnist_read(path.c_str(), -1, &p, n, d)
                                : graft_dataset_read_f32(path.c_str(), 0, -1, &p, n, d);
    if (rc != GRAFT_OK) {
        *err = graft_last_error();
        return false;
    }
    x->assign(p, p + *n * *d);
    free(p);
    return true;
}

// The ground-truth ids of a file: .ivecs/.ibin (int32 rows) or HDF5 neighbors; rows x cols.
bool read_ids(const std::string& path, std::vector<int64_t>* ids, int64_t* rows, int64_t* cols, std::string* err) {
    if (is_hdf5(path)) return bench::hdf5_read_i64(path, "neighbors", ids, rows, cols, err);
    graft_dataset m;
    if (graft_dataset_read(path.c_str(), 0, -1, &m) != GRAFT_OK) {
        *err = graft_last_error();
        return false;
    }
    bool ok = m.dtype == GRAFT_DTYPE_I32;
    if (!ok) *err = path + ": ground truth must hold int32 ids (.ivecs or .ibin)";
    else {
        ids->assign((const int32_t*)m.data, (const int32_t*)m.data + m.n * m.d);
        *rows = m.n;
        *cols = m.d;
    }
    graft_dataset_free(&m);
    return ok;
}

// Keeps the first k of `cols` columns of a rows x cols id matrix.
void keep_columns(std::vector<int64_t>* ids, int64_t rows, int64_t cols, int64_t k) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) (*ids)[r * k + j] = (*ids)[r * cols + j];
    ids->resize((size_t)(rows * k));
}

// A fingerprint of the vectors (every 997th row of base and queries), so that a cached ground truth
// is never used for other data of the same name and size.
uint64_t fingerprint(const Dataset& D) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const std::vector<float>& x, int64_t n) {
        for (int64_t i = 0; i < n; i += 997)
            for (int64_t j = 0; j < D.d; j++) {
                uint32_t u;
                memcpy(&u, &x[i * D.d + j], 4);
                h = (h ^ u) * 1099511628211ull;
            }
    };
    mix(D.xb, D.nb);
    mix(D.xq, D.nq);
    return h;
}

void mkdirs(const std::string& dir) {
    for (size_t i = 1; i <= dir.size(); i++)
        if (i == dir.size() || dir[i] == '/') mkdir(dir.substr(0, i).c_str(), 0755);
}

bool load(const Options& o, Dataset* D, std::string* err) {
    D->k = o.k;
    D->metric = o.metric == "ip" ? "IP" : "L2";
    std::string name = o.name;
    if (name.empty()) {
        name = basename_of(o.base);
        for (const char* ext : {".gz", ".fvecs", ".bvecs", ".ivecs", ".fbin", ".u8bin", ".ibin", ".hdf5", ".h5"})
            if (ends_with(name, ext)) name.resize(name.size() - strlen(ext));
        for (const char* tail : {"_base", "-base", "_learn"})
            if (ends_with(name, tail)) name.resize(name.size() - strlen(tail));
    }
    D->name = name;
    int64_t dq = 0;
    if (!read_vectors(o.base, &D->xb, &D->nb, &D->d, err)) return false;
    const std::string qpath = o.query.empty() && is_hdf5(o.base) ? o.base : o.query;
    if (qpath.empty()) {
        *err = "--query is required (except with an HDF5 --base, whose test set is the queries)";
        return false;
    }
    if (is_hdf5(qpath) ? !bench::hdf5_read_f32(qpath, "test", &D->xq, &D->nq, &dq, err)
                       : !read_vectors(qpath, &D->xq, &D->nq, &dq, err))
        return false;
    if (dq != D->d) {
        *err = "queries have d = " + std::to_string(dq) + ", the base d = " + std::to_string(D->d);
        return false;
    }
    if (is_hdf5(o.base)) {
        // ann-benchmarks: "angular" is the cosine: normalized vectors under inner product.
        const std::string dist = bench::hdf5_attribute(o.base, "distance");
        if (dist == "angular") {
            for (std::vector<float>* x : {&D->xb, &D->xq})
                for (size_t i = 0; i < x->size(); i += D->d) {
                    double s = 0;
                    for (int64_t j = 0; j < D->d; j++) s += (double)(*x)[i + j] * (*x)[i + j];
                    const float inv = s > 0 ? (float)(1 / std::sqrt(s)) : 0.f;
                    for (int64_t j = 0; j < D->d; j++) (*x)[i + j] *= inv;
                }
            D->metric = "IP";
            printf("%s: distance angular, so normalized vectors under inner product\n", o.base.c_str());
        } else if (!dist.empty() && dist != "euclidean") {
            *err = o.base + ": distance '" + dist + "' is not supported (euclidean or angular)";
            return false;
        } else if (o.metric == "ip") {
            printf("%s: distance euclidean, but --metric ip asked for: inner product it is\n", o.base.c_str());
        }
    }
    return true;
}

// D.gt from --gt, the HDF5 file's neighbors, the cache in DIR, or computed (then cached).
bool ground_truth(const Options& o, Dataset& D, std::string* err) {
    std::string gt_path = o.gt;
    // An HDF5 file's own queries come with their neighbours (for "angular", by the cosine: the
    // same order as inner product on the normalized vectors).
    if (gt_path.empty() && is_hdf5(o.base) && (o.query.empty() || o.query == o.base)) gt_path = o.base;
    if (!gt_path.empty()) {
        int64_t rows = 0, cols = 0;
        if (!read_ids(gt_path, &D.gt, &rows, &cols, err)) return false;
        if (rows < D.nq || cols < D.k) {
            *err = gt_path + ": " + std::to_string(rows) + " x " + std::to_string(cols) + " ids, need at least " +
                   std::to_string(D.nq) + " x " + std::to_string(D.k);
            return false;
        }
        keep_columns(&D.gt, D.nq, cols, D.k);
        printf("ground truth: %s (%lld x %lld)\n", gt_path.c_str(), (long long)rows, (long long)cols);
        return true;
    }
    char key[96];
    snprintf(key, sizeof key, "-%lldx%lld-k%lld-%s-%016llx.ibin", (long long)D.nb, (long long)D.nq, (long long)D.k,
             D.metric.c_str(), (unsigned long long)fingerprint(D));
    const std::string cache = (o.gt_cache.empty() ? o.out_dir : o.gt_cache) + "/gt-" + D.name + key;
    int64_t rows = 0, cols = 0;
    std::string ignored;
    if (access(cache.c_str(), R_OK) == 0 && read_ids(cache, &D.gt, &rows, &cols, &ignored) && rows == D.nq &&
        cols == D.k) {
        printf("ground truth: cached %s\n", cache.c_str());
        return true;
    }
    const bool gpu = graft_gpu_available();
    const double t0 = now_s();
    const bool ok = bench::exact_neighbours(D, gpu ? 10000 : 256, [&](int64_t done) {
        char s[96];
        snprintf(s, sizeof s, "ground truth: %lld / %lld queries, %.0f s", (long long)done, (long long)D.nq,
                 now_s() - t0);
        Status::show(s);
    });
    Status::clear();
    if (!ok) {
        *err = "ground truth failed";
        return false;
    }
    printf("ground truth: computed by %s in %.1f s, cached as %s\n",
           gpu ? "graft's flat index on the GPUs (bench::exact_neighbours: blocks of the base, one GPU each)"
               : "FAISS IndexFlat on the CPU",
           now_s() - t0, cache.c_str());
    std::vector<int32_t> ids(D.gt.begin(), D.gt.end());
    if (graft_dataset_write(cache.c_str(), ids.data(), D.nq, D.k, GRAFT_DTYPE_I32) != GRAFT_OK)
        printf("  (cache not written: %s)\n", graft_last_error());
    return true;
}

// ---- memory readings ------------------------------------------------------------------------------

// Host memory: resident set now and its peak since reset_host_peak() (VmRSS / VmHWM of
// /proc/self/status; writing 5 to clear_refs resets the peak, Linux >= 4.0).
size_t proc_status_kb(const char* field) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    const size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = strtoull(line + n + 1, nullptr, 10);
    fclose(f);
    return kb;
}
void reset_host_peak() {
    // Freed heap pages (the ground truth's, the previous index's) go back to the system first:
    // otherwise the next index reuses them without its resident set growing.
    malloc_trim(0);
    FILE* f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

std::string device_name() {
    const char* env = getenv("GRAFT_DEVICE_NAME");
    if (env && *env) return env;
#ifdef GRAFT_BENCH_CUDA
    if (graft_gpu_available()) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) return prop.name;
    }
#endif
    return "cpu";
}

// ---- the indexes ----------------------------------------------------------------------------------

#ifdef GRAFT_BENCH_GGNN
// GGNN behind faiss::Index, so that it runs the same measuring path: add builds the graph,
// search queries it with the current tau_query.
struct GgnnIndex : faiss::Index {
    bench::GgnnPeer* peer;
    int k_build = 24, max_iterations = 400;
    float tau_build = 0.5f, tau_query = 0.5f;
    GgnnIndex(int d, faiss::MetricType m) : faiss::Index(d, m), peer(bench::ggnn_peer_new(d, m == faiss::METRIC_INNER_PRODUCT)) {}
    ~GgnnIndex() override { bench::ggnn_peer_free(peer); }
    void add(idx_t n, const float* x) override {
        if (ntotal != 0) throw std::runtime_error("GGNN: one add only (it builds the graph)");
        std::string err;
        if (!bench::ggnn_peer_build(peer, n, x, k_build, tau_build, &err)) throw std::runtime_error(err);
        ntotal = n;
    }
    void search(idx_t n, const float* x, idx_t k, float* D, idx_t* I,
                const faiss::SearchParameters* = nullptr) const override {
        std::string err;
        if (!bench::ggnn_peer_search(peer, n, x, (int)k, tau_query, max_iterations, D, I, &err))
            throw std::runtime_error(err);
    }
    void reset() override { throw std::runtime_error("GGNN: reset is not supported"); }
};
#endif

#ifdef GRAFT_BENCH_CAGRA
// CAGRA behind faiss::Index, the same way: add builds CAGRA's graph (or, on_graft_graph, takes the
// graph graft's default GraftGraph builds over the same vectors), search walks it at the current
// itopk.
struct CagraIndex : faiss::Index {
    bench::CagraPeer* peer;
    int graph_degree = 0, itopk = 64, width = 1;
    bench::CagraAlgo algo = bench::CagraAlgo::automatic;
    bool on_graft_graph = false;
    std::string build_algo;     // what built the graph (the records' params.build)
    bool graph_reused = false;  // the graph of an earlier CAGRA index over the same data
    // The last graph CAGRA built: a later CAGRA index of the run over the same vectors, degree and
    // metric (algo=single / multi) takes it instead of building the same graph again.
    struct LastGraph {
        int64_t n = 0;
        const float* x = nullptr;
        int degree_asked = -1;
        faiss::MetricType metric = faiss::METRIC_L2;
        std::vector<uint32_t> rows;
        int degree = 0;
        std::string algo;
    };
    static LastGraph& last() {
        static LastGraph b;
        return b;
    }
    // The last graph, if it was built over these n vectors x at this degree and metric.
    static const LastGraph* built_before(int64_t n, const float* x, int degree, faiss::MetricType metric) {
        const LastGraph& b = last();
        return b.n == n && b.x == x && b.degree_asked == degree && b.metric == metric ? &b : nullptr;
    }
    CagraIndex(int d, faiss::MetricType m) : faiss::Index(d, m), peer(bench::cagra_peer_new(d, m == faiss::METRIC_INNER_PRODUCT)) {}
    ~CagraIndex() override { bench::cagra_peer_free(peer); }
    void add(idx_t n, const float* x) override;
    void search(idx_t n, const float* x, idx_t k, float* D, idx_t* I,
                const faiss::SearchParameters* = nullptr) const override {
        std::string err;
        if (!bench::cagra_peer_search(peer, n, x, (int)k, itopk, width, algo, D, I, &err)) throw std::runtime_error(err);
    }
    void reset() override { throw std::runtime_error("CAGRA: reset is not supported"); }
};
#endif

// What graft-bench knows of one --index.
struct IndexSpec {
    std::string desc;     // as given (the records' index field)
    std::string factory;  // desc without "@gpu"
    const char* system = "faiss-cpu";
    const char* family = "";
    bool graft = false, faiss_gpu = false, ggnn = false, cagra = false;
    bool cagra_graph = false;  // "GraftGraph,...,graph=cagra": graft's search on CAGRA's graph
    int faiss_gpus = 0;  // DESC@gpus=N: FAISS's sharded GPU index over GPUs 0..N-1
    bool faiss_replicas = false;  // DESC@gpus=N,replicas: replicated on them instead
    int ggnn_k_build = 24, ggnn_iterations = 400;
    float ggnn_tau_build = 0.5f;
    int cagra_degree = 0, cagra_width = 1;  // 0: cuVS's default degree
    std::string cagra_algo = "auto";
    bool cagra_on_graft = false;  // CAGRA,graph=graft
    std::string knob;  // "" when nothing is swept
    std::vector<double> sweep;
    bench::KnobRange range{1, 1, true};  // what the adaptive sweep may try (--refine)
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Fills spec from desc; false with *err for what this graft-bench cannot run.
bool describe(const std::string& desc, const Options& o, IndexSpec* s, std::string* err) {
    s->desc = desc;
    s->factory = desc;
    const size_t at_gpus = desc.rfind("@gpus=");
    if (at_gpus != std::string::npos) {
        s->faiss_gpus = atoi(desc.c_str() + at_gpus + 6);
        const size_t tail = desc.find_first_not_of("0123456789", at_gpus + 6);
        s->faiss_replicas = tail != std::string::npos && desc.compare(tail, std::string::npos, ",replicas") == 0;
        if (s->faiss_gpus < 1 || (tail != std::string::npos && !s->faiss_replicas)) {
            *err = desc + ": @gpus=N takes the number of GPUs (0..N-1), N >= 1, optionally \",replicas\" "
                          "(@gpus=2,replicas)";
            return false;
        }
    }
    if (ends_with(desc, "@gpu") || at_gpus != std::string::npos) {
        s->factory = desc.substr(0, at_gpus != std::string::npos ? at_gpus : desc.size() - 4);
        s->faiss_gpu = true;
        s->system = "faiss-gpu";
        if (contains(s->factory, "Graft")) {
            *err = desc + ": @gpu is for FAISS indexes (graft's indexes choose their device themselves)";
            return false;
        }
#ifndef GRAFT_BENCH_FAISS_GPU
        *err = desc + ": this graft-bench has no FAISS GPU (configure with GRAFT_FAISS_GPU_DIR, bench/CMakeLists.txt)";
        return false;
#endif
    }
    const std::string& f = s->factory;
    std::vector<double> natural;
    if (f.rfind("GGNN", 0) == 0) {
        s->ggnn = true;
        s->system = "ggnn";
        s->family = "graph";
        s->knob = "tau";
        natural = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0};
        s->range = {0, 2, false};
        // GGNN[<k_build>][,tau_build=X][,iter=N]
        std::string rest = f.substr(4);
        if (!rest.empty() && isdigit((unsigned char)rest[0])) s->ggnn_k_build = atoi(rest.c_str());
        for (size_t c = rest.find(','); c != std::string::npos; c = rest.find(',', c + 1)) {
            const std::string opt = rest.substr(c + 1, rest.find(',', c + 1) - c - 1);
            if (opt.rfind("tau_build=", 0) == 0) s->ggnn_tau_build = (float)atof(opt.c_str() + 10);
            else if (opt.rfind("iter=", 0) == 0) s->ggnn_iterations = atoi(opt.c_str() + 5);
            else {
                *err = desc + ": unknown GGNN option '" + opt + "' (GGNN[<k_build>][,tau_build=X][,iter=N])";
                return false;
            }
        }
#ifndef GRAFT_BENCH_GGNN
        *err = desc + ": this graft-bench has no GGNN (configure with GRAFT_GGNN_DIR, bench/CMakeLists.txt)";
        return false;
#endif
        // GGNN ends the process (a glog CHECK) when CUDA fails: ask first.
        if (!graft_gpu_available()) {
            *err = desc + ": GGNN needs a CUDA device, and none is usable here";
            return false;
        }
    } else if (f.rfind("CAGRA", 0) == 0) {
        s->cagra = true;
        s->system = "cuvs";
        s->family = "graph";
        s->knob = "itopk";
        natural = {16, 32, 64, 128, 256, 512};
        s->range = {(double)o.k, 512, true};  // the itopk cuVS's single-CTA search takes
        // CAGRA[<graph_degree>][,algo=single|multi|auto][,width=W][,graph=graft]
        std::string rest = f.substr(5);
        if (!rest.empty() && isdigit((unsigned char)rest[0])) s->cagra_degree = atoi(rest.c_str());
        for (size_t c = rest.find(','); c != std::string::npos; c = rest.find(',', c + 1)) {
            const std::string opt = rest.substr(c + 1, rest.find(',', c + 1) - c - 1);
            if (opt == "algo=single" || opt == "algo=multi" || opt == "algo=auto") s->cagra_algo = opt.substr(5);
            else if (opt.rfind("width=", 0) == 0 && atoi(opt.c_str() + 6) > 0) s->cagra_width = atoi(opt.c_str() + 6);
            else if (opt == "graph=graft") s->cagra_on_graft = true;
            else {
                *err = desc + ": unknown CAGRA option '" + opt +
                       "' (CAGRA[<graph_degree>][,algo=single|multi|auto][,width=W][,graph=graft])";
                return false;
            }
        }
#ifndef GRAFT_BENCH_CAGRA
        *err = desc + ": this graft-bench has no CAGRA (configure with GRAFT_CAGRA_PEER_LIB: scripts/device/build_cuvs.sh)";
        return false;
#endif
        if (!graft_gpu_available()) {
            *err = desc + ": CAGRA needs a CUDA device, and none is usable here";
            return false;
        }
    } else if (contains(f, "Graft")) {
        s->graft = true;
        const size_t on_cagra = f.find(",graph=cagra");
        if (on_cagra != std::string::npos) {
#ifndef GRAFT_BENCH_CAGRA
            *err = desc + ": graph=cagra needs a graft-bench with CAGRA (configure with GRAFT_CAGRA_PEER_LIB)";
            return false;
#endif
            s->cagra_graph = true;
            s->factory.erase(on_cagra, 12);
        }
        s->system = contains(f, ",cpu") || !graft_gpu_available() ? "reference" : "graft";
        if (contains(f, "GraftGraph")) {
            s->family = "graph";
            s->knob = "L";
            natural = {16, 32, 64, 128, 256};
            s->range = {(double)o.k, 1024, true};  // graft searches a beam under k as k
        } else {
            s->family = "flat";
        }
    } else if (contains(f, "HNSW")) {
        s->family = "hnsw";
        s->knob = "efSearch";
        natural = {16, 32, 64, 128, 256, 512};
        s->range = {(double)o.k, 4096, true};  // FAISS searches max(efSearch, k)
    } else if (contains(f, "NSG")) {
        s->family = "nsg";
        s->knob = "search_L";
        natural = {16, 32, 64, 128, 256};
        s->range = {(double)o.k, 2048, true};
    } else if (contains(f, "IVF")) {
        s->family = "ivf";
        s->knob = "nprobe";
        const long nlist = atol(f.c_str() + f.find("IVF") + 3);
        for (double p : {1, 4, 16, 64, 256})
            if (nlist <= 0 || p <= nlist) natural.push_back(p);
        // FAISS GPU 1.7.3 takes nprobe <= 2048 (its k-selection limit).
        s->range = {1, (double)(nlist > 0 ? nlist : 65536), true};
        if (s->faiss_gpu) s->range.hi = std::min(s->range.hi, 2048.0);
    } else if (contains(f, "Flat")) {
        s->family = "flat";
    }
    s->sweep = natural;
    for (const Sweep& w : o.sweeps)
        if (w.knob == s->knob) s->sweep = w.values;
    return true;
}

// A built index and what it needs alive (the FAISS GPU resources outlive the index).
struct Built {
#ifdef GRAFT_BENCH_FAISS_GPU
    std::unique_ptr<faiss::gpu::StandardGpuResources> res;
    std::vector<std::unique_ptr<faiss::gpu::StandardGpuResources>> multi;  // @gpus=N: one per GPU
#endif
    std::unique_ptr<faiss::Index> index;
};

// A new, empty index for spec; throws (FAISS's or our message) when it cannot be made.
Built make_index(const IndexSpec& s, int d, faiss::MetricType metric) {
    Built b;
#ifdef GRAFT_BENCH_GGNN
    if (s.ggnn) {
        auto* g = new GgnnIndex(d, metric);
        g->k_build = s.ggnn_k_build;
        g->tau_build = s.ggnn_tau_build;
        g->max_iterations = s.ggnn_iterations;
        b.index.reset(g);
        return b;
    }
#endif
#ifdef GRAFT_BENCH_CAGRA
    if (s.cagra) {
        auto* c = new CagraIndex(d, metric);
        c->graph_degree = s.cagra_degree;
        c->width = s.cagra_width;
        c->algo = s.cagra_algo == "single" ? bench::CagraAlgo::single_cta
                  : s.cagra_algo == "multi" ? bench::CagraAlgo::multi_cta
                                            : bench::CagraAlgo::automatic;
        c->on_graft_graph = s.cagra_on_graft;
        b.index.reset(c);
        return b;
    }
#endif
    FaissIndex* p = nullptr;
    if (faiss_graft_index_factory(&p, d, s.factory.c_str(), (FaissMetricType)metric) != 0)
        throw std::runtime_error(faiss_get_last_error() ? faiss_get_last_error() : "index factory failed");
    b.index.reset(reinterpret_cast<faiss::Index*>(p));
    // A FAISS GPU index stays on the CPU, untrained, until build_faiss_gpu.
    return b;
}

// FAISS GPU indexes' trained CPU copies by factory string: a later --index of the same factory
// (IVF16384,Flat@gpu, then @gpus=2, then @gpus=2,replicas) starts from the same quantizer instead
// of running the same k-means again (its record says params.train_reused).
using TrainedCache = std::map<std::string, std::unique_ptr<faiss::Index>>;

#ifdef GRAFT_BENCH_FAISS_GPU
// FAISS's GPU index, the way FAISS's own multi-GPU benchmarks make one: trained once on GPU 0
// (or taken from the cache), the trained index cloned onto GPU 0 (@gpu) or GPUs 0..N-1 as shards
// (@gpus=N: GpuMultipleClonerOptions::shard, adds split over them, searches on all at once,
// merged) or replicas (@gpus=N,replicas: every GPU holds all, a search's queries split over them),
// then filled by add. True when the training came from the cache.
bool build_faiss_gpu(Built& b, const IndexSpec& s, const Dataset& D, TrainedCache& trained) {
    bool reused = false;
    if (!b.index->is_trained) {
        auto it = trained.find(s.factory);
        if (it != trained.end()) {
            b.index.reset(faiss::clone_index(it->second.get()));
            reused = true;
        } else {
            faiss::gpu::StandardGpuResources res0;
            std::unique_ptr<faiss::Index> g(faiss::gpu::index_cpu_to_gpu(&res0, 0, b.index.get()));
            g->train(D.nb, D.xb.data());
            b.index.reset(faiss::gpu::index_gpu_to_cpu(g.get()));
            trained[s.factory].reset(faiss::clone_index(b.index.get()));
        }
    }
    if (s.faiss_gpus == 0) {
        b.res.reset(new faiss::gpu::StandardGpuResources());
        b.index.reset(faiss::gpu::index_cpu_to_gpu(b.res.get(), 0, b.index.get()));
    } else {
        std::vector<faiss::gpu::GpuResourcesProvider*> provs;
        std::vector<int> devs;
        for (int i = 0; i < s.faiss_gpus; i++) {
            b.multi.emplace_back(new faiss::gpu::StandardGpuResources());
            provs.push_back(b.multi.back().get());
            devs.push_back(i);
        }
        faiss::gpu::GpuMultipleClonerOptions opt;
        opt.shard = !s.faiss_replicas;
        b.index.reset(faiss::gpu::index_cpu_to_gpu_multiple(provs, devs, b.index.get(), &opt));
    }
    b.index->add(D.nb, D.xb.data());
    return reused;
}
#endif

// A sharded (or replicated) graft index's shard count and the distinct GPUs its shards live on
// (0, 0 otherwise).
std::pair<int, int> graft_shards(faiss::Index* index) {
    int n = 1;
    if (faiss_graft_shard_count(reinterpret_cast<FaissIndex*>(index), &n) != 0 || n <= 1) return {0, 0};
    std::vector<int> devs;
    for (int i = 0; i < n; i++) {
        double dev = -1;
        if (faiss_graft_get_shard_param(reinterpret_cast<FaissIndex*>(index), i, "device", &dev) == 0 && dev >= 0 &&
            std::find(devs.begin(), devs.end(), (int)dev) == devs.end())
            devs.push_back((int)dev);
    }
    return {n, (int)devs.size()};
}

// Applies knob = v to the index.
void set_knob(const IndexSpec& s, faiss::Index* index, double v) {
    if (s.knob.empty()) return;
#ifdef GRAFT_BENCH_GGNN
    if (s.ggnn) {
        static_cast<GgnnIndex*>(index)->tau_query = (float)v;
        return;
    }
#endif
#ifdef GRAFT_BENCH_CAGRA
    if (s.cagra) {
        static_cast<CagraIndex*>(index)->itopk = (int)v;
        return;
    }
#endif
    if (s.graft) {
        if (faiss_graft_set_param(reinterpret_cast<FaissIndex*>(index), s.knob.c_str(), v) != 0)
            throw std::runtime_error(faiss_get_last_error());
        return;
    }
#ifdef GRAFT_BENCH_FAISS_GPU
    if (s.faiss_gpu) {
        faiss::gpu::GpuParameterSpace().set_index_parameter(index, s.knob, v);
        return;
    }
#endif
    // FAISS 1.7.3's ParameterSpace does not know NSG's search_L.
    if (auto* nsg = dynamic_cast<faiss::IndexNSG*>(index); nsg && s.knob == "search_L") {
        nsg->nsg.search_L = (int)v;
        return;
    }
    faiss::ParameterSpace().set_index_parameter(index, s.knob, v);
}

// ---- filters (--selectivity) ----------------------------------------------------------------------

// One --selectivity value: the selector and the exact filtered ground truth (nq x k, -1 where
// fewer than k ids pass).
struct Filter {
    double frac;
    std::vector<int64_t> ids;
    std::unique_ptr<faiss::IDSelectorBatch> sel;
    std::vector<int64_t> gt;
};

// round(frac n) random ids (at least one), ascending; the same for a seed on every run.
std::vector<int64_t> random_ids(int64_t n, double frac, uint64_t seed) {
    const int64_t m = std::max<int64_t>(1, std::llround(frac * (double)n));
    std::vector<int64_t> ids;
    if (2 * m > n) {  // a partial Fisher-Yates over all ids
        std::vector<int64_t> all(n);
        for (int64_t i = 0; i < n; i++) all[i] = i;
        for (int64_t i = 0; i < m; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            std::swap(all[i], all[i + (int64_t)(seed % (uint64_t)(n - i))]);
        }
        ids.assign(all.begin(), all.begin() + m);
    } else {  // rejection: few ids
        std::vector<uint8_t> taken(n, 0);
        while ((int64_t)ids.size() < m) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            const int64_t i = (int64_t)(seed % (uint64_t)n);
            if (!taken[i]) taken[i] = 1, ids.push_back(i);
        }
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

// The exact k nearest among the passing vectors (gathered), as exact_neighbours finds them for
// the whole set, mapped back to base ids.
bool filtered_ground_truth(const Dataset& D, Filter* f) {
    Dataset sub;
    sub.name = D.name;
    sub.d = D.d;
    sub.k = D.k;
    sub.metric = D.metric;
    sub.nb = (int64_t)f->ids.size();
    sub.xb.resize((size_t)(sub.nb * D.d));
    for (int64_t i = 0; i < sub.nb; i++)
        std::copy_n(D.xb.data() + f->ids[i] * D.d, D.d, sub.xb.data() + i * D.d);
    sub.xq = D.xq;
    sub.nq = D.nq;
    if (!bench::exact_neighbours(sub, graft_gpu_available() ? 10000 : 256, [](int64_t) {})) return false;
    f->gt = std::move(sub.gt);
    for (int64_t& id : f->gt)
        if (id >= 0) id = f->ids[id];
    return true;
}

// recall@k against a filtered ground truth: of each query's true neighbours (k, or fewer when
// fewer ids pass), the fraction found.
double filtered_recall(const int64_t* I, const std::vector<int64_t>& gt, int64_t nq, int64_t k) {
    int64_t hit = 0, want = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t j = 0; j < k; j++) {
            const int64_t t = gt[q * k + j];
            if (t < 0) continue;
            want++;
            for (int64_t i = 0; i < k; i++) hit += I[q * k + i] == t;
        }
    return want ? (double)hit / (double)want : 1.0;
}

// An index searched with fixed SearchParameters (the selector), for the measuring functions.
struct WithParams : faiss::Index {
    const faiss::Index* inner;
    const faiss::SearchParameters* params;
    WithParams(const faiss::Index* in, const faiss::SearchParameters* p)
        : faiss::Index(in->d, in->metric_type), inner(in), params(p) {
        ntotal = in->ntotal;
    }
    void add(idx_t, const float*) override { throw std::runtime_error("WithParams: add"); }
    void reset() override { throw std::runtime_error("WithParams: reset"); }
    void search(idx_t n, const float* x, idx_t k, float* D, idx_t* I,
                const faiss::SearchParameters* = nullptr) const override {
        inner->search(n, x, k, D, I, params);
    }
};

// ---- measuring ------------------------------------------------------------------------------------

// Batch 1 over the first n queries (at most 5 s): p50 and p99 per-query latency in ms, QPS and the
// recall of those queries.
struct Latency {
    double p50 = -1, p99 = -1, qps = -1, recall = -1;
    int64_t n = 0;
};
Latency time_batch1(faiss::Index* index, const Dataset& D, int64_t n) {
    Latency L;
    n = std::min(n, D.nq);
    std::vector<double> t;
    std::vector<float> dist(D.k);
    std::vector<int64_t> I((size_t)(n * D.k));
    index->search(1, D.xq.data(), D.k, dist.data(), I.data());  // warm-up
    double total = 0;
    for (int64_t q = 0; q < n && (q < 20 || total < 5); q++) {
        const double t0 = now_s();
        index->search(1, D.xq.data() + q * D.d, D.k, dist.data(), I.data() + q * D.k);
        t.push_back(now_s() - t0);
        total += t.back();
    }
    if (t.empty()) return L;
    L.n = (int64_t)t.size();
    L.qps = L.n / total;
    L.recall = bench::recall_at_k(I.data(), D.gt.data(), L.n, D.k);
    std::sort(t.begin(), t.end());
    L.p50 = t[t.size() / 2] * 1e3;
    L.p99 = t[std::min(t.size() - 1, (size_t)std::ceil(0.99 * t.size()) - 1)] * 1e3;
    return L;
}

std::string number(double v) {
    char s[32];
    snprintf(s, sizeof s, "%g", v);
    return s;
}

// --graph-recall: sampled vertices and their exact neighbours (k + 1 each, the vertex itself
// among them), against which each graph index's rows are scored.
struct GraphSample {
    std::vector<int64_t> ids;
    std::vector<int64_t> nbrs;  // ids.size() x (k + 1), nearest first
    int64_t k = 0;
};

// The sample's exact neighbours, by the ground truth's own path (bench::exact_neighbours) on D
// with the sampled base rows standing in as queries.
bool sample_graph_truth(Dataset& D, int64_t count, GraphSample* gs) {
    std::mt19937_64 rng(0x6A0F5EEDull);
    std::vector<int64_t> ids;
    std::vector<char> taken((size_t)D.nb, 0);
    for (int64_t i = 0; i < std::min(count, D.nb); i++) {
        int64_t v = (int64_t)(rng() % (uint64_t)D.nb);
        while (taken[(size_t)v]) v = (v + 1) % D.nb;
        taken[(size_t)v] = 1;
        ids.push_back(v);
    }
    std::vector<float> xq(ids.size() * (size_t)D.d);
    for (size_t i = 0; i < ids.size(); i++)
        std::copy_n(D.xb.data() + ids[i] * D.d, D.d, xq.data() + i * D.d);
    std::swap(D.xq, xq);
    std::vector<int64_t> gt;
    std::swap(D.gt, gt);
    const int64_t nq = D.nq, k = D.k;
    D.nq = (int64_t)ids.size();
    D.k = k + 1;
    const bool ok = bench::exact_neighbours(D, graft_gpu_available() ? 10000 : 256, [](int64_t) {});
    gs->ids = ids;
    gs->nbrs = D.gt;
    gs->k = k;
    std::swap(D.xq, xq);
    std::swap(D.gt, gt);
    D.nq = nq, D.k = k;
    return ok;
}

// An index's graph rows (n x R, -1 padded): graft's own graph, or CAGRA's (copied); false for
// FAISS's indexes, wrappers and shards.
bool graph_rows(faiss::Index* index, std::vector<int32_t>* copy, const int32_t** rows, int* R) {
    if (auto* g = dynamic_cast<graft::GraftIndexGraph*>(index)) {
        const graft_graph* graph = graft_gindex_graph(g->gindex);
        if (!graph) return false;
        *rows = graph->nbrs;
        *R = graph->R;
        return true;
    }
#ifdef GRAFT_BENCH_CAGRA
    if (auto* c = dynamic_cast<CagraIndex*>(index)) {
        std::vector<uint32_t> ids;
        std::string err;
        if (!bench::cagra_peer_graph(c->peer, &ids, R, &err)) return false;
        copy->assign(ids.begin(), ids.end());
        *rows = copy->data();
        return true;
    }
#endif
    return false;
}

// The share of each sampled vertex's k exact nearest neighbours (itself left out) that its graph
// row holds, averaged; -1 when the index has no graph of its own (graph_rows).
double graph_row_recall(faiss::Index* index, const GraphSample& gs) {
    std::vector<int32_t> copy;
    const int32_t* rows = nullptr;
    int R = 0;
    if (gs.ids.empty() || !graph_rows(index, &copy, &rows, &R)) return -1;
    double sum = 0;
    for (size_t i = 0; i < gs.ids.size(); i++) {
        const int64_t v = gs.ids[i];
        const int32_t* row = rows + v * R;
        int64_t found = 0, want = 0;
        for (int64_t j = 0; j <= gs.k && want < gs.k; j++) {
            const int64_t u = gs.nbrs[i * (gs.k + 1) + j];
            if (u == v || u < 0) continue;
            want++;
            found += std::find(row, row + R, (int32_t)u) != row + R;
        }
        sum += want ? (double)found / want : 1.0;
    }
    return sum / gs.ids.size();
}

#ifdef GRAFT_BENCH_CAGRA
// ---- one graph, two walks (CAGRA,graph=graft and GraftGraph,graph=cagra) --------------------------

// graft's rows as CAGRA takes them (every entry an id): a row's -1 padding repeats its first
// neighbour, which CAGRA's visited set skips; a row with none holds the vertex itself.
std::vector<uint32_t> rows_for_cagra(const graft_graph& g) {
    std::vector<uint32_t> rows((size_t)(g.n * g.R));
    for (int64_t v = 0; v < g.n; v++) {
        const int32_t* in = g.nbrs + v * g.R;
        const int32_t fill = in[0] >= 0 ? in[0] : (int32_t)v;
        for (int j = 0; j < g.R; j++) rows[v * g.R + j] = (uint32_t)(in[j] >= 0 ? in[j] : fill);
    }
    return rows;
}

void CagraIndex::add(idx_t n, const float* x) {
    if (ntotal != 0) throw std::runtime_error("CAGRA: one add only (it builds the graph)");
    std::string err;
    if (on_graft_graph) {
        FaissIndex* p = nullptr;
        if (faiss_graft_index_factory(&p, (int)d, "GraftGraph", (FaissMetricType)metric_type) != 0)
            throw std::runtime_error(faiss_get_last_error());
        std::unique_ptr<faiss::Index> g(reinterpret_cast<faiss::Index*>(p));
        g->add(n, x);
        float d1;
        idx_t i1;
        g->search(1, x, 1, &d1, &i1);  // the graph is built at the first search
        const graft_graph* graph = graft_gindex_graph(static_cast<graft::GraftIndexGraph*>(g.get())->gindex);
        const std::vector<uint32_t> rows = rows_for_cagra(*graph);
        if (!bench::cagra_peer_set_graph(peer, n, x, rows.data(), graph->R, &err)) throw std::runtime_error(err);
        build_algo = "graft";
    } else if (const LastGraph* b = built_before(n, x, graph_degree, metric_type)) {
        if (!bench::cagra_peer_set_graph(peer, n, x, b->rows.data(), b->degree, &err)) throw std::runtime_error(err);
        build_algo = b->algo;
        graph_reused = true;
    } else {
        if (!bench::cagra_peer_build(peer, n, x, graph_degree, &build_algo, &err)) throw std::runtime_error(err);
        last() = {n, x, graph_degree, metric_type, {}, 0, build_algo};
        if (!bench::cagra_peer_graph(peer, &last().rows, &last().degree, &err)) throw std::runtime_error(err);
    }
    ntotal = n;
}

// CAGRA's default graph over D's base (the one a CAGRA index of this run built, else built here)
// given to graft's index (which holds the same vectors), as graft's graphs are: each row sorted by
// distance to its vertex, the entry the vertex nearest the mean.
void take_cagra_graph(faiss::Index* index, const Dataset& D, faiss::MetricType metric) {
    auto* g = dynamic_cast<graft::GraftIndexGraph*>(index);
    if (!g) throw std::runtime_error("graph=cagra: takes one graft graph index (no shards, no wrapper)");
    const bool ip = metric == faiss::METRIC_INNER_PRODUCT;
    std::unique_ptr<bench::CagraPeer, void (*)(bench::CagraPeer*)> peer(bench::cagra_peer_new(D.d, ip),
                                                                      bench::cagra_peer_free);
    std::string err, algo;
    std::vector<uint32_t> built;
    int R = 0;
    // A CAGRA index's graph of this run, else one built here.
    const CagraIndex::LastGraph* b = CagraIndex::built_before(D.nb, D.xb.data(), 0, metric);
    if (b) {
        R = b->degree;
    } else if (!bench::cagra_peer_build(peer.get(), D.nb, D.xb.data(), 0, &algo, &err) ||
               !bench::cagra_peer_graph(peer.get(), &built, &R, &err)) {
        throw std::runtime_error(err);
    }
    const std::vector<uint32_t>& rows = b ? b->rows : built;
    const int64_t n = D.nb, d = D.d;
    const float* x = D.xb.data();
    auto far = [&](const float* a, const float* b) {  // larger is farther
        float s = 0;
        for (int64_t i = 0; i < d; i++) s += ip ? -a[i] * b[i] : (a[i] - b[i]) * (a[i] - b[i]);
        return s;
    };
    std::vector<int32_t> nbrs(rows.size());
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < n; v++) {
        std::vector<std::pair<float, int32_t>> row(R);
        for (int j = 0; j < R; j++) {
            const uint32_t u = rows[v * R + j];
            row[j] = {far(x + v * d, x + (int64_t)u * d), (int32_t)u};
        }
        std::sort(row.begin(), row.end());
        for (int j = 0; j < R; j++) nbrs[v * R + j] = row[j].second;
    }
    std::vector<float> mean(d, 0.f);
    for (int64_t v = 0; v < n; v++)
        for (int64_t i = 0; i < d; i++) mean[i] += x[v * d + i] / (float)n;
    int64_t entry = 0;
    for (int64_t v = 1; v < n; v++)
        if (far(x + v * d, mean.data()) < far(x + entry * d, mean.data())) entry = v;
    const graft_graph graph{n, R, nbrs.data(), entry};
    if (graft_gindex_set_graph(g->gindex, &graph) != 0) throw std::runtime_error(graft_last_error());
}
#endif

struct IndexResult {
    double build_s = -1;
    double graph_recall = -1;  // --graph-recall (graph_row_recall)
    int build_rounds = 0;      // GRNND's inner rounds (graft's graph indexes)
    long long build_linked = -1;  // vertices without an in-edge the build linked (-1: not read)
    size_t gpu_bytes = 0, host_bytes = 0;
    std::string multi_gpu_json;  // ,"gpu_bytes_per_device":[...] (and per shard): the records' tail
    std::pair<int, int> shards{0, 0};  // graft_shards()
    bool replicas = false, train_reused = false;
    bool ok = false;
    std::map<int64_t, std::vector<bench::SweepPoint>> swept;  // every configuration, by --batch
};

// The adaptive sweep's bound on extra configurations an index (--refine): about 3 a bar.
constexpr int kMaxRefined = 12;

// Builds one index and runs its sweep; records every configuration.
// The params every record of an index carries: the GPUs of a multi-GPU index and how its data is
// spread (graft's shards / replicas, FAISS's @gpus=N), how its recall is counted and how its
// queries were repeated.
void common_params(bench::Params& p, const IndexSpec& s, const std::pair<int, int>& shards, bool replicas,
                   bool train_reused, const Options& o, const Dataset& D) {
    if (shards.first > 1) {
        if (shards.second > 0) p.add("gpus", shards.second, false);
        p.add(replicas ? "replicas" : "shards", shards.first, false);
    }
    if (s.faiss_gpus > 0) p.add("gpus", s.faiss_gpus, false).add(s.faiss_replicas ? "replicas" : "shards", s.faiss_gpus, false);
    if (train_reused) p.add("train_reused", true, false);
    if (!D.kth.empty()) p.add("recall_ties", true, false);
    if (o.repeat > 1) p.add("repeat", (long long)o.repeat, false);
}

IndexResult run_index(const Options& o, const IndexSpec& s, const Dataset& D, bench::Recorder& out,
                      const bench::Deadline& deadline, const std::vector<Filter>& filters,
                      TrainedCache& trained, const GraphSample& gs) {
    IndexResult res;
    const faiss::MetricType metric = D.metric == "IP" ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
    // Every device's use: sharded indexes spread over several.
    const std::vector<size_t> gpu0 = bench::gpu_used_bytes_per_device();
    std::vector<size_t> gpu_max = gpu0;
    reset_host_peak();
    const size_t host0 = proc_status_kb("VmRSS:") * 1024;
    auto sample = [&] {
        const std::vector<size_t> now = bench::gpu_used_bytes_per_device();
        for (size_t i = 0; i < now.size() && i < gpu_max.size(); i++) gpu_max[i] = std::max(gpu_max[i], now[i]);
    };
    auto per_device = [&](std::string* note, std::string* json) {
        size_t sum = 0;
        for (size_t i = 0; i < gpu0.size(); i++) {
            const size_t used = gpu_max[i] - gpu0[i];
            sum += used;
            if (note) *note += (note->empty() ? "GPU MiB per device: " : "/") + std::to_string(used >> 20);
            *json += (i ? "," : ",\"gpu_bytes_per_device\":[") + std::to_string(used) + (i + 1 == gpu0.size() ? "]" : "");
        }
        return sum;
    };
    const int threads = omp_get_max_threads();
    const bool cpu_system = !strcmp(s.system, "faiss-cpu") || !strcmp(s.system, "reference");
    try {
        Built b = make_index(s, (int)D.d, metric);
        faiss::Index* index = b.index.get();
        bool train_reused = false;
        double adds_s = 0;  // train + add; the rest of build_s is the graph build a search starts
        {
            Ticker tick("building " + s.desc);
            const double t0 = now_s();
#ifdef GRAFT_BENCH_FAISS_GPU
            if (s.faiss_gpu) {
                train_reused = build_faiss_gpu(b, s, D, trained);
                index = b.index.get();
            } else
#endif
            {
                if (!index->is_trained) index->train(D.nb, D.xb.data());
                index->add(D.nb, D.xb.data());
#ifdef GRAFT_BENCH_CAGRA
                if (s.cagra_graph) take_cagra_graph(index, D, metric);
#endif
            }
            // graft's graph index (every storage) builds its graph at the first search after the
            // adds (on every shard or replica at once when spread over several: GraftIndexShards
            // and GraftIndexReplicas build all of them before the first search's queries go out):
            // a one-query search puts that build in build_s.
            adds_s = now_s() - t0;
            if (s.graft && contains(s.factory, "GraftGraph")) {
                std::vector<float> d1(D.k);
                std::vector<int64_t> i1(D.k);
                index->search(1, D.xq.data(), D.k, d1.data(), i1.data());
            }
            res.build_s = now_s() - t0;
        }
        sample();
        const std::pair<int, int> shards = s.graft ? graft_shards(index) : std::pair<int, int>{0, 0};
        const bool replicas = dynamic_cast<faiss::IndexReplicas*>(index) != nullptr;
        res.shards = shards;
        res.replicas = replicas;
        res.train_reused = train_reused;
        // graft's own account of each shard's resident device bytes (graph indexes).
        std::string per_shard;
        for (int i = 0; i < shards.first; i++) {
            double bytes = 0;
            if (faiss_graft_get_shard_param(reinterpret_cast<FaissIndex*>(index), i, "gpu_bytes", &bytes) != 0) {
                per_shard.clear();
                break;
            }
            per_shard += (i ? "," : ",\"gpu_bytes_per_shard\":[") + std::to_string((long long)bytes) +
                         (i + 1 == shards.first ? "]" : "");
        }
        printf("%s: built in %.2f s (train + add %.2f s)%s\n", s.desc.c_str(), res.build_s, adds_s,
               train_reused ? " (training reused from the first index of this factory string)" : "");
        if (s.graft && contains(s.factory, "GraftGraph")) {
            double rounds = 0;
            if (faiss_graft_get_param(reinterpret_cast<FaissIndex*>(index), "build_rounds", &rounds) == 0)
                res.build_rounds = (int)rounds;
            double linked = 0;
            if (faiss_graft_get_param(reinterpret_cast<FaissIndex*>(index), "build_linked", &linked) == 0)
                res.build_linked = (long long)linked;
        }
        if ((s.graft && contains(s.factory, "GraftGraph")) || s.cagra) {
            res.graph_recall = graph_row_recall(index, gs);
            if (res.graph_recall >= 0)
                printf("%s: %s; graph rows hold %.4f of %zu sampled vertices' %lld exact neighbours\n",
                       s.desc.c_str(),
                       s.cagra || s.cagra_graph ? "CAGRA's graph"
                                                : ("GRNND, " + std::to_string(res.build_rounds) + " rounds, " +
                                                   std::to_string(res.build_linked) + " vertices linked").c_str(),
                       res.graph_recall, gs.ids.size(), (long long)gs.k);
        }
        fflush(stdout);

        std::vector<double> values = s.sweep;
        if (values.empty()) values.push_back(NAN);  // one configuration, no knob
        const size_t coarse = values.size();
        const int64_t summary_batch = *std::max_element(o.batches.begin(), o.batches.end());
        const std::vector<double> bars(std::begin(bench::kRecallBars), std::end(bench::kRecallBars));
        std::vector<float> dist((size_t)(D.nq * D.k));
        std::vector<int64_t> I((size_t)(D.nq * D.k));
        for (size_t i = 0;; i++) {
            // The coarse sweep, then (--refine) the values that bring each bar between two close points.
            if (i == values.size()) {
                if (s.knob.empty() || o.refine_gap <= 0 || i - coarse >= (size_t)kMaxRefined) break;
                const double next = bench::next_knob_value(res.swept[summary_batch], bars, o.refine_gap, s.range);
                if (!std::isfinite(next)) break;
                values.push_back(next);
            }
            const double v = values[i];
            const bool refined = i >= coarse;
            const std::string label = s.knob.empty() ? s.desc : s.desc + " " + s.knob + "=" + number(v);
            if (deadline.stops(label)) break;
            Status::show(label + (refined ? " (refining)" : " (" + std::to_string(i + 1) + "/" + std::to_string(coarse) + ")"));
            if (!std::isnan(v)) set_knob(s, index, v);
            auto base_rec = [&](int64_t batch) {
                bench::Rec r{s.system, s.family, s.desc.c_str(), D.nq, batch};
                if (!std::isnan(v)) {
                    if (v == std::floor(v)) r.params.add(s.knob.c_str(), (long long)v);
                    else r.params.add(s.knob.c_str(), v);
                }
                if (refined) {
                    r.params.add("refined", true, false);
                    r.note = "refined";
                }
                r.build_s = res.build_s;
                if (res.build_rounds > 0) r.params.add("build_rounds", res.build_rounds, false);
                if (res.build_linked >= 0) r.params.add("build_linked", res.build_linked, false);
                if (res.graph_recall >= 0) r.params.add("graph_recall", res.graph_recall, false);
#ifdef GRAFT_BENCH_CAGRA
                if (s.cagra) {
                    auto* c = static_cast<CagraIndex*>(index);
                    r.params.add("algo", s.cagra_algo.c_str()).add("width", (long long)s.cagra_width, false);
                    r.params.add("build", c->build_algo.c_str(), false);
                    if (c->graph_reused) r.params.add("graph_reused", true, false);
                }
                if (s.cagra_graph) r.params.add("graph", "cagra", false);
#endif
                if (cpu_system) r.threads = threads;
                // Every record says the OpenMP setting it ran under (a GPU index's search call
                // should cost the same at any: examples/search_loop checks it from a user's side).
                r.json_tail = ",\"omp_threads\":" + std::to_string(threads);
                if (!filters.empty()) r.params.add("selectivity", 1.0);
                common_params(r.params, s, shards, replicas, train_reused, o, D);
                return r;
            };
            std::vector<bench::Rec> recs;
            for (int64_t batch : o.batches) {
                // CAGRA links each new search kernel (JIT-LTO) at its first call, seconds long:
                // that call is timed apart (params.first_call_s), the sweep's figures are warm.
                double first_call_s = -1;
                if (s.cagra) {
                    const double t0 = now_s();
                    index->search(std::min(batch, D.nq), D.xq.data(), D.k, dist.data(), I.data());
                    first_call_s = now_s() - t0;
                }
                const double t = bench::time_search(index, D, batch, o.min_time_s, dist.data(), I.data());
                sample();
                bench::Rec r = base_rec(batch);
                if (first_call_s >= 0) r.params.add("first_call_s", first_call_s, false);
                r.qps = D.nq / t;
                r.recall = bench::recall_vs_gt(D, I.data(), D.nq);
                r.latency_ms = t * 1e3 / (double)((D.nq + batch - 1) / batch);
                // GraftFlat's exact path that ran (as bench_exact names them).
                double path = 0;
                FaissIndex* fi = reinterpret_cast<FaissIndex*>(index);
                if (s.graft && !strcmp(s.family, "flat") && faiss_graft_get_param(fi, "last_path", &path) == 0 && path > 0) {
                    r.params.add("path", path == GRAFT_EXACT_INT8 ? "int8"
                                         : path == GRAFT_EXACT_TF32_CERTIFIED ? "tf32-certified"
                                         : path == GRAFT_EXACT_FP16_CERTIFIED ? "fp16-certified"
                                         : path == GRAFT_EXACT_FP16_FUSED ? "fp16-fused" : "fp32");
                    // The share of a search's queries searched in FP32 (certificate failed and
                    // band too wide to re-rank): one more search between two readings.
                    double fb0 = 0, fb1 = 0;
                    if (faiss_graft_get_param(fi, "fp32_fallbacks", &fb0) == 0) {
                        bench::search_all(index, D, batch, dist.data(), I.data());
                        if (faiss_graft_get_param(fi, "fp32_fallbacks", &fb1) == 0)
                            r.params.add("fp32_fallback_frac", (fb1 - fb0) / (double)D.nq);
                    }
                }
                res.swept[batch].push_back({r.recall, r.qps, v, s.knob.empty() ? "" : s.knob + "=" + number(v)});
                recs.push_back(std::move(r));
            }
            if (o.latency_queries > 0 && !refined) {
                const Latency L = time_batch1(index, D, std::min(o.latency_queries, D.nq / o.repeat));
                bench::Rec r = base_rec(1);
                r.nq = L.n;
                r.qps = L.qps;
                r.recall = L.recall;
                r.latency_ms = L.p50;
                r.latency_p99_ms = L.p99;
                r.params.add("latency", "p50", false);
                r.note = "p99 " + number(std::round(L.p99 * 1000) / 1000) + " ms";
                r.summary = false;  // the summary and chart are at the --batch sizes
                recs.push_back(std::move(r));
            }
            // The filtered searches of this configuration (--selectivity).
            const bool takes_sel = s.graft || (!s.faiss_gpu && !s.ggnn && !s.cagra && (!strcmp(s.family, "flat") ||
                                                                            !strcmp(s.family, "ivf")));
            if (!filters.empty() && !takes_sel && i == 0)
                printf("%s: no selector support (FAISS GPU 1.7.3, HNSW, NSG, GGNN): searched unfiltered only\n",
                       s.desc.c_str());
            for (const Filter& f : filters) {
                if (!takes_sel || refined) break;
                faiss::SearchParameters plain;
                faiss::SearchParametersIVF ivf;
                faiss::SearchParameters* sp = &plain;
                if (!strcmp(s.family, "ivf") && !s.graft) {
                    ivf.nprobe = (size_t)v;
                    sp = &ivf;
                }
                sp->sel = f.sel.get();
                WithParams filtered(index, sp);
                const std::vector<std::string> modes =
                        s.graft && !strcmp(s.family, "graph") ? o.filter_modes : std::vector<std::string>{"-"};
                for (const std::string& mode : modes) {
                    char flabel[96];
                    snprintf(flabel, sizeof flabel, "%s s=%g %s", label.c_str(), f.frac, mode.c_str());
                    if (deadline.stops(flabel)) break;
                    auto* fi = reinterpret_cast<FaissIndex*>(index);
                    if (mode != "-")
                        faiss_graft_set_param(fi, "filter_exact_below", mode == "auto" ? -1.0 : mode == "walk" ? 0.0 : 1.0);
                    for (int64_t batch : o.batches) {
                        const double t = bench::time_search(&filtered, D, batch, o.min_time_s, dist.data(), I.data());
                        sample();
                        bench::Rec r = base_rec(batch);
                        r.params = bench::Params();
                        if (!std::isnan(v)) {
                            if (v == std::floor(v)) r.params.add(s.knob.c_str(), (long long)v);
                            else r.params.add(s.knob.c_str(), v);
                        }
                        r.params.add("selectivity", f.frac);
                        if (mode != "-") {
                            double path = 0, beam = 0;
                            faiss_graft_get_param(fi, "filter_path", &path);
                            faiss_graft_get_param(fi, "filter_L", &beam);
                            r.params.add("filter", mode.c_str());
                            r.params.add("path", path == GRAFT_FILTER_EXACT ? "exact" : "walk");
                            if (path == GRAFT_FILTER_WALK) r.params.add("beam", (long long)beam);
                        }
                        r.qps = D.nq / t;
                        r.recall = filtered_recall(I.data(), f.gt, D.nq, D.k);
                        r.latency_ms = t * 1e3 / (double)((D.nq + batch - 1) / batch);
                        r.summary = false;  // the summary and chart are the unfiltered searches'
                        recs.push_back(std::move(r));
                    }
                    if (mode != "-") faiss_graft_set_param(fi, "filter_exact_below", -1.0);
                }
            }
            Status::clear();
            std::string dev_note, dev_json;
            res.gpu_bytes = per_device(gpu0.size() > 1 ? &dev_note : nullptr, &dev_json);
            res.host_bytes = std::max<size_t>(proc_status_kb("VmHWM:") * 1024, host0) - host0;
            res.multi_gpu_json = dev_json + per_shard;
            for (bench::Rec& r : recs) {
                r.gpu_bytes = res.gpu_bytes;
                r.host_bytes = res.host_bytes;
                r.json_tail += res.multi_gpu_json;
                if (!dev_note.empty()) r.note += (r.note.empty() ? "" : "; ") + dev_note;
                out.record(D, std::move(r));
            }
        }
        res.ok = true;
    } catch (const std::exception& e) {
        Status::clear();
        printf("%s: FAILED: %s\n", s.desc.c_str(), e.what());
    }
    return res;
}

// The summary cell's source: "L=32..48" (interpolated between those points), or the measured point
// and its recall, "L=16, r=0.9962".
std::string bracket_label(const bench::BarFigure& b, const std::string& knob) {
    if (b.interpolated) {
        const std::string pre = knob + "=";
        if (!knob.empty() && b.lo.label.rfind(pre, 0) == 0 && b.hi.label.rfind(pre, 0) == 0)
            return b.lo.label + ".." + b.hi.label.substr(pre.size());
        return b.lo.label + ".." + b.hi.label;
    }
    char r[32];
    snprintf(r, sizeof r, "r=%.4f", b.hi.recall);
    return b.hi.label.empty() ? r : b.hi.label + ", " + r;
}

// One summary record: the index's QPS at recall `bar` at one batch size, read off its frontier;
// "interpolated" says how, and "bracket" lists the measured point(s) it comes from.
bench::Rec summary_record(const Options& o, const IndexSpec& s, const IndexResult& res, const Dataset& D,
                          int64_t batch, double bar, const bench::BarFigure& b) {
    bench::Rec r{s.system, s.family, s.desc.c_str(), D.nq, batch};
    r.params.add("recall_bar", bar);
    common_params(r.params, s, res.shards, res.replicas, res.train_reused, o, D);
    r.qps = b.qps;
    r.recall = b.interpolated ? bar : b.hi.recall;
    r.build_s = res.build_s;
    r.gpu_bytes = res.gpu_bytes;
    r.host_bytes = res.host_bytes;
    if (!strcmp(s.system, "faiss-cpu") || !strcmp(s.system, "reference")) r.threads = omp_get_max_threads();
    r.console = false;
    r.summary = false;
    auto point = [&](const bench::SweepPoint& p) {
        char t[96];
        snprintf(t, sizeof t, "\"recall\":%.4f,\"qps\":%.1f}", p.recall, p.qps);
        return "{" + (s.knob.empty() ? std::string() : "\"" + s.knob + "\":" + number(p.knob) + ",") + t;
    };
    r.json_tail = std::string(",\"summary\":true,\"interpolated\":") + (b.interpolated ? "true" : "false") +
                  ",\"bracket\":[" + (b.interpolated ? point(b.lo) + "," : "") + point(b.hi) + "]" +
                  res.multi_gpu_json;
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, &o)) return 2;
    if (o.threads > 0) omp_set_num_threads(o.threads);

    std::vector<IndexSpec> specs;
    for (const std::string& desc : o.indexes) {
        IndexSpec s;
        std::string err;
        if (!describe(desc, o, &s, &err)) {
            fprintf(stderr, "graft-bench: %s\n", err.c_str());
            return 2;
        }
        specs.push_back(s);
    }
    for (const Sweep& w : o.sweeps)
        if (std::none_of(specs.begin(), specs.end(), [&](const IndexSpec& s) { return s.knob == w.knob; })) {
            fprintf(stderr, "graft-bench: --sweep %s=...: no index sweeps %s (L, efSearch, nprobe, tau)\n",
                    w.knob.c_str(), w.knob.c_str());
            return 2;
        }

    Dataset D;
    std::string err;
    {
        Ticker tick("reading " + o.base);
        if (!load(o, &D, &err)) {
            fprintf(stderr, "graft-bench: %s\n", err.c_str());
            return 2;
        }
    }
    if (o.scale > 1) {
        if (D.d != bench::kCells * bench::kBins || !o.gt.empty() || is_hdf5(o.base)) {
            fprintf(stderr, "graft-bench: --scale needs a d = 128 SIFT base with its own queries and no --gt "
                            "(the grown set's ground truth is computed)\n");
            return 2;
        }
        printf("--scale %d: the base is SYNTHETIC, %d cell-permuted, jittered copies of %s (for stress; "
               "recall claims want real data)\n", o.scale, o.scale, o.base.c_str());
        Ticker tick("growing the base to " + std::to_string(o.scale) + " cell-permuted copies");
        bench::scale_by_cells(D, o.scale);
        bench::jitter_copies(D, 0x5EED0033ull);
    }
    // Every index string is checked on the data's dimension before any long phase starts.
    for (const IndexSpec& s : specs) {
        try {
            if (!s.ggnn && !s.cagra) make_index(s, (int)D.d, D.metric == "IP" ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2);
        } catch (const std::exception& e) {
            fprintf(stderr, "graft-bench: --index %s: %s\n", s.desc.c_str(), e.what());
            return 2;
        }
    }
    // A batch over the query count repeats the queries (after the ground truth: it is theirs).
    const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
    if (max_batch > D.nq && !o.selectivities.empty()) {
        printf("--batch %lld > %lld queries: with --selectivity, batches stop at the query count\n",
               (long long)max_batch, (long long)D.nq);
    } else if (max_batch > D.nq) {
        o.repeat = (max_batch + D.nq - 1) / D.nq;
    }
    for (int64_t& b : o.batches) b = std::min(b, D.nq * o.repeat);

    mkdirs(o.out_dir);
    if (!o.gt_cache.empty()) mkdirs(o.gt_cache);
    const std::string jsonl = o.out_dir + "/graft-bench.jsonl";
    FILE* f = fopen(jsonl.c_str(), "a");
    if (!f) {
        fprintf(stderr, "graft-bench: cannot write %s\n", jsonl.c_str());
        return 2;
    }
    const std::string date = bench::utc_date();
    std::string run_id = o.run_id;
    if (run_id.empty()) {
        run_id = "graft-bench-" + date;
        run_id.erase(std::remove_if(run_id.begin(), run_id.end(), [](char c) { return c == ':' || c == '-'; }),
                     run_id.end());
        run_id.insert(5, "-").insert(11, "-");  // graft-bench-YYYYMMDDTHHMMSSZ
    }
    const std::string device = device_name();

    printf("graft-bench: device %s, %d CPU threads, commit %s, run %s\n", device.c_str(), omp_get_max_threads(),
           o.commit.c_str(), run_id.c_str());
    printf("data: %s: base %lld x %lld, %lld queries, k = %lld, metric %s\n", D.name.c_str(), (long long)D.nb,
           (long long)D.d, (long long)D.nq, (long long)D.k, D.metric.c_str());
    std::string batches;
    for (int64_t b : o.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
    printf("batch sizes %s%s; records: %s\n", batches.c_str(),
           o.latency_queries > 0 ? (", latency at batch 1 over " + std::to_string(std::min(o.latency_queries, D.nq)) +
                                    " queries").c_str()
                                 : "",
           jsonl.c_str());
    fflush(stdout);
    if (!ground_truth(o, D, &err)) {
        fprintf(stderr, "graft-bench: %s\n", err.c_str());
        return 2;
    }
    if (o.scale > 1) {
        bench::count_ties(D);
        printf("recall@%lld counts ties: a returned id at the query's k-th exact distance or closer is found\n",
               (long long)D.k);
    }

    GraphSample gs;
    if (o.graph_sample > 0) {
        const double t0 = now_s();
        if (!sample_graph_truth(D, o.graph_sample, &gs)) {
            fprintf(stderr, "graft-bench: the sampled vertices' exact neighbours failed\n");
            return 2;
        }
        printf("graph recall: %zu sampled vertices' exact %lld neighbours in %.1f s\n", gs.ids.size(),
               (long long)gs.k, now_s() - t0);
    }

    // The selectors and their exact filtered ground truths (--selectivity).
    std::vector<Filter> filters;
    for (size_t i = 0; i < o.selectivities.size(); i++) {
        Filter fl;
        fl.frac = o.selectivities[i];
        fl.ids = random_ids(D.nb, fl.frac, 0x9E3779B97F4A7C15ull + i);
        fl.sel.reset(new faiss::IDSelectorBatch(fl.ids.size(), fl.ids.data()));
        const double t0 = now_s();
        if (!filtered_ground_truth(D, &fl)) {
            fprintf(stderr, "graft-bench: filtered ground truth failed\n");
            return 2;
        }
        printf("selectivity %g: %zu ids pass (IDSelectorBatch); filtered ground truth in %.1f s\n", fl.frac,
               fl.ids.size(), now_s() - t0);
        filters.push_back(std::move(fl));
    }
    if (o.repeat > 1) {
        const int64_t nq = D.nq, R = o.repeat;
        D.xq.resize((size_t)(nq * R * D.d));
        for (int64_t r = 1; r < R; r++) std::copy_n(D.xq.data(), nq * D.d, D.xq.data() + r * nq * D.d);
        D.gt.resize((size_t)(nq * R * D.k));
        for (int64_t r = 1; r < R; r++) std::copy_n(D.gt.data(), nq * D.k, D.gt.data() + r * nq * D.k);
        if (!D.kth.empty()) {
            D.kth.resize((size_t)(nq * R));
            for (int64_t r = 1; r < R; r++) std::copy_n(D.kth.data(), nq, D.kth.data() + r * nq);
        }
        D.nq = nq * R;
        printf("queries repeated %lld times (%lld) to fill a batch of %lld; recall is theirs\n", (long long)R,
               (long long)D.nq, (long long)max_batch);
    }

    bench::Recorder out(f, "graft-bench", run_id, date, o.commit, device);
    int index_w = 13;
    for (const IndexSpec& s : specs) index_w = std::max(index_w, (int)s.desc.size());
    out.set_widths(index_w, 24, index_w + 8);
    bench::Deadline deadline(o.deadline_s);
    std::vector<IndexResult> results;
    TrainedCache trained;
    printf("\n");
    out.header();
    for (const IndexSpec& s : specs) {
        if (deadline.stops(s.desc)) break;
        results.push_back(run_index(o, s, D, out, deadline, filters, trained, gs));
    }

    // A summary at each --batch: build, memory, and each index's QPS at each recall bar read off
    // its Pareto frontier at that batch (interpolated where two points lie around the bar), ratio
    // to the first index; one summary record per index, batch and bar reached. The chart is the
    // largest batch's.
    const int64_t batch = *std::max_element(o.batches.begin(), o.batches.end());
    std::vector<int64_t> sizes = o.batches;
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    std::vector<bench::Curve> curves;
    for (int64_t b_sz : sizes) {
        printf("\n== summary: %s, batch %lld: QPS at recall@%lld = each bar on each index's Pareto frontier "
               "(x = ratio to %s)\n",
               D.name.c_str(), (long long)b_sz, (long long)D.k, specs[0].desc.c_str());
        printf("   ~ interpolated between the two frontier points named (log QPS linear in recall); otherwise the\n"
               "   measured point (its recall), where no point lies below the bar\n");
        const int cell_w = 32;
        printf("%-*s %8s %9s %9s", index_w, "index", "build s", "GPU MiB", "host MiB");
        for (double bar : bench::kRecallBars) printf("   %-*.2f", cell_w, bar);
        printf("\n");
        std::vector<bench::BarFigure> first(std::size(bench::kRecallBars));
        for (size_t i = 0; i < results.size(); i++) {
            const IndexSpec& s = specs[i];
            const IndexResult& r = results[i];
            const auto it = r.swept.find(b_sz);
            const std::vector<bench::SweepPoint> none, &pts = it == r.swept.end() ? none : it->second;
            const std::vector<bench::SweepPoint> frontier = bench::pareto_frontier(pts);
            printf("%-*s %8.2f %9.0f %9.0f", index_w, s.desc.c_str(), r.build_s, r.gpu_bytes / 1048576.0,
                   r.host_bytes / 1048576.0);
            for (size_t j = 0; j < std::size(bench::kRecallBars); j++) {
                const double bar = bench::kRecallBars[j];
                const bench::BarFigure b = bench::qps_at_recall(frontier, bar);
                if (i == 0) first[j] = b;
                std::string cell = "-";
                if (b.reached) {
                    char q[48];
                    snprintf(q, sizeof q, "%s%.0f", b.interpolated ? "~" : "", b.qps);
                    cell = q + std::string(" (") + bracket_label(b, s.knob) + ")";
                    if (i > 0 && first[j].reached) {
                        snprintf(q, sizeof q, " %.2fx", b.qps / first[j].qps);
                        cell += q;
                    }
                    out.record(D, summary_record(o, s, r, D, b_sz, bar, b));
                }
                printf("   %-*s", cell_w, cell.c_str());
            }
            printf("\n");
            if (b_sz != batch) continue;
            bench::Curve c{s.desc, {}};
            for (const bench::SweepPoint& p : pts) c.pts.push_back({p.recall, p.qps});
            curves.push_back(c);
        }
    }
    fclose(f);
    int rc = std::all_of(results.begin(), results.end(), [](const IndexResult& r) { return r.ok; }) ? 0 : 1;

    if (o.plot) {
        const std::string stem = o.out_dir + "/recall-qps-" + D.name, svg = stem + ".svg", png = stem + ".png";
        const std::string title = D.name + " (" + std::to_string(D.nb) + " x " + std::to_string(D.d) + "), batch " +
                                  std::to_string(batch) + ", " + device + ", commit " + o.commit;
        if (!bench::write_recall_qps_svg(svg, title, "recall@" + std::to_string(D.k), curves,
                                        std::vector<double>(std::begin(bench::kRecallBars), std::end(bench::kRecallBars)), &err)) {
            fprintf(stderr, "graft-bench: %s\n", err.c_str());
            rc = 1;
        } else {
            printf("\nchart: %s%s\n", svg.c_str(),
                   bench::svg_to_png(svg, png) ? (" and " + png).c_str() : " (no rsvg-convert on PATH: no PNG)");
        }
    }
    return rc;
}
