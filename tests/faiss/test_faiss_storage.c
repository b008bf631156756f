/* The graph index's storages through the real faiss_c, like a user: factory strings
 * ("GraftGraph,FP16", "GraftGraph,SQ8", "GraftGraph32,SQ8,cpu,L=64", wrappers), training
 * (faiss_Index_is_trained, add before train fails, train through IDMap), "rerank" and the
 * read-only "storage" and "host_bytes" (against the memory model), keep_fp32=0 (the codes only),
 * recall@10 on sift5k against
 * FAISS IndexFlatL2, I/O round trips, a selector, and bad strings. CPU references (",cpu"); where a GPU is visible the same strings on
 * GPU 0 are searched too. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/IndexPreTransform_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_sift_fixture.h"
#include "graft/graph_index.h"

static FaissIndex* built(const char* desc) {
    FaissIndex* index = make(desc);
    if (!index) return NULL;
    if (!faiss_Index_is_trained(index)) FAISS_OK(faiss_Index_train(index, s.nb, s.xb));
    add_sift(index, desc);
    return index;
}

static void test_factory(int gpu) {
    printf("factory (%s)\n", gpu ? "GPU 0" : "CPU");
    /* Floors 0.01 under the measured values (CPU references; sift5k is integers 0..255, where
     * FP16 is exact and SQ8 nearly so, and the exact re-rank gives FP32's recall). */
    struct { const char* desc; int storage, L; double min_recall; int keep; } cases[] = {
        {"GraftGraph,%s", 0, 64, 0.98, 1},                 /* measured 0.9944 */
        {"GraftGraph,FP16,%s", 1, 64, 0.98, 1},            /* measured 0.9944 */
        {"GraftGraph,SQfp16,%s", 1, 64, 0.98, 1},          /* measured 0.9944 */
        {"GraftGraph,SQ8,%s", 2, 64, 0.98, 1},             /* measured 0.9944 */
        {"GraftGraph32,SQ8,%s,L=64", 2, 64, 0.97, 1},      /* measured 0.9880 */
        {"IDMap2,GraftGraph,SQ8,%s", 2, 64, 0.98, 1},      /* measured 0.9944 */
        {"GraftGraph,FP16,%s,RFlat", 1, 64, 0.98, 1},      /* measured 0.9944 */
        /* The codes only (keep_fp32=0): the codes' distances, no exact re-rank (CPU measured;
         * the GPU's rows await the device). */
        {"GraftGraph,SQ8,keep_fp32=0,%s", 2, 64, 0.977, 0}, /* measured 0.9874 */
        {"GraftGraph,FP16,%s,keep_fp32=0", 1, 64, 0.98, 0}, /* measured 0.9934 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char desc[96];
        snprintf(desc, sizeof desc, cases[c].desc, gpu ? "gpu=0" : "cpu");
        FaissIndex* index = make(desc);
        if (!index) continue;
        CHECK(faiss_Index_is_trained(index) == (cases[c].storage != 2), "%s: is_trained %d", desc,
              faiss_Index_is_trained(index));
        faiss_Index_free(index);
        index = built(desc);
        if (!index) continue;
        const double r = recall_of(index);
        printf("  %-30s recall@10 %.4f, storage %g, gpu_bytes %.0f (%.0f a vector)\n", desc, r,
               param(index, "storage"), param(index, "gpu_bytes"), param(index, "gpu_bytes") / s.nb);
        CHECK(r >= cases[c].min_recall, "%s: recall@10 %.4f < %.2f", desc, r, cases[c].min_recall);
        CHECK(param(index, "storage") == cases[c].storage && param(index, "L") == cases[c].L,
              "%s: storage %g L %g", desc, param(index, "storage"), param(index, "L"));
        CHECK((param(index, "gpu_bytes") > 0) == gpu, "%s: gpu_bytes %g", desc, param(index, "gpu_bytes"));
        /* One add, then the search's build: the host holds what the memory model says. */
        graft_memory_model m = {0, 0};
        CHECK(param(index, "keep_fp32") == cases[c].keep, "%s: keep_fp32 %g", desc, param(index, "keep_fp32"));
        CHECK_OK(graft_gindex_memory_model_ex(GRAFT_MEMORY_HOST, cases[c].storage, GRAFT_BANG_AUTO,
                                              cases[c].keep, s.d, (int)param(index, "R"), 0, &m));
        CHECK(param(index, "host_bytes") == (double)graft_memory_model_bytes(&m, s.nb),
              "%s: host_bytes %.0f, model %zu", desc, param(index, "host_bytes"),
              graft_memory_model_bytes(&m, s.nb));
        faiss_Index_free(index);
    }
}

static void test_params_io(void) {
    printf("rerank, training, I/O\n");
    char buf[512];
    FaissIndex* g = make("GraftGraph,SQ8,cpu");
    if (!g) return;
    FAISS_FAILS(faiss_Index_add(g, 100, s.xb), "trained before adding");
    CHECK(faiss_Index_ntotal(g) == 0, "failed add leaves it empty");
    FAISS_OK(faiss_Index_train(g, s.nb, s.xb));
    CHECK(faiss_Index_is_trained(g), "trained");
    FAISS_OK(faiss_Index_add(g, s.nb, s.xb));
    FAISS_FAILS(faiss_Index_train(g, s.nb, s.xb), "reset it before training again");
    FAISS_OK(faiss_graft_set_param(g, "rerank", 10));
    CHECK(param(g, "rerank") == 10, "rerank reads back");
    const double r10 = recall_of(g);
    FAISS_OK(faiss_graft_set_param(g, "rerank", 0));
    const double r0 = recall_of(g);
    printf("  SQ8 recall@10 rerank=k %.4f, rerank=0 (whole list) %.4f\n", r10, r0);
    CHECK(r0 >= r10 - 0.002, "rerank 0 %.4f below rerank k %.4f", r0, r10);
    FAISS_FAILS(faiss_graft_set_param(g, "rerank", -3), "rerank");
    FAISS_FAILS(faiss_graft_set_param(g, "storage", 1), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "gpu_bytes", 1), "read-only");
    FAISS_FAILS(faiss_graft_set_param(g, "host_bytes", 1), "read-only");
    /* A search with k above rerank (rerank must cover the k results). */
    FAISS_OK(faiss_graft_set_param(g, "rerank", 5));
    float D[K];
    idx_t I[K];
    FAISS_FAILS(faiss_Index_search(g, 1, s.xq, K, D, I), "rerank");
    FAISS_OK(faiss_graft_set_param(g, "rerank", 20));
    single_walk(g);
    results a = search_with(g, NULL);
    FAISS_OK(faiss_graft_write_index_fname(g, path(buf, "sq8.graft")));
    FaissIndex* r = NULL;
    FAISS_OK(faiss_graft_read_index_fname(path(buf, "sq8.graft"), 0, &r));
    if (r) {
        single_walk(r); /* read onto the GPU when there is one */
        results b = search_with(r, NULL);
        CHECK(same_results(a, b), "SQ8 record: same results read back");
        CHECK(param(r, "storage") == 2 && param(r, "rerank") == 20 && faiss_Index_is_trained(r),
              "SQ8 record: storage, rerank, trained");
        free_results(&b);
        faiss_Index_free(r);
    }
    free_results(&a);
    /* A selector: only allowed ids, re-ranked exactly. */
    FaissIDSelectorRange* sel = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&sel, 1000, 3000));
    FAISS_OK(faiss_graft_set_param(g, "rerank", 0));
    filtered(g, (FaissIDSelector*)sel, "SQ8, ids in [1000, 3000)", 0.95);
    faiss_IDSelector_free((FaissIDSelector*)sel);
    /* reset keeps the training. */
    FAISS_OK(faiss_Index_reset(g));
    CHECK(faiss_Index_is_trained(g), "reset keeps the training");
    FAISS_OK(faiss_Index_add(g, 500, s.xb));
    faiss_Index_free(g);

    /* keep_fp32: a storage choice before the first add; with 0, rerank reads 0 and a record
     * round-trips the codes. */
    g = make("GraftGraph,SQ8,cpu");
    if (g) {
        FAISS_OK(faiss_graft_set_param(g, "rerank", 20));
        FAISS_OK(faiss_graft_set_param(g, "keep_fp32", 0));
        CHECK(param(g, "keep_fp32") == 0 && param(g, "rerank") == 0, "keep_fp32 0 set, rerank 0");
        FAISS_OK(faiss_Index_train(g, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(g, s.nb, s.xb));
        FAISS_FAILS(faiss_graft_set_param(g, "keep_fp32", 1), "before the first add");
        CHECK(param(g, "keep_fp32") == 0 && faiss_Index_ntotal(g) == s.nb, "refused: unchanged");
        float v[128];
        FAISS_OK(faiss_Index_reconstruct(g, 3, v));
        double err = 0;
        for (int64_t j = 0; j < s.d; j++) err += fabs(v[j] - s.xb[3 * s.d + j]);
        CHECK(err / s.d < 1.0, "reconstruct decodes (mean |error| %.3f)", err / s.d);
        single_walk(g);
        results ka = search_with(g, NULL);
        FAISS_OK(faiss_graft_write_index_fname(g, path(buf, "sq8_codes.graft")));
        FaissIndex* kr = NULL;
        /* onto the CPU, as g is: without the exact re-rank a GPU's distances differ by an ulp */
        FAISS_OK(faiss_graft_read_index_placed_fname(path(buf, "sq8_codes.graft"), 0, "cpu", &kr));
        if (kr) {
            single_walk(kr);
            results kb = search_with(kr, NULL);
            CHECK(same_results(ka, kb) && param(kr, "keep_fp32") == 0, "keep_fp32 0 record: same results");
            free_results(&kb);
            faiss_Index_free(kr);
        }
        free_results(&ka);
        faiss_Index_free(g);
    }
    g = make("GraftGraph,cpu");
    if (g) {
        FAISS_FAILS(faiss_graft_set_param(g, "keep_fp32", 0), "compressed storage");
        faiss_Index_free(g);
    }

    /* IDMap over an untrained SQ8 graph: the wrapper starts untrained, its train trains graft's. */
    FaissIndex* m = make("IDMap,GraftGraph,SQ8,cpu");
    if (m) {
        CHECK(!faiss_Index_is_trained(m), "IDMap over SQ8 starts untrained");
        FAISS_OK(faiss_Index_train(m, s.nb, s.xb));
        CHECK(faiss_Index_is_trained(m), "IDMap trained");
        faiss_Index_free(m);
    }
}

/* OPQ before PQ in either form: FAISS's OPQMatrix as the pre-transform of the graph + PQ index
 * (training it is FAISS's own code, tens of seconds on sift5k here: searched on the GPU
 * machine's benchmarks, not in this test). */
static void test_opq(void) {
    printf("OPQ\n");
    const char* forms[] = {"GraftGraph,OPQ32,PQ32,cpu", "OPQ32_128,GraftGraph,PQ32,cpu", "OPQ16,GraftGraph,PQ16,cpu"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        FaissIndex* index = make(forms[i]);
        if (!index) continue;
        FaissIndexPreTransform* pt = faiss_IndexPreTransform_cast(index);
        CHECK(pt != NULL && !faiss_Index_is_trained(index), "%s: an untrained pre-transform", forms[i]);
        CHECK(param(index, "M") == (i == 2 ? 16 : 32), "%s: the graph + PQ index inside (M %g)", forms[i],
              param(index, "M"));
        faiss_Index_free(index);
    }
}

static void test_bad_strings(void) {
    printf("bad strings\n");
    const struct { const char* desc; const char* needle; } bad[] = {
        {"GraftFlat,SQ8", "takes no storage"},
        {"GraftGraph,SQ8,FP16", "must directly follow"},
        {"GraftGraph,cpu,SQ8", "must directly follow"},
        {"GraftGraph,PQ16,SQ8", "must directly follow"},
        {"GraftGraph,SQ8,ooc", "belongs to the graph + PQ index"},
        {"GraftGraph,keep_fp32=0", "belongs to the FP16 and SQ8"},
        {"GraftGraph,PQ16,keep_fp32=0", "not to PQ"},
        {"GraftGraph,SQ8,keep_fp32=2", "keep_fp32=0"},
        {"GraftGraph,SQ8,keep_fp32=0,keep_fp32=0", "once"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FaissIndex* index = NULL;
        FAISS_FAILS(faiss_graft_index_factory(&index, (int)s.d, bad[i].desc, METRIC_L2), bad[i].needle);
        CHECK(index == NULL, "%s: no index", bad[i].desc);
        printf("  %-24s -> %s\n", bad[i].desc, faiss_get_last_error());
    }
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "storage");
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, QUICK_NB, QUICK_NQ); /* GRAFT_TEST_QUICK: faiss_sift_fixture.h */
    truth = exact_truth(NULL);
    test_factory(0);
    if (graft_gpu_available()) test_factory(1);
    test_params_io();
    test_opq();
    test_bad_strings();
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_storage");
}
