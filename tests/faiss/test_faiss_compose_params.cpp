// graft::SearchParametersGraftFlat through FAISS's C++ API (FAISS 1.7.3's C API has no
// SearchParameters): IDSelector filtering equals faiss::IndexFlat with the same selector, directly
// and through IndexPreTransform's SearchParametersPreTransform; cpu_reference gives the exact
// results on a GPU index too. Uses the public headers (GraftIndexFlat.h, faiss/*.h) like a user.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include "GraftIndexFlat.h"

extern "C" {
#include "testutil.h"
}

using idx_t = graft::idx_t;

static const int K = 10;
static const double TOL = 1e-5 * 2 * 512.0 * 512.0;

// Same search by two exact methods: distances within TOL, labels equal except near-tie swaps.
static void agree(const char* what, const std::vector<float>& Da, const std::vector<idx_t>& Ia,
                  const std::vector<float>& Db, const std::vector<idx_t>& Ib, int64_t k) {
    int64_t bad = 0, swaps = 0;
    for (size_t i = 0; i < Ia.size(); i++) {
        if (Ia[i] == -1 || Ib[i] == -1) {
            if (Ia[i] != Ib[i]) bad++;
            continue;
        }
        if (std::fabs((double)Da[i] - Db[i]) > TOL) bad++;
        if (Ia[i] != Ib[i]) {
            swaps++;
            size_t q = i / k;
            bool tie = i % k == (size_t)k - 1;
            for (int64_t j = 0; j < k; j++)
                if (Ib[q * k + j] == Ia[i] && std::fabs((double)Db[q * k + j] - Da[i]) <= TOL) tie = true;
            if (!tie) bad++;
        }
    }
    CHECK(bad == 0, "%s: %lld differences that are not ties", what, (long long)bad);
    printf("  %-52s agree (%lld tie swaps)\n", what, (long long)swaps);
}

int main() {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    const int64_t nq = s.nq, d = s.d;
    graft::GraftIndexFlat g(d, faiss::METRIC_L2);  // GPU 0 when visible, else the CPU reference
    faiss::IndexFlatL2 f(d);
    g.add(s.nb, s.xb);
    f.add(s.nb, s.xb);
    std::vector<float> Dg(nq * K), Df(nq * K);
    std::vector<idx_t> Ig(nq * K), If(nq * K);

    std::vector<idx_t> ids;
    for (idx_t i = 0; i < s.nb; i += 4) ids.push_back(i + (i / 4) % 3);
    faiss::IDSelectorBatch batch(ids.size(), ids.data());
    faiss::IDSelectorRange range(700, 2100);

    for (int which = 0; which < 2; which++) {
        faiss::IDSelector* sel = which ? (faiss::IDSelector*)&range : (faiss::IDSelector*)&batch;
        graft::SearchParametersGraftFlat gp;
        gp.sel = sel;
        faiss::SearchParameters fp;
        fp.sel = sel;
        g.search(nq, s.xq, K, Dg.data(), Ig.data(), &gp);
        f.search(nq, s.xq, K, Df.data(), If.data(), &fp);
        int64_t outside = 0;
        for (idx_t l : Ig) outside += l >= 0 && !sel->is_member(l);
        CHECK(outside == 0, "%lld labels outside the selector", (long long)outside);
        agree(which ? "SearchParametersGraftFlat sel=IDSelectorRange" : "SearchParametersGraftFlat sel=IDSelectorBatch",
              Df, If, Dg, Ig, K);
    }

    // cpu_reference: the unfiltered exact result (identical to the CPU index's own search).
    graft::GraftIndexFlat c(d, faiss::METRIC_L2, nullptr);
    graft::SearchParametersGraftFlat cpu;
    cpu.cpu_reference = true;
    g.search(nq, s.xq, K, Dg.data(), Ig.data(), &cpu);
    f.search(nq, s.xq, K, Df.data(), If.data());
    agree("cpu_reference vs IndexFlatL2", Df, If, Dg, Ig, K);
    CHECK(graft_test_recall(reinterpret_cast<int64_t*>(Ig.data()), K, s.gt, s.gt_k, nq, K) >= 0.999,
          "cpu_reference recall");

    // Through IndexPreTransform(PCA64): SearchParametersPreTransform carries graft's parameters.
    faiss::PCAMatrix* pca_g = new faiss::PCAMatrix(d, 64);
    faiss::PCAMatrix* pca_f = new faiss::PCAMatrix(d, 64);
    faiss::IndexPreTransform pg(pca_g, new graft::GraftIndexFlat(64, faiss::METRIC_L2));
    faiss::IndexPreTransform pf(pca_f, new faiss::IndexFlatL2(64));
    pg.own_fields = pf.own_fields = true;
    pg.train(s.nb, s.xb);
    pf.train(s.nb, s.xb);
    pg.add(s.nb, s.xb);
    pf.add(s.nb, s.xb);
    graft::SearchParametersGraftFlat inner;
    inner.sel = &range;
    faiss::SearchParametersPreTransform outer;
    outer.index_params = &inner;
    faiss::SearchParameters fsel;
    fsel.sel = &range;
    pg.search(nq, s.xq, K, Dg.data(), Ig.data(), &outer);
    pf.search(nq, s.xq, K, Df.data(), If.data(), &fsel);
    agree("PCA64 + SearchParametersPreTransform(graft sel)", Df, If, Dg, Ig, K);

    // Errors still come back as FaissException (bad k, NaN) on the parameter path.
    bool threw = false;
    try {
        g.search(1, s.xq, 0, Dg.data(), Ig.data(), &cpu);
    } catch (const faiss::FaissException& e) {
        threw = std::strstr(e.what(), "k must be") != nullptr;
    }
    CHECK(threw, "k=0 with parameters must throw a FaissException naming k");

    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_compose_params");
}
