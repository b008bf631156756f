// graft's classes inside FAISS's own wrappers, through FAISS's C++ API, on sift5k: IndexIDMap,
// IndexIDMap2, IndexShards (of IDMaps), IndexReplicas, IndexPreTransform and IndexRefineFlat over
// GraftIndexFlat and GraftIndexGraph give what the same wrapper over faiss::IndexFlatL2 gives
// (GraftFlat: the same neighbours up to ties; GraftGraph: recall@10 >= 0.95 of them), and
// SearchParameters with IDSelectors reach graft through every wrapper that passes them on: the
// selectors Range, Batch, Bitmap, Not and And / Or / XOr, on the ids the caller sees.
//
// Written against the newer FAISS API. What FAISS's version decides comes from the compatibility
// header: faiss_compat::kWrappersPassSearchParameters (FAISS 1.7.3's IndexIDMap, IndexShards and
// IndexRefine refuse any SearchParameters: then both the reference and graft must be refused), and
// the And / Or / XOr selectors, FAISS's own since 1.7.4 (graft's copy on 1.7.3).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexRefine.h>
#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"

extern "C" {
#include "testutil.h"
}

using idx_t = graft::idx_t;
namespace compat = graft::faiss_compat;

static const int K = 10;
static const double kGraphRecall = 0.95;

struct Results {
    bool refused = false;  // FAISS's wrapper threw (it takes no SearchParameters)
    std::string why;
    std::vector<float> D;
    std::vector<idx_t> I;
};

static Results run(const faiss::Index& index, const graft_test_sift& s, const faiss::SearchParameters* p) {
    Results r;
    r.D.resize(s.nq * K);
    r.I.resize(s.nq * K);
    try {
        index.search(s.nq, s.xq, K, r.D.data(), r.I.data(), p);
    } catch (const faiss::FaissException& e) {
        r.refused = true;
        r.why = e.what();
    }
    return r;
}

// Of the reference's valid labels, the fraction found (pooled over queries).
static double overlap(const Results& got, const Results& want, int64_t nq) {
    int64_t hit = 0, total = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int j = 0; j < K; j++) {
            idx_t w = want.I[q * K + j];
            if (w < 0) continue;
            total++;
            for (int i = 0; i < K; i++) hit += got.I[q * K + i] == w;
        }
    return total ? (double)hit / (double)total : 1.0;
}

// graft through a wrapper vs IndexFlatL2 through the same wrapper. exact: GraftFlat (every label
// equal but near-tie swaps, and the distances); else recall >= kGraphRecall. Every label must be
// accepted by `sel` (on the ids the caller sees) when given, and labels are never repeated.
static void compare(const char* what, const Results& got, const Results& want, const graft_test_sift& s,
                    bool exact, const faiss::IDSelector* sel, bool params) {
    if (want.refused || got.refused) {
        CHECK(want.refused && got.refused, "%s: FAISS's reference %s, graft %s (%s)", what,
              want.refused ? "refused" : "ran", got.refused ? "refused" : "ran", got.why.c_str());
        CHECK(!(params && compat::kWrappersPassSearchParameters), "%s: refused with FAISS %s: %s", what,
              graft::kFaissVersion, got.why.c_str());
        printf("  %-58s refused by FAISS %s, as expected\n", what, graft::kFaissVersion);
        return;
    }
    int64_t outside = 0, repeats = 0;
    for (int64_t q = 0; q < s.nq; q++)
        for (int j = 0; j < K; j++) {
            idx_t l = got.I[q * K + j];
            if (l < 0) continue;
            if (sel && !sel->is_member(l)) outside++;
            for (int i = 0; i < j; i++) repeats += got.I[q * K + i] == l;
        }
    CHECK(outside == 0, "%s: %lld labels the selector rejects", what, (long long)outside);
    CHECK(repeats == 0, "%s: %lld repeated labels", what, (long long)repeats);
    const double r = overlap(got, want, s.nq);
    if (exact) {
        // Ties at sift's integer distances may swap labels; the distances may not differ.
        int64_t far = 0;
        for (size_t i = 0; i < got.D.size(); i++)
            if ((got.I[i] < 0) != (want.I[i] < 0) ||
                (got.I[i] >= 0 && std::fabs(got.D[i] - want.D[i]) > 1e-5f * (1.0f + std::fabs(want.D[i]))))
                far++;
        CHECK(far == 0 && r >= 0.99, "%s: %lld distances differ, overlap %.4f", what, (long long)far, r);
    } else {
        CHECK(r >= kGraphRecall, "%s: recall@10 %.4f against the same wrapper over IndexFlatL2", what, r);
    }
    printf("  %-58s %s %.4f\n", what, exact ? "overlap" : "recall@10", r);
}

// The index under test: GraftFlat or GraftGraph of dimension d, or the reference IndexFlatL2.
using Make = std::function<faiss::Index*(int64_t d)>;

struct Kind {
    const char* name;
    bool exact;
    Make make;
};

static faiss::Index* make_ref(int64_t d) { return new faiss::IndexFlatL2(d); }

// Same search on graft's wrapper and the reference's, with and without parameters.
static void both(const char* what, const faiss::Index& g, const faiss::Index& ref, const graft_test_sift& s,
                 const Kind& kind, const faiss::SearchParameters* gp, const faiss::SearchParameters* rp,
                 const faiss::IDSelector* sel_out) {
    std::string name = std::string(kind.name) + ": " + what;
    compare(name.c_str(), run(g, s, gp), run(ref, s, rp), s, kind.exact, sel_out, gp != nullptr);
}

static void test_kind(const Kind& kind, const graft_test_sift& s) {
    printf("%s\n", kind.name);
    const int64_t d = s.d, nb = s.nb;

    // The external ids of IDMap: i -> 3 i + 1000; selectors on them.
    std::vector<idx_t> ids(nb);
    for (int64_t i = 0; i < nb; i++) ids[i] = 3 * i + 1000;
    faiss::IDSelectorRange ext_range(1000 + 3 * 500, 1000 + 3 * 3000);
    std::vector<idx_t> some;
    std::mt19937_64 rng(7);
    for (int64_t i = 0; i < nb; i++)
        if (rng() % 10 < 3) some.push_back(i);
    faiss::IDSelectorBatch some_local(some.size(), some.data());

    {  // IndexIDMap: labels mapped; a selector on the external ids (IDSelectorTranslated inside).
        faiss::IndexIDMap g(kind.make(d)), r(make_ref(d));
        g.own_fields = r.own_fields = true;
        g.add_with_ids(nb, s.xb, ids.data());
        r.add_with_ids(nb, s.xb, ids.data());
        both("IndexIDMap", g, r, s, kind, nullptr, nullptr, nullptr);
        faiss::SearchParameters p;
        p.sel = &ext_range;
        both("IndexIDMap + SearchParameters(IDSelectorRange on ids)", g, r, s, kind, &p, &p, &ext_range);
    }
    {  // IndexIDMap2: reconstruct by external id.
        faiss::IndexIDMap2 g(kind.make(d)), r(make_ref(d));
        g.own_fields = r.own_fields = true;
        g.add_with_ids(nb, s.xb, ids.data());
        r.add_with_ids(nb, s.xb, ids.data());
        std::vector<float> v(d);
        g.reconstruct(ids[1234], v.data());
        CHECK(std::memcmp(v.data(), s.xb + 1234 * d, sizeof(float) * d) == 0,
              "%s: IndexIDMap2::reconstruct(id) is not the vector added under that id", kind.name);
        both("IndexIDMap2", g, r, s, kind, nullptr, nullptr, nullptr);
    }
    {  // IndexShards of two IDMaps holding halves under their global ids; a selector on those ids.
        // Not threaded: FAISS's IndexIDMap swaps the selector inside the caller's parameters for
        // the time of its search, which shards on threads would do at once on the same object.
        std::vector<std::unique_ptr<faiss::IndexIDMap>> parts;
        faiss::IndexShards g(d, /*threaded=*/false, /*successive_ids=*/false);
        faiss::IndexShards r(d, false, false);
        for (int half = 0; half < 2; half++) {
            const int64_t i0 = half * nb / 2, i1 = (half + 1) * nb / 2;
            for (faiss::IndexShards* sh : {&g, &r}) {
                parts.emplace_back(new faiss::IndexIDMap(sh == &g ? kind.make(d) : make_ref(d)));
                parts.back()->own_fields = true;
                parts.back()->add_with_ids(i1 - i0, s.xb + i0 * d, ids.data() + i0);
                sh->add_shard(parts.back().get());
            }
        }
        both("IndexShards(IndexIDMap x 2)", g, r, s, kind, nullptr, nullptr, nullptr);
        faiss::SearchParameters p;
        p.sel = &ext_range;
        both("IndexShards + SearchParameters(IDSelectorRange on ids)", g, r, s, kind, &p, &p, &ext_range);
    }
    {  // IndexReplicas: the queries split between two copies.
        std::unique_ptr<faiss::Index> a(kind.make(d)), b(kind.make(d));
        faiss::IndexReplicas g(d, /*threaded=*/true);
        g.addIndex(a.get());
        g.addIndex(b.get());
        g.add(nb, s.xb);
        faiss::IndexFlatL2 r(d);
        r.add(nb, s.xb);
        both("IndexReplicas x 2", g, r, s, kind, nullptr, nullptr, nullptr);
    }
    {  // IndexPreTransform(PCA64): graft's own parameters inside SearchParametersPreTransform.
        faiss::IndexPreTransform g(new faiss::PCAMatrix(d, 64), kind.make(64));
        faiss::IndexPreTransform r(new faiss::PCAMatrix(d, 64), make_ref(64));
        g.own_fields = r.own_fields = true;
        g.train(nb, s.xb);
        r.train(nb, s.xb);
        g.add(nb, s.xb);
        r.add(nb, s.xb);
        both("IndexPreTransform(PCA64)", g, r, s, kind, nullptr, nullptr, nullptr);
        graft::SearchParametersGraftFlat flat_p;
        graft::SearchParametersGraftGraph graph_p;
        graph_p.L = 96;
        faiss::SearchParameters& inner = kind.exact ? (faiss::SearchParameters&)flat_p : graph_p;
        inner.sel = &some_local;
        faiss::SearchParametersPreTransform outer;
        outer.index_params = &inner;
        faiss::SearchParameters rp;
        rp.sel = &some_local;
        both("IndexPreTransform + SearchParametersPreTransform(graft's, Batch)", g, r, s, kind, &outer, &rp,
             &some_local);
    }
    {  // IndexRefineFlat: graft's candidates re-ranked exactly; its parameters through
       // IndexRefineSearchParameters::base_index_params.
        faiss::IndexRefineFlat g(kind.make(d));
        g.own_fields = true;
        g.k_factor = 4;
        g.add(nb, s.xb);
        faiss::IndexFlatL2 r(d);
        r.add(nb, s.xb);
        both("IndexRefineFlat", g, r, s, kind, nullptr, nullptr, nullptr);
        graft::SearchParametersGraftGraph graph_p;
        faiss::SearchParameters flat_p;
        faiss::SearchParameters& inner = kind.exact ? flat_p : graph_p;
        inner.sel = &some_local;
        compat::IndexRefineSearchParameters rsp;
        rsp.k_factor = 4;
        rsp.base_index_params = &inner;
        faiss::SearchParameters rp;
        rp.sel = &some_local;
        // The reference is IndexFlatL2 with the selector itself: refining exact results changes
        // nothing. FAISS 1.7.3's IndexRefine refuses parameters, which the reference cannot show.
        Results got = run(g, s, &rsp), want = run(r, s, &rp);
        if (got.refused && !compat::kWrappersPassSearchParameters) want.refused = true;
        std::string name = std::string(kind.name) + ": IndexRefineFlat + IndexRefineSearchParameters(Batch)";
        compare(name.c_str(), got, want, s, kind.exact, &some_local, true);
    }
}

// FAISS's selectors straight on the graft index: each gives what IndexFlatL2 gives with it.
static void test_selectors(const Kind& kind, const graft_test_sift& s) {
    printf("%s: selectors\n", kind.name);
    const int64_t d = s.d, nb = s.nb;
    std::unique_ptr<faiss::Index> g(kind.make(d));
    faiss::IndexFlatL2 r(d);
    g->add(nb, s.xb);
    r.add(nb, s.xb);
    faiss::IDSelectorRange range(nb / 5, 4 * nb / 5);
    std::vector<idx_t> odd;
    for (idx_t i = 1; i < nb; i += 2) odd.push_back(i);
    faiss::IDSelectorBatch batch(odd.size(), odd.data());
    std::vector<uint8_t> bitmap((nb + 7) / 8);
    std::mt19937_64 rng(11);
    for (auto& b : bitmap) b = (uint8_t)(rng() & rng());  // ~1/4 of the ids
    faiss::IDSelectorBitmap bits(bitmap.size(), bitmap.data());
    faiss::IDSelectorNot not_bits(&bits);
    compat::IDSelectorAnd both_(&range, &batch);
    compat::IDSelectorOr either(&bits, &range);
    compat::IDSelectorXOr one(&range, &batch);
    compat::IDSelectorAnd nested(&not_bits, &either);  // a tree: And(Not(Bitmap), Or(Bitmap, Range))
    const struct { const char* name; const faiss::IDSelector* sel; } cases[] = {
            {"IDSelectorBitmap", &bits},
            {"IDSelectorNot(Bitmap)", &not_bits},
            {"IDSelectorAnd(Range, Batch)", &both_},
            {"IDSelectorOr(Bitmap, Range)", &either},
            {"IDSelectorXOr(Range, Batch)", &one},
            {"IDSelectorAnd(Not(Bitmap), Or(Bitmap, Range))", &nested},
    };
    for (const auto& c : cases) {
        faiss::SearchParameters p;
        p.sel = const_cast<faiss::IDSelector*>(c.sel);
        both(c.name, *g, r, s, kind, &p, &p, c.sel);
    }
}

int main() {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    // GRAFT_TEST_QUICK (the sanitizer tree's run): the first 1500 vectors and 100 queries; ASan
    // makes the eight graph builds slow and the wrappers' code paths are the same. The references
    // are computed here, so any subset serves.
    graft_test_sift all = s;
    if (getenv("GRAFT_TEST_QUICK")) {
        s.nb = 1500;
        s.nq = 100;
    }
    printf("FAISS %s, %lld vectors, %lld queries\n", graft::kFaissVersion, (long long)s.nb, (long long)s.nq);
    const Kind kinds[] = {
            {"GraftFlat", true, [](int64_t d) -> faiss::Index* { return new graft::GraftIndexFlat(d); }},
            {"GraftGraph", false, [](int64_t d) -> faiss::Index* { return new graft::GraftIndexGraph(d); }},
    };
    for (const Kind& k : kinds) {
        test_kind(k, s);
        test_selectors(k, s);
    }
    graft_test_free_sift(&all);
    return graft_test_finish("test_faiss_wrappers");
}
