/* Through the real faiss_c, like a user: graft's exact k-NN agrees with FAISS IndexFlatL2/IP, and
 * graft's flat index works as a FaissIndex* (add, search, ntotal, reconstruct, reset, errors,
 * IndexIDMap). Runs on the GPU when one is visible, else on the CPU reference. */
#include <float.h>
#include <math.h>
#include <string.h>

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>

#include "graft/flat.h"
#include "graft_faiss_c.h"
#include "faiss_testutil.h"

/* FAISS (BLAS, float, norm formula) vs graft's reference (double): same labels except where the
 * two distances at a rank are within float rounding; distances within that rounding. */
static void agree(const char* what, const float* Df, const int64_t* If, const float* Dg,
                  const int64_t* Ig, int64_t nq, int64_t k, double scale) {
    int64_t dist_bad = 0, unexplained = 0, swaps = 0;
    double tol = 1e-5 * scale + 1e-6;
    for (int64_t i = 0; i < nq * k; i++) {
        if (fabs((double)Df[i] - Dg[i]) > tol && !(If[i] == -1 && Ig[i] == -1 && Df[i] == Dg[i])) dist_bad++;
        if (If[i] != Ig[i]) {
            swaps++;
            /* a swap is a tie only if the other list holds this label at a distance within tol */
            int64_t q = i / k, found = 0;
            for (int64_t j = 0; j < k; j++)
                if (Ig[q * k + j] == If[i] && fabs((double)Dg[q * k + j] - Df[i]) <= tol) found = 1;
            if (!found && !(i % k == k - 1)) unexplained++;
        }
    }
    CHECK(dist_bad == 0 && unexplained == 0, "%s: %lld distances off, %lld label differences not ties",
          what, (long long)dist_bad, (long long)unexplained);
    printf("  %-40s agree (%lld tie swaps)\n", what, (long long)swaps);
}

static void faiss_vs_graft(const char* what, const float* xb, int64_t nb, const float* xq, int64_t nq,
                           int64_t d, int64_t k, int l2, double scale) {
    FaissIndex* fi = NULL;
    if (l2) FAISS_OK(faiss_IndexFlatL2_new_with((FaissIndexFlatL2**)&fi, d));
    else FAISS_OK(faiss_IndexFlatIP_new_with((FaissIndexFlatIP**)&fi, d));
    FAISS_OK(faiss_Index_add((FaissIndex*)fi, nb, xb));
    float *Df = malloc(sizeof(float) * nq * k), *Dg = malloc(sizeof(float) * nq * k);
    int64_t *If = malloc(sizeof(int64_t) * nq * k), *Ig = malloc(sizeof(int64_t) * nq * k);
    FAISS_OK(faiss_Index_search((FaissIndex*)fi, nq, xq, k, Df, If));
    CHECK_OK(graft_knn_cpu(xb, nb, xq, nq, d, k, l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT, -1, Dg, Ig));
    agree(what, Df, If, Dg, Ig, nq, k, scale);
    /* The same through graft's FaissIndex*. */
    FaissIndex* gi = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&gi, (int)d, l2 ? METRIC_L2 : METRIC_INNER_PRODUCT,
                                      graft_gpu_available() ? 0 : -1));
    FAISS_OK(faiss_Index_add(gi, nb, xb));
    FAISS_OK(faiss_Index_search(gi, nq, xq, k, Dg, Ig));
    char w2[128];
    snprintf(w2, sizeof w2, "%s (GraftIndexFlat)", what);
    agree(w2, Df, If, Dg, Ig, nq, k, scale);
    faiss_Index_free(gi);
    faiss_Index_free((FaissIndex*)fi);
    free(Df); free(Dg); free(If); free(Ig);
}

static void test_agreement(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* SIFT norms are about 512^2; float rounding of the norm formula is ~1e-7 of that. */
    faiss_vs_graft("sift5k L2 k=100", s.xb, s.nb, s.xq, s.nq, s.d, 100, 1, 2 * 512.0 * 512.0);
    faiss_vs_graft("sift5k IP k=10", s.xb, s.nb, s.xq, s.nq, s.d, 10, 0, 512.0 * 512.0);
    faiss_vs_graft("sift5k L2 k>ntotal", s.xb, 100, s.xq, 30, s.d, 150, 1, 2 * 512.0 * 512.0);
    faiss_vs_graft("sift5k L2 nq=1 k=1", s.xb, s.nb, s.xq, 1, s.d, 1, 1, 2 * 512.0 * 512.0);
    int64_t nb = 3000, nq = 40, d = 37;
    float* xb = malloc(sizeof(float) * nb * d);
    float* xq = malloc(sizeof(float) * nq * d);
    graft_test_random(xb, (size_t)(nb * d), 5);
    graft_test_random(xq, (size_t)(nq * d), 6);
    faiss_vs_graft("random d=37 L2 k=nb", xb, nb, xq, nq, d, nb, 1, 2.0 * d);
    faiss_vs_graft("random d=37 IP k=64", xb, nb, xq, nq, d, 64, 0, (double)d);
    free(xb);
    free(xq);
    graft_test_free_sift(&s);
}

static void test_index_api(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    FaissIndex* gi = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&gi, (int)s.d, METRIC_L2, graft_gpu_available() ? 0 : -1));
    CHECK(faiss_Index_d(gi) == s.d && faiss_Index_is_trained(gi) && faiss_Index_ntotal(gi) == 0, "getters");
    CHECK(faiss_GraftIndexFlat_cast(gi) == gi, "cast");
    FAISS_OK(faiss_Index_add(gi, s.nb, s.xb));
    CHECK(faiss_Index_ntotal(gi) == s.nb, "ntotal after add");
    float D[10 * 10], rec[128];
    int64_t I[10 * 10];
    FAISS_OK(faiss_Index_search(gi, 10, s.xq, 10, D, I));
    for (int q = 0; q < 10; q++) CHECK(I[q * 10] == s.gt[q * s.gt_k], "query %d nearest", q);
    FAISS_OK(faiss_Index_reconstruct(gi, 17, rec));
    CHECK(memcmp(rec, s.xb + 17 * s.d, sizeof rec) == 0, "reconstruct");
    /* Errors come back as faiss_c codes with graft's message; the index survives. */
    float bad[128];
    memcpy(bad, s.xq, sizeof bad);
    bad[3] = NAN;
    int rc = faiss_Index_add(gi, 1, bad);
    CHECK(rc != 0 && strstr(faiss_get_last_error(), "NaN"), "NaN add: rc=%d msg=%s", rc, faiss_get_last_error());
    CHECK(faiss_Index_ntotal(gi) == s.nb, "failed add changed ntotal");
    rc = faiss_Index_search(gi, 1, s.xq, 0, D, I);
    CHECK(rc != 0 && strstr(faiss_get_last_error(), "k must be"), "k=0: rc=%d msg=%s", rc, faiss_get_last_error());
    rc = faiss_Index_reconstruct(gi, s.nb + 5, rec);
    CHECK(rc != 0, "reconstruct out of range must fail");
    FaissIndex* bogus = NULL;
    rc = faiss_GraftIndexFlat_new(&bogus, 0, METRIC_L2, -1);
    CHECK(rc != 0 && bogus == NULL && strstr(faiss_get_last_error(), "dimension"), "d=0: %s", faiss_get_last_error());
    rc = faiss_GraftIndexFlat_new(&bogus, 8, METRIC_L1, -1);
    CHECK(rc != 0 && bogus == NULL, "L1 must be refused");
    FAISS_OK(faiss_Index_search(gi, 1, s.xq, 10, D, I));
    CHECK(I[0] == s.gt[0], "search after errors");
    FAISS_OK(faiss_Index_reset(gi));
    CHECK(faiss_Index_ntotal(gi) == 0, "reset");
    /* Empty: FAISS's padding in every slot, also for 20+ queries (FAISS's BLAS path leaves its
     * output untouched there). */
    float De[20 * 10];
    idx_t Ie[20 * 10];
    memset(De, 0, sizeof De), memset(Ie, 0, sizeof Ie);
    FAISS_OK(faiss_Index_search(gi, 20, s.xq, 10, De, Ie));
    for (int i = 0; i < 20 * 10; i++)
        CHECK(Ie[i] == -1 && De[i] == FLT_MAX, "empty index, slot %d: %lld %g", i, (long long)Ie[i], De[i]);
    faiss_Index_free(gi);

    /* IndexIDMap over a graft index: user ids come back. */
    FAISS_OK(faiss_GraftIndexFlat_new(&gi, (int)s.d, METRIC_L2, graft_gpu_available() ? 0 : -1));
    FaissIndexIDMap* idmap = NULL;
    FAISS_OK(faiss_IndexIDMap_new(&idmap, gi));
    int64_t* ids = malloc(sizeof(int64_t) * s.nb);
    for (int64_t i = 0; i < s.nb; i++) ids[i] = 1000000 + 7 * i;
    FAISS_OK(faiss_Index_add_with_ids((FaissIndex*)idmap, s.nb, s.xb, ids));
    FAISS_OK(faiss_Index_search((FaissIndex*)idmap, 10, s.xq, 10, D, I));
    for (int q = 0; q < 10; q++)
        CHECK(I[q * 10] == 1000000 + 7 * s.gt[q * s.gt_k], "idmap query %d: %lld", q, (long long)I[q * 10]);
    faiss_Index_free((FaissIndex*)idmap);
    faiss_Index_free(gi);
    free(ids);
    graft_test_free_sift(&s);
}

int main(void) {
    test_agreement();
    test_index_api();
    return graft_test_finish("test_faiss_flat");
}
