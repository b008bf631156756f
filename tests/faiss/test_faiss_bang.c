/* graft's graph + PQ index (BANG) through the real faiss_c, like a user with only public headers:
 * factory strings and their errors, the train-before-add life cycle, recall@10 against FAISS
 * IndexFlatL2, named parameters, IDSelector filtering against an exact search restricted to the
 * same selector, IndexIDMap wrapping, I/O round trips and broken files, and bad input. Runs on the
 * CPU reference (device -1, "...,cpu": RNN-Descent build, graft_bang_search_cpu search), as CI has
 * no GPU; where a GPU is visible, "GraftGraph32,PQ16" also runs there. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>
#include <faiss/c_api/index_io_c.h>

#include "faiss_sift_fixture.h"

static FaissIndex* pq16; /* "GraftGraph32,PQ16,cpu" over sift5k, shared by the tests that only search */

/* desc trained and filled with sift5k (ids 0..nb-1 given explicitly to an IDMap, whose add
 * refuses to invent ids). */
static FaissIndex* built(const char* desc) {
    FaissIndex* index = make(desc);
    if (!index) return NULL;
    CHECK(!faiss_Index_is_trained(index), "%s: trained before train()", desc);
    FAISS_OK(faiss_Index_train(index, s.nb, s.xb));
    CHECK(faiss_Index_is_trained(index), "%s: untrained after train()", desc);
    add_sift(index, desc);
    return index;
}
/* Every slot of every row from `found` on is FAISS's empty answer (-1, FLT_MAX). */
static int64_t not_empty(const float* D, const idx_t* I, int64_t nq, int64_t k, int64_t found) {
    int64_t bad = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t j = found; j < k; j++) bad += I[q * k + j] != -1 || D[q * k + j] != FLT_MAX;
    return bad;
}

/* ---- factory ---------------------------------------------------------------------------------- */

static void test_factory(void) {
    printf("factory\n");
    /* Recall floors: measured values beside them (sift5k, CPU reference, deterministic k-means
     * and builds); each floor sits 0.01-0.03 below. */
    struct { const char* desc; double min_recall; int R, M, L; } cases[] = {
        {"GraftGraph,PQ32,cpu", 0.98, 64, 32, 64},           /* measured 0.9942 */
        {"GraftGraph32,PQ16x8,cpu,L=32", 0.90, 32, 16, 32},  /* measured 0.9234 */
        {"IDMap2,GraftGraph32,PQ16,cpu", 0.96, 32, 16, 64},  /* measured 0.9752 */
        {"PCA64,GraftGraph32,PQ16,cpu", 0.84, 32, 16, 64},   /* measured 0.8610 (PCA to 64) */
    };
    /* "GraftGraph32,PQ16,cpu" (pq16, built once in main): measured 0.9752. */
    double r16 = recall_of(pq16);
    printf("  %-30s recall@10 %.4f, build %.3f s\n", "GraftGraph32,PQ16,cpu", r16, param(pq16, "build_seconds"));
    CHECK(r16 >= 0.96, "GraftGraph32,PQ16,cpu: recall@10 %.4f < 0.96", r16);
    CHECK(param(pq16, "device") == -1 && param(pq16, "R") == 32 && param(pq16, "M") == 16 &&
          param(pq16, "L") == 64 && faiss_GraftIndexGraphPQ_cast(pq16) == pq16, "GraftGraph32,PQ16,cpu");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        FaissIndex* index = built(cases[c].desc);
        if (!index) continue;
        double r = recall_of(index);
        printf("  %-30s recall@10 %.4f, build %.3f s\n", cases[c].desc, r, param(index, "build_seconds"));
        CHECK(r >= cases[c].min_recall, "%s: recall@10 %.4f < %.2f", cases[c].desc, r, cases[c].min_recall);
        CHECK(param(index, "device") == -1 && param(index, "R") == cases[c].R && param(index, "M") == cases[c].M &&
              param(index, "L") == cases[c].L && param(index, "mode") == 0,
              "%s: device %g R %g M %g L %g mode %g", cases[c].desc, param(index, "device"), param(index, "R"),
              param(index, "M"), param(index, "L"), param(index, "mode"));
        const int direct = strncmp(cases[c].desc, "GraftGraph", 10) == 0;
        /* GraftIndexGraphPQ is a GraftIndexGraph with the PQ storage (faiss::IndexHNSWPQ's shape) */
        CHECK((faiss_GraftIndexGraphPQ_cast(index) != NULL) == direct &&
                  (faiss_GraftIndexGraph_cast(index) != NULL) == direct,
              "%s: cast", cases[c].desc);
        faiss_Index_free(index);
    }
    /* Memory options: recorded on the CPU, used on a GPU. */
    FaissIndex* ooc = make("GraftGraph32,PQ16,cpu,ooc,budget=64");
    if (ooc) {
        CHECK(param(ooc, "mode") == 2 && param(ooc, "gpu_budget") == 64.0 * 1048576 &&
              param(ooc, "active_mode") == 0 && param(ooc, "gpu_bytes") == 0, "ooc,budget=64");
        faiss_Index_free(ooc);
    }
    FaissIndex* inmem = make("GraftGraph,PQ16,inmem,cpu");
    if (inmem) {
        CHECK(param(inmem, "mode") == 1 && param(inmem, "gpu_budget") == 0, "inmem");
        faiss_Index_free(inmem);
    }
    /* "GraftGraph32,PQ16": GPU 0 where one is visible. */
    if (graft_gpu_available()) {
        FaissIndex* g = built("GraftGraph32,PQ16");
        if (g) {
            double r = recall_of(g);
            printf("  %-30s recall@10 %.4f, build %.3f s (GPU, mode %g)\n", "GraftGraph32,PQ16", r,
                   param(g, "build_seconds"), param(g, "active_mode"));
            CHECK(param(g, "device") == 0 && r >= 0.96, "GraftGraph32,PQ16 on the GPU: recall@10 %.4f", r);
        }
        faiss_Index_free(g);
    }

    FaissIndex* index = NULL;
    const int d = (int)s.d;
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ7,cpu", METRIC_L2), "M must divide d");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ7,cpu", METRIC_L2), "d = 128");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "PCA64,GraftGraph,PQ48,cpu", METRIC_L2), "d = 64");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ256,cpu", METRIC_L2), "M must divide d");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ0", METRIC_L2), "'PQ0'");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ,cpu", METRIC_L2), "PQ<M>");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16x4", METRIC_L2), "8 bits");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,PQ16", METRIC_L2), "takes no PQ");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,cpu,PQ16", METRIC_L2), "must directly follow");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,PQ8", METRIC_L2), "must directly follow");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,ooc", METRIC_L2), "graph + PQ index");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftFlat,budget=10", METRIC_L2), "graph + PQ index");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,ooc,inmem", METRIC_L2), "memory mode twice");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,budget=x", METRIC_L2), "budget=MiB");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,budget=1,budget=2", METRIC_L2), "budget=2");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,cpu,HNSW32", METRIC_L2), "HNSW32");
    FAISS_FAILS(faiss_graft_index_factory(&index, d, "GraftGraph,PQ16,cpu", METRIC_L1), "METRIC_L2");
    CHECK(index == NULL, "a failed factory call set *p_index");
    /* FAISS's own PQ strings still go to FAISS. */
    FAISS_OK(faiss_graft_index_factory(&index, d, "PQ16", METRIC_L2));
    CHECK(index && faiss_GraftIndexGraphPQ_cast(index) == NULL, "\"PQ16\" is FAISS's IndexPQ");
    faiss_Index_free(index);
}

/* ---- life cycle and bad input ------------------------------------------------------------------- */

static void test_lifecycle(void) {
    printf("life cycle and errors\n");
    FaissIndex* bogus = NULL;
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(&bogus, (int)s.d, METRIC_L2, 7, -1), "must divide");
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(&bogus, (int)s.d, METRIC_L2, -1, -1), "M = -1");
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(&bogus, (int)s.d, METRIC_L2, 16, -3), "device -3");
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(&bogus, 0, METRIC_L2, 0, -1), "dimension");
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(&bogus, 8, METRIC_L1, 0, -1), "METRIC_L2");
    FAISS_FAILS(faiss_GraftIndexGraphPQ_new(NULL, 8, METRIC_L2, 0, -1), "NULL");
    CHECK(bogus == NULL, "a failed constructor set *p_index");

    FaissIndex* g = NULL;
    FAISS_OK(faiss_GraftIndexGraphPQ_new(&g, (int)s.d, METRIC_L2, 16, -1));
    if (!g) return;
    CHECK(faiss_GraftIndexGraphPQ_cast(g) == g && faiss_GraftIndexGraph_cast(g) == g &&
          faiss_GraftIndexFlat_cast(g) == NULL, "casts");
    float D[8 * 2000];
    idx_t I[8 * 2000];

    /* Untrained: FAISS's convention (IndexPQ, IndexIVFPQ) is an error on add, naming the fix. */
    CHECK(!faiss_Index_is_trained(g) && param(g, "M") == 16, "new index: trained, or M %g", param(g, "M"));
    int rc = faiss_Index_add(g, 500, s.xb);
    CHECK(rc == -2 && strstr(faiss_get_last_error(), "not trained") && strstr(faiss_get_last_error(), "train()"),
          "add before train -> %d: %s", rc, rc ? faiss_get_last_error() : "");
    printf("  add before train -> %d: %s\n", rc, faiss_get_last_error());
    FAISS_OK(faiss_Index_search(g, 2, s.xq, 5, D, I));
    CHECK(not_empty(D, I, 2, 5, 0) == 0, "search of an untrained empty index");
    FAISS_FAILS(faiss_Index_train(g, 255, s.xb), "too few training points");
    float* bad = malloc(sizeof(float) * 300 * s.d);
    memcpy(bad, s.xb, sizeof(float) * 300 * s.d);
    bad[299 * s.d + 5] = NAN;
    FAISS_FAILS(faiss_Index_train(g, 300, bad), "NaN");
    CHECK(!faiss_Index_is_trained(g) && faiss_Index_ntotal(g) == 0, "failed train calls trained the index");

    /* Trained and empty: -1 labels. */
    FAISS_OK(faiss_Index_train(g, s.nb, s.xb));
    CHECK(faiss_Index_is_trained(g), "trained");
    FAISS_OK(faiss_Index_search(g, 2, s.xq, 5, D, I));
    CHECK(not_empty(D, I, 2, 5, 0) == 0, "search of a trained empty index");

    FAISS_OK(faiss_Index_add(g, 500, s.xb));
    results before = search_with(g, NULL);
    memcpy(bad, s.xq, sizeof(float) * 2 * s.d);
    bad[s.d + 7] = NAN;
    FAISS_FAILS(faiss_Index_add(g, 2, bad), "NaN");
    FAISS_FAILS(faiss_Index_search(g, 2, bad, 5, D, I), "NaN");
    FAISS_FAILS(faiss_Index_search(g, 2, s.xq, 0, D, I), "k must be");
    FAISS_FAILS(faiss_Index_search(g, 2, s.xq, 2000, D, I), "1024");
    FAISS_FAILS(faiss_Index_train(g, s.nb, s.xb), "500"); /* non-empty: its codes would go stale */
    float rec[128];
    FAISS_FAILS(faiss_Index_reconstruct(g, 500, rec), "key 500");
    FAISS_OK(faiss_Index_reconstruct(g, 17, rec));
    CHECK(!memcmp(rec, s.xb + 17 * s.d, sizeof rec), "reconstruct gives the stored vector");
    FAISS_FAILS(faiss_graft_set_param(g, "L", 0), "L");
    CHECK(faiss_Index_ntotal(g) == 500 && faiss_Index_is_trained(g), "failed calls changed the index");
    results after = search_with(g, NULL);
    CHECK(same_results(before, after), "failed calls changed the results");
    check_remove_first_ten(g);

    /* k > ntotal: the 3 vectors, then FAISS's -1 / FLT_MAX. reset keeps the codebooks. */
    FAISS_OK(faiss_Index_reset(g));
    CHECK(faiss_Index_is_trained(g) && faiss_Index_ntotal(g) == 0, "reset");
    FAISS_OK(faiss_Index_add(g, 3, s.xb));
    FAISS_OK(faiss_Index_search(g, 2, s.xq, 8, D, I));
    CHECK(I[0] >= 0 && I[2] >= 0 && I[8] >= 0 && I[10] >= 0 && not_empty(D, I, 2, 8, 3) == 0, "k > ntotal");
    /* Empty again: training anew is allowed. */
    FAISS_OK(faiss_Index_reset(g));
    FAISS_OK(faiss_Index_train(g, 1000, s.xb));
    free_results(&before);
    free_results(&after);
    free(bad);
    faiss_Index_free(g);
}

/* ---- named parameters -------------------------------------------------------------------------- */

static void test_params(void) {
    printf("named parameters\n");
    FaissIndex* g = pq16;
    /* Recall rises with the worklist; allow 0.002 of noise between neighbouring widths. */
    const int Ls[] = {10, 16, 32, 64, 128};
    double rec[5];
    for (int i = 0; i < 5; i++) {
        FAISS_OK(faiss_graft_set_param(g, "L", Ls[i]));
        CHECK(param(g, "L") == Ls[i], "L read back");
        rec[i] = recall_of(g);
        printf("  L=%-4d recall@10 %.4f\n", Ls[i], rec[i]);
        if (i) CHECK(rec[i] >= rec[i - 1] - 0.002, "recall fell from %.4f to %.4f at L=%d", rec[i - 1], rec[i], Ls[i]);
    }
    CHECK(rec[4] >= rec[0] + 0.1 && rec[4] >= 0.98, "L=128 %.4f vs L=10 %.4f", rec[4], rec[0]);
    /* Re-rank depth: only the 10 best by PQ distance get exact distances (BANG re-ranks every
     * expanded vertex): recall falls to what the codes rank right. */
    FAISS_OK(faiss_graft_set_param(g, "L", 64));
    FAISS_OK(faiss_graft_set_param(g, "rerank", 10));
    double r10 = recall_of(g);
    FAISS_OK(faiss_graft_set_param(g, "rerank", 0));
    printf("  L=64 rerank=10 recall@10 %.4f (rerank=0: %.4f)\n", r10, rec[3]);
    CHECK(r10 < rec[3], "rerank=10 %.4f not below rerank=0 %.4f", r10, rec[3]);
    FAISS_OK(faiss_graft_set_param(g, "max_expand", 64)); /* at most L expansions */
    double rx = recall_of(g);
    printf("  L=64 max_expand=64 recall@10 %.4f\n", rx);
    CHECK(rx <= rec[3] + 0.002 && rx >= rec[3] - 0.1, "max_expand=64 %.4f vs %.4f", rx, rec[3]);
    FAISS_OK(faiss_graft_set_param(g, "max_expand", 0));

    FAISS_OK(faiss_graft_set_param(g, "bloom_log2", 20));
    FAISS_OK(faiss_graft_set_param(g, "mode", 2));
    FAISS_OK(faiss_graft_set_param(g, "gpu_budget", 1 << 30));
    FAISS_OK(faiss_graft_set_param(g, "S", 16));
    FAISS_OK(faiss_graft_set_param(g, "T1", 2));
    FAISS_OK(faiss_graft_set_param(g, "T2", 4));
    FAISS_OK(faiss_graft_set_param(g, "rho", 0.5));
    FAISS_OK(faiss_graft_set_param(g, "R", 24));
    CHECK(param(g, "bloom_log2") == 20 && param(g, "mode") == 2 && param(g, "gpu_budget") == 1 << 30 &&
          param(g, "S") == 16 && param(g, "T1") == 2 && param(g, "T2") == 4 && param(g, "rho") == 0.5 &&
          param(g, "R") == 24 && param(g, "rerank") == 0 && param(g, "max_expand") == 0,
          "parameters read back");
    CHECK(param(g, "active_mode") == 0 && param(g, "gpu_bytes") == 0 && param(g, "build_seconds") > 0,
          "CPU index: active_mode %g gpu_bytes %g build_seconds %g", param(g, "active_mode"),
          param(g, "gpu_bytes"), param(g, "build_seconds"));
    FAISS_OK(faiss_graft_set_param(g, "mode", 0));

    FAISS_FAILS(faiss_graft_set_param(g, "L", 0), "L");
    FAISS_FAILS(faiss_graft_set_param(g, "L", 2.5), "integer");
    FAISS_FAILS(faiss_graft_set_param(g, "rerank", -2), "re-rank depth -2");
    /* A re-rank depth below k is refused by the search that asks for more. */
    FAISS_OK(faiss_graft_set_param(g, "rerank", 5));
    float D[2 * K];
    idx_t I[2 * K];
    FAISS_FAILS(faiss_Index_search(g, 2, s.xq, K, D, I), "re-rank depth 5");
    FAISS_OK(faiss_graft_set_param(g, "rerank", 0));
    FAISS_FAILS(faiss_graft_set_param(g, "max_expand", 10), "max_expand");
    FAISS_FAILS(faiss_graft_set_param(g, "bloom_log2", 30), "bloom_log2");
    FAISS_FAILS(faiss_graft_set_param(g, "mode", 3), "mode 3");
    FAISS_FAILS(faiss_graft_set_param(g, "gpu_budget", -1), "gpu_budget");
    FAISS_FAILS(faiss_graft_set_param(g, "gpu_budget", 1.5), "gpu_budget");
    FAISS_FAILS(faiss_graft_set_param(g, "rho", 1.5), "rho");
    FAISS_FAILS(faiss_graft_set_param(g, "R", 0), "R=0");
    FAISS_FAILS(faiss_graft_set_param(g, "M", 8), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "device", 0), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "gpu_bytes", 0), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "build_seconds", 1), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "probes", 2), "unknown parameter 'probes'");
    double v;
    FAISS_FAILS(faiss_graft_get_param(g, "efSearch", &v), "L, rerank, max_expand");
    CHECK(param(g, "L") == 64 && param(g, "R") == 24 && param(g, "mode") == 0 && param(g, "rerank") == 0,
          "failed set_param calls changed parameters");
    CHECK(recall_of(g) == rec[3], "parameters set back: recall %.4f, was %.4f", recall_of(g), rec[3]);
}

/* ---- selectors ---------------------------------------------------------------------------------- */

static void test_selectors(void) {
    printf("selectors\n");
    FaissIndex* g = pq16;
    FaissIDSelectorRange* range = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&range, 1000, 3250));
    filtered(g, (FaissIDSelector*)range, "IDSelectorRange [1000, 3250)", 0.93); /* measured 0.9542 */
    const int64_t nsel = s.nb / 10;
    idx_t* ids = malloc(sizeof(idx_t) * nsel);
    for (int64_t i = 0; i < nsel; i++) ids[i] = 10 * i + 3;
    FaissIDSelectorBatch* batch = NULL;
    FAISS_OK(faiss_IDSelectorBatch_new(&batch, (size_t)nsel, ids));
    /* 1 id in 10: only expanded vertices are re-ranked into the results (BANG's candidates), and
     * at L = 64 a query expands ~110 vertices, ~11 of them allowed: a third of the slots stay
     * empty (measured 0.5910, 1629 of 5000 slots -1). A wider worklist expands enough of them
     * (L = 256: measured 0.9820, none empty). */
    filtered(g, (FaissIDSelector*)batch, "IDSelectorBatch, 1 id in 10, L=64", 0.55);
    FAISS_OK(faiss_graft_set_param(g, "L", 256));
    filtered(g, (FaissIDSelector*)batch, "IDSelectorBatch, 1 id in 10, L=256", 0.96);
    FAISS_OK(faiss_graft_set_param(g, "L", 64));
    FaissIDSelectorRange* none = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&none, 100000, 100010));
    results r = search_with(g, (FaissIDSelector*)none);
    CHECK(not_empty(r.D, r.I, s.nq, K, 0) == 0, "a selector that accepts nothing returned results");
    free_results(&r);
    faiss_IDSelector_free((FaissIDSelector*)none);
    faiss_IDSelector_free((FaissIDSelector*)range);
    faiss_IDSelector_free((FaissIDSelector*)batch);
    free(ids);
}

/* ---- IndexIDMap and I/O ------------------------------------------------------------------------- */

/* idx written to `name` and read back onto the CPU: the same results, bit for bit, the same
 * parameters. Returns the file's length. */
static long roundtrip(FaissIndex* idx, const char* name, const char* what) {
    char p[512];
    FAISS_OK(faiss_graft_write_index_fname(idx, path(p, name)));
    FILE* f = fopen(p, "rb");
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_read_index_device(f, 0, -1, &back));
    long len = ftell(f);
    fclose(f);
    if (!back) return len;
    results a = search_with(idx, NULL), b = search_with(back, NULL);
    CHECK(same_results(a, b) && faiss_Index_ntotal(back) == faiss_Index_ntotal(idx) &&
          faiss_Index_is_trained(back) == faiss_Index_is_trained(idx), "%s: read back differs", what);
    /* M is stored trained or not (graft/graph_index.h). */
    const char* names[] = {"L", "rerank", "max_expand", "bloom_log2", "mode", "gpu_budget", "M"};
    const size_t nnames = sizeof names / sizeof names[0];
    for (size_t i = 0; i < nnames; i++)
        CHECK(param(back, names[i]) == param(idx, names[i]), "%s: %s not restored (%g, was %g)", what, names[i],
              param(back, names[i]), param(idx, names[i]));
    printf("  %-34s %ld bytes, same results after reading\n", what, len);
    free_results(&a);
    free_results(&b);
    faiss_Index_free(back);
    return len;
}

static void test_idmap_io(void) {
    printf("IndexIDMap and I/O\n");
    FaissIndex* g = NULL;
    FAISS_OK(faiss_GraftIndexGraphPQ_new(&g, (int)s.d, METRIC_L2, 16, -1));
    if (!g) return;
    FaissIndexIDMap* m = NULL;
    FAISS_OK(faiss_IndexIDMap_new(&m, g));
    CHECK(!faiss_Index_is_trained((FaissIndex*)m), "IndexIDMap over an untrained index is trained");
    FAISS_OK(faiss_Index_train((FaissIndex*)m, s.nb, s.xb)); /* passes down */
    CHECK(faiss_Index_is_trained((FaissIndex*)m) && faiss_Index_is_trained(g), "IndexIDMap train");
    idx_t* ids = malloc(sizeof(idx_t) * s.nb);
    for (int64_t i = 0; i < s.nb; i++) ids[i] = 7000000 + 3 * i;
    FAISS_OK(faiss_Index_add_with_ids((FaissIndex*)m, s.nb, s.xb, ids));
    results inner = search_with(g, NULL), outer = search_with((FaissIndex*)m, NULL);
    int64_t bad = 0;
    for (int64_t i = 0; i < s.nq * K; i++)
        bad += outer.I[i] != (inner.I[i] < 0 ? -1 : ids[inner.I[i]]) || outer.D[i] != inner.D[i];
    CHECK(bad == 0, "IndexIDMap over GraftIndexGraphPQ: %lld results not the inner ones mapped", (long long)bad);
    free_results(&inner);
    free_results(&outer);

    FAISS_OK(faiss_graft_set_param(g, "L", 48));
    FAISS_OK(faiss_graft_set_param(g, "rerank", 32));
    FAISS_OK(faiss_graft_set_param(g, "mode", 2));
    long len = roundtrip(g, "bang.gft", "GraftIndexGraphPQ");
    const long M = 16, R = (long)param(g, "R");
    /* GRFTGRPH version 4 with the PQ storage: header, codebooks, codes, vectors, graph, checksum */
    CHECK(len == 152 + 256 * s.d * 4 + s.nb * M + s.nb * s.d * 4 + s.nb * R * 4 + 8, "GRFTGRPH PQ record of %ld bytes",
          len);
    roundtrip((FaissIndex*)m, "idmap_bang.gft", "IndexIDMap over GraftIndexGraphPQ");
    FaissIndex* m2 = built("IDMap2,GraftGraph32,PQ16,cpu");
    if (m2) roundtrip(m2, "idmap2_bang.gft", "IDMap2,GraftGraph32,PQ16 (factory)");
    faiss_Index_free(m2);
    FaissIndex* untrained = make("GraftGraph32,PQ16,cpu");
    if (untrained) {
        roundtrip(untrained, "untrained.gft", "untrained GraftIndexGraphPQ");
        /* Read back untrained, it trains with FAISS's k-means like a new one. */
        char p[512];
        FaissIndex* back = NULL;
        FAISS_OK(faiss_graft_read_index_fname(path(p, "untrained.gft"), 0, &back));
        if (back) {
            CHECK(!faiss_Index_is_trained(back), "untrained read back");
            FAISS_OK(faiss_Index_train(back, 1000, s.xb));
            FAISS_OK(faiss_Index_add(back, 1000, s.xb));
            CHECK(faiss_Index_ntotal(back) == 1000, "train + add after reading");
        }
        faiss_Index_free(back);
        FAISS_OK(faiss_Index_train(untrained, s.nb, s.xb));
        roundtrip(untrained, "empty.gft", "trained, empty GraftIndexGraphPQ");
    }
    faiss_Index_free(untrained);

    /* The file-name reader (automatic device): the same index. */
    char p[512];
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_read_index_fname(path(p, "bang.gft"), 0, &back));
    if (back) {
        CHECK(faiss_GraftIndexGraphPQ_cast(back) && faiss_Index_ntotal(back) == s.nb, "read_index_fname");
        double r0 = recall_of(g), r1 = recall_of(back);
        CHECK(fabs(r0 - r1) <= (graft_gpu_available() ? 0.01 : 0.0), "recall %.4f after reading, %.4f before", r1, r0);
    }
    faiss_Index_free(back);

    /* Truncated copies fail cleanly and leave *p_out alone; so does a flipped byte. */
    FILE* f = fopen(p, "rb");
    unsigned char* bytes = malloc((size_t)len);
    CHECK(fread(bytes, 1, (size_t)len, f) == (size_t)len, "re-reading bang.gft");
    fclose(f);
    const long cuts[] = {0, 7, 40, 88, 88 + 1000, len / 2, len - 8, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char q[512];
        f = fopen(path(q, "cut.gft"), "wb");
        fwrite(bytes, 1, (size_t)cuts[i], f);
        fclose(f);
        FaissIndex* out = NULL;
        FAISS_FAILS(faiss_graft_read_index_fname(q, 0, &out), cuts[i] < 8 ? "empty" : "truncated");
        CHECK(out == NULL, "truncated at %ld: *p_out set", cuts[i]);
        if (i == 5) printf("  truncated at byte %ld -> %s\n", cuts[i], faiss_get_last_error());
    }
    bytes[len / 2] ^= 4;
    f = fopen(p, "wb");
    fwrite(bytes, 1, (size_t)len, f);
    fclose(f);
    FaissIndex* corrupt = NULL;
    FAISS_FAILS(faiss_graft_read_index_fname(p, 0, &corrupt), "checksum");
    CHECK(corrupt == NULL, "corrupt file: *p_out set");
    free(bytes);
    free(ids);
    faiss_Index_free((FaissIndex*)m);
    faiss_Index_free(g);
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "bang");
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, QUICK_NB, QUICK_NQ); /* GRAFT_TEST_QUICK: faiss_sift_fixture.h */
    truth = exact_truth(NULL);
    pq16 = built("GraftGraph32,PQ16,cpu");
    if (!pq16) return graft_test_finish("test_faiss_bang");
    test_factory();
    test_lifecycle();
    test_params();
    test_selectors();
    test_idmap_io();
    faiss_Index_free(pq16);
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_bang");
}
