// graft::SearchParametersGraftGraphPQ and graft_faiss_kmeans through FAISS's C++ API (FAISS 1.7.3's
// C API has no SearchParameters): per-search L / rerank / max_expand give what the same index
// defaults give, leave the defaults alone, combine with an IDSelector, and bad values throw
// faiss::FaissException; graft_faiss_kmeans honours a ClusteringParameters context and reports
// FAISS's refusals as graft statuses. CPU reference (device -1), sift5k, public headers only.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <faiss/Clustering.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include "GraftIndexGraphPQ.h"
#include "graft_faiss_c.h"

extern "C" {
#include "testutil.h"
}

using idx_t = graft::idx_t;

static const int K = 10;

struct Results {
    std::vector<float> D;
    std::vector<idx_t> I;
    bool operator==(const Results& o) const { return D == o.D && I == o.I; }
};

static Results run(const faiss::Index& index, const graft_test_sift& s,
                   const faiss::SearchParameters* params = nullptr) {
    Results r{std::vector<float>(s.nq * K), std::vector<idx_t>(s.nq * K)};
    index.search(s.nq, s.xq, K, r.D.data(), r.I.data(), params);
    return r;
}

static void test_search_params(const graft_test_sift& s) {
    printf("SearchParametersGraftGraphPQ\n");
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.storage = GRAFT_STORAGE_PQ;
    p.device = -1;
    p.build.base.R = 32;
    graft::GraftIndexGraphPQ g(s.d, 16, faiss::METRIC_L2, &p);
    g.train(2000, s.xb);
    g.add(s.nb, s.xb);
    const Results base = run(g, s);

    // Each per-search field gives what the same index default gives, and leaves it as it was.
    struct { const char* name; int value; } cases[] = {{"L", 128}, {"rerank", 10}, {"max_expand", 64}};
    for (const auto& c : cases) {
        graft::SearchParametersGraftGraphPQ sp;
        if (!strcmp(c.name, "L")) sp.L = c.value;
        if (!strcmp(c.name, "rerank")) sp.rerank = c.value;
        if (!strcmp(c.name, "max_expand")) sp.max_expand = c.value;
        const Results per_search = run(g, s, &sp);
        CHECK(run(g, s) == base, "%s=%d per search changed the index's defaults", c.name, c.value);
        const double old = g.get_param(c.name);
        g.set_param(c.name, c.value);
        const Results by_default = run(g, s);
        g.set_param(c.name, old);
        CHECK(per_search == by_default, "%s=%d: per-search results differ from the index default's", c.name,
              c.value);
        CHECK(!(per_search == base), "%s=%d changed nothing", c.name, c.value);
        printf("  %-10s = %-4d recall@10 %.4f (default %.4f)\n", c.name, c.value,
               graft_test_recall(per_search.I.data(), K, s.gt, s.gt_k, s.nq, K),
               graft_test_recall(base.I.data(), K, s.gt, s.gt_k, s.nq, K));
    }

    // With a selector: only its ids, more of them with a wider worklist.
    faiss::IDSelectorRange range(100, 550);  // 1 id in 10
    graft::SearchParametersGraftGraphPQ sp;
    sp.sel = &range;
    int64_t found64 = 0, found256 = 0, outside = 0;
    Results r64 = run(g, s, &sp);
    sp.L = 256;
    Results r256 = run(g, s, &sp);
    for (size_t i = 0; i < r64.I.size(); i++) {
        found64 += r64.I[i] >= 0;
        found256 += r256.I[i] >= 0;
        outside += (r64.I[i] >= 0 && !range.is_member(r64.I[i])) + (r256.I[i] >= 0 && !range.is_member(r256.I[i]));
    }
    printf("  IDSelectorRange [100, 550): %lld of %zu slots filled at L=64, %lld at L=256\n", (long long)found64,
           r64.I.size(), (long long)found256);
    CHECK(outside == 0 && found256 >= found64, "selector: %lld ids outside, %lld vs %lld found", (long long)outside,
          (long long)found256, (long long)found64);

    // Bad per-search values throw and change nothing.
    graft::SearchParametersGraftGraphPQ bad;
    bad.L = 2000;
    bool threw = false;
    try {
        run(g, s, &bad);
    } catch (const faiss::FaissException& e) {
        threw = strstr(e.what(), "2000") != nullptr;
        printf("  L=2000 -> %s\n", e.what());
    }
    CHECK(threw, "L=2000 per search did not throw a FaissException naming it");
    CHECK(run(g, s) == base && g.get_param("L") == 64, "a refused search changed the index");
}

static void test_kmeans(const graft_test_sift& s) {
    printf("graft_faiss_kmeans\n");
    const int64_t n = 3000, d = 16, k = 64;
    std::vector<float> x(n * d), a(k * d), b(k * d), c(k * d);
    for (int64_t i = 0; i < n; i++) std::memcpy(&x[i * d], s.xb + i * s.d, sizeof(float) * d);
    CHECK_OK(graft_faiss_kmeans(nullptr, d, n, k, x.data(), a.data()));
    CHECK_OK(graft_faiss_kmeans(nullptr, d, n, k, x.data(), b.data()));
    CHECK(a == b, "the default k-means is not deterministic");
    faiss::ClusteringParameters cp;
    cp.niter = 3;
    cp.seed = 99;
    CHECK_OK(graft_faiss_kmeans(&cp, d, n, k, x.data(), c.data()));
    CHECK(c != a, "a ClusteringParameters context changed nothing");
    // Objective: the default 25 iterations beat 3.
    auto sse = [&](const std::vector<float>& cent) {
        double t = 0;
        for (int64_t i = 0; i < n; i++) {
            double best = INFINITY;
            for (int64_t j = 0; j < k; j++) {
                double e = 0;
                for (int64_t u = 0; u < d; u++) e += std::pow(x[i * d + u] - cent[j * d + u], 2);
                best = std::min(best, e);
            }
            t += best;
        }
        return t;
    };
    printf("  sum of squared errors: %.4g (25 iterations), %.4g (3 iterations, seed 99)\n", sse(a), sse(c));
    CHECK(sse(a) < sse(c), "25 iterations %.4g not below 3: %.4g", sse(a), sse(c));

    CHECK_ERR(graft_faiss_kmeans(nullptr, d, k - 1, k, x.data(), a.data()), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "FAISS k-means failed"), "n < k: %s", graft_last_error());
    printf("  n < k -> %s\n", graft_last_error());
    x[5] = NAN;
    CHECK_ERR(graft_faiss_kmeans(nullptr, d, n, k, x.data(), a.data()), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "NaN"), "NaN input: %s", graft_last_error());
    CHECK_ERR(graft_faiss_kmeans(nullptr, d, n, k, nullptr, a.data()), GRAFT_EINVAL);
    CHECK_ERR(graft_faiss_kmeans(nullptr, 0, n, k, x.data(), a.data()), GRAFT_EINVAL);
}

int main() {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    test_search_params(s);
    test_kmeans(s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_bang_params");
}
