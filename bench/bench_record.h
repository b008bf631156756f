// What the GPU search benchmarks (bench_search, bench_bang) share: their command line, the
// datasets and their exact ground truth, the records (DESIGN.md, "Benchmark records") with the
// console table and end-of-run summary, the deadline, and device-memory readings (every record
// names the FAISS the program was built with: faiss_version, the FAISS peers' version); graft-bench
// shares the datasets, records and summary. Header-only, C++17; needs graft's flat index and
// FAISS's IndexFlat (whichever FAISS the program links: the CPU libfaiss or the GPU build,
// bench/CMakeLists.txt), and the CUDA runtime where GRAFT_BENCH_CUDA is defined (without it there
// are no device-memory readings and no cuda_device()).
#ifndef GRAFT_BENCH_RECORD_H
#define GRAFT_BENCH_RECORD_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef GRAFT_BENCH_CUDA
#include <cuda_runtime.h>
#endif

#include <faiss/IndexFlat.h>

#include <memory>

#include "bench_common.h"
#include "graft/dataset.h"
#include "graft/flat.h"
#include "graft/graft.h"

namespace bench {

constexpr int64_t K = 10;  // recall@10 everywhere
constexpr double kRecallBars[] = {0.90, 0.95, 0.99};

// ---- command line ---------------------------------------------------------------------------------

// The options every search benchmark takes:
//   --out F.jsonl --commit C --run-id R --data DIR --fmnist DIR --dense-sift DIR --only NAME
//   --quick --deadline S --replicate R
// --replicate R (R > 1): dense-sift1m becomes "dense-sift1m-xR", R x 1M vectors: the base, then
// R - 1 copies of it, each value moved by a deterministic offset in [-16, 16] (an expected squared
// L2 of 128 x 90.7 = 11.6k between a vector and a copy, 23k between two copies), for the scale of
// a run (memory, build and search time); its recall is against its own exact ground truth and not
// comparable with real data of that size.
struct Options {
    std::string bench;  // the records' "bench" field; also names the defaults below
    std::string out_path, commit = "unknown", run_id, data = "../shared/data",
                fmnist = "/usr/share/datasets/fashion-mnist", dense, kde, only;
    bool quick = false;
    double deadline_s = 1e9;
    int replicate = 1;

    explicit Options(std::string name) : bench(std::move(name)), out_path("bench_" + bench + ".jsonl") {}

    // False (the usage or the error printed) when the command line is not understood: exit 2.
    bool parse(int argc, char** argv);
};

// The datasets (k = 10, L2), in the order they run: dense-sift1m (--dense-sift DIR holding
// base.u8bin and query.u8bin), fashion-mnist (--fmnist DIR: the 60k training images are the base,
// the 10k test images the queries), sift5k (DIR/sift5k of --data), kde-patches1m (--kde DIR, as
// dense-sift1m's). Default: all but sift5k (dense-sift1m and kde-patches1m where their DIR is
// given); --quick: sift5k; --only NAME: that one.
struct Source {
    std::string name, base, query;
    bool fmnist;
};

inline std::vector<Source> sources(const Options& o) {
    return {{"dense-sift1m", o.dense + "/base.u8bin", o.dense + "/query.u8bin", false},
            {"fashion-mnist", o.fmnist + "/train-images-idx3-ubyte.gz", o.fmnist + "/t10k-images-idx3-ubyte.gz", true},
            {"sift5k", o.data + "/sift5k/sift5k_base.fvecs", o.data + "/sift5k/sift5k_query.fvecs", false},
            {"kde-patches1m", o.kde + "/base.u8bin", o.kde + "/query.u8bin", false}};
}

inline bool Options::parse(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--quick") quick = true;
        else if (a == "--out" && has_value) out_path = argv[++i];
        else if (a == "--commit" && has_value) commit = argv[++i];
        else if (a == "--run-id" && has_value) run_id = argv[++i];
        else if (a == "--data" && has_value) data = argv[++i];
        else if (a == "--fmnist" && has_value) fmnist = argv[++i];
        else if (a == "--dense-sift" && has_value) dense = argv[++i];
        else if (a == "--kde" && has_value) kde = argv[++i];
        else if (a == "--only" && has_value) only = argv[++i];
        else if (a == "--deadline" && has_value) deadline_s = atof(argv[++i]);
        else if (a == "--replicate" && has_value) replicate = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--out F.jsonl] [--commit C] [--run-id R] [--data DIR] [--fmnist DIR] "
                    "[--dense-sift DIR] [--kde DIR] [--only dense-sift1m|fashion-mnist|sift5k|kde-patches1m] [--quick] [--deadline S] "
                    "[--replicate R]\n",
                    argv[0]);
            return false;
        }
    }
    if (replicate < 1 || replicate > 200) {
        fprintf(stderr, "--replicate: %d, need 1..200\n", replicate);
        return false;
    }
    const std::vector<Source> all = sources(*this);
    if (!only.empty() && std::none_of(all.begin(), all.end(), [&](const Source& s) { return s.name == only; })) {
        fprintf(stderr, "--only: unknown dataset %s\n", only.c_str());
        return false;
    }
    return true;
}

// ---- datasets ---------------------------------------------------------------------------------------

struct Dataset {
    std::string name;
    std::vector<float> xb, xq;
    int64_t nb = 0, nq = 0, d = 0;
    int64_t k = K;                // neighbours searched and scored (graft-bench's --k)
    std::string metric = "L2";    // the records' metric: "L2" or "IP"
    std::vector<int64_t> gt;      // nq x k, exact
    // Recall with ties (count_ties): each query's k-th exact distance; a returned id at that
    // distance or closer counts as found. Empty: recall by ids (recall_at_k).
    std::vector<double> kth;
};

// Options::replicate: D.xb followed by R - 1 jittered copies (offsets from a hash of the copy,
// row and column, so the same on every run and thread count).
inline void replicate(Dataset& D, int R) {
    const int64_t n = D.nb, d = D.d;
    D.xb.resize((size_t)(n * R * d));
#pragma omp parallel for schedule(static)
    for (int64_t i = n; i < n * R; i++) {
        const float* src = D.xb.data() + (i % n) * d;
        float* dst = D.xb.data() + i * d;
        uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        for (int64_t j = 0; j < d; j++) {
            h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
            dst[j] = src[j] + (float)((int)(h % 33) - 16);
        }
    }
    D.nb = n * R;
    D.name += "-x" + std::to_string(R);
    printf("%s: %lld x %lld (the base and %d jittered copies, for scale)\n", D.name.c_str(), (long long)D.nb,
           (long long)d, R - 1);
}

// --scale C (bench_bang's run_scale, graft-bench's --scale): a d = 128 SIFT set (4 x 4 cells of 8
// orientation bins) grown to C copies, copy c with its 16 cells permuted (copy 0 unpermuted); a
// permutation of coordinates is an isometry, so every copy keeps the source's neighbour structure.
constexpr int kCells = 16, kBins = 8;

// One row: dst = src with its cells permuted (dst cell j = src cell perm[j]).
inline void permute_row(const float* src, const int* perm, float* dst) {
    for (int j = 0; j < kCells; j++) memcpy(dst + j * kBins, src + perm[j] * kBins, kBins * sizeof(float));
}

// n rows, one permutation, all threads.
inline void permute_cells(const float* src, int64_t n, const int* perm, float* dst) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) permute_row(src + i * kCells * kBins, perm, dst + i * kCells * kBins);
}

// The C permutations: identity for copy 0, then Fisher-Yates from a splitmix64 stream per copy.
inline std::vector<std::vector<int>> cell_perms(int C) {
    std::vector<std::vector<int>> P(C, std::vector<int>(kCells));
    for (int c = 0; c < C; c++) {
        for (int j = 0; j < kCells; j++) P[c][j] = j;
        uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(c + 1);
        for (int j = kCells - 1; j > 0 && c > 0; j--) {
            h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29, h *= 0x94D049BB133111EBull, h ^= h >> 32;
            std::swap(P[c][j], P[c][h % (uint64_t)(j + 1)]);
        }
    }
    return P;
}

// D grown to C cell-permuted copies (D.xb copy c = the source permuted by cell_perms(C)[c]),
// query q permuted as copy q mod C, as bench_bang --scale does; the ground truth must be computed
// afresh. D.d must be 128.
inline void scale_by_cells(Dataset& D, int C) {
    const auto perms = cell_perms(C);
    const int64_t n1 = D.nb, d = D.d;
    std::vector<float> src;
    src.swap(D.xb);
    D.xb.resize((size_t)(n1 * C * d));
    for (int c = 0; c < C; c++) permute_cells(src.data(), n1, perms[c].data(), D.xb.data() + (size_t)c * n1 * d);
    std::vector<float> q(D.xq);
    for (int64_t i = 0; i < D.nq; i++) permute_row(q.data() + i * d, perms[i % C].data(), D.xq.data() + i * d);
    D.nb = n1 * C;
    D.name += "-perm" + std::to_string(C);
    D.gt.clear();
}


// --scale's copies made never equal (graft-bench): every value of every copy moved by a seeded
// offset of -1, 0, 0 or +1 (one draw of 2 bits a value from a splitmix64 hash of the row, so the
// same on every run and thread count), then clamped to [0, 255] where the data is uint8 (integer
// values in that range: dense SIFT's u8bin) so that it stays so. The cell permutation maps many
// vectors with all-zero cells onto other copies' vectors exactly; the offsets part them by a few
// units of squared L2 (an expected 64 between two copies of one vector, against thousands between
// near neighbours), so the copies keep their neighbour structure and ids can be scored.
inline void jitter_copies(Dataset& D, uint64_t seed) {
    const int64_t total = D.nb * D.d;
    int integral = 1;
#pragma omp parallel for reduction(&& : integral) schedule(static)
    for (int64_t i = 0; i < total; i++) {
        const float v = D.xb[i];
        integral = integral && v >= 0 && v <= 255 && v == std::floor(v);
    }
    const int64_t d = D.d;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < D.nb; r++) {
        float* row = D.xb.data() + r * d;
        uint64_t h = 0;
        for (int64_t j = 0; j < d; j++) {
            if (j % 32 == 0) {  // 64 bits: 32 two-bit draws
                h = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(r * ((d + 31) / 32) + j / 32 + 1));
                h ^= h >> 30, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 27, h *= 0x94D049BB133111EBull, h ^= h >> 31;
            }
            static const float kStep[4] = {-1.f, 0.f, 0.f, 1.f};
            float v = row[j] + kStep[h & 3];
            h >>= 2;
            if (integral) v = std::min(255.f, std::max(0.f, v));
            row[j] = v;
        }
    }
    D.name += "-jit";
}

// Exact distance of query q to base vector id, in double (the same arithmetic for every id, so
// equal vectors give equal distances): squared L2, or the inner product.
inline double exact_distance(const Dataset& D, int64_t q, int64_t id) {
    const float* a = D.xq.data() + q * D.d;
    const float* b = D.xb.data() + id * D.d;
    double s = 0;
    if (D.metric == "IP") {
        for (int64_t j = 0; j < D.d; j++) s += (double)a[j] * b[j];
    } else {
        for (int64_t j = 0; j < D.d; j++) {
            const double t = (double)a[j] - b[j];
            s += t * t;
        }
    }
    return s;
}

// Recall that counts ties at the k-th distance: D.kth from D.gt. A query whose true k-th
// neighbour has equal-distance twins has several exact top-k answers; recall by ids scores all
// but one of them as misses (the grown --scale set has many such ties: copies of vectors whose
// cells are all zero).
inline void count_ties(Dataset& D) {
    D.kth.assign((size_t)D.nq, NAN);
    const bool ip = D.metric == "IP";
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < D.nq; q++) {
        const int64_t id = D.gt[q * D.k + D.k - 1];
        D.kth[q] = id >= 0 ? exact_distance(D, q, id) : (ip ? -INFINITY : INFINITY);
    }
}

inline bool read_matrix(const std::string& path, bool fmnist, std::vector<float>& x, int64_t& n, int64_t& d) {
    float* p = nullptr;
    int rc = fmnist ? graft_fmnist_read(path.c_str(), -1, &p, &n, &d)
                    : graft_dataset_read_f32(path.c_str(), 0, -1, &p, &n, &d);
    if (rc != GRAFT_OK) {
        printf("cannot read %s: %s\n", path.c_str(), graft_last_error());
        return false;
    }
    x.assign(p, p + n * d);
    free(p);
    return true;
}

// recall@k of I (n rows of D.k) against the ground truth; rows beyond nq repeat the query set.
// With D.kth (count_ties): of each row's distinct returned ids, those at the query's k-th exact
// distance or closer, at most k, over k.
inline double recall_vs_gt(const Dataset& D, const int64_t* I, int64_t n) {
    if (!D.kth.empty()) {
        const bool ip = D.metric == "IP";
        int64_t hits = 0;
#pragma omp parallel for reduction(+ : hits) schedule(static)
        for (int64_t r = 0; r < n; r++) {
            const int64_t q = r % D.nq;
            std::vector<int64_t> row(I + r * D.k, I + (r + 1) * D.k);
            std::sort(row.begin(), row.end());
            int64_t h = 0;
            for (int64_t j = 0; j < D.k; j++) {
                const int64_t id = row[j];
                if (id < 0 || id >= D.nb || (j > 0 && id == row[j - 1])) continue;
                const double dist = exact_distance(D, q, id);
                h += ip ? dist >= D.kth[q] : dist <= D.kth[q];
            }
            hits += std::min(h, D.k);
        }
        return n ? (double)hits / (double)(n * D.k) : 0.0;
    }
    double hits = 0;
    for (int64_t r = 0; r < n; r += D.nq) {
        int64_t m = std::min(D.nq, n - r);
        hits += recall_at_k(I + r * D.k, D.gt.data(), m, D.k) * m;
    }
    return hits / n;
}

// ---- device memory ----------------------------------------------------------------------------------

// Device memory in use on the current device (all holders), bytes; 0 without CUDA.
inline size_t gpu_used_bytes() {
#ifdef GRAFT_BENCH_CUDA
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return 0;
    return total - free_b;
#else
    return 0;
#endif
}

// Device memory in use on each visible device (cudaMemGetInfo per device; empty without CUDA).
// The calling thread's current device is restored.
inline std::vector<size_t> gpu_used_bytes_per_device() {
    std::vector<size_t> out;
#ifdef GRAFT_BENCH_CUDA
    int n = 0, cur = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        return out;
    }
    for (int i = 0; i < n; i++) {
        size_t free_b = 0, total = 0;
        if (cudaSetDevice(i) != cudaSuccess || cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
            (void)cudaGetLastError();
            free_b = total = 0;
        }
        out.push_back(total - free_b);
    }
    cudaSetDevice(cur);
#endif
    return out;
}

// Device memory taken since gpu_used_bytes() returned `base`.
inline size_t gpu_bytes_since(size_t base) {
    const size_t used = gpu_used_bytes();
    return used > base ? used - base : 0;
}

// ---- records ------------------------------------------------------------------------------------

// The parameters of one configuration: a JSON object for the record, and a console label made of
// the entries marked shown (numbers as key=value, strings as the bare value).
class Params {
   public:
    template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
    Params& add(const char* key, T v, bool show = true) {
        char s[40];
        if constexpr (std::is_integral_v<T>)
            snprintf(s, sizeof s, "%lld", (long long)v);
        else
            snprintf(s, sizeof s, "%.6g", (double)v);
        return put(key, s, s, show, true);
    }
    Params& add(const char* key, const char* v, bool show = true) {
        return put(key, std::string("\"") + v + "\"", v, show, false);
    }
    Params& add(const char* key, bool v, bool show = true) {
        return put(key, v ? "true" : "false", v ? key : "", show && v, false);
    }
    std::string json() const { return "{" + json_ + "}"; }
    const std::string& label() const { return label_; }

   private:
    Params& put(const char* key, const std::string& json_value, const std::string& shown, bool show,
                bool with_key) {
        json_ += (json_.empty() ? "\"" : ",\"") + std::string(key) + "\":" + json_value;
        if (show) label_ += (label_.empty() ? "" : " ") + (with_key ? std::string(key) + "=" : "") + shown;
        return *this;
    }
    std::string json_, label_;
};

// One measured configuration.
struct Rec {
    const char* system;
    const char* family;
    const char* index;   // graft's name or FAISS's factory string
    int64_t nq, batch;   // queries searched, queries per search call
    Params params;       // "batch" is appended by Recorder::record
    double qps = -1, recall = -1, build_s = -1, latency_ms = -1;  // < 0: not measured
    double latency_p99_ms = -1;  // graft-bench's batch-1 rows: latency_ms is then the p50
    const char* mode = nullptr;  // graft's memory mode, where it applies
    size_t gpu_bytes = 0;        // the record's gpu_peak_bytes (0: not measured)
    size_t host_bytes = 0;       // the record's host_peak_bytes (0: not measured)
    int threads = 0;
    std::string note;        // console only
    bool summary = true;     // counted in the end-of-run summary (ablation rows are not)
    bool console = true;     // a row of the console table (graft-bench's summary records are not)
    std::string json_tail;   // more fields of the record, verbatim: ",\"key\":value..."
};

struct Point {  // what the summary keeps of a record
    std::string dataset, system, family, index, label;
    int64_t batch;
    double recall, qps;
    std::string mode;  // "" where none applies
    std::string group() const { return system + " " + index + " @" + std::to_string(batch); }
};

// Writes the records (JSON lines, flushed one by one) and the console table; keeps the points of
// the summary. `bench` is the records' bench field ("search", "bang", ...).
class Recorder {
   public:
    Recorder(FILE* f, std::string bench, std::string run_id, std::string date, std::string commit,
             std::string device)
        : f_(f), bench_(std::move(bench)), run_id_(std::move(run_id)), date_(std::move(date)),
          commit_(std::move(commit)), device_(std::move(device)) {}

    // Console column widths of the index and params (a longer value pushes the row right).
    void set_widths(int index_w, int params_w, int group_w) {
        index_w_ = index_w;
        params_w_ = params_w;
        group_w_ = group_w;
    }

    void header() const {
        printf("%-10s %-*s %-*s %9s %12s %10s  %s\n", "system", index_w_, "index", params_w_, "params",
               "recall@10", "QPS", "ms/call", "notes");
    }

    void record(const Dataset& D, Rec r) {
        const std::string knobs = r.params.label();  // the summary's label: batch is in its group
        r.params.add("batch", r.batch);
        fprintf(f_,
                "{\"run_id\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"bench\":\"%s\","
                "\"faiss_version\":\"%d.%d.%d\",\"system\":\"%s\",\"family\":\"%s\",\"index\":\"%s\"",
                run_id_.c_str(), date_.c_str(), commit_.c_str(), device_.c_str(), bench_.c_str(),
                FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR, FAISS_VERSION_PATCH, r.system, r.family, r.index);
        if (r.mode) fprintf(f_, ",\"mode\":\"%s\"", r.mode);
        fprintf(f_, ",\"dataset\":\"%s\",\"n\":%lld,\"d\":%lld,\"nq\":%lld,\"k\":%lld,\"metric\":\"%s\",\"params\":%s",
                D.name.c_str(), (long long)D.nb, (long long)D.d, (long long)r.nq, (long long)D.k,
                D.metric.c_str(), r.params.json().c_str());
        if (r.qps >= 0) fprintf(f_, ",\"qps\":%.1f", r.qps);
        if (r.recall >= 0) fprintf(f_, ",\"recall\":%.4f", r.recall);
        if (r.build_s >= 0) fprintf(f_, ",\"build_s\":%.3f", r.build_s);
        if (r.latency_ms >= 0) fprintf(f_, ",\"latency_ms\":%.4f", r.latency_ms);
        if (r.latency_p99_ms >= 0) fprintf(f_, ",\"latency_p99_ms\":%.4f", r.latency_p99_ms);
        if (r.gpu_bytes) fprintf(f_, ",\"gpu_peak_bytes\":%zu", r.gpu_bytes);
        if (r.host_bytes) fprintf(f_, ",\"host_peak_bytes\":%zu", r.host_bytes);
        if (r.threads) fprintf(f_, ",\"threads\":%d", r.threads);
        fprintf(f_, "%s}\n", r.json_tail.c_str());
        fflush(f_);
        if (!r.console) return;

        printf("%-10s %-*s %-*s %9.4f %12.0f %10.3f  %s\n", r.system, index_w_, r.index, params_w_,
               r.params.label().c_str(), r.recall, r.qps, r.latency_ms, r.note.c_str());
        fflush(stdout);
        if (r.summary)
            points_.push_back({D.name, r.system, r.family, r.index, knobs, r.batch, r.recall, r.qps,
                               r.mode ? r.mode : ""});
    }

    // Per dataset and system (at each batch size): the best QPS at recall@10 >= each bar; then
    // after_dataset(name), where the program prints its own comparisons (best() below).
    template <class F>
    void summary(F&& after_dataset) const {
        printf("\n== summary: best QPS at recall@10 >= each bar (the configuration that reaches it)\n");
        printf("  %-*s", group_w_, "system index @batch");
        for (double bar : kRecallBars) printf("  %6s%.2f %-13s", ">= ", bar, "");
        printf("\n");
        std::vector<std::string> datasets;
        for (const Point& p : points_)
            if (std::find(datasets.begin(), datasets.end(), p.dataset) == datasets.end()) datasets.push_back(p.dataset);
        for (const std::string& ds : datasets) {
            printf("%s\n", ds.c_str());
            std::vector<std::string> groups;
            for (const Point& p : points_)
                if (p.dataset == ds && std::find(groups.begin(), groups.end(), p.group()) == groups.end())
                    groups.push_back(p.group());
            for (const std::string& g : groups) {
                printf("  %-*s", group_w_, g.c_str());
                for (double bar : kRecallBars) {
                    const Point* b = best(ds, bar, [&](const Point& p) { return p.group() == g; });
                    if (b) printf("  %10.0f %-13s", b->qps, b->label.empty() ? "" : ("(" + b->label + ")").c_str());
                    else printf("  %10s %-13s", "-", "");
                }
                printf("\n");
            }
            after_dataset(ds);
        }
    }

    // The fastest point of `ds` at recall >= bar among those `match` accepts (nullptr: none).
    template <class M>
    const Point* best(const std::string& ds, double bar, M&& match) const {
        const Point* b = nullptr;
        for (const Point& p : points_)
            if (p.dataset == ds && p.recall >= bar && match(p) && (!b || p.qps > b->qps))
                b = &p;
        return b;
    }

    const std::vector<Point>& points() const { return points_; }

   private:
    FILE* f_;
    std::string bench_, run_id_, date_, commit_, device_;
    int index_w_ = 13, params_w_ = 36, group_w_ = 30;
    std::vector<Point> points_;
};

class Deadline {
   public:
    explicit Deadline(double seconds) : end_(now_s() + seconds) {}
    // True (and says so) when `what`, expected to take `need_s`, would start or end past the deadline.
    bool stops(const std::string& what, double need_s = 0) const {
        if (now_s() + need_s <= end_) return false;
        printf("deadline: %s skipped\n", what.c_str());
        return true;
    }

   private:
    double end_;
};

// ---- the run ----------------------------------------------------------------------------------------
#ifdef GRAFT_BENCH_CUDA

// Device 0's properties and the records' device field (GRAFT_DEVICE_NAME when set, else the CUDA
// name); false (said on stderr) when there is no CUDA device.
inline bool cuda_device(const Options& o, cudaDeviceProp* prop, std::string* device) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "bench_%s: no CUDA device\n", o.bench.c_str());
        return false;
    }
    *prop = cudaDeviceProp{};
    cudaGetDeviceProperties(prop, 0);
    const char* dev_env = getenv("GRAFT_DEVICE_NAME");
    *device = dev_env && *dev_env ? dev_env : prop->name;
    return true;
}
#endif

// Loads the chosen datasets one at a time (Source) and hands each to run(Dataset&); stops at the
// deadline.
template <class F>
void for_each_dataset(const Options& o, const Deadline& deadline, F&& run) {
    for (const Source& s : sources(o)) {
        const bool chosen = !o.only.empty() ? s.name == o.only : o.quick ? s.name == "sift5k" : s.name != "sift5k";
        if (!chosen) continue;
        if ((s.name == "dense-sift1m" && o.dense.empty()) || (s.name == "kde-patches1m" && o.kde.empty())) {
            if (s.name == "dense-sift1m") printf("dense-sift1m: no --dense-sift DIR given, skipped\n");
            continue;
        }
        if (deadline.stops(s.name)) break;
        Dataset D;
        D.name = s.name;
        int64_t nq_d = 0;
        if (!read_matrix(s.base, s.fmnist, D.xb, D.nb, D.d) || !read_matrix(s.query, s.fmnist, D.xq, D.nq, nq_d))
            continue;
        if (nq_d != D.d) {
            printf("%s: queries have d=%lld, base d=%lld; skipped\n", s.name.c_str(), (long long)nq_d, (long long)D.d);
            continue;
        }
        if (o.replicate > 1 && s.name == "dense-sift1m") replicate(D, o.replicate);
        run(D);
    }
}

// ---- ground truth and the exact peer -----------------------------------------------------------------

// Fills D.gt with graft's exact GPU flat search, checks it against FAISS IndexFlatL2 on a prefix of
// the queries, and records the flat search (batch nq) as the exact peer (system graft, family
// flat; its recall is its agreement with FAISS on that prefix).
inline bool ground_truth(Recorder& out, Dataset& D) {
    graft_flat_params fp;
    graft_flat_params_defaults(&fp);
    fp.device = 0;
    graft_flat* flat = nullptr;
    std::vector<float> dist(D.nq * K);
    D.gt.assign(D.nq * K, -1);
    if (graft_flat_new(D.d, &fp, &flat) != GRAFT_OK || graft_flat_add(flat, D.nb, D.xb.data()) != GRAFT_OK ||
        graft_flat_search(flat, D.nq, D.xq.data(), K, dist.data(), D.gt.data()) != GRAFT_OK) {
        printf("graft flat index failed: %s\n", graft_last_error());
        graft_flat_free(flat);
        return false;
    }
    // FAISS CPU on about 2e8 distances' worth of queries (a few seconds on 1M).
    const int64_t nq_check = std::min(D.nq, std::max<int64_t>(100, (int64_t)(2e8 / D.nb)));
    std::vector<int64_t> I(nq_check * K);
    {
        faiss::IndexFlatL2 cpu(D.d);
        cpu.add(D.nb, D.xb.data());
        cpu.search(nq_check, D.xq.data(), K, dist.data(), I.data());
    }
    const double agree = recall_at_k(D.gt.data(), I.data(), nq_check, K);
    printf("ground truth: graft GPU flat, agreement with FAISS IndexFlatL2 on the first %lld queries %.4f%s\n",
           (long long)nq_check, agree, agree < 0.999 ? "  WARNING: below 0.999 (ties at the k-th distance?)" : "");

    std::vector<int64_t> If(D.nq * K);
    const double t = median_time(3, [&] {
        return graft_flat_search(flat, D.nq, D.xq.data(), K, dist.data(), If.data()) == GRAFT_OK;
    });
    if (t > 0) {
        Rec r{"graft", "flat", "GraftFlat", D.nq, D.nq};
        r.params.add("recall_vs", "faiss-cpu IndexFlatL2", false).add("recall_queries", nq_check, false);
        r.qps = D.nq / t;
        r.recall = agree;
        r.latency_ms = t * 1e3;
        r.gpu_bytes = graft_flat_gpu_scratch_peak(flat) + (size_t)D.nb * (D.d + 1) * 4;
        r.note = "exact; recall = agreement with FAISS on " + std::to_string(nq_check) + " queries";
        out.record(D, std::move(r));
    }
    graft_flat_free(flat);
    return true;
}

// Exact top-D.k neighbours of every query into D.gt: graft's flat index on the GPUs when one is
// usable, else FAISS's IndexFlat on the CPU (L2 or inner product as D.metric says). On the GPU
// the base goes in blocks of at most kExactBlockBytes (a block's FP32 vectors and FP16 codes fit
// any of our devices; 10M x 128 is one block), each block on the next GPU, one host thread per
// GPU, every block searched for all queries (in calls of `block` queries); the blocks' top-k
// lists are merged on the host, ties to the smaller id as graft's flat index orders them.
// progress(done) reports queries done (after the last block: all of them). False (said) on
// failure.
constexpr size_t kExactBlockBytes = size_t(8) << 30;

template <class P>
bool exact_neighbours(Dataset& D, int64_t block, P&& progress) {
    const bool ip = D.metric == "IP";
    D.gt.assign((size_t)(D.nq * D.k), -1);
    if (!graft_gpu_available()) {
        faiss::IndexFlat cpu(D.d, ip ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2);
        cpu.add(D.nb, D.xb.data());
        std::vector<float> dist((size_t)(block * D.k));
        for (int64_t q = 0; q < D.nq; q += block) {
            const int64_t m = std::min(block, D.nq - q);
            cpu.search(m, D.xq.data() + q * D.d, D.k, dist.data(), D.gt.data() + q * D.k);
            progress(q + m);
        }
        return true;
    }
    const int64_t rows = std::max<int64_t>(1, (int64_t)(kExactBlockBytes / ((size_t)D.d * sizeof(float))));
    const int64_t nblocks = (D.nb + rows - 1) / rows;
    const int ngpu = std::max(1, std::min<int>(graft_gpu_count(), (int)nblocks));
    std::vector<std::vector<float>> bd((size_t)nblocks);
    std::vector<std::vector<int64_t>> bi((size_t)nblocks);
    std::vector<std::string> errors((size_t)ngpu);
    auto run_gpu = [&](int g) {
        for (int64_t b = g; b < nblocks; b += ngpu) {
            const int64_t b0 = b * D.nb / nblocks, b1 = (b + 1) * D.nb / nblocks;
            graft_flat_params fp;
            graft_flat_params_defaults(&fp);
            fp.device = g;
            fp.metric = ip ? GRAFT_METRIC_INNER_PRODUCT : GRAFT_METRIC_L2;
            graft_flat* flat = nullptr;
            bd[b].resize((size_t)(D.nq * D.k));
            bi[b].resize((size_t)(D.nq * D.k));
            int rc = graft_flat_new(D.d, &fp, &flat);
            if (rc == GRAFT_OK) rc = graft_flat_add(flat, b1 - b0, D.xb.data() + b0 * D.d);
            for (int64_t q = 0; rc == GRAFT_OK && q < D.nq; q += block) {
                const int64_t m = std::min(block, D.nq - q);
                rc = graft_flat_search(flat, m, D.xq.data() + q * D.d, D.k, bd[b].data() + q * D.k,
                                       bi[b].data() + q * D.k);
            }
            if (rc != GRAFT_OK) errors[g] = graft_last_error();
            graft_flat_free(flat);
            if (rc != GRAFT_OK) return;
            for (int64_t& id : bi[b])
                if (id >= 0) id += b0;
        }
    };
    std::vector<std::thread> threads;
    for (int g = 0; g < ngpu; g++) threads.emplace_back(run_gpu, g);
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors)
        if (!e.empty()) {
            printf("graft flat index failed: %s\n", e.c_str());
            return false;
        }
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < D.nq; q++) {
        std::vector<int64_t> pos((size_t)nblocks, 0);
        for (int64_t j = 0; j < D.k; j++) {
            int64_t best = -1, bid = -1;
            float bdist = 0;
            for (int64_t b = 0; b < nblocks; b++) {
                if (pos[b] >= D.k) continue;
                const size_t o = (size_t)(q * D.k + pos[b]);
                const int64_t id = bi[b][o];
                if (id < 0) continue;
                const float dist = bd[b][o];
                if (best < 0 || (ip ? dist > bdist : dist < bdist) || (dist == bdist && id < bid))
                    best = b, bdist = dist, bid = id;
            }
            if (best < 0) break;
            D.gt[q * D.k + j] = bid;
            pos[best]++;
        }
    }
    progress(D.nq);
    return true;
}

// ---- measuring ------------------------------------------------------------------------------------

// Searches all queries in calls of `batch`; seconds.
inline double search_all(faiss::Index* index, const Dataset& D, int64_t batch, float* dist, int64_t* I) {
    const double t0 = now_s();
    for (int64_t q = 0; q < D.nq; q += batch) {
        const int64_t m = std::min(batch, D.nq - q);
        index->search(m, D.xq.data() + q * D.d, D.k, dist + q * D.k, I + q * D.k);
    }
    return now_s() - t0;
}

// Seconds for one pass over the queries (graft-bench's and faiss_sweep's measure): the first pass
// warms up (and gives the results), then passes until min_time_s is spent (at least 3, at most
// 200), median: a pass of a few ms can meet a host stall of a few ms, and the median of many
// passes is not moved by a few of them. A first pass of 2 x min_time_s or more is its own measure
// (a warm-up matters little there).
inline double time_search(faiss::Index* index, const Dataset& D, int64_t batch, double min_time_s, float* dist, int64_t* I) {
    const double first = search_all(index, D, batch, dist, I);
    if (first >= 2 * min_time_s) return first;
    std::vector<double> t;
    std::vector<float> d2(dist, dist + D.nq * D.k);
    std::vector<int64_t> i2(I, I + D.nq * D.k);
    double spent = 0;
    while (t.size() < 3 || (spent < min_time_s && t.size() < 200)) {
        t.push_back(search_all(index, D, batch, d2.data(), i2.data()));
        spent += t.back();
    }
    return median(t);
}

// ---- FAISS peers ------------------------------------------------------------------------------------

// A FAISS index searched at batch nq with one parameter swept (set(value) applies it); records one
// line per value: base plus the knob, median of 3 timed searches after a warm-up (time_search).
template <class Set>
void faiss_sweep(Recorder& out, const Deadline& deadline, const Dataset& D, faiss::Index& index, const Rec& base,
                 const char* knob, const std::vector<int>& values, Set&& set) {
    std::vector<float> dist(D.nq * D.k);
    std::vector<int64_t> I(D.nq * D.k);
    for (int v : values) {
        if (deadline.stops(std::string(base.index) + " " + knob + "=" + std::to_string(v))) return;
        set(v);
        const double t = time_search(&index, D, D.nq, 1e30, dist.data(), I.data());  // 1e30: always 3 passes
        Rec r = base;
        r.params.add(knob, v);
        r.qps = D.nq / t;
        r.recall = recall_vs_gt(D, I.data(), D.nq);
        r.latency_ms = t * 1e3;
        out.record(D, std::move(r));
    }
}

}  // namespace bench

#endif
