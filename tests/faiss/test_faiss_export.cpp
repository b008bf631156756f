// graft's graph exported to FAISS's two HNSW types, compared on real data (sift5k, and the first
// 10k of Fashion-MNIST, 200 queries): IndexHNSWFlat (export_hnsw: one level, entered at graft's entry point) and,
// with FAISS >= 1.9, IndexHNSWCagra (export_hnsw_cagra: base_level_only, entered at the best of 32
// random vertices), both searched by FAISS's own CPU HNSW search on the same graph and vectors.
// Prints recall@10 against IndexFlat and the CPU search time of all queries for efSearch 16..128,
// and checks: both hold the same graph; recall at efSearch 64 >= 0.95 (sift5k) / 0.90
// (Fashion-MNIST) for both; the Cagra export refuses adds and survives faiss::write_index /
// read_index; with a FAISS without IndexHNSWCagra the export fails, saying so.
// Timings are reported, not checked (a shared 2-core machine). No figure here is a comparison with
// CAGRA: the graphs are graft's (RNN-Descent on the CPU here), only FAISS's container differs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include "GraftIndexGraph.h"

extern "C" {
#include "testutil.h"
}

using idx_t = graft::idx_t;
static const int K = 10;

struct Data {
    const char* name;
    const float* xb;
    const float* xq;
    int64_t nb, nq, d;
    double min_recall;  // at efSearch 64
};

static double recall(const std::vector<idx_t>& I, const std::vector<idx_t>& truth, int64_t nq) {
    int64_t hit = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int j = 0; j < K; j++)
            for (int t = 0; t < K; t++) hit += I[q * K + j] == truth[q * K + t];
    return (double)hit / (double)(nq * K);
}

// Recall and seconds of one search of all queries at efSearch ef (the better of 2 runs' time).
static double search(faiss::IndexHNSW& h, const Data& s, int ef, const std::vector<idx_t>& truth, double* secs) {
    h.hnsw.efSearch = ef;
    std::vector<float> D(s.nq * K);
    std::vector<idx_t> I(s.nq * K);
    *secs = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        auto t0 = std::chrono::steady_clock::now();
        h.search(s.nq, s.xq, K, D.data(), I.data());
        *secs = std::min(*secs, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return recall(I, truth, s.nq);
}

static void run(const Data& s) {
    faiss::IndexFlatL2 flat(s.d);
    flat.add(s.nb, s.xb);
    std::vector<float> Dt(s.nq * K);
    std::vector<idx_t> truth(s.nq * K);
    flat.search(s.nq, s.xq, K, Dt.data(), truth.data());

    graft::GraftIndexGraph g(s.d);
    g.add(s.nb, s.xb);
    std::vector<float> D1(K);
    std::vector<idx_t> I1(K);
    g.search(1, s.xq, K, D1.data(), I1.data());  // builds the graph
    printf("%s: %lld x %lld, %lld queries; graft graph R = %g built on device %g in %.1f s\n", s.name,
           (long long)s.nb, (long long)s.d, (long long)s.nq, g.get_param("R"), g.get_param("device"),
           g.get_param("build_seconds"));

    std::unique_ptr<faiss::IndexHNSWFlat> hf(graft::export_hnsw(g));
    std::unique_ptr<faiss::IndexHNSW> hc;
    try {
        hc.reset(graft::export_hnsw_cagra(g));
        CHECK(graft::faiss_compat::kHasHNSWCagra, "export_hnsw_cagra made an index on FAISS %s",
              graft::kFaissVersion);
    } catch (const faiss::FaissException& e) {
        CHECK(!graft::faiss_compat::kHasHNSWCagra && std::strstr(e.what(), "IndexHNSWCagra"),
              "export_hnsw_cagra: %s", e.what());
        printf("  FAISS %s: no IndexHNSWCagra (%s)\n", graft::kFaissVersion, e.what());
    }
    if (hc) {
        CHECK(hc->hnsw.neighbors.size() == hf->hnsw.neighbors.size() &&
                      std::memcmp(hc->hnsw.neighbors.data(), hf->hnsw.neighbors.data(),
                                  sizeof(hf->hnsw.neighbors[0]) * hf->hnsw.neighbors.size()) == 0,
              "the two exports hold different graphs");
        bool refused = false;
        try {
            hc->add(1, s.xb);
        } catch (const faiss::FaissException&) {
            refused = true;
        }
        CHECK(refused && hc->ntotal == s.nb, "IndexHNSWCagra (base_level_only) took an add");
        faiss::VectorIOWriter w;
        faiss::write_index(hc.get(), &w);
        faiss::VectorIOReader r;
        r.data = w.data;
        std::unique_ptr<faiss::Index> back(faiss::read_index(&r));
        auto* bc = dynamic_cast<faiss::IndexHNSW*>(back.get());
        CHECK(bc && bc->ntotal == s.nb && bc->hnsw.neighbors.size() == hc->hnsw.neighbors.size(),
              "IndexHNSWCagra export after write_index / read_index");
    }

    printf("  %-8s %-22s %-22s\n", "efSearch", "IndexHNSWFlat", hc ? "IndexHNSWCagra" : "");
    printf("  %-8s %-22s %-22s\n", "", "recall@10  CPU ms", hc ? "recall@10  CPU ms" : "");
    for (int ef : {16, 32, 64, 128}) {
        double tf = 0, tc = 0;
        const double rf = search(*hf, s, ef, truth, &tf);
        const double rc = hc ? search(*hc, s, ef, truth, &tc) : 0;
        if (hc)
            printf("  %-8d %.4f     %8.1f    %.4f     %8.1f\n", ef, rf, 1e3 * tf, rc, 1e3 * tc);
        else
            printf("  %-8d %.4f     %8.1f\n", ef, rf, 1e3 * tf);
        if (ef == 64) {
            CHECK(rf >= s.min_recall, "%s: IndexHNSWFlat export recall@10 %.4f at efSearch 64", s.name, rf);
            CHECK(!hc || rc >= s.min_recall, "%s: IndexHNSWCagra export recall@10 %.4f at efSearch 64", s.name, rc);
        }
    }
}

int main() {
    graft_test_sift sift;
    graft_test_load_sift5k(&sift);
    printf("FAISS %s\n", graft::kFaissVersion);
    run({"sift5k", sift.xb, sift.xq, sift.nb, sift.nq, sift.d, 0.95});
    float *xb = nullptr, *xq = nullptr;
    int64_t nb = 0, nq = 0, d = 0;
    if (!getenv("GRAFT_TEST_QUICK") && graft_test_load_fmnist(10000, 200, &xb, &nb, &xq, &nq, &d) == 0) {
        run({"fashion-mnist-10k", xb, xq, nb, nq, d, 0.90});
        free(xb);
        free(xq);
    }
    graft_test_free_sift(&sift);
    return graft_test_finish("test_faiss_export");
}
