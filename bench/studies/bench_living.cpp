// The living graph index (issue 34; docs/adding-and-removing.md): what an add, a removal and a
// consolidation cost against a full build, and what they do to recall.
//
//   bench_living --base F --query F [--name N] [--scale C] [--nq Q] [--out F.jsonl] [--commit C]
//                [--run-id R] [--device D] [--storage FP32|FP16|SQ8] [--hnsw-max N]
//                [--hnsw-threads T] [--deadline S] [--insert-L L,L,...]
//
// On one dataset (u8bin / fvecs / ... as graft_dataset_read_f32 reads; --scale C grows a d = 128
// SIFT base to C cell-permuted, jittered copies, as graft-bench --scale does, bench_record.h):
//   1. full:    one build over every vector (the reference time and recall at L 32..128);
//   2. insert:  built on 90%, ten 1% adds (each timed: the insert's wall time over the full
//               build's is the "at most 5%"), recall at the same L against the full build;
//               then again with each --insert-L (the beam of the inserts' walk, against the
//               default graft_insert_default_L(R)), to compare the beams in one run;
//   3. rate:    built on 80%, adds of 1k vectors (5, median) and one of 100k: vectors a second;
//               FAISS HNSW32 (M = 32, efConstruction 40) on --hnsw-threads threads, built on the
//               same 80% (its build rate), then the same 1k and 100k adds (skipped past
//               --hnsw-max vectors, default 2M: HNSW's build of 10M takes tens of minutes);
//   4. remove:  on the index of 2., a random 10% removed (timed), recall against exact search
//               over the rest and a fresh build over the rest; 50% in all (timed), recall with
//               the tombstones; consolidated (timed), recall; a fresh build over the 50%.
// Recall is recall@10 of GPU searches (batch nq) against graft's exact GPU flat search; QPS of the
// same search is recorded beside it. Records (DESIGN.md, "Benchmark records"): bench "living",
// params.op one of full, insert, rate, remove, consolidate, fresh. Without a GPU the same runs on
// the CPU references (slow: small data only).
#include <omp.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <faiss/IndexHNSW.h>

#include "bench_record.h"
#include "graft/graph_index.h"

namespace {

using bench::now_s;

struct Opts {
    std::string base, query, name = "data", out = "bench_living.jsonl", commit = "unknown", run_id;
    int scale = 1, device = 0, storage = GRAFT_STORAGE_FP32, hnsw_threads = 16;
    int64_t nq = 1000, hnsw_max = 2000000;
    double deadline = 1e9;
    std::vector<int> insert_Ls;  // --insert-L: step 2 again at each beam
};

const int kLs[] = {32, 48, 64, 96, 128};
constexpr int kNL = 5;

struct Out {
    FILE* f;
    std::string run_id, date, commit, device, dataset;
    int64_t n = 0, d = 0, nq = 0;
    // One record; params is a JSON object's inside ("\"op\":\"insert\",...").
    void rec(const char* system, const char* family, const char* index, const std::string& params,
             double seconds, double recall, double qps, int threads) {
        fprintf(f,
                "{\"run_id\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"bench\":\"living\","
                "\"system\":\"%s\",\"family\":\"%s\",\"index\":\"%s\",\"mode\":\"in-memory\",\"dataset\":\"%s\","
                "\"n\":%lld,\"d\":%lld,\"nq\":%lld,\"k\":10,\"metric\":\"L2\",\"params\":{%s},\"build_s\":%.4f",
                run_id.c_str(), date.c_str(), commit.c_str(), device.c_str(), system, family, index,
                dataset.c_str(), (long long)n, (long long)d, (long long)nq, params.c_str(), seconds);
        if (recall >= 0) fprintf(f, ",\"recall\":%.4f", recall);
        if (qps > 0) fprintf(f, ",\"qps\":%.1f", qps);
        if (threads) fprintf(f, ",\"threads\":%d", threads);
        fprintf(f, "}\n");
        fflush(f);
    }
};

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
    char b[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}

graft_gindex* make(const Opts& o, int64_t d, int insert_L = 0) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.living.insert_L = insert_L;
    p.device = graft_gpu_available() ? o.device : -1;
    p.storage = o.storage;
    p.living.policy = GRAFT_ADD_INSERT; /* measured as inserts, whatever the cost model says */
    p.living.consolidate_share = 1.0;   /* consolidation only when called */
    graft_gindex* g = nullptr;
    if (graft_gindex_new(d, &p, &g) != GRAFT_OK) {
        printf("graft_gindex_new: %s\n", graft_last_error());
        exit(1);
    }
    return g;
}

void must(int rc, const char* what) {
    if (rc == GRAFT_OK) return;
    printf("%s failed: %s\n", what, graft_last_error());
    exit(1);
}

// Rows rows[0..n) of x into a new matrix.
std::vector<float> gather(const std::vector<float>& x, int64_t d, const std::vector<int64_t>& rows) {
    std::vector<float> y(rows.size() * d);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < (int64_t)rows.size(); i++)
        std::copy(x.begin() + rows[i] * d, x.begin() + (rows[i] + 1) * d, y.begin() + i * d);
    return y;
}

// Exact top 10 of the queries among rows (ids: positions in rows), graft's GPU flat search.
std::vector<int64_t> truth(const bench::Dataset& D, const std::vector<int64_t>& rows) {
    bench::Dataset R;
    R.d = D.d;
    R.xq = D.xq;
    R.nq = D.nq;
    R.xb = gather(D.xb, D.d, rows);
    R.nb = (int64_t)rows.size();
    if (!bench::exact_neighbours(R, 1000, [](int64_t) {})) exit(1);
    return R.gt;
}

struct Sweep {
    double recall[kNL], qps[kNL];
};

Sweep sweep(const graft_gindex* g, const bench::Dataset& D, const std::vector<int64_t>& gt) {
    Sweep s;
    std::vector<float> dist(D.nq * 10);
    std::vector<int64_t> I(D.nq * 10);
    graft_search_params sp = graft_gindex_get_params(g).search;
    for (int i = 0; i < kNL; i++) {
        sp.L = kLs[i];
        must(graft_gindex_search(g, D.nq, D.xq.data(), 10, &sp, dist.data(), I.data(), nullptr), "search");
        const double t = bench::median_time(3, [&] {
            return graft_gindex_search(g, D.nq, D.xq.data(), 10, &sp, dist.data(), I.data(), nullptr) == GRAFT_OK;
        });
        s.recall[i] = bench::recall_at_k(I.data(), gt.data(), D.nq, 10);
        s.qps[i] = t > 0 ? D.nq / t : 0;
    }
    return s;
}

void print_sweep(const char* what, const Sweep& s, const Sweep* ref) {
    printf("  %-34s", what);
    for (int i = 0; i < kNL; i++) {
        printf(" L=%d %.4f", kLs[i], s.recall[i]);
        if (ref) printf(" (%+.4f)", s.recall[i] - ref->recall[i]);
    }
    printf("\n");
}

void record_sweep(Out& out, const char* index, const std::string& params, double seconds, const Sweep& s) {
    for (int i = 0; i < kNL; i++)
        out.rec("graft", "graph", index, params + fmt(",\"L\":%d", kLs[i]), seconds, s.recall[i], s.qps[i], 0);
}

graft_living_report living(const graft_gindex* g) {
    graft_living_report r;
    graft_gindex_living_report(g, &r);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--base") o.base = v;
        else if (a == "--query") o.query = v;
        else if (a == "--name") o.name = v;
        else if (a == "--scale") o.scale = atoi(v.c_str());
        else if (a == "--nq") o.nq = atoll(v.c_str());
        else if (a == "--out") o.out = v;
        else if (a == "--commit") o.commit = v;
        else if (a == "--run-id") o.run_id = v;
        else if (a == "--device") o.device = atoi(v.c_str());
        else if (a == "--storage") o.storage = v == "FP16" ? GRAFT_STORAGE_FP16 : v == "SQ8" ? GRAFT_STORAGE_SQ8 : GRAFT_STORAGE_FP32;
        else if (a == "--hnsw-max") o.hnsw_max = atoll(v.c_str());
        else if (a == "--hnsw-threads") o.hnsw_threads = atoi(v.c_str());
        else if (a == "--deadline") o.deadline = atof(v.c_str());
        else if (a == "--insert-L") {
            std::vector<double> beams;
            if (!bench::split_numbers(v, &beams)) {
                fprintf(stderr, "bench_living: --insert-L %s, need L[,L...]\n", v.c_str());
                return 2;
            }
            for (double b : beams) o.insert_Ls.push_back((int)b);
        }
        else {
            fprintf(stderr, "bench_living: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (o.base.empty() || o.query.empty()) {
        fprintf(stderr, "usage: bench_living --base F --query F [--name N] [--scale C] [--nq Q] [--out F] ...\n");
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0); /* progress lines while it runs (tee'd on the device) */
    const double t_start = now_s();
    auto late = [&](const char* what) {
        if (now_s() - t_start < o.deadline) return false;
        printf("deadline: %s skipped\n", what);
        return true;
    };
    bench::Dataset D;
    D.name = o.name;
    int64_t dq = 0;
    if (!bench::read_matrix(o.base, false, D.xb, D.nb, D.d) || !bench::read_matrix(o.query, false, D.xq, D.nq, dq))
        return 1;
    if (o.scale > 1) {  // graft-bench's grown set: copies jittered, never equal, so ids score
        bench::scale_by_cells(D, o.scale);
        bench::jitter_copies(D, 0x5EED0033ull);
    }
    D.nq = std::min(D.nq, o.nq);
    D.xq.resize(D.nq * D.d);
    const std::string date = bench::utc_date();
    const char* dev = getenv("GRAFT_DEVICE_NAME");
    Out out{fopen(o.out.c_str(), "a"), o.run_id.empty() ? "living-" + date : o.run_id, date, o.commit,
            dev ? dev : graft_gpu_available() ? "gpu" : "cpu", D.name, D.nb, D.d, D.nq};
    const char* index = o.storage == GRAFT_STORAGE_FP16 ? "GraftGraph,FP16"
                        : o.storage == GRAFT_STORAGE_SQ8 ? "GraftGraph,SQ8"
                                                         : "GraftGraph";
    const int64_t n = D.nb, d = D.d;
    printf("== %s: n=%lld d=%lld nq=%lld, %s, %s, %d host threads\n", D.name.c_str(), (long long)n,
           (long long)d, (long long)D.nq, index, graft_gpu_available() ? "GPU" : "CPU references",
           omp_get_max_threads());
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    const std::vector<int64_t> gt = truth(D, all);
    {   // warm-up: context, modules
        graft_gindex* w = make(o, d);
        must(graft_gindex_add(w, std::min<int64_t>(n, 20000), D.xb.data()), "warm-up add");
        must(graft_gindex_build(w), "warm-up build");
        graft_gindex_free(w);
    }

    // 1. the full build
    graft_gindex* full = make(o, d);
    must(graft_gindex_add(full, n, D.xb.data()), "add");
    double t0 = now_s();
    must(graft_gindex_build(full), "build");
    const double t_full = now_s() - t0;
    const Sweep s_full = sweep(full, D, gt);
    printf("full build: %.3f s\n", t_full);
    print_sweep("full build", s_full, nullptr);
    record_sweep(out, index, "\"op\":\"full\"", t_full, s_full);
    graft_gindex_free(full);

    // 2. built on 90%, ten 1% inserts (the index of 4.), then at each --insert-L
    auto inserts = [&](int insert_L) {
        const int64_t n90 = n * 9 / 10, step = n / 100;
        graft_gindex* g = make(o, d, insert_L);
        const std::string beam = insert_L ? fmt(",\"insert_L\":%d", insert_L) : std::string();
        must(graft_gindex_add(g, n90, D.xb.data()), "add 90%");
        double ts = now_s();
        must(graft_gindex_build(g), "build 90%");
        const double t90 = now_s() - ts;
        std::vector<double> t_add;
        for (int64_t at = n90; at < n;) {
            const int64_t m = std::min(step, n - at);
            ts = now_s();
            must(graft_gindex_add(g, m, D.xb.data() + at * d), "insert");
            t_add.push_back(now_s() - ts);
            const double t = t_add.back();
            out.rec("graft", "graph", index,
                    fmt("\"op\":\"insert\",\"batch\":%lld,\"at\":%lld,\"share_of_full_build\":%.4f,\"vectors_per_s\":%.0f,"
                        "\"gpu_inserts\":%d", (long long)m, (long long)at, t / t_full, m / t, living(g).on_gpu_inserts) + beam,
                    t, -1, 0, 0);
            printf("  insert of %lld at %lld: %.4f s = %.2f%% of the full build (%.0f vectors/s)\n", (long long)m,
                   (long long)at, t, 100 * t / t_full, m / t);
            at += m;
        }
        const Sweep s_ins = sweep(g, D, gt);
        const graft_living_report lr = living(g);
        printf("built on 90%% in %.3f s; ten 1%% inserts%s: median %.4f s = %.2f%% of the full build (on the GPU: %d)\n",
               t90, insert_L ? fmt(" at insert_L %d", insert_L).c_str() : "", bench::median(t_add),
               100 * bench::median(t_add) / t_full, lr.on_gpu_inserts);
        print_sweep(insert_L ? fmt("90%% + ten 1%% inserts, beam %d", insert_L).c_str() : "90% + ten 1% inserts",
                    s_ins, &s_full);
        record_sweep(out, index, fmt("\"op\":\"after_inserts\",\"median_insert_s\":%.4f,\"full_build_s\":%.4f",
                                     bench::median(t_add), t_full) + beam,
                     t90, s_ins);
        return g;
    };
    graft_gindex* g = inserts(0);
    for (int beam : o.insert_Ls)
        if (!late("another insert beam")) graft_gindex_free(inserts(beam));

    // 3. insert rates at batch 1k and 100k, and FAISS HNSW32's add rate
    if (!late("rates")) {
        const int64_t n80 = n * 8 / 10;
        graft_gindex* h = make(o, d);
        must(graft_gindex_add(h, n80, D.xb.data()), "add 80%");
        must(graft_gindex_build(h), "build 80%");
        int64_t at = n80;
        std::vector<double> t1k;
        for (int r = 0; r < 5 && at + 1000 <= n; r++, at += 1000) {
            t0 = now_s();
            must(graft_gindex_add(h, 1000, D.xb.data() + at * d), "insert 1k");
            t1k.push_back(now_s() - t0);
        }
        const int64_t big = std::min<int64_t>(100000, n - at);
        const double t1 = t1k.empty() ? 0 : bench::median(t1k);
        t0 = now_s();
        if (big > 0) must(graft_gindex_add(h, big, D.xb.data() + at * d), "insert 100k");
        const double t100k = now_s() - t0;
        printf("graft inserts into %lld: batch 1k %.0f vectors/s (median of %zu), batch %lld %.0f vectors/s\n",
               (long long)n80, t1 > 0 ? 1000 / t1 : 0.0, t1k.size(), (long long)big, big / t100k);
        if (t1 > 0)
            out.rec("graft", "graph", index, fmt("\"op\":\"rate\",\"batch\":1000,\"into\":%lld,\"vectors_per_s\":%.0f",
                                                 (long long)n80, 1000 / t1), t1, -1, 0, 0);
        out.rec("graft", "graph", index, fmt("\"op\":\"rate\",\"batch\":%lld,\"into\":%lld,\"vectors_per_s\":%.0f",
                                             (long long)big, (long long)(n80 + 5000), big / t100k),
                t100k, -1, 0, 0);
        graft_gindex_free(h);
        if (n <= o.hnsw_max && !late("HNSW32")) {
            const int threads = omp_get_max_threads();
            omp_set_num_threads(o.hnsw_threads);
            faiss::IndexHNSWFlat hnsw((int)d, 32);
            t0 = now_s();
            hnsw.add(n80, D.xb.data());
            const double tb = now_s() - t0;
            at = n80;
            std::vector<double> h1k;
            for (int r = 0; r < 5 && at + 1000 <= n; r++, at += 1000) {
                t0 = now_s();
                hnsw.add(1000, D.xb.data() + at * d);
                h1k.push_back(now_s() - t0);
            }
            t0 = now_s();
            if (big > 0) hnsw.add(big, D.xb.data() + at * d);
            const double h100k = now_s() - t0;
            const double h1 = h1k.empty() ? 0 : bench::median(h1k);
            omp_set_num_threads(threads);
            printf("FAISS HNSW32 on %d threads: built on %lld at %.0f vectors/s; adds: batch 1k %.0f vectors/s, "
                   "batch %lld %.0f vectors/s\n", o.hnsw_threads, (long long)n80, n80 / tb, h1 > 0 ? 1000 / h1 : 0.0,
                   (long long)big, big / h100k);
            out.rec("faiss-cpu", "hnsw", "HNSW32", fmt("\"op\":\"rate\",\"batch\":%lld,\"into\":0,\"vectors_per_s\":%.0f",
                                                       (long long)n80, n80 / tb), tb, -1, 0, o.hnsw_threads);
            if (h1 > 0)
                out.rec("faiss-cpu", "hnsw", "HNSW32", fmt("\"op\":\"rate\",\"batch\":1000,\"into\":%lld,\"vectors_per_s\":%.0f",
                                                           (long long)n80, 1000 / h1), h1, -1, 0, o.hnsw_threads);
            out.rec("faiss-cpu", "hnsw", "HNSW32", fmt("\"op\":\"rate\",\"batch\":%lld,\"into\":%lld,\"vectors_per_s\":%.0f",
                                                       (long long)big, (long long)(n80 + 5000), big / h100k),
                    h100k, -1, 0, o.hnsw_threads);
        }
    }

    // 4. removals and consolidation on the inserted index
    if (!late("removals")) {
        std::mt19937_64 rng(34);
        std::vector<int64_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<uint8_t> gone(n, 0);
        std::vector<int64_t> left;  // the rows left, in order: the index's ids
        auto remove_upto = [&](int64_t total, int64_t& done) {
            // the rows order[done, total) go; their ids in the numbering of now
            std::vector<int64_t> rank(n, -1);
            int64_t id = 0;
            for (int64_t r = 0; r < n; r++)
                if (!gone[r]) rank[r] = id++;
            std::vector<int64_t> ids;
            for (int64_t i = done; i < total; i++) ids.push_back(rank[order[i]]), gone[order[i]] = 1;
            int64_t removed = 0;
            const double ts = now_s();
            must(graft_gindex_remove_ids(g, (int64_t)ids.size(), ids.data(), &removed), "remove_ids");
            const double t = now_s() - ts;
            done = total;
            left.clear();
            for (int64_t r = 0; r < n; r++)
                if (!gone[r]) left.push_back(r);
            return t;
        };
        auto fresh = [&](const char* what) {
            graft_gindex* f = make(o, d);
            const std::vector<float> x = gather(D.xb, d, left);
            must(graft_gindex_add(f, (int64_t)left.size(), x.data()), "fresh add");
            const double ts = now_s();
            must(graft_gindex_build(f), "fresh build");
            const double t = now_s() - ts;
            const std::vector<int64_t> gl = truth(D, left);
            const Sweep s = sweep(f, D, gl);
            record_sweep(out, index, fmt("\"op\":\"fresh\",\"after\":\"%s\",\"vectors\":%zu", what, left.size()), t, s);
            graft_gindex_free(f);
            return s;
        };
        int64_t done = 0;
        for (int pct : {10, 50}) {
            const double t = remove_upto(n * pct / 100, done);
            const std::vector<int64_t> gl = truth(D, left);
            const Sweep s = sweep(g, D, gl);
            const Sweep f = fresh(pct == 10 ? "remove 10%" : "remove 50%");
            printf("removed %d%% (%lld in all) in %.4f s; searches read the tombstones:\n", pct, (long long)done, t);
            print_sweep(fmt("%d%% removed (tombstones)", pct).c_str(), s, &f);
            print_sweep("  fresh build over the rest", f, nullptr);
            record_sweep(out, index, fmt("\"op\":\"remove\",\"removed_share\":%.2f,\"removed\":%lld", pct / 100.0,
                                         (long long)done), t, s);
            if (pct == 50) {
                const double ts = now_s();
                must(graft_gindex_consolidate(g), "consolidate");
                const double tc = now_s() - ts;
                const Sweep c = sweep(g, D, gl);
                printf("consolidated in %.4f s (%.2f%% of the full build):\n", tc, 100 * tc / t_full);
                print_sweep("50% removed, consolidated", c, &f);
                record_sweep(out, index, fmt("\"op\":\"consolidate\",\"removed_share\":0.50,\"share_of_full_build\":%.4f",
                                             tc / t_full), tc, c);
            }
        }
    }
    graft_gindex_free(g);
    fclose(out.f);
    printf("done in %.1f s\n", now_s() - t_start);
    return 0;
}
