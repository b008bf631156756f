// Graph-search study: what graft-bench does not measure of graft's GPU graph search (a GRNND graph
// kept on the GPU, searched by the SONG/BANG-style kernels): the walk's kernel time against the
// HBM floor its distances imply, the ablation of its visited set, worklist update, probes and
// lanes, graft's graph searched by FAISS's own HNSW search after the export, the GPU walk's
// agreement with the CPU reference, and the walk's memory floor (walk_replay.h). The peers (FAISS
// HNSW32 on the CPU, FAISS IVF-Flat on the GPU) and the batches from 1 query to 10 nq are
// graft-bench's runs (bench/studies/README.md).
//
//   bench_search --out F.jsonl [--commit C] [--run-id R] [--data DIR] [--fmnist DIR]
//                [--dense-sift DIR] [--kde DIR] [--only DATASET] [--quick] [--deadline SECONDS]
//                [--replay-only] [--replay-L A,B,...]
//
// Datasets (k = 10, L2): dense-sift1m (--dense-sift DIR holding base.u8bin and query.u8bin: 1M x
// 128, 10k queries), fashion-mnist (--fmnist DIR: the 60k training images are the base, the 10k
// test images the queries), sift5k (DIR/sift5k of --data: 4.5k x 128, 500 queries), kde-patches1m
// (--kde DIR, as dense-sift1m's: 1M x 192). By default all but sift5k; --quick: sift5k, L in
// {16, 32, 64} (every step below runs, in seconds); --only NAME: that set alone. --deadline S: no
// configuration starts more than S seconds after the program did (records already written are
// kept; the summary covers what was measured).
//
// Per dataset, in this order (the most important numbers first, in case the deadline cuts in):
//  1. Ground truth from graft's exact GPU flat index, checked against FAISS IndexFlatL2 (CPU) on a
//     prefix of the queries. The flat search, timed, is the exact peer (system graft, family flat);
//     its recall is its agreement with FAISS on that prefix.
//  2. graft: one graph per dataset, built by GRNND at the default parameters inside a graft_gindex
//     on device 0 (graph and vectors stay on the GPU: a search uploads only its queries). L sweep
//     at a batch of all nq queries, each record with the kernels' time and the HBM floor.
//  3. graft's graph exported to a FAISS IndexHNSWFlat and searched by FAISS (efSearch = L).
//  4. Ablation (dense-sift1m and --quick): visited set (hash / Bloom) x worklist update (merge sort
//     / insertion), then multi-step probes, at batch nq.
//  5. graft's CPU reference search (graft_graph_search_cpu_ex, all host threads) on the same graph
//     at batch nq, with the GPU-vs-CPU agreement of the results.
//  6. The walk's memory floor (issue 47; --replay-only: steps 1, 2's build and this alone): at
//     each L, batch nq, the walk's kernel time against a replay of the CPU reference's walks with
//     every load independent (walk_replay.h).
//
// Timing: wall clock from host queries to host results (what a FAISS user sees), one warm-up pass,
// then the median of timed passes (graft's graph: 5; the others: 3). graft's records add the kernels' device time
// (graft_search_report), the distances computed per query and the floor they imply: every distance
// reads one d-float vector, so at the H100's 3.35 TB/s HBM3 bandwidth a query cannot take less
// than distances x d x 4 / 3.35e12 seconds (graph rows and queries not counted).
// gpu_peak_bytes: graft's graph index, the device memory it held after the configuration's
// searches (cudaMemGetInfo, against the level before it was created: the steady state, not the
// build's transient peak); graft's flat index, its scratch peak plus its vectors (as bench_exact).
#include <cmath>
#include <cstdint>

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "hnsw_export.h"

#include <faiss/IndexHNSW.h>

#include "bench_record.h"
#include "graft/graph.h"
#include "graph/walk_trace.h"
#include "walk_replay.h"
#include "graft/graph_index.h"

namespace {

using bench::Dataset;
using bench::Deadline;
using bench::gpu_bytes_since;
using bench::gpu_used_bytes;
using bench::K;
using bench::now_s;
using bench::Point;
using bench::Rec;
using bench::Recorder;
using bench::recall_vs_gt;

constexpr double kHbmBytesPerS = 3.35e12;  // H100 SXM HBM3, datasheet

const char* visited_name(int v) { return v == GRAFT_VISITED_BLOOM ? "bloom" : "hash"; }
const char* merge_name(int m) { return m == GRAFT_MERGE_INSERT ? "insert" : "sort"; }

struct Bench {
    Recorder& out;
    const Deadline& deadline;
    int threads;
    bool quick;
    bool replay_only;  // --replay-only: the ground truth, the build and replay_floor alone
    std::vector<int> replay_Ls;  // --replay-L A,B,...: replay_floor's L values (else its own)
};

// ---- graft's graph index -------------------------------------------------------------------------

struct Graft {
    graft_gindex* index = nullptr;
    double build_s = 0;
    size_t gpu_base = 0;  // device memory in use before the index existed
};

// Builds the graph (defaults, device 0) after a warm-up build on a slice of the data (kernels
// loaded, allocator primed), so that build_s is the build itself: wall clock of graft_gindex_add
// and graft_gindex_build (adds only append; the build runs GRNND and uploads), vectors copied to
// the GPU included.
bool graft_build(const Dataset& D, Graft* G) {
    graft_gindex_params gp;
    graft_gindex_params_defaults(&gp);
    gp.device = 0;
    graft_gindex* warm = nullptr;
    bool ok = graft_gindex_new(D.d, &gp, &warm) == GRAFT_OK &&
              graft_gindex_add(warm, std::min<int64_t>(D.nb, 20000), D.xb.data()) == GRAFT_OK &&
              graft_gindex_build(warm) == GRAFT_OK;
    graft_gindex_free(warm);
    G->gpu_base = gpu_used_bytes();
    ok = ok && graft_gindex_new(D.d, &gp, &G->index) == GRAFT_OK;
    const double t0 = now_s();
    ok = ok && graft_gindex_add(G->index, D.nb, D.xb.data()) == GRAFT_OK &&
         graft_gindex_build(G->index) == GRAFT_OK;
    G->build_s = now_s() - t0;
    if (!ok) {
        printf("graft graph index failed: %s\n", graft_last_error());
        graft_gindex_free(G->index);
        G->index = nullptr;
        return false;
    }
    double mean_degree = 0, reachable = 0;
    graft_graph_stats(graft_gindex_graph(G->index), &mean_degree, nullptr, nullptr, &reachable);
    printf("graft build: %.3f s wall (graph %.3f s), mean degree %.2f, reachable %.5f, %.0f MB held on the GPU\n",
           G->build_s, graft_gindex_build_seconds(G->index), mean_degree, reachable,
           gpu_bytes_since(G->gpu_base) / 1e6);
    return true;
}

struct GraftRun {
    double qps = 0, latency_ms = 0, gpu_s = 0, recall = 0, dist_per_query = 0;
};

// graft_gindex_search over the n queries at x in calls of `batch` rows: one untimed pass, then
// `passes` timed ones. QPS from the median pass, latency the median call over all timed passes,
// kernel time the median pass's sum, recall from the last pass.
bool time_graft(const Dataset& D, const Graft& G, const float* x, int64_t n, int64_t batch,
                const graft_search_params& sp, int passes, GraftRun* run) {
    std::vector<float> dist(n * K);
    std::vector<int64_t> I(n * K);
    std::vector<double> pass_s, pass_gpu, call_ms;
    int64_t distances = 0;
    for (int p = -1; p < passes; p++) {
        double gpu = 0;
        distances = 0;
        const double t0 = now_s();
        for (int64_t i = 0; i < n; i += batch) {
            const int64_t m = std::min(batch, n - i);
            graft_search_report rep{};
            const double c0 = now_s();
            if (graft_gindex_search(G.index, m, x + i * D.d, K, &sp, dist.data() + i * K, I.data() + i * K,
                                    &rep) != GRAFT_OK) {
                printf("graft search L=%d batch %lld failed: %s\n", sp.L, (long long)batch, graft_last_error());
                return false;
            }
            if (p >= 0) call_ms.push_back((now_s() - c0) * 1e3);
            gpu += rep.gpu_seconds;
            distances += rep.distances;
        }
        if (p >= 0) {
            pass_s.push_back(now_s() - t0);
            pass_gpu.push_back(gpu);
        }
    }
    run->qps = n / bench::median(pass_s);
    run->latency_ms = bench::median(call_ms);
    run->gpu_s = bench::median(pass_gpu);
    run->recall = recall_vs_gt(D, I.data(), n);
    run->dist_per_query = (double)distances / n;
    return true;
}

// Measures graft at one configuration, a batch of all nq queries, and records it.
bool graft_config(Bench& B, const Dataset& D, const Graft& G, const graft_search_params& sp, bool ablation,
                  int lanes = 0) {
    const int64_t n = D.nq, batch = D.nq;
    GraftRun run;
    if (!time_graft(D, G, D.xq.data(), n, batch, sp, 5, &run)) return false;
    const double floor_qps = run.dist_per_query > 0 ? kHbmBytesPerS / (run.dist_per_query * D.d * 4) : 0;
    Rec r{"graft", "graph", "GraftGraph", n, batch};
    r.mode = "in-memory";
    // The main sweeps vary L alone: the other knobs are labelled on the ablation's rows only.
    r.params.add("L", sp.L).add("probes", sp.probes, ablation).add("visited", visited_name(sp.visited), ablation)
        .add("merge", merge_name(sp.merge), ablation);
    if (lanes) r.params.add("lanes", lanes);
    if (ablation) r.params.add("ablation", true, false);
    r.params.add("gpu_kernel_s", run.gpu_s, false).add("dist_per_query", run.dist_per_query, false)
        .add("floor_qps", floor_qps, false);
    r.qps = run.qps;
    r.recall = run.recall;
    r.build_s = G.build_s;
    r.latency_ms = run.latency_ms;
    r.gpu_bytes = gpu_bytes_since(G.gpu_base);
    r.summary = !ablation;
    char note[160];
    snprintf(note, sizeof note, "kernels %.2f ms (%.0f QPS), %.0f dist/query, HBM floor %.0f QPS (%.0f%%)",
             run.gpu_s * 1e3, run.gpu_s > 0 ? n / run.gpu_s : 0, run.dist_per_query, floor_qps,
             floor_qps > 0 ? 100 * run.qps / floor_qps : 0);
    r.note = note;
    B.out.record(D, std::move(r));
    return true;
}

// The L sweep at batch nq, the index's other search parameters at their defaults.
void graft_sweep(Bench& B, const Dataset& D, const Graft& G, const std::vector<int>& Ls) {
    graft_search_params sp = graft_gindex_get_params(G.index).search;
    for (int L : Ls) {
        if (B.deadline.stops("graft L=" + std::to_string(L))) return;
        sp.L = L;
        if (!graft_config(B, D, G, sp, false)) return;
    }
}

// Visited set x worklist update, then multi-step probes at the default visited set and update,
// at batch nq (a variant equal to one already measured at that L is not repeated), then the lanes
// per distance at L = 64.
void graft_ablation(Bench& B, const Dataset& D, const Graft& G) {
    const graft_search_params def = graft_gindex_get_params(G.index).search;
    struct Variant { int visited, merge, probes; };
    std::vector<Variant> vars;
    for (int v : {GRAFT_VISITED_HASH, GRAFT_VISITED_BLOOM})
        for (int m : {GRAFT_MERGE_SORT, GRAFT_MERGE_INSERT}) vars.push_back({v, m, def.probes});
    for (int p : {1, 2, 4})
        if (p != def.probes) vars.push_back({def.visited, def.merge, p});
    if (B.deadline.stops("ablation")) return;
    printf("-- ablation at batch %lld (not in the summary)\n", (long long)D.nq);
    for (int L : {32, 64, 128})
        for (const Variant& v : vars) {
            if (B.deadline.stops("rest of the ablation")) return;
            graft_search_params sp = def;
            sp.L = L;
            sp.visited = v.visited;
            sp.merge = v.merge;
            sp.probes = v.probes;
            graft_config(B, D, G, sp, true);
        }
    // Lanes per distance (the kernel's default: about 16 dimensions a lane; GRAFT_SEARCH_LANES
    // overrides it, read at each launch).
    for (int lanes : {4, 8, 16, 32}) {
        if (B.deadline.stops("lanes ablation")) break;
        setenv("GRAFT_SEARCH_LANES", std::to_string(lanes).c_str(), 1);
        graft_search_params sp = def;
        sp.L = 64;
        graft_config(B, D, G, sp, true, lanes);
    }
    unsetenv("GRAFT_SEARCH_LANES");
}

// graft's CPU reference search on the index's graph and vectors, all host threads, batch nq, and
// how far the GPU's results agree with it (recall of the GPU's top-k against the CPU's).
void cpu_reference(Bench& B, const Dataset& D, const Graft& G) {
    const graft_graph* graph = graft_gindex_graph(G.index);
    const float* x = graft_gindex_vectors(G.index);
    graft_search_params sp = graft_gindex_get_params(G.index).search;
    std::vector<float> dist(D.nq * K);
    std::vector<int64_t> Icpu(D.nq * K), Igpu(D.nq * K);
    for (int L : {32, 64, 128}) {
        if (B.deadline.stops("CPU reference L=" + std::to_string(L))) return;
        sp.L = L;
        const double t = bench::median_time(3, [&] {
            return graft_graph_search_cpu_ex(graph, x, D.d, GRAFT_METRIC_L2, D.xq.data(), D.nq, K, &sp, dist.data(),
                                             Icpu.data()) == GRAFT_OK;
        });
        if (t < 0 || graft_gindex_search(G.index, D.nq, D.xq.data(), K, &sp, dist.data(), Igpu.data(), nullptr) !=
                         GRAFT_OK) {
            printf("CPU reference / GPU search at L=%d failed: %s\n", L, graft_last_error());
            return;
        }
        const double agree = bench::recall_at_k(Igpu.data(), Icpu.data(), D.nq, K);
        Rec r{"reference", "graph", "GraftGraph", D.nq, D.nq};
        r.params.add("L", L).add("probes", sp.probes, false).add("gpu_agreement", agree, false);
        r.qps = D.nq / t;
        r.recall = recall_vs_gt(D, Icpu.data(), D.nq);
        r.build_s = G.build_s;
        r.latency_ms = t * 1e3;
        r.threads = B.threads;
        char note[128];
        snprintf(note, sizeof note, "%d threads; GPU agrees %.4f (GPU recall %.4f)", B.threads, agree,
                 recall_vs_gt(D, Igpu.data(), D.nq));
        r.note = note;
        B.out.record(D, std::move(r));
    }
}

// ---- the walk's memory floor (issue 47) ------------------------------------------------------------

// The nq walks at L, probes 1, as the CPU reference walks them (graft_graph_walk_traced: its own
// search, recording), on all host threads, concatenated in order; with the host's reading of
// them for the replay's check: each query's distances summed, its rows' R words and its vectors'
// d words XORed.
bench::WalkTraces trace_walks(const graft_graph& g, const float* x, int64_t d, const float* xq, int64_t nq, int L) {
    std::vector<graft_walk_trace> tr(nq, graft_walk_trace{});
    bench::WalkTraces t;
    t.sum.resize(nq);
    t.xor_rows.resize(nq);
    t.xor_vecs.resize(nq);
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        std::vector<uint32_t> seen(g.n, 0);
        uint32_t stamp = 0;
#pragma omp for schedule(dynamic, 16)
        for (int64_t q = 0; q < nq; q++) {
            const float* qv = xq + q * d;
            failed |= graft_graph_walk_traced(&g, x, d, GRAFT_METRIC_L2, qv, L, 1, seen.data(), ++stamp, &tr[q]) !=
                      GRAFT_OK;
            double sum = 0;
            uint32_t xr = 0, xv = 0;
            for (int64_t i = 0; i < tr[q].nrows; i++)
                for (int j = 0; j < g.R; j++) xr ^= (uint32_t)g.nbrs[(int64_t)tr[q].rows[i] * g.R + j];
            for (int64_t i = 0; i < tr[q].nvecs; i++) {
                const float* v = x + (int64_t)tr[q].vecs[i] * d;
                float du = 0;
                for (int64_t j = 0; j < d; j++) {
                    du += (qv[j] - v[j]) * (qv[j] - v[j]);
                    uint32_t w;
                    memcpy(&w, v + j, 4);
                    xv ^= w;
                }
                sum += du;
            }
            t.sum[q] = sum, t.xor_rows[q] = xr, t.xor_vecs[q] = xv;
        }
    }
    t.row_off.push_back(0), t.vec_off.push_back(0);
    for (int64_t q = 0; q < nq; q++) {
        t.rows.insert(t.rows.end(), tr[q].rows, tr[q].rows + tr[q].nrows);
        t.vecs.insert(t.vecs.end(), tr[q].vecs, tr[q].vecs + tr[q].nvecs);
        t.row_off.push_back((int64_t)t.rows.size());
        t.vec_off.push_back((int64_t)t.vecs.size());
        graft_walk_trace_free(&tr[q]);
    }
    if (failed) printf("walk traces: %s\n", graft_last_error());
    return t;
}

// At each L, batch nq: the walk's kernel time (graft_search_report, the batch in one launch)
// against the replay of the CPU reference's walks over the same graph (walk_replay.h): the
// replay is the floor of any walk that reads those rows and vectors, so walk / replay bounds what
// more memory round trips in flight can gain. The distances a query of both are printed: the
// GPU's walk recomputes a few after its visited set's deletions.
void replay_floor(Bench& B, const Dataset& D, const Graft& G, const std::vector<int>& Ls) {
    const graft_graph* g = graft_gindex_graph(G.index);
    const float* x = graft_gindex_vectors(G.index);
    bench::WalkReplay replay;
    if (!g || !x || !replay.upload(x, g->n, D.d, g->nbrs, g->R)) return;
    graft_search_params sp = graft_gindex_get_params(G.index).search;
    sp.mode = GRAFT_SEARCH_SINGLE;  // the walk the trace replays (auto's own at batch 10k)
    for (int L : Ls) {
        if (B.deadline.stops("replay L=" + std::to_string(L))) return;
        sp.L = L;
        GraftRun run;
        if (!time_graft(D, G, D.xq.data(), D.nq, D.nq, sp, 3, &run)) return;
        const double t0 = now_s();
        const bench::WalkTraces t = trace_walks(*g, x, D.d, D.xq.data(), D.nq, L);
        const double trace_s = now_s() - t0;
        // The floor (8 loads a lane in flight, every warp that fits), then the walk's own limits
        // one at a time and together: one load in flight, 5 blocks a multiprocessor.
        double ms = 0, one = 0, few = 0, both = 0;
        std::vector<float> sums;
        std::vector<uint32_t> xors;
        if (!replay.time(D.xq.data(), D.nq, t, 8, 0, 5, &ms, &sums, &xors) ||
            !replay.time(D.xq.data(), D.nq, t, 1, 0, 5, &one, &sums, &xors) ||
            !replay.time(D.xq.data(), D.nq, t, 8, 5, 5, &few, &sums, &xors) ||
            !replay.time(D.xq.data(), D.nq, t, 1, 5, 5, &both, &sums, &xors))
            return;
        // The last replay read what the host's walks read: each query's rows and vectors (their
        // words' XOR equal); its distances' sum, a float sum of thousands of terms in another
        // order, is compared by its largest relative difference.
        int64_t agree = 0;
        double worst = 0;
        for (int64_t q = 0; q < D.nq; q++) {
            agree += xors[2 * q] == t.xor_rows[q] && xors[2 * q + 1] == t.xor_vecs[q];
            worst = std::max(worst, std::abs(sums[q] - t.sum[q]) / std::max(1.0, t.sum[q]));
        }
        const double rows_q = (double)t.rows.size() / D.nq, vecs_q = (double)t.vecs.size() / D.nq;
        // Bytes the replay reads: rows of R ids and vectors of d floats (the queries aside).
        const double gb = ((double)t.rows.size() * g->R * 4 + (double)t.vecs.size() * D.d * 4) / 1e9;
        Rec r{"graft", "graph", "GraftGraph replay floor", D.nq, D.nq};
        r.params.add("L", L).add("walk_kernel_ms", run.gpu_s * 1e3, false).add("replay_kernel_ms", ms, false)
            .add("walk_over_replay", ms > 0 ? run.gpu_s * 1e3 / ms : 0, false)
            .add("rows_per_query", rows_q, false).add("dist_per_query", vecs_q, false)
            .add("gpu_dist_per_query", run.dist_per_query, false).add("replay_gb", gb, false)
            .add("replay_one_load_ms", one, false).add("replay_5_blocks_ms", few, false)
            .add("replay_one_load_5_blocks_ms", both, false).add("replay_agrees", (double)agree / D.nq, false)
            .add("replay_sum_rel_diff", worst, false);
        r.qps = D.nq / (ms / 1e3);
        r.recall = run.recall;
        r.build_s = G.build_s;
        r.summary = false;
        char note[400];
        snprintf(note, sizeof note,
                 "walk kernel %.3f ms, replay %.3f ms: walk / replay %.2fx; replay with 1 load in flight %.3f, "
                 "5 blocks an SM %.3f, both %.3f ms; %.0f rows, %.0f dist a query (GPU %.0f); %.2f GB, %.0f GB/s; "
                 "trace %.1f s; the replay read the host's rows and vectors on %lld of %lld queries, "
                 "its distance sums within %.1e",
                 run.gpu_s * 1e3, ms, run.gpu_s * 1e3 / ms, one, few, both, rows_q, vecs_q, run.dist_per_query, gb,
                 gb / (ms / 1e3), trace_s, (long long)agree, (long long)D.nq, worst);
        r.note = note;
        B.out.record(D, std::move(r));
    }
}

// ---- FAISS peers -----------------------------------------------------------------------------------

// graft's graph exported to a single-level FAISS IndexHNSWFlat (adapters/faiss/hnsw_export.h)
// and searched by FAISS's own HNSW search on all host threads, efSearch = L: build on the GPU,
// serve on CPUs with plain FAISS.
void exported_hnsw(Bench& B, const Dataset& D, const Graft& G) {
    if (B.deadline.stops("exported HNSW")) return;
    std::unique_ptr<faiss::IndexHNSWFlat> h(graft::export_hnsw(G.index, faiss::METRIC_L2));
    Rec base{"faiss-cpu", "hnsw", "GraftGraph exported to HNSW", D.nq, D.nq};
    base.build_s = G.build_s;
    base.threads = B.threads;
    bench::faiss_sweep(B.out, B.deadline, D, *h, base, "efSearch", {16, 32, 48, 64, 128},
                       [&](int ef) { h->hnsw.efSearch = ef; });
}

// ---- one dataset -----------------------------------------------------------------------------------

void run_dataset(Bench& B, Dataset& D) {
    printf("\n== %s: n=%lld d=%lld nq=%lld k=%lld, %d host threads\n", D.name.c_str(), (long long)D.nb,
           (long long)D.d, (long long)D.nq, (long long)K, B.threads);
    B.out.header();
    if (!bench::ground_truth(B.out, D)) return;
    Graft G;
    graft_build(D, &G);
    const std::vector<int> Ls = B.quick ? std::vector<int>{16, 32, 64}
                                        : std::vector<int>{10, 16, 24, 32, 48, 64, 96, 128, 192, 256};
    const std::vector<int> replay_Ls = !B.replay_Ls.empty() ? B.replay_Ls
                                       : B.quick ? std::vector<int>{16, 32, 64}
                                                 : std::vector<int>{32, 48, 64, 96, 128, 192, 256};
    if (G.index && B.replay_only) {
        replay_floor(B, D, G, replay_Ls);
    } else if (G.index) {
        graft_sweep(B, D, G, Ls);
        exported_hnsw(B, D, G);
        if (B.quick || D.name == "dense-sift1m") graft_ablation(B, D, G);
        cpu_reference(B, D, G);
        replay_floor(B, D, G, replay_Ls);
    }
    graft_gindex_free(G.index);
}

}  // namespace

int main(int argc, char** argv) {
    bench::Options o("search");
    // This study's own options: --replay-only (the walk's memory floor alone), --replay-L LIST.
    bool replay_only = false;
    std::vector<int> replay_Ls;
    std::vector<char*> args;
    for (int i = 0; i < argc; i++)
        if (std::string(argv[i]) == "--replay-only") {
            replay_only = true;
        } else if (std::string(argv[i]) == "--replay-L" && i + 1 < argc) {
            for (char* t = strtok(argv[++i], ","); t; t = strtok(nullptr, ",")) replay_Ls.push_back(atoi(t));
        } else {
            args.push_back(argv[i]);
        }
    if (!o.parse((int)args.size(), args.data())) return 2;
    cudaDeviceProp prop;
    std::string device;
    if (!bench::cuda_device(o, &prop, &device)) return 1;
    const std::string date = bench::utc_date();
    if (o.run_id.empty()) o.run_id = o.bench + "-" + date;
    FILE* f = fopen(o.out_path.c_str(), "a");
    if (!f) {
        perror(o.out_path.c_str());
        return 1;
    }
    Recorder out(f, o.bench, o.run_id, date, o.commit, device);
    const Deadline deadline(o.deadline_s);
    Bench B{out, deadline, omp_get_max_threads(), o.quick, replay_only, replay_Ls};
    printf("device: %s (%d SMs), host threads: %d, commit %s, run %s%s\n", prop.name, prop.multiProcessorCount,
           B.threads, o.commit.c_str(), o.run_id.c_str(), o.quick ? ", quick" : "");
    bench::for_each_dataset(o, deadline, [&](Dataset& D) { run_dataset(B, D); });
    out.summary([](const std::string&) {});
    fclose(f);
    return 0;
}
