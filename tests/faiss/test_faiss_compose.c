/* graft inside faiss_c pipelines, like a user with only public headers: the factory
 * (faiss_graft_index_factory) for graft's and FAISS's strings, bad strings, graft indexes inside
 * IndexIDMap/IDMap2, IndexShards, IndexPreTransform (PCA) and IndexRefineFlat, IDSelector
 * filtering equal to FAISS's IndexFlat, named parameters (and what FAISS's ParameterSpace does
 * with them), concurrent searches from 8 threads, and unsupported operations failing cleanly.
 * Runs on the GPU when one is visible ("GraftFlat"), else on the CPU reference. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/IndexPreTransform_c.h>
#include <faiss/c_api/IndexShards_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/VectorTransform_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "graft_faiss_c.h"
#include "faiss_testutil.h"

#define K 10

static graft_test_sift s;

/* Two result lists of the same exact search (FAISS float/BLAS vs graft's double reference, or two
 * pipelines): distances within tol, labels equal except swaps between (near-)tied distances. */
static void agree(const char* what, const float* Da, const int64_t* Ia, const float* Db,
                  const int64_t* Ib, int64_t nq, int64_t k, double tol) {
    int64_t dist_bad = 0, unexplained = 0, swaps = 0;
    for (int64_t i = 0; i < nq * k; i++) {
        if (Ia[i] == -1 || Ib[i] == -1) {
            if (Ia[i] != Ib[i] || Da[i] != Db[i]) dist_bad++;
            continue;
        }
        if (fabs((double)Da[i] - Db[i]) > tol) dist_bad++;
        if (Ia[i] != Ib[i]) {
            swaps++;
            int64_t q = i / k, found = 0;
            for (int64_t j = 0; j < k; j++)
                if (Ib[q * k + j] == Ia[i] && fabs((double)Db[q * k + j] - Da[i]) <= tol) found = 1;
            if (!found && i % k != k - 1) unexplained++;
        }
    }
    CHECK(dist_bad == 0 && unexplained == 0, "%s: %lld distances off, %lld label differences not ties",
          what, (long long)dist_bad, (long long)unexplained);
    printf("  %-52s agree (%lld tie swaps)\n", what, (long long)swaps);
}
/* SIFT squared distances reach ~1e6; float rounding of FAISS's norm formula is ~1e-7 of 2*512^2. */
#define SIFT_TOL (1e-5 * 2 * 512.0 * 512.0)

static double recall_of(FaissIndex* index, int64_t nq) {
    float* D = malloc(sizeof(float) * nq * K);
    int64_t* I = malloc(sizeof(int64_t) * nq * K);
    FAISS_OK(faiss_Index_search(index, nq, s.xq, K, D, I));
    double r = graft_test_recall(I, K, s.gt, s.gt_k, nq, K);
    free(D);
    free(I);
    return r;
}

static FaissIndex* make(const char* desc, FaissMetricType metric) {
    FaissIndex* index = NULL;
    FAISS_OK(faiss_graft_index_factory(&index, (int)s.d, desc, metric));
    return index;
}

/* ---- factory --------------------------------------------------------------------------------- */

static void test_factory(void) {
    struct { const char* desc; double min_recall; int graft; } cases[] = {
        {"GraftFlat", 0.999, 1}, {"GraftFlat,cpu", 0.999, 1}, {"HNSW32", 0.9, 0}, {"Flat", 0.999, 0},
        {"GraftFlat,RFlat", 0.999, 1},
        {"L2norm,GraftFlat,cpu", 0.5, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        FaissIndex* index = make(cases[c].desc, METRIC_L2);
        if (!index) continue;
        FAISS_OK(faiss_Index_add(index, s.nb, s.xb));
        CHECK(faiss_Index_ntotal(index) == s.nb, "%s: ntotal", cases[c].desc);
        double r = recall_of(index, s.nq);
        CHECK(r >= cases[c].min_recall, "%s: recall@10 %.4f < %.3f", cases[c].desc, r, cases[c].min_recall);
        double dev = 0;
        int rc = faiss_graft_get_param(index, "device", &dev);
        CHECK((rc == 0) == cases[c].graft, "%s: graft inside? rc=%d", cases[c].desc, rc);
        if (strstr(cases[c].desc, ",cpu")) CHECK(dev == -1, "%s: device %g", cases[c].desc, dev);
        if (!strcmp(cases[c].desc, "GraftFlat"))
            CHECK(dev == (graft_gpu_available() ? 0 : -1), "GraftFlat: default device %g", dev);
        int bare = !strcmp(cases[c].desc, "GraftFlat") || !strcmp(cases[c].desc, "GraftFlat,cpu");
        CHECK((faiss_GraftIndexFlat_cast(index) != NULL) == bare, "%s: cast", cases[c].desc);
        printf("  factory %-28s recall@10 %.4f\n", cases[c].desc, r);
        faiss_Index_free(index);
    }

    /* A FAISS string that needs training and a FAISS parameter, through the same call. */
    FaissIndex* ivf = make("IVF64,Flat", METRIC_L2);
    FaissParameterSpace* ps = NULL;
    FAISS_OK(faiss_ParameterSpace_new(&ps));
    if (ivf && ps) {
        FAISS_OK(faiss_Index_train(ivf, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(ivf, s.nb, s.xb));
        FAISS_OK(faiss_ParameterSpace_set_index_parameter(ps, ivf, "nprobe", 64));
        double r = recall_of(ivf, s.nq);
        CHECK(r >= 0.999, "IVF64,Flat nprobe=64: recall %.4f", r);
        printf("  factory %-28s recall@10 %.4f (nprobe=64)\n", "IVF64,Flat", r);
    }
    faiss_Index_free(ivf);
    faiss_ParameterSpace_free(ps);

    /* Inner product: graft's factory index agrees with FAISS's. */
    FaissIndex* gi = make("GraftFlat", METRIC_INNER_PRODUCT);
    FaissIndex* fi = make("Flat", METRIC_INNER_PRODUCT);
    if (gi && fi) {
        float Dg[100 * K], Df[100 * K];
        int64_t Ig[100 * K], If[100 * K];
        FAISS_OK(faiss_Index_add(gi, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(fi, s.nb, s.xb));
        FAISS_OK(faiss_Index_search(gi, 100, s.xq, K, Dg, Ig));
        FAISS_OK(faiss_Index_search(fi, 100, s.xq, K, Df, If));
        CHECK(faiss_Index_metric_type(gi) == METRIC_INNER_PRODUCT, "metric");
        agree("factory GraftFlat vs Flat, inner product", Df, If, Dg, Ig, 100, K, SIFT_TOL);
    }
    faiss_Index_free(gi);
    faiss_Index_free(fi);

    /* "PCA64,GraftFlat" equals "PCA64,Flat" (same deterministic PCA trained on the same data). */
    FaissIndex* pg = make("PCA64,GraftFlat,cpu", METRIC_L2);
    FaissIndex* pf = make("PCA64,Flat", METRIC_L2);
    if (pg && pf) {
        float *Dg = malloc(sizeof(float) * s.nq * K), *Df = malloc(sizeof(float) * s.nq * K);
        int64_t *Ig = malloc(sizeof(int64_t) * s.nq * K), *If = malloc(sizeof(int64_t) * s.nq * K);
        CHECK(!faiss_Index_is_trained(pg), "PCA64,GraftFlat must need training");
        FAISS_OK(faiss_Index_train(pg, s.nb, s.xb));
        FAISS_OK(faiss_Index_train(pf, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(pg, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(pf, s.nb, s.xb));
        FAISS_OK(faiss_Index_search(pg, s.nq, s.xq, K, Dg, Ig));
        FAISS_OK(faiss_Index_search(pf, s.nq, s.xq, K, Df, If));
        agree("factory PCA64,GraftFlat vs PCA64,Flat", Df, If, Dg, Ig, s.nq, K, SIFT_TOL);
        free(Dg); free(Df); free(Ig); free(If);
    }
    faiss_Index_free(pg);
    faiss_Index_free(pf);
}

static void test_bad_strings(void) {
    FaissIndex* index = NULL;
    int d = (int)s.d;
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftHNSW32", METRIC_L2), "GraftHNSW32");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftHNSW32", METRIC_L2), "GraftFlat,gpu=N");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "Graft", METRIC_L2), "unknown graft index");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,gpu=x", METRIC_L2), "gpu=x");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,gpu=-1", METRIC_L2), "gpu=-1");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,cpu,gpu=1", METRIC_L2), "device twice");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,HNSW32", METRIC_L2), "HNSW32");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "IVF64(GraftFlat),Flat", METRIC_L2), "parentheses");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "PCAx,GraftFlat", METRIC_L2), "PCAx");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat", METRIC_L1), "METRIC_L2");
    FAISS_FAILS(faiss_graft_index_factory(&index, 0, "GraftFlat", METRIC_L2), "dimension");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, NULL, METRIC_L2), "NULL");
    /* Strings that are not graft's fail exactly as in faiss_index_factory. */
    CHECK(faiss_graft_index_factory(&index, d, "NoSuchIndex", METRIC_L2) != 0, "NoSuchIndex must fail");
    if (!graft_gpu_available())
        CHECK(faiss_graft_index_factory(&index, d, "GraftFlat,gpu=0", METRIC_L2) != 0,
              "GraftFlat,gpu=0 without a GPU must fail");
    CHECK(index == NULL, "a failed factory call wrote *p_index");
    printf("  bad strings refused; e.g.: %.200s...\n",
           (faiss_graft_index_factory(&index, d, "GraftFoo", METRIC_L2), faiss_get_last_error()));
}

/* ---- wrappers -------------------------------------------------------------------------------- */

static void test_idmap(void) {
    int64_t* ids = malloc(sizeof(int64_t) * s.nb);
    for (int64_t i = 0; i < s.nb; i++) ids[i] = 5000000 + 13 * i;
    float D[50 * K], rec[128];
    int64_t I[50 * K];
    /* By hand (faiss_IndexIDMap_new / faiss_IndexIDMap2_new) and through the factory. */
    const char* how[4] = {"IndexIDMap ", "IndexIDMap2", "factory IDMap2,GraftFlat", "factory GraftFlat,IDMap"};
    for (int v = 0; v < 4; v++) {
        int two = v == 1 || v == 2;
        FaissIndex *gi = NULL, *m = NULL;
        if (v < 2) {
            gi = make("GraftFlat", METRIC_L2);
            if (two) FAISS_OK(faiss_IndexIDMap2_new((FaissIndexIDMap2**)&m, gi));
            else FAISS_OK(faiss_IndexIDMap_new((FaissIndexIDMap**)&m, gi));
        } else {
            m = make(v == 2 ? "IDMap2,GraftFlat" : "GraftFlat,IDMap", METRIC_L2);
        }
        if (!m) continue;
        FAISS_OK(faiss_Index_add_with_ids(m, s.nb, s.xb, ids));
        FAISS_OK(faiss_Index_search(m, 50, s.xq, K, D, I));
        int bad = 0;
        for (int q = 0; q < 50; q++)
            if (I[q * K] != 5000000 + 13 * (int64_t)s.gt[q * s.gt_k]) bad++;
        CHECK(bad == 0, "%s: %d queries without the user id of their nearest", how[v], bad);
        if (two) {
            FAISS_OK(faiss_Index_reconstruct(m, 5000000 + 13 * 321, rec));
            CHECK(memcmp(rec, s.xb + 321 * s.d, sizeof rec) == 0, "IDMap2 reconstruct by user id");
            CHECK(faiss_Index_reconstruct(m, 17, rec) != 0, "IDMap2 reconstruct of an unknown id must fail");
        }
        /* remove_ids reaches graft's index, which refuses it cleanly. */
        FaissIDSelectorRange* sel = NULL;
        FAISS_OK(faiss_IDSelectorRange_new(&sel, 5000000, 5000100));
        size_t removed = 0;
        FAISS_FAILS(faiss_Index_remove_ids(m, (FaissIDSelector*)sel, &removed), "append-only");
        CHECK(faiss_Index_ntotal(m) == s.nb && (!gi || faiss_Index_ntotal(gi) == s.nb),
              "%s: ntotal after refused remove", how[v]);
        FAISS_OK(faiss_Index_search(m, 1, s.xq, K, D, I));
        /* A selector on the user ids: FAISS 1.7.3's IndexIDMap takes no search parameters (a clean
         * error); a later one translates it to graft's ids (test_faiss_wrappers says which FAISS
         * must): then the 8 user ids in the range (5000000 + 13 i, i < 8) come back, and no other. */
        if (faiss_graft_search_with_selector(m, 1, s.xq, K, (FaissIDSelector*)sel, D, I) != 0) {
            const char* e = faiss_get_last_error();
            CHECK(e && strstr(e, "not supported"), "%s: selector refused with '%s'", how[v], e ? e : "");
        } else {
            int in = 0, out = 0;
            for (int j = 0; j < K; j++) {
                if (I[j] >= 5000000 && I[j] < 5000100 && (I[j] - 5000000) % 13 == 0) in++;
                else if (I[j] != -1) out++;
            }
            CHECK(in == 8 && out == 0, "%s: selector on user ids: %d in range, %d outside", how[v], in, out);
        }
        printf("  %-26s over graft: user ids%s, remove_ids refused\n", how[v], two ? ", reconstruct" : "");
        faiss_IDSelector_free((FaissIDSelector*)sel);
        faiss_Index_free(m);
        faiss_Index_free(gi); /* the factory's wrappers own their graft index */
    }
    free(ids);
}

static void test_shards(void) {
    float *D1 = malloc(sizeof(float) * s.nq * K), *D3 = malloc(sizeof(float) * s.nq * K);
    int64_t *I1 = malloc(sizeof(int64_t) * s.nq * K), *I3 = malloc(sizeof(int64_t) * s.nq * K);
    FaissIndex* single = make("GraftFlat", METRIC_L2);
    FAISS_OK(faiss_Index_add(single, s.nb, s.xb));
    FAISS_OK(faiss_Index_search(single, s.nq, s.xq, K, D1, I1));
    for (int threaded = 0; threaded < 2; threaded++) {
        FaissIndexShards* sh = NULL;
        if (threaded) FAISS_OK(faiss_IndexShards_new_with_options(&sh, s.d, 1, 1));
        else FAISS_OK(faiss_IndexShards_new(&sh, s.d));
        CHECK(faiss_IndexShards_successive_ids(sh), "successive_ids is the default");
        FaissIndex* part[3];
        for (int i = 0; i < 3; i++) {
            part[i] = make("GraftFlat", METRIC_L2);
            FAISS_OK(faiss_IndexShards_add_shard(sh, part[i]));
        }
        FAISS_OK(faiss_Index_add((FaissIndex*)sh, s.nb, s.xb));
        CHECK(faiss_Index_ntotal((FaissIndex*)sh) == s.nb && faiss_Index_ntotal(part[2]) > 0, "shard sizes");
        FAISS_OK(faiss_Index_search((FaissIndex*)sh, s.nq, s.xq, K, D3, I3));
        /* Each pair's distance is computed the same way in whichever shard holds it: the
         * distances are bit-identical, labels may differ only between exactly equal distances. */
        int64_t dbad = 0, lbad = 0;
        for (int64_t i = 0; i < s.nq * K; i++) {
            if (D1[i] != D3[i]) dbad++;
            else if (I1[i] != I3[i]) {
                int tie = (i % K > 0 && D1[i - 1] == D1[i]) || (i % K < K - 1 && D1[i + 1] == D1[i]) ||
                          i % K == K - 1;
                if (!tie) lbad++;
            }
        }
        CHECK(dbad == 0 && lbad == 0, "IndexShards (threaded=%d) vs single: %lld distances, %lld labels differ",
              threaded, (long long)dbad, (long long)lbad);
        /* graft's parameters reach every shard. */
        FAISS_OK(faiss_graft_set_param((FaissIndex*)sh, "allow_tf32", 1));
        for (int i = 0; i < 3; i++) {
            double v = 0;
            FAISS_OK(faiss_graft_get_param(part[i], "allow_tf32", &v));
            CHECK(v == 1, "allow_tf32 did not reach shard %d", i);
        }
        printf("  IndexShards (threaded=%d) over 3 graft indexes == one graft index\n", threaded);
        faiss_IndexShards_free(sh);
        for (int i = 0; i < 3; i++) faiss_Index_free(part[i]);
    }
    faiss_Index_free(single);
    free(D1); free(D3); free(I1); free(I3);
}

/* PCA 128 -> 64 in front of an index: graft's flat vs FAISS's IndexFlatL2, built by hand. */
static FaissIndex* pca_pipeline(FaissIndex* inner) {
    FaissPCAMatrix* pca = NULL;
    FaissIndexPreTransform* pt = NULL;
    FAISS_OK(faiss_PCAMatrix_new_with(&pca, (int)s.d, 64, 0.f, 0));
    FAISS_OK(faiss_IndexPreTransform_new_with(&pt, inner));
    FAISS_OK(faiss_IndexPreTransform_prepend_transform(pt, (FaissVectorTransform*)pca));
    faiss_IndexPreTransform_set_own_fields(pt, 1); /* frees the PCA and the inner index */
    FAISS_OK(faiss_Index_train((FaissIndex*)pt, s.nb, s.xb));
    FAISS_OK(faiss_Index_add((FaissIndex*)pt, s.nb, s.xb));
    return (FaissIndex*)pt;
}

static void test_pretransform_and_refine(void) {
    FaissIndex *g = NULL, *f = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&g, 64, METRIC_L2, graft_gpu_available() ? 0 : -1));
    FAISS_OK(faiss_IndexFlatL2_new_with((FaissIndexFlatL2**)&f, 64));
    FaissIndex* pg = pca_pipeline(g);
    FaissIndex* pf = pca_pipeline(f);
    float *Dg = malloc(sizeof(float) * s.nq * K), *Df = malloc(sizeof(float) * s.nq * K);
    int64_t *Ig = malloc(sizeof(int64_t) * s.nq * K), *If = malloc(sizeof(int64_t) * s.nq * K);
    FAISS_OK(faiss_Index_search(pg, s.nq, s.xq, K, Dg, Ig));
    FAISS_OK(faiss_Index_search(pf, s.nq, s.xq, K, Df, If));
    agree("PCA64 + graft flat vs PCA64 + IndexFlatL2", Df, If, Dg, Ig, s.nq, K, SIFT_TOL);
    /* A selector goes through IndexPreTransform to graft's index. */
    FaissIDSelectorRange* r = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&r, 1000, 3000));
    FAISS_OK(faiss_graft_search_with_selector(pg, s.nq, s.xq, K, (FaissIDSelector*)r, Dg, Ig));
    FAISS_OK(faiss_graft_search_with_selector(pf, s.nq, s.xq, K, (FaissIDSelector*)r, Df, If));
    agree("PCA64 + graft flat, IDSelectorRange [1000,3000)", Df, If, Dg, Ig, s.nq, K, SIFT_TOL);
    faiss_IDSelector_free((FaissIDSelector*)r);
    faiss_Index_free(pg);
    faiss_Index_free(pf);

    /* IndexRefineFlat behind a graft index: exact again (and the same as graft alone). */
    FaissIndex* base = make("GraftFlat", METRIC_L2);
    FaissIndexRefineFlat* rf = NULL;
    FAISS_OK(faiss_IndexRefineFlat_new(&rf, base));
    faiss_IndexRefineFlat_set_k_factor(rf, 2.f);
    FAISS_OK(faiss_Index_add((FaissIndex*)rf, s.nb, s.xb));
    double rr = recall_of((FaissIndex*)rf, s.nq);
    CHECK(rr >= 0.999, "IndexRefineFlat over graft: recall %.4f", rr);
    FAISS_OK(faiss_Index_search((FaissIndex*)rf, s.nq, s.xq, K, Df, If));
    FAISS_OK(faiss_Index_search(base, s.nq, s.xq, K, Dg, Ig));
    agree("IndexRefineFlat(graft) vs graft", Df, If, Dg, Ig, s.nq, K, SIFT_TOL);
    faiss_IndexRefineFlat_free(rf);
    faiss_Index_free(base);
    free(Dg); free(Df); free(Ig); free(If);
}

/* ---- IDSelector ------------------------------------------------------------------------------ */

static void selector_case(const char* what, FaissMetricType metric, const FaissIDSelector* sel,
                          int64_t nq, int64_t k) {
    FaissIndex* g = make("GraftFlat", metric);
    FaissIndex* f = make("Flat", metric);
    FAISS_OK(faiss_Index_add(g, s.nb, s.xb));
    FAISS_OK(faiss_Index_add(f, s.nb, s.xb));
    float *Dg = malloc(sizeof(float) * nq * k), *Df = malloc(sizeof(float) * nq * k);
    int64_t *Ig = malloc(sizeof(int64_t) * nq * k), *If = malloc(sizeof(int64_t) * nq * k);
    FAISS_OK(faiss_graft_search_with_selector(g, nq, s.xq, k, sel, Dg, Ig));
    FAISS_OK(faiss_graft_search_with_selector(f, nq, s.xq, k, sel, Df, If));
    int64_t outside = 0;
    for (int64_t i = 0; i < nq * k; i++)
        if (Ig[i] >= 0 && !faiss_IDSelector_is_member(sel, Ig[i])) outside++;
    CHECK(outside == 0, "%s: %lld labels outside the selector", what, (long long)outside);
    agree(what, Df, If, Dg, Ig, nq, k, SIFT_TOL);
    faiss_Index_free(g);
    faiss_Index_free(f);
    free(Dg); free(Df); free(Ig); free(If);
}

static void test_selectors(void) {
    FaissIDSelectorRange *range = NULL, *empty = NULL, *tail = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&range, 1000, 3000));
    FAISS_OK(faiss_IDSelectorRange_new(&empty, 10, 10));
    FAISS_OK(faiss_IDSelectorRange_new(&tail, 4490, 100000));
    int64_t every3[1500], few[20];
    for (int i = 0; i < 1500; i++) every3[i] = 3 * i + 1;
    for (int i = 0; i < 20; i++) few[i] = 211 * i + 5;
    FaissIDSelectorBatch *batch = NULL, *small = NULL;
    FAISS_OK(faiss_IDSelectorBatch_new(&batch, 1500, every3));
    FAISS_OK(faiss_IDSelectorBatch_new(&small, 20, few));
    selector_case("IDSelectorRange [1000,3000) L2 k=10", METRIC_L2, (FaissIDSelector*)range, s.nq, K);
    selector_case("IDSelectorRange [4490,1e5) L2 k=20 (past ntotal)", METRIC_L2, (FaissIDSelector*)tail, 50, 20);
    selector_case("IDSelectorBatch every 3rd L2 k=10", METRIC_L2, (FaissIDSelector*)batch, s.nq, K);
    selector_case("IDSelectorBatch every 3rd IP k=10", METRIC_INNER_PRODUCT, (FaissIDSelector*)batch, 100, K);
    selector_case("IDSelectorBatch 20 ids L2 k=50 (-1 padding)", METRIC_L2, (FaissIDSelector*)small, 30, 50);
    selector_case("IDSelectorRange empty L2 k=5", METRIC_L2, (FaissIDSelector*)empty, 5, 5);
    /* No selector: a plain search. */
    FaissIndex* g = make("GraftFlat", METRIC_L2);
    FAISS_OK(faiss_Index_add(g, s.nb, s.xb));
    float D[K];
    int64_t I[K];
    FAISS_OK(faiss_graft_search_with_selector(g, 1, s.xq, K, NULL, D, I));
    CHECK(I[0] == s.gt[0], "plain search through faiss_graft_search_with_selector");
    float nanq[128];
    memcpy(nanq, s.xq, sizeof nanq);
    nanq[5] = NAN;
    FAISS_FAILS(faiss_graft_search_with_selector(g, 1, nanq, K, (FaissIDSelector*)range, D, I), "NaN");
    FAISS_FAILS(faiss_graft_search_with_selector(g, 1, s.xq, 0, (FaissIDSelector*)range, D, I), "k must be");
    faiss_Index_free(g);
    faiss_IDSelector_free((FaissIDSelector*)range);
    faiss_IDSelector_free((FaissIDSelector*)empty);
    faiss_IDSelector_free((FaissIDSelector*)tail);
    faiss_IDSelector_free((FaissIDSelector*)batch);
    faiss_IDSelector_free((FaissIDSelector*)small);
}

/* ---- parameters ------------------------------------------------------------------------------ */

static void test_params(void) {
    FaissIndex* g = make("GraftFlat", METRIC_L2);
    FAISS_OK(faiss_Index_add(g, s.nb, s.xb));
    double v = -5;
    FAISS_OK(faiss_graft_get_param(g, "allow_tf32", &v));
    CHECK(v == 0, "allow_tf32 default %g", v);
    FAISS_OK(faiss_graft_get_param(g, "device_budget_mb", &v));
    CHECK(v == 0, "device_budget_mb default (auto) %g", v);
    FAISS_OK(faiss_graft_set_param(g, "allow_tf32", 1));
    FAISS_OK(faiss_graft_set_param(g, "device_budget_mb", 256));
    FAISS_OK(faiss_graft_get_param(g, "allow_tf32", &v));
    CHECK(v == 1, "allow_tf32 after set %g", v);
    FAISS_OK(faiss_graft_get_param(g, "device_budget_mb", &v));
    CHECK(v == 256, "device_budget_mb after set %g", v);
    CHECK(faiss_Index_ntotal(g) == s.nb, "ntotal after set_param");
    double r = recall_of(g, s.nq);
    /* TF32 (on a GPU) may swap near-ties; on the CPU it changes nothing. */
    CHECK(r >= (graft_gpu_available() ? 0.99 : 0.999), "recall after set_param %.4f", r);
    FAISS_OK(faiss_graft_set_param(g, "allow_tf32", 0));
    FAISS_FAILS(faiss_graft_set_param(g, "allow_tf32", 2), "0 or 1");
    FAISS_FAILS(faiss_graft_set_param(g, "device_budget_mb", -1), "device_budget_mb");
    FAISS_FAILS(faiss_graft_set_param(g, "device", 1), "fixed at creation");
    FAISS_FAILS(faiss_graft_set_param(g, "nprobe", 8), "allow_tf32, exact_path, device_budget_mb");
    FAISS_FAILS(faiss_graft_set_param(g, "exact_path", 6), "4 (fp16 certified) or 5 (fp16 fused)");
    /* sift5k is uint8 data: forced INT8 runs on a GPU (exact); the CPU ignores the path. */
    FAISS_OK(faiss_graft_set_param(g, "exact_path", 3));
    r = recall_of(g, s.nq);
    CHECK(r >= 0.999, "recall with exact_path 3: %.4f", r);
    FAISS_OK(faiss_graft_get_param(g, "last_path", &v));
    CHECK(v == (graft_gpu_available() ? 3 : 1), "last_path %g after an exact_path 3 search", v);
    FAISS_OK(faiss_graft_set_param(g, "exact_path", 1));
    FAISS_OK(faiss_graft_get_param(g, "exact_path", &v));
    CHECK(v == 1, "exact_path reads back %g after setting 1", v);
    FAISS_OK(faiss_graft_set_param(g, "exact_path", 0));
    FAISS_FAILS(faiss_graft_get_param(g, "nprobe", &v), "nprobe");
    FaissIndex* h = make("HNSW32", METRIC_L2);
    FAISS_FAILS(faiss_graft_set_param(h, "allow_tf32", 1), "no graft index");
    faiss_Index_free(h);
    /* Inside wrappers: found like ParameterSpace finds sub-indexes. */
    FaissIndex* w = make("PCA64,GraftFlat,IDMap2", METRIC_L2);
    FAISS_OK(faiss_graft_set_param(w, "device_budget_mb", 64));
    FAISS_OK(faiss_graft_get_param(w, "device_budget_mb", &v));
    CHECK(v == 64, "device_budget_mb through IDMap2+PreTransform %g", v);
    faiss_Index_free(w);

    /* FAISS's ParameterSpace on a graft index: "verbose" works, graft's names are refused with
     * FAISS's message (it cannot know them); the index is unharmed. */
    FaissParameterSpace* ps = NULL;
    FAISS_OK(faiss_ParameterSpace_new(&ps));
    FAISS_OK(faiss_ParameterSpace_set_index_parameter(ps, g, "verbose", 0));
    FAISS_FAILS(faiss_ParameterSpace_set_index_parameter(ps, g, "allow_tf32", 1), "allow_tf32");
    printf("  ParameterSpace on graft: %.160s\n", faiss_get_last_error());
    FAISS_FAILS(faiss_ParameterSpace_set_index_parameter(ps, g, "nprobe", 4), "nprobe");
    faiss_ParameterSpace_free(ps);
    float D[K];
    int64_t I[K];
    FAISS_OK(faiss_Index_search(g, 1, s.xq, K, D, I));
    CHECK(I[0] == s.gt[0], "search after parameter errors");

    /* Unsupported operations: clear errors, no crash, index unchanged. */
    FaissIDSelectorRange* sel = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&sel, 0, 10));
    size_t removed = 7;
    FAISS_FAILS(faiss_Index_remove_ids(g, (FaissIDSelector*)sel, &removed), "append-only");
    CHECK(faiss_Index_ntotal(g) == s.nb, "ntotal after refused remove_ids");
    FaissRangeSearchResult* rs = NULL;
    FAISS_OK(faiss_RangeSearchResult_new(&rs, 1));
    CHECK(faiss_Index_range_search(g, 1, s.xq, 1e4f, rs) != 0, "range_search is not implemented");
    printf("  range_search on graft: %.120s\n", faiss_get_last_error());
    faiss_RangeSearchResult_free(rs);
    faiss_IDSelector_free((FaissIDSelector*)sel);
    FAISS_OK(faiss_Index_search(g, 1, s.xq, K, D, I));
    CHECK(I[0] == s.gt[0], "search after unsupported operations");
    printf("  parameters, ParameterSpace and unsupported operations checked\n");
    faiss_Index_free(g);
}

/* ---- threads --------------------------------------------------------------------------------- */

#define NTHREADS 8
#define NSLICES 10 /* 500 queries in slices of 50 */
#define REPEAT 6
static FaissIndex* shared_index;
static float *seqD;
static int64_t *seqI;

typedef struct { int t; int64_t mismatches, failures; } worker;

static void* search_worker(void* arg) {
    worker* w = arg;
    int64_t qs = s.nq / NSLICES;
    float D[50 * K];
    int64_t I[50 * K];
    for (int r = 0; r < REPEAT; r++) {
        int slice = (w->t * 3 + r) % NSLICES;
        if (faiss_Index_search(shared_index, qs, s.xq + slice * qs * s.d, K, D, I) != 0) {
            w->failures++;
            continue;
        }
        if (memcmp(D, seqD + slice * qs * K, sizeof D) || memcmp(I, seqI + slice * qs * K, sizeof I))
            w->mismatches++;
    }
    return NULL;
}

static void test_threads(void) {
    shared_index = make("GraftFlat", METRIC_L2);
    FAISS_OK(faiss_Index_add(shared_index, s.nb, s.xb));
    int64_t qs = s.nq / NSLICES;
    seqD = malloc(sizeof(float) * s.nq * K);
    seqI = malloc(sizeof(int64_t) * s.nq * K);
    for (int slice = 0; slice < NSLICES; slice++)
        FAISS_OK(faiss_Index_search(shared_index, qs, s.xq + slice * qs * s.d, K, seqD + slice * qs * K,
                                    seqI + slice * qs * K));
    pthread_t th[NTHREADS];
    worker w[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (worker){t, 0, 0};
        CHECK(pthread_create(&th[t], NULL, search_worker, &w[t]) == 0, "pthread_create");
    }
    int64_t mism = 0, fail = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        mism += w[t].mismatches;
        fail += w[t].failures;
    }
    CHECK(mism == 0 && fail == 0, "8 threads: %lld searches differ from sequential, %lld failed",
          (long long)mism, (long long)fail);
    printf("  %d threads x %d searches on one graft index == sequential\n", NTHREADS, REPEAT);
    faiss_Index_free(shared_index);
    free(seqD);
    free(seqI);
}

int main(void) {
    graft_test_load_sift5k(&s);
    printf("graft %s, GPU %s\n", graft_version_string(), graft_gpu_available() ? "visible" : "not visible");
    test_factory();
    test_bad_strings();
    test_idmap();
    test_shards();
    test_pretransform_and_refine();
    test_selectors();
    test_params();
    test_threads();
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_compose");
}
