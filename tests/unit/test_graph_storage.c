/* Storages of the graph index (graft/storage.h) on the CPU references: the FP16 and SQ8 codecs
 * against FAISS's own ScalarQuantizer (SQfp16, SQ8 through faiss_c's sa_encode / sa_decode), the
 * walk on codes with exact re-ranking against FP32 on sift5k, sift5k normalized (where SQ8 is
 * lossy: real values) and a 20k Fashion-MNIST subset, training rules and failed calls, the
 * version-2 record per storage, and the version-1 fixture written before format version 2. */
#include <float.h>
#include <math.h>
#include <string.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/index_factory_c.h>

#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include "testutil.h"

#define HDR 152 /* bytes of a version-4 GRFTGRPH header */
#include "core/vec_dist.h"

static const int kinds[] = {GRAFT_STORAGE_FP32, GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};

/* ---- codecs against FAISS ---------------------------------------------------------------- */

static void codec_vs_faiss(const char* what, const float* x, int64_t n, int64_t d) {
    const struct { int kind; const char* faiss; } cases[] = {{GRAFT_STORAGE_FP16, "SQfp16"},
                                                             {GRAFT_STORAGE_SQ8, "SQ8"}};
    for (int c = 0; c < 2; c++) {
        FaissIndex* fi = NULL;
        CHECK(faiss_index_factory(&fi, (int)d, cases[c].faiss, METRIC_L2) == 0, "faiss %s",
              cases[c].faiss);
        if (!fi) continue;
        CHECK(faiss_Index_train(fi, n, x) == 0, "faiss train");
        graft_storage st;
        CHECK_OK(graft_storage_init(&st, cases[c].kind, d));
        CHECK_OK(graft_storage_train(&st, n, x));
        /* FAISS 1.7.3's faiss_Index_sa_code_size never stores the size (c_api/Index_c.cpp), so
         * the code size is graft's: 2 d and d bytes, IndexScalarQuantizer's code_size. */
        const size_t cs = graft_storage_code_size(st.kind, d);
        uint8_t *cf = malloc(cs * n), *cg = malloc(cs * n);
        float *xf = malloc(sizeof(float) * n * d), *xg = malloc(sizeof(float) * n * d);
        faiss_Index_sa_encode(fi, n, x, cf);
        graft_storage_encode(&st, n, x, cg);
        /* FP16: graft rounds to nearest even (as CUDA's __float2half_rn); FAISS 1.7.3 built
         * without F16C converts with ryg's float_to_half_fast3 (utils/fp16-inl.h), measured here
         * to differ by one ulp on ~3e-5 of real values. Those may differ, by one ulp, where
         * graft's half is the nearer one; everything else must be equal. */
        int64_t diff = 0, ulp = 0;
        if (cases[c].kind == GRAFT_STORAGE_FP16) {
            const uint16_t *hf = (const uint16_t*)cf, *hg = (const uint16_t*)cg;
            graft_storage one;
            graft_storage_init(&one, GRAFT_STORAGE_FP16, 1);
            for (int64_t i = 0; i < n * d; i++) {
                if (hf[i] == hg[i]) continue;
                float a, b;
                graft_storage_decode(&one, 1, (const uint8_t*)&hf[i], &a);
                graft_storage_decode(&one, 1, (const uint8_t*)&hg[i], &b);
                const int near = fabsf(b - x[i]) <= fabsf(a - x[i]);
                if (abs((int)hf[i] - (int)hg[i]) == 1 && near) ulp++;
                else diff++;
            }
        } else {
            for (size_t i = 0; i < cs * n; i++) diff += cf[i] != cg[i];
        }
        faiss_Index_sa_decode(fi, n, cg, xf);
        graft_storage_decode(&st, n, cg, xg);
        int64_t ddiff = 0;
        for (int64_t i = 0; i < n * d; i++) ddiff += memcmp(&xf[i], &xg[i], 4) != 0;
        double err = 0; /* mean |x - decode(encode(x))| relative to the data's mean |x| */
        double mag = 0;
        for (int64_t i = 0; i < n * d; i++) err += fabs(x[i] - xg[i]), mag += fabs(x[i]);
        printf("  %-22s %-5s: %lld of %lld code bytes differ from FAISS's (+ %lld halves one ulp "
               "nearer), %lld decoded values; mean reconstruction error %.2e of the mean |x|\n", what,
               graft_storage_name(st.kind), (long long)diff, (long long)(cs * n), (long long)ulp,
               (long long)ddiff, err / mag);
        CHECK(ulp <= n * d / 10000, "%s: %lld one-ulp differences", what, (long long)ulp);
        CHECK(diff == 0, "%s %s: codes differ from FAISS's", what, graft_storage_name(st.kind));
        CHECK(ddiff == 0, "%s %s: decoded values differ from FAISS's", what,
              graft_storage_name(st.kind));
        free(cf), free(cg), free(xf), free(xg);
        graft_storage_free(&st);
        faiss_Index_free(fi);
    }
}

/* ---- the index on each storage ------------------------------------------------------------- */

static graft_gindex* new_index(int64_t d, int kind, graft_metric metric, const float* xt, int64_t nt) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.metric = metric;
    p.storage = kind;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, &p, &g));
    if (g && xt) CHECK_OK(graft_gindex_train(g, nt, xt));
    return g;
}

typedef struct {
    const char* name;
    const float *xb, *xq;
    int64_t nb, nq, d;
    graft_metric metric;
    int32_t* gt; /* nq x 10 */
    graft_graph g;
} dataset;

static double recall_of(graft_gindex* g, const dataset* s, int L, int rerank, float* D, int64_t* I) {
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.L = L;
    sp.rerank = rerank;
    CHECK_OK(graft_gindex_search(g, s->nq, s->xq, 10, &sp, D, I, NULL));
    return graft_test_recall(I, 10, s->gt, 10, s->nq, 10);
}

/* Every storage over the same graph (the FP32 build's; the storage does not change the build),
 * PQ with M sub-quantizers (its codebooks by FAISS's k-means on the base vectors). *_loss: how
 * much below FP32's recall each compressed storage may fall at each L, from the measurements
 * printed here. */
static void storages_on(dataset* s, double fp16_loss, double sq8_loss, int pq_M, double pq_loss) {
    const int64_t k = 10, nq = s->nq;
    float* D = malloc(sizeof(float) * nq * k);
    int64_t* I = malloc(sizeof(int64_t) * nq * k);
    const int l2 = s->metric == GRAFT_METRIC_L2;
    printf("%s (%lld x %lld, %s):\n", s->name, (long long)s->nb, (long long)s->d, l2 ? "L2" : "IP");
    double fp32[3] = {0};
    const int Ls[3] = {16, 32, 64};
    const int kinds[] = {GRAFT_STORAGE_FP32, GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8, GRAFT_STORAGE_PQ};
    for (int c = 0; c < 4; c++) {
        graft_gindex* g = NULL;
        if (kinds[c] == GRAFT_STORAGE_PQ) {
            graft_gindex_params p;
            graft_gindex_params_defaults(&p);
            p.device = -1;
            p.metric = s->metric;
            p.storage = GRAFT_STORAGE_PQ;
            p.pq.M = pq_M;
            p.pq.max_train = 10000; /* 39 points a centroid (FAISS's advice); keeps CI's k-means short */
            p.pq.kmeans = graft_faiss_kmeans;
            CHECK_OK(graft_gindex_new(s->d, &p, &g));
            if (g) CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
        } else {
            g = new_index(s->d, kinds[c], s->metric, kinds[c] == GRAFT_STORAGE_SQ8 ? s->xb : NULL, s->nb);
        }
        if (!g) continue;
        CHECK_OK(graft_gindex_set_data(g, s->nb, s->xb, &s->g));
        CHECK(graft_gindex_gpu_bytes(g) == 0, "a CPU index holds no device bytes");
        double r[3], rk = 0;
        for (int i = 0; i < 3; i++) r[i] = recall_of(g, s, Ls[i], 0, D, I);
        /* Compressed: the returned distances are the exact FP32 ones of the returned ids. */
        int64_t inexact = 0;
        if (kinds[c] != GRAFT_STORAGE_FP32)
            for (int64_t q = 0; q < nq; q++)
                for (int64_t j = 0; j < k; j++) {
                    if (I[q * k + j] < 0) continue;
                    const float e = graft_vec_dist(s->xq + q * s->d, s->xb + I[q * k + j] * s->d, s->d, l2);
                    inexact += D[q * k + j] != (l2 ? e : -e);
                }
        CHECK(inexact == 0, "%s %s: %lld distances are not the exact FP32 ones", s->name,
              graft_storage_name(kinds[c]), (long long)inexact);
        /* rerank = k: the k best by code distance only re-sorted, i.e. the codes' own ranking. */
        if (kinds[c] != GRAFT_STORAGE_FP32) rk = recall_of(g, s, 64, (int)k, D, I);
        printf("  %-5s recall@10 L=16 %.4f L=32 %.4f L=64 %.4f", graft_storage_name(kinds[c]), r[0],
               r[1], r[2]);
        if (kinds[c] != GRAFT_STORAGE_FP32) printf("; L=64 without re-ranking past k: %.4f", rk);
        printf("\n");
        if (kinds[c] == GRAFT_STORAGE_FP32) memcpy(fp32, r, sizeof r);
        const double loss = kinds[c] == GRAFT_STORAGE_FP16 ? fp16_loss
                            : kinds[c] == GRAFT_STORAGE_SQ8 ? sq8_loss
                                                            : pq_loss;
        if (kinds[c] != GRAFT_STORAGE_FP32)
            for (int i = 0; i < 3; i++)
                CHECK(r[i] >= fp32[i] - loss, "%s %s L=%d: recall %.4f vs FP32's %.4f (allowed "
                      "loss %.3f)", s->name, graft_storage_name(kinds[c]), Ls[i], r[i], fp32[i], loss);
        /* PQ's coarse codes cost recall at narrow beams; at L = 64 the exact re-rank of every
         * expanded vertex brings it within 0.015 of FP32 (measured 0.0002-0.0098). */
        if (kinds[c] == GRAFT_STORAGE_PQ)
            CHECK(r[2] >= fp32[2] - 0.015, "%s PQ L=64: recall %.4f vs FP32's %.4f", s->name, r[2], fp32[2]);
        /* Re-ranking the whole list never ranks worse than re-ranking k. */
        if (kinds[c] != GRAFT_STORAGE_FP32)
            CHECK(r[2] >= rk - 0.002, "%s %s: rerank 0 %.4f below rerank k %.4f", s->name,
                  graft_storage_name(kinds[c]), r[2], rk);
        graft_gindex_free(g);
    }
    free(D);
    free(I);
}

static void make_dataset(dataset* s, const char* name, const float* xb, int64_t nb, const float* xq,
                         int64_t nq, int64_t d, graft_metric metric) {
    *s = (dataset){name, xb, xq, nb, nq, d, metric, NULL, {0}};
    s->gt = graft_test_exact_topk(xb, nb, xq, nq, d, metric, 10);
    graft_rnnd_params bp;
    graft_rnnd_params_defaults(&bp);
    bp.metric = metric;
    CHECK_OK(graft_rnnd_build_cpu(xb, nb, d, &bp, &s->g));
}

static void free_dataset(dataset* s) {
    free(s->gt);
    graft_graph_free(&s->g);
}

/* ---- training and failed calls ------------------------------------------------------------- */

static void test_rules(const graft_test_sift* s) {
    printf("training rules and failed calls\n");
    graft_gindex* g = new_index(s->d, GRAFT_STORAGE_SQ8, GRAFT_METRIC_L2, NULL, 0);
    CHECK(!graft_gindex_is_trained(g), "SQ8 starts untrained");
    CHECK_ERR(graft_gindex_add(g, 100, s->xb), GRAFT_ESTATE);
    graft_graph gr = {0};
    graft_rnnd_params bp;
    graft_rnnd_params_defaults(&bp);
    CHECK_OK(graft_rnnd_build_cpu(s->xb, 200, s->d, &bp, &gr));
    CHECK_ERR(graft_gindex_set_data(g, 200, s->xb, &gr), GRAFT_ESTATE);
    CHECK(graft_gindex_ntotal(g) == 0, "failed adds leave the index empty");
    float* bad = malloc(sizeof(float) * 10 * s->d);
    memcpy(bad, s->xb, sizeof(float) * 10 * s->d);
    bad[5 * s->d + 3] = NAN;
    CHECK_ERR(graft_gindex_train(g, 10, bad), GRAFT_EINVAL);
    CHECK(!graft_gindex_is_trained(g), "a failed train leaves it untrained");
    CHECK_ERR(graft_gindex_train(g, 0, s->xb), GRAFT_EINVAL);
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK(graft_gindex_is_trained(g), "trained");
    CHECK_OK(graft_gindex_add(g, 300, s->xb));
    CHECK_ERR(graft_gindex_train(g, s->nb, s->xb), GRAFT_ESTATE);
    float D[10];
    int64_t I[10];
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.rerank = 5;
    CHECK_ERR(graft_gindex_search(g, 1, s->xq, 10, &sp, D, I, NULL), GRAFT_EINVAL);
    sp.rerank = -1;
    CHECK_ERR(graft_gindex_set_search_params(g, &sp), GRAFT_EINVAL);
    sp.rerank = 10;
    CHECK_OK(graft_gindex_search(g, 1, s->xq, 10, &sp, D, I, NULL));
    CHECK_OK(graft_gindex_reset(g));
    CHECK(graft_gindex_is_trained(g), "reset keeps the SQ8 training");
    CHECK_OK(graft_gindex_train(g, 1000, s->xb)); /* empty again: retraining allowed */
    CHECK_OK(graft_gindex_add(g, 300, s->xb));
    CHECK(graft_gindex_ntotal(g) == 300, "add after reset");
    graft_gindex_free(g);
    /* FP16 needs no training; train is accepted and learns nothing. */
    g = new_index(s->d, GRAFT_STORAGE_FP16, GRAFT_METRIC_L2, NULL, 0);
    CHECK(graft_gindex_is_trained(g), "FP16 is trained from the start");
    CHECK_OK(graft_gindex_add(g, 300, s->xb));
    CHECK_OK(graft_gindex_train(g, 300, s->xb));
    graft_gindex_free(g);
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.storage = 7;
    graft_gindex* none = NULL;
    CHECK_ERR(graft_gindex_new(s->d, &p, &none), GRAFT_EINVAL);
    CHECK(none == NULL, "no index for an unknown storage");
    free(bad);
    graft_graph_free(&gr);
}

/* ---- records ------------------------------------------------------------------------------- */

static int read_record(FILE* f, void** out) { return graft_gindex_read(f, NULL, (graft_gindex**)out); }

static void test_io(const graft_test_sift* s) {
    printf("records\n");
    const int64_t n = 800, nq = 100, k = 10;
    for (int c = 0; c < 3; c++) {
        graft_gindex* g = new_index(s->d, kinds[c], GRAFT_METRIC_L2,
                                    kinds[c] == GRAFT_STORAGE_SQ8 ? s->xb : NULL, s->nb);
        graft_search_params sp = graft_gindex_get_params(g).search;
        sp.L = 48;
        sp.rerank = 24;
        CHECK_OK(graft_gindex_set_search_params(g, &sp));
        CHECK_OK(graft_gindex_add(g, n, s->xb));
        FILE* f = tmpfile();
        CHECK_OK(graft_gindex_write(g, f));
        size_t len;
        unsigned char* b = graft_test_bytes_of(f, &len);
        const size_t sq = kinds[c] == GRAFT_STORAGE_SQ8 ? 8 * (size_t)s->d : 0;
        const int R = graft_gindex_graph(g)->R;
        CHECK(len == HDR + sq + (size_t)n * s->d * 4 + (size_t)n * R * 4 + 8, "%s record length %zu",
              graft_storage_name(kinds[c]), len);
        f = tmpfile();
        fwrite(b, 1, len, f);
        rewind(f);
        graft_gindex* r = NULL;
        CHECK_OK(graft_gindex_read(f, NULL, &r));
        fclose(f);
        if (r) {
            const graft_storage *a = graft_gindex_storage(g), *bs = graft_gindex_storage(r);
            CHECK(bs->kind == kinds[c] && bs->trained && graft_gindex_get_params(r).search.rerank == 24 &&
                  graft_gindex_get_params(r).storage == kinds[c],
                  "%s: storage, rerank read back", graft_storage_name(kinds[c]));
            if (kinds[c] == GRAFT_STORAGE_SQ8)
                CHECK(!memcmp(a->vmin, bs->vmin, 4 * s->d) && !memcmp(a->vdiff, bs->vdiff, 4 * s->d),
                      "SQ8 parameters read back bit for bit");
            float *Da = malloc(sizeof(float) * nq * k), *Db = malloc(sizeof(float) * nq * k);
            int64_t *Ia = malloc(sizeof(int64_t) * nq * k), *Ib = malloc(sizeof(int64_t) * nq * k);
            CHECK_OK(graft_gindex_search(g, nq, s->xq, k, NULL, Da, Ia, NULL));
            CHECK_OK(graft_gindex_search(r, nq, s->xq, k, NULL, Db, Ib, NULL));
            CHECK(!memcmp(Da, Db, sizeof(float) * nq * k) && !memcmp(Ia, Ib, sizeof(int64_t) * nq * k),
                  "%s: same results after the round trip", graft_storage_name(kinds[c]));
            free(Da), free(Db), free(Ia), free(Ib);
            graft_gindex_free(r);
        }
        if (kinds[c] == GRAFT_STORAGE_SQ8) {
            graft_test_expect_format(read_record, b, HDR + 100, "truncated in the SQ8 parameters",
                                     "truncated");
            graft_test_with_field(read_record, b, len, 68, 0, 4, 0, "SQ8 with vectors, untrained",
                                  "untrained SQ8");
            /* vdiff < 0 under a valid checksum */
            graft_test_with_field(read_record, b, len, HDR + 4 * (size_t)s->d, 0xbf800000u, 4, 1,
                                  "SQ8 vdiff -1, valid checksum", "vdiff");
        }
        free(b);
        graft_gindex_free(g);
    }
    /* An untrained SQ8 index round-trips untrained. */
    graft_gindex* g = new_index(s->d, GRAFT_STORAGE_SQ8, GRAFT_METRIC_L2, NULL, 0);
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(g, f));
    rewind(f);
    graft_gindex* r = NULL;
    CHECK_OK(graft_gindex_read(f, NULL, &r));
    CHECK(r && !graft_gindex_is_trained(r) && graft_gindex_storage(r)->kind == GRAFT_STORAGE_SQ8,
          "untrained SQ8 round trip");
    fclose(f);
    graft_gindex_free(r);
    graft_gindex_free(g);
}

/* A record written by the code before a format change (tests/fixtures/make_gindex_v1.c, version
 * 1; make_bindex_v1.c, version 2 with SQ8 and the graph + PQ index's GRFTBANG version 1) loads
 * with its storage and answers exactly what that
 * code answered; written again, it is a version-3 record that reads back to the same answers. */
static void test_fixture(const graft_test_sift* s, const char* name, int storage, int trained) {
    printf("fixture %s\n", name);
    enum { NQ = 100, K = 10 };
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.grft", GRAFT_FIXTURES_DIR, name);
    FILE* f = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/%s.expect", GRAFT_FIXTURES_DIR, name);
    FILE* e = fopen(path, "rb");
    CHECK(f && e, "fixtures in %s", GRAFT_FIXTURES_DIR);
    if (!f || !e) return;
    int64_t I0[NQ * K], I[NQ * K];
    float D0[NQ * K], D[NQ * K];
    CHECK(fread(I0, sizeof I0, 1, e) == 1 && fread(D0, sizeof D0, 1, e) == 1, "expectation file");
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_read(f, NULL, &g));
    fclose(f);
    fclose(e);
    if (!g) return;
    graft_gindex_params p = graft_gindex_get_params(g);
    CHECK(graft_gindex_ntotal(g) == 500 && p.storage == storage && graft_gindex_is_trained(g) == trained &&
              p.search.L == 32 && p.search.rerank == 0 && graft_gindex_graph(g)->R == 32,
          "%s: storage, shape and defaults", name);
    CHECK(!memcmp(graft_gindex_vectors(g), s->xb, sizeof(float) * 500 * s->d), "%s: the vectors", name);
    CHECK_OK(graft_gindex_search(g, NQ, s->xq, K, NULL, D, I, NULL));
    CHECK(!memcmp(I, I0, sizeof I) && !memcmp(D, D0, sizeof D), "%s: the same labels and distances "
          "as the code that wrote it", name);
    FILE* t = tmpfile();
    CHECK_OK(graft_gindex_write(g, t));
    rewind(t);
    graft_gindex* r = NULL;
    CHECK_OK(graft_gindex_read(t, NULL, &r));
    fclose(t);
    if (r) CHECK_OK(graft_gindex_search(r, NQ, s->xq, K, NULL, D, I, NULL));
    CHECK(!memcmp(I, I0, sizeof I) && !memcmp(D, D0, sizeof D), "%s -> version 3: same answers", name);
    graft_gindex_free(r);
    graft_gindex_free(g);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): sift5k's first 2000 vectors and 200
     * queries. The storages' bars are recall lost against FP32 over the same graph and queries,
     * measured and set at full size. */
    graft_test_sift_quick(&s, 2000, 200);
    /* sift5k normalized: real values in [0, 1), where 8 bits per dimension lose information
     * (sift5k itself is integers 0..255, for which SQ8 is nearly lossless). */
    float* xn = malloc(sizeof(float) * s.nb * s.d);
    float* qn = malloc(sizeof(float) * s.nq * s.d);
    for (int pass = 0; pass < 2; pass++) {
        const float* src = pass ? s.xq : s.xb;
        float* dst = pass ? qn : xn;
        const int64_t n = pass ? s.nq : s.nb;
        for (int64_t i = 0; i < n; i++) {
            double nn = 0;
            for (int64_t j = 0; j < s.d; j++) nn += (double)src[i * s.d + j] * src[i * s.d + j];
            for (int64_t j = 0; j < s.d; j++) dst[i * s.d + j] = (float)(src[i * s.d + j] / sqrt(nn));
        }
    }
    printf("codecs against FAISS's ScalarQuantizer\n");
    codec_vs_faiss("sift5k", s.xb, s.nb, s.d);
    codec_vs_faiss("sift5k normalized", xn, s.nb, s.d);
    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    /* GRAFT_TEST_QUICK (the sanitizer tree's run): sift5k only, as test_graph_cpu does. */
    const int have_fm = !getenv("GRAFT_TEST_QUICK") &&
                        graft_test_load_fmnist(20000, 500, &fb, &fnb, &fq, &fnq, &fd) == 0;
    if (have_fm) codec_vs_faiss("fashion-mnist 20k", fb, fnb, fd);

    test_rules(&s);
    test_io(&s);
    test_fixture(&s, "gindex_v1_sift500", GRAFT_STORAGE_FP32, 1);
    test_fixture(&s, "gindex_v2_sq8_sift500", GRAFT_STORAGE_SQ8, 1);
    test_fixture(&s, "bindex_v1_sift500", GRAFT_STORAGE_PQ, 1); /* GRFTBANG: the PQ storage */

    dataset ds;
    make_dataset(&ds, "sift5k", s.xb, s.nb, s.xq, s.nq, s.d, GRAFT_METRIC_L2);
    storages_on(&ds, 0.002, 0.005, 32, 0.04); /* PQ measured: 0.027 at L = 16 */
    free_dataset(&ds);
    make_dataset(&ds, "sift5k normalized", xn, s.nb, qn, s.nq, s.d, GRAFT_METRIC_L2);
    storages_on(&ds, 0.002, 0.01, 32, 0.03); /* PQ measured: 0.019 at L = 16 */
    free_dataset(&ds);
    make_dataset(&ds, "sift5k normalized", xn, s.nb, qn, s.nq, s.d, GRAFT_METRIC_INNER_PRODUCT);
    /* PQ codes (L2 k-means) rank inner products worst at narrow beams: measured 0.132 at L = 16,
     * 0.051 at L = 32, 0.010 at L = 64 */
    storages_on(&ds, 0.002, 0.01, 32, 0.15);
    free_dataset(&ds);
    if (have_fm) {
        make_dataset(&ds, "fashion-mnist 20k", fb, fnb, fq, fnq, fd, GRAFT_METRIC_L2);
        storages_on(&ds, 0.002, 0.005, 98, 0.035); /* PQ98 measured: 0.024 at L = 16 */
        free_dataset(&ds);
    }
    free(fb), free(fq), free(xn), free(qn);
    graft_test_free_sift(&s);
    return graft_test_finish("test_graph_storage");
}
