// Graph-build benchmark: GPU GRNND against the CPU RNN-Descent reference and FAISS CPU HNSW/NSG,
// in one run, on real data.
//
//   bench_build --out results.jsonl [--commit C] [--run-id R] [--data DIR] [--fmnist DIR]
//               [--dense-sift DIR] [--kde DIR] [--only DATASET] [--gpu-default-only 1]
//               [--pieces 1] [--chain 1] [--max-base N]
//
// --only: one of sift5k, fashion-mnist, dense-sift1m, kde-patches1m. --max-base N: N base rows
// spread evenly over the set. --gpu-default-only 1: GRNND at its
// defaults alone (no variants, no CPU peers), e.g. under GRAFT_GRNND_PROFILE=1.
// --pieces 1: instead of the above, GRNND in pieces (graft_graph_build_pieces) of n/2, n/4 and
// n/8 vectors against GRNND on the whole set and the CPU RNN-Descent (what data past GRNND's
// GPU pools got before), plus the CPU pieces reference at n/4; one timed build each after a
// warm-up.
// --chain 1: instead of the above, the CPU walk's steps a query (its chain: what bounds a GPU walk
// at small batches) on the CPU RNN-Descent graph at alpha 1, 1.1, 1.2 and with its rows filled
// (chain_bench); runs without a GPU.
//
// Every graph built here is searched with the same algorithm (graft_graph_search_cpu, beam L)
// for graft's graphs; FAISS HNSW uses its own search (efSearch), as the paper does for
// hierarchical methods. Ground truth: FAISS IndexFlatL2 (never graft). Build times are wall
// clock, GPU times include the upload of the vectors and the download of the graph.
#include <cstdint>

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexNSG.h>

#include "bench_common.h"
#include "graft/dataset.h"
#include "graft/graph.h"

namespace {

using bench::now_s;

struct Data {
    std::string name;
    std::vector<float> xb, xq;
    int64_t nb = 0, nq = 0, d = 0;
    std::vector<int64_t> gt;  // nq x 10, from FAISS IndexFlatL2
};

// max_base > 0: every (nb / max_base)-th base row, max_base of them (a subset spread over the
// whole set; its name gets "-<n>").
bool load(Data& D, const std::string& name, const std::string& base, const std::string& query,
          bool fmnist, int64_t max_q, int64_t max_base) {
    float *xb = nullptr, *xq = nullptr;
    int64_t nb, nq, d, d2;
    int rc = fmnist ? graft_fmnist_read(base.c_str(), -1, &xb, &nb, &d)
                    : graft_dataset_read_f32(base.c_str(), 0, -1, &xb, &nb, &d);
    if (rc == GRAFT_OK)
        rc = fmnist ? graft_fmnist_read(query.c_str(), max_q, &xq, &nq, &d2)
                    : graft_dataset_read_f32(query.c_str(), 0, -1, &xq, &nq, &d2);
    if (rc != GRAFT_OK) {
        printf("skip %s: %s\n", name.c_str(), graft_last_error());
        free(xb);
        return false;
    }
    nq = std::min(nq, max_q);
    D.name = name;
    if (max_base > 0 && max_base < nb) {
        for (int64_t i = 0; i < max_base; i++)
            std::copy(xb + i * (nb / max_base) * d, xb + (i * (nb / max_base) + 1) * d, xb + i * d);
        nb = max_base;
        D.name += "-" + std::to_string(nb);
    }
    D.xb.assign(xb, xb + nb * d);
    D.xq.assign(xq, xq + nq * d);
    free(xb);
    free(xq);
    D.nb = nb;
    D.nq = nq;
    D.d = d;
    faiss::IndexFlatL2 flat(d);
    flat.add(nb, D.xb.data());
    std::vector<float> dist(nq * 10);
    D.gt.resize(nq * 10);
    flat.search(nq, D.xq.data(), 10, dist.data(), D.gt.data());
    return true;
}

double recall10(const Data& D, const int64_t* I) {
    return bench::recall_at_k(I, D.gt.data(), D.nq, 10);
}

struct Out {
    FILE* f;
    std::string run_id, date, commit, device;
    void rec(const char* system, const char* family, const char* index, const Data& D,
             const std::string& params, double build_s, double recall, double qps, int threads,
             size_t gpu_bytes) {
        fprintf(f,
                "{\"run_id\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"bench\":\"build\","
                "\"system\":\"%s\",\"family\":\"%s\",\"index\":\"%s\",\"dataset\":\"%s\",\"n\":%lld,\"d\":%lld,"
                "\"nq\":%lld,\"k\":10,\"metric\":\"L2\",\"params\":%s,\"build_s\":%.3f,\"recall\":%.4f,\"qps\":%.1f",
                run_id.c_str(), date.c_str(), commit.c_str(), device.c_str(), system, family, index,
                D.name.c_str(), (long long)D.nb, (long long)D.d, (long long)D.nq, params.c_str(), build_s,
                recall, qps);
        if (threads) fprintf(f, ",\"threads\":%d", threads);
        if (gpu_bytes) fprintf(f, ",\"gpu_peak_bytes\":%zu", gpu_bytes);
        fprintf(f, "}\n");
        fflush(f);
    }
};

// Searches a graft graph at an L sweep; records one line per L.
void sweep_graph(Out& out, const char* system, const char* index, const Data& D, const graft_graph& g, const std::string& p,
                 double build_s, int threads, size_t gpu_bytes) {
    std::vector<float> dist(D.nq * 10);
    std::vector<int64_t> I(D.nq * 10);
    printf("  %-9s %-14s build %8.3f s  recall@10 (CPU search QPS) by L:", system, D.name.c_str(), build_s);
    for (int L : {16, 32, 48, 64, 96, 128}) {
        double t0 = now_s();
        graft_graph_search_cpu(&g, D.xb.data(), D.d, GRAFT_METRIC_L2, D.xq.data(), D.nq, 10, L, dist.data(), I.data());
        double t = now_s() - t0;
        double r = recall10(D, I.data());
        std::string pl = p.substr(0, p.size() - 1) + ",\"L\":" + std::to_string(L) + "}";
        out.rec(system, "graph", index, D, pl, build_s, r, D.nq / t, threads, gpu_bytes);
        printf(" %d: %.4f (%.0f)", L, r, D.nq / t);
    }
    printf("\n");
}

// Builds a FAISS graph index (timed) and searches it at each value of its beam knob; one record
// per value. params_prefix holds the record's fixed params ("" or "\"name\":v,").
template <class Index, class SetKnob>
void faiss_peer(Out& out, const Data& D, Index& idx, const char* family, const char* name,
                const std::string& params_prefix, const char* knob, std::initializer_list<int> values,
                SetKnob set, int threads) {
    double t0 = now_s();
    idx.add(D.nb, D.xb.data());
    double t = now_s() - t0;
    std::vector<float> dist(D.nq * 10);
    std::vector<int64_t> I(D.nq * 10);
    for (int v : values) {
        set(v);
        double s0 = now_s();
        idx.search(D.nq, D.xq.data(), 10, dist.data(), I.data());
        double st = now_s() - s0;
        double r = recall10(D, reinterpret_cast<int64_t*>(I.data()));
        out.rec("faiss-cpu", family, name, D, "{" + params_prefix + "\"" + knob + "\":" + std::to_string(v) + "}",
                t, r, D.nq / st, threads, 0);
        printf("  faiss-%-4s %-14s build %8.3f s  %s=%-4d recall@10 %.4f  (%.0f QPS)\n", family, D.name.c_str(), t,
               knob, v, r, D.nq / st);
    }
}

// GRNND in pieces against the whole builds (--pieces 1).
void pieces_bench(Out& out, const Data& D, const graft_grnnd_params& gp, int threads) {
    graft_graph w{};
    if (graft_grnnd_build_gpu(D.xb.data(), D.nb, D.d, &gp, &w, nullptr) != GRAFT_OK) {  // warm-up
        printf("GRNND failed: %s\n", graft_last_error());
        return;
    }
    graft_graph_free(&w);
    auto stats = [](const graft_graph& g, double& md, double& reach) {
        int mx;
        int64_t full;
        graft_graph_stats(&g, &md, &mx, &full, &reach);
    };
    // A whole-set build (GRNND on the GPU, or the CPU reference on all threads): its record.
    auto whole = [&](const char* system, const char* index, double t, int thr, size_t gpu_bytes) {
        double md, reach;
        stats(w, md, reach);
        char ps[256];
        snprintf(ps, sizeof ps, "{\"variant\":\"whole\",\"R\":%d,\"mean_degree\":%.2f,\"reachable\":%.5f}",
                 gp.base.R, md, reach);
        printf(" %s whole: %.3f s (%d host threads, %.0f MB device), mean degree %.2f, reachable %.5f\n", index, t,
               thr, gpu_bytes / 1e6, md, reach);
        sweep_graph(out, system, index, D, w, ps, t, thr, gpu_bytes);
        graft_graph_free(&w);
    };
    {
        graft_grnnd_report rep{};
        double t0 = now_s();
        if (graft_grnnd_build_gpu(D.xb.data(), D.nb, D.d, &gp, &w, &rep) == GRAFT_OK)
            whole("graft", "GRNND", now_s() - t0, 0, rep.gpu_peak_bytes);
    }
    for (int div : {2, 4, 8, -4}) {  // -4: the CPU builder at n/4
        const int gpu = div > 0;
        const int64_t piece = D.nb / (gpu ? div : -div);
        graft_graph g{};
        graft_pieces_report rep{};
        double t0 = now_s();
        if (graft_graph_build_pieces(D.xb.data(), D.nb, D.d, &gp, gpu, piece, &g, &rep) != GRAFT_OK) {
            printf("pieces of %lld failed: %s\n", (long long)piece, graft_last_error());
            continue;
        }
        double t = now_s() - t0, md, reach;
        stats(g, md, reach);
        char ps[384];
        snprintf(ps, sizeof ps,
                 "{\"variant\":\"pieces\",\"R\":%d,\"piece_max\":%lld,\"pieces\":%d,\"largest_piece\":%lld,"
                 "\"partition_s\":%.3f,\"builds_s\":%.3f,\"merge_s\":%.3f,\"mean_degree\":%.2f,\"reachable\":%.5f}",
                 gp.base.R, (long long)piece, rep.pieces, (long long)rep.largest_piece, rep.partition_seconds,
                 rep.build_seconds, rep.merge_seconds, md, reach);
        printf(" %s in %d pieces of <= %lld (largest %lld): %.3f s (partition %.3f, builds %.3f, merge %.3f), "
               "mean degree %.2f, reachable %.5f\n", gpu ? "GRNND" : "RNN-Descent", rep.pieces, (long long)piece,
               (long long)rep.largest_piece, t, rep.partition_seconds, rep.build_seconds, rep.merge_seconds, md, reach);
        sweep_graph(out, gpu ? "graft" : "reference", gpu ? "GRNND-pieces" : "RNN-Descent-pieces", D, g, ps, t,
                    gpu ? 0 : threads, 0);
        graft_graph_free(&g);
    }
    double t0 = now_s();
    if (graft_rnnd_build_cpu(D.xb.data(), D.nb, D.d, &gp.base, &w) == GRAFT_OK)
        whole("reference", "RNN-Descent", now_s() - t0, threads, 0);
}

// --chain 1: the walk's chain of steps against the graph's rows (issue 47). At small batches a GPU
// walk is a chain of dependent steps, each a row and then its candidates fetched (bench/RESULTS.md,
// "Walk modes"), and the CPU reference walks the same steps as the GPU's single walk. For the
// CPU RNN-Descent graph at alpha 1 (the default), 1.1 and 1.2 and the default graph's rows filled
// to R (graft_graph_fill_rows), each at probes 1, 2 and 4: recall@10, steps and distances a query by L.
void chain_bench(Out& out, const Data& D, int threads) {
    struct Variant { const char* what; float alpha; bool filled; };  // filled: the first graph's rows
    graft_graph base{};
    for (const Variant& v : {Variant{"alpha=1", 1.0f, false}, Variant{"alpha=1+fill", 1.0f, true},
                             Variant{"alpha=1.1", 1.1f, false}, Variant{"alpha=1.2", 1.2f, false}}) {
        const char* what = v.what;
        graft_graph g{};
        double t0 = now_s();
        if (v.filled) {
            g = base;
            g.nbrs = static_cast<int32_t*>(malloc(sizeof(int32_t) * base.n * base.R));
            memcpy(g.nbrs, base.nbrs, sizeof(int32_t) * base.n * base.R);
            if (graft_graph_fill_rows(&g, D.xb.data(), D.d, GRAFT_METRIC_L2, nullptr) != GRAFT_OK) {
                printf("%s: fill failed: %s\n", what, graft_last_error());
                graft_graph_free(&g);
                continue;
            }
        } else {
            graft_rnnd_params p;
            graft_rnnd_params_defaults(&p);
            p.alpha = v.alpha;
            if (graft_rnnd_build_cpu(D.xb.data(), D.nb, D.d, &p, &g) != GRAFT_OK) {
                printf("%s: build failed: %s\n", what, graft_last_error());
                continue;
            }
        }
        const double build_s = now_s() - t0;
        double md, reach;
        int mx;
        int64_t full;
        graft_graph_stats(&g, &md, &mx, &full, &reach);
        printf(" %-13s %s: built in %.1f s (%d threads), mean degree %.2f\n", what, D.name.c_str(), build_s,
               threads, md);
        std::vector<float> dist(D.nq * 10);
        std::vector<int64_t> I(D.nq * 10);
        for (int probes : {1, 2, 4}) {
            printf("   probes=%d  L: recall / steps / distances a query\n   ", probes);
            for (int L : {10, 11, 12, 14, 16, 18, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 256}) {
                graft_search_params sp;
                graft_search_params_defaults(&sp);
                sp.L = L, sp.probes = probes;
                graft_search_report rep{};
                double s0 = now_s();
                if (graft_graph_search_cpu_report(&g, D.xb.data(), D.d, GRAFT_METRIC_L2, D.xq.data(), D.nq, 10, &sp,
                                                  dist.data(), I.data(), &rep) != GRAFT_OK)
                    break;
                const double t = now_s() - s0, r = recall10(D, I.data());
                const double steps = (double)rep.iterations / D.nq, dists = (double)rep.distances / D.nq;
                char ps[320];
                snprintf(ps, sizeof ps,
                         "{\"variant\":\"%s\",\"probes\":%d,\"L\":%d,\"steps_per_query\":%.1f,"
                         "\"distances_per_query\":%.1f,\"mean_degree\":%.2f,\"reachable\":%.5f}",
                         what, probes, L, steps, dists, md, reach);
                out.rec("reference", "graph", "RNN-Descent", D, ps, build_s, r, D.nq / t, threads, 0);
                printf(" %d: %.3f/%.0f/%.0f", L, r, steps, dists);
                if (r > 0.995) break;
            }
            printf("\n");
        }
        if (!base.nbrs)
            base = g;
        else
            graft_graph_free(&g);
    }
    graft_graph_free(&base);
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path = "bench_build.jsonl", commit = "unknown", run_id, data = "../shared/data",
                fmnist = "/usr/share/datasets/fashion-mnist", dense, kde, only;
    bool gpu_default_only = false, pieces = false, chain = false;
    int64_t max_base = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--out") out_path = argv[i + 1];
        else if (a == "--commit") commit = argv[i + 1];
        else if (a == "--run-id") run_id = argv[i + 1];
        else if (a == "--data") data = argv[i + 1];
        else if (a == "--fmnist") fmnist = argv[i + 1];
        else if (a == "--dense-sift") dense = argv[i + 1];
        else if (a == "--only") only = argv[i + 1];
        else if (a == "--gpu-default-only") gpu_default_only = std::string(argv[i + 1]) == "1";
        else if (a == "--pieces") pieces = std::string(argv[i + 1]) == "1";
        else if (a == "--chain") chain = std::string(argv[i + 1]) == "1";
        else if (a == "--kde") kde = argv[i + 1];
        else if (a == "--max-base") max_base = std::stoll(argv[i + 1]);
    }
    const std::string date = bench::utc_date();
    if (run_id.empty()) run_id = "build-" + date;
    const char* dev = getenv("GRAFT_DEVICE_NAME");
    Out out{fopen(out_path.c_str(), "a"), run_id, date, commit, dev ? dev : "unknown"};
    const int threads = omp_get_max_threads();

    std::vector<Data> sets(4);
    auto want = [&](const char* name) { return only.empty() || only == name; };
    bool ok[4] = {want("sift5k") && load(sets[0], "sift5k", data + "/sift5k/sift5k_base.fvecs", data + "/sift5k/sift5k_query.fvecs", false, 500, max_base),
                  want("fashion-mnist") && load(sets[1], "fashion-mnist", fmnist + "/train-images-idx3-ubyte.gz", fmnist + "/t10k-images-idx3-ubyte.gz", true, 1000, max_base),
                  want("dense-sift1m") && !dense.empty() && load(sets[2], "dense-sift1m", dense + "/base.u8bin", dense + "/query.u8bin", false, 1000, max_base),
                  want("kde-patches1m") && !kde.empty() && load(sets[3], "kde-patches1m", kde + "/base.u8bin", kde + "/query.u8bin", false, 1000, max_base)};
    for (int s = 0; s < 4; s++) {
        if (!ok[s]) continue;
        const Data& D = sets[s];
        printf("== %s: n=%lld d=%lld nq=%lld, %d host threads\n", D.name.c_str(), (long long)D.nb, (long long)D.d,
               (long long)D.nq, threads);
        graft_grnnd_params gp;
        graft_grnnd_params_defaults(&gp);
        if (chain) {
            chain_bench(out, D, threads);
            continue;
        }
        if (pieces) {
            pieces_bench(out, D, gp, threads);
            continue;
        }
        // GPU GRNND: defaults, then one knob at a time (the paper's ablations: rho, T1/T2; ours:
        // pairs, Alg. 5 warp distances vs staged tiles). Median of 3 builds after a warm-up.
        struct Var { const char* what; int S, R, T1, T2, order, pairs, staged; float rho; };
        const graft_rnnd_params& b = gp.base;
        const int SO = GRAFT_GRNND_SORTED, RA = GRAFT_GRNND_RANDOM;
        std::vector<Var> vars = {
            {"default", b.S, b.R, b.T1, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"sorted-all-pairs-staged", b.S, b.R, b.T1, b.T2, SO, gp.pairs, 1, b.rho},
            {"random-order", b.S, b.R, b.T1, b.T2, RA, gp.pairs, gp.staged, b.rho},
            {"random-order-alg5", b.S, b.R, b.T1, b.T2, RA, gp.pairs, 0, b.rho},
            {"random-order-pairs=256", b.S, b.R, b.T1, b.T2, RA, 256, 1, b.rho},
            {"T1=1", b.S, b.R, 1, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"T1=2", b.S, b.R, 2, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"T1=4", b.S, b.R, 4, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"T2=4", b.S, b.R, b.T1, 4, SO, gp.pairs, gp.staged, b.rho},
            {"T2=12", b.S, b.R, b.T1, 12, SO, gp.pairs, gp.staged, b.rho},
            {"rho=0.6", b.S, b.R, b.T1, b.T2, SO, gp.pairs, gp.staged, 0.6f},
            {"rho=0.3", b.S, b.R, b.T1, b.T2, SO, gp.pairs, gp.staged, 0.3f},
            {"S=16", 16, b.R, b.T1, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"R=32", b.S, 32, b.T1, b.T2, SO, gp.pairs, gp.staged, b.rho},
            {"T1=2 T2=4", b.S, b.R, 2, 4, SO, gp.pairs, gp.staged, b.rho},
        };
        if (gpu_default_only) vars.resize(1);
        if (D.nb > 100000)  // 1M: the knobs that matter most, to keep the run short
            vars.erase(std::remove_if(vars.begin(), vars.end(), [](const Var& v) {
                           const std::string w = v.what;
                           return w == "T1=4" || w == "T2=12" || w == "rho=0.3" || w == "S=16" ||
                                  w == "R=32" || w == "random-order-pairs=256";
                       }), vars.end());
        {
            graft_graph g{};
            if (graft_grnnd_build_gpu(D.xb.data(), D.nb, D.d, &gp, &g, nullptr) != GRAFT_OK) {
                printf("GRNND failed: %s\n", graft_last_error());
                vars.clear();
            }
            graft_graph_free(&g);  // warm-up: context, module load
        }
        for (const Var& v : vars) {
            graft_grnnd_params p = gp;
            p.base.S = v.S; p.base.R = v.R; p.base.T1 = v.T1; p.base.T2 = v.T2; p.base.rho = v.rho;
            p.order = v.order; p.pairs = v.pairs; p.staged = v.staged;
            std::vector<double> wall, kern;
            graft_grnnd_report r1{};
            graft_graph g{};
            graft_grnnd_report rep{};
            bool failed = false;
            for (int rep_i = 0; rep_i < 3 && !failed; rep_i++) {
                graft_graph_free(&g);
                double t0 = now_s();
                failed = graft_grnnd_build_gpu(D.xb.data(), D.nb, D.d, &p, &g, &rep) != GRAFT_OK;
                wall.push_back(now_s() - t0);
                kern.push_back(rep.gpu_seconds);
                if (rep_i == 1) r1 = rep;
            }
            if (failed) {
                printf("GRNND %s failed: %s\n", v.what, graft_last_error());
                continue;
            }
            std::sort(wall.begin(), wall.end());
            std::sort(kern.begin(), kern.end());
            double md;
            int mx;
            int64_t full;
            double reach;
            graft_graph_stats(&g, &md, &mx, &full, &reach);
            char ps[384];
            snprintf(ps, sizeof ps,
                     "{\"variant\":\"%s\",\"S\":%d,\"R\":%d,\"T1\":%d,\"T2\":%d,\"rho\":%.2f,\"order\":\"%s\","
                     "\"pairs\":%d,\"staged\":%d,\"gpu_kernel_s\":%.4f,\"upload_s\":%.4f,\"download_s\":%.4f,\"host_s\":%.4f,\"mean_degree\":%.2f,\"reachable\":%.5f}",
                     v.what, v.S, v.R, v.T1, v.T2, (double)v.rho, v.order == SO ? "sorted" : "random", v.pairs,
                     v.staged, kern[1], r1.upload_seconds, r1.download_seconds, r1.host_seconds, md, reach);
            printf(" GRNND %-26s wall %.3f s (kernels %.4f, upload %.4f, download %.4f, host %.4f), %.0f MB device, "
                   "mean degree %.2f, reachable %.5f\n",
                   v.what, wall[1], kern[1], r1.upload_seconds, r1.download_seconds, r1.host_seconds,
                   rep.gpu_peak_bytes / 1e6, md, reach);
            sweep_graph(out, "graft", "GRNND", D, g, ps, wall[1], 0, rep.gpu_peak_bytes);
            graft_graph_free(&g);
        }
        if (gpu_default_only) continue;
        {   // CPU reference (RNN-Descent), all host threads.
            graft_graph g{};
            double t0 = now_s();
            if (graft_rnnd_build_cpu(D.xb.data(), D.nb, D.d, &gp.base, &g) == GRAFT_OK) {
                double t = now_s() - t0;
                double md, reach;
                int mx;
                int64_t full;
                graft_graph_stats(&g, &md, &mx, &full, &reach);
                char ps[256];
                snprintf(ps, sizeof ps, "{\"S\":%d,\"R\":%d,\"T1\":%d,\"T2\":%d,\"rho\":%.2f,\"mean_degree\":%.2f,\"reachable\":%.5f}",
                         gp.base.S, gp.base.R, gp.base.T1, gp.base.T2, (double)gp.base.rho, md, reach);
                printf(" reference RNN-Descent: %.3f s on %d threads, mean degree %.2f, reachable %.5f\n", t, threads, md, reach);
                sweep_graph(out, "reference", "RNN-Descent", D, g, ps, t, threads, 0);
                graft_graph_free(&g);
            }
        }
        {   // FAISS HNSW32, efConstruction 40 (FAISS's default), efSearch sweep.
            faiss::IndexHNSWFlat h(D.d, 32);
            faiss_peer(out, D, h, "hnsw", "HNSW32", "\"efConstruction\":40,", "efSearch", {16, 32, 64, 128, 256},
                       [&](int ef) { h.hnsw.efSearch = ef; }, threads);
        }
    }
    // FAISS NSG32 last (its NN-Descent k-NN graph build is the slowest peer), small sets only.
    for (int si = 0; si < 4 && !gpu_default_only && !pieces && !chain; si++) {
        if (!ok[si]) continue;
        const Data& D = sets[si];
        if (D.nb <= 100000) {   // FAISS NSG32 (builds its k-NN graph with NN-Descent first).
            faiss::IndexNSGFlat nsg(D.d, 32);
            faiss_peer(out, D, nsg, "nsg", "NSG32", "", "search_L", {16, 32, 64, 128},
                       [&](int L) { nsg.nsg.search_L = L; }, threads);
        }
    }
    fclose(out.f);
    return 0;
}
