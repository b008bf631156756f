/* The sift5k fixture of the faiss_c index tests (test_faiss_graph.c, test_faiss_bang.c, test_faiss_storage.c): the data,
 * FAISS IndexFlatL2's exact top-K as truth, a scratch directory, and the searches and checks both
 * run through faiss_c like a user. Included by one test program each (its definitions are
 * static). */
#ifndef GRAFT_FAISS_SIFT_FIXTURE_H
#define GRAFT_FAISS_SIFT_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_testutil.h"
#include "graft_faiss_c.h"

#define K 10
/* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): sift5k's first 2000 vectors and 200
 * queries (graft_test_sift_quick). The truth here is FAISS's exact search of whatever s holds, so
 * every recall bar is held against the exact top-10 of the smaller set; the bars are set at full
 * size (the faiss label), and with fewer vectors a beam of L covers more of the graph: easier,
 * never harder. The selectors keep their fractions of the ids (1 in 10, a range). A test whose bar
 * needs more vectors to mean something defines QUICK_NB first, and says why. */
#ifndef QUICK_NB
#define QUICK_NB 2000
#endif
#define QUICK_NQ 200

static graft_test_sift s;
static int32_t* truth; /* nq x K: FAISS IndexFlatL2's top-10 */
static char dir[64];   /* scratch directory for written indexes */

typedef struct results {
    float* D;
    idx_t* I;
} results;

static results search_with(const FaissIndex* index, const FaissIDSelector* sel) {
    results r = {malloc(sizeof(float) * s.nq * K), malloc(sizeof(idx_t) * s.nq * K)};
    if (sel)
        FAISS_OK(faiss_graft_search_with_selector(index, s.nq, s.xq, K, sel, r.D, r.I));
    else
        FAISS_OK(faiss_Index_search(index, s.nq, s.xq, K, r.D, r.I));
    return r;
}
static void free_results(results* r) {
    free(r->D);
    free(r->I);
}
static int same_results(results a, results b) {
    return !memcmp(a.D, b.D, sizeof(float) * s.nq * K) && !memcmp(a.I, b.I, sizeof(idx_t) * s.nq * K);
}
static double recall_vs(results r, const int32_t* gt) {
    return graft_test_recall(r.I, K, gt, K, s.nq, K);
}
static double recall_of(const FaissIndex* index) {
    results r = search_with(index, NULL);
    double rec = recall_vs(r, truth);
    free_results(&r);
    return rec;
}
static FaissIndex* make(const char* desc) {
    FaissIndex* index = NULL;
    FAISS_OK(faiss_graft_index_factory(&index, (int)s.d, desc, METRIC_L2));
    return index;
}
/* Adds sift5k to index (built from desc): ids 0..nb-1 given explicitly to an IDMap, whose add
 * refuses to invent ids. */
static inline void add_sift(FaissIndex* index, const char* desc) {
    if (strncmp(desc, "IDMap", 5) != 0) {
        FAISS_OK(faiss_Index_add(index, s.nb, s.xb));
        return;
    }
    idx_t* ids = malloc(sizeof(idx_t) * s.nb);
    for (int64_t i = 0; i < s.nb; i++) ids[i] = i;
    FAISS_OK(faiss_Index_add_with_ids(index, s.nb, s.xb, ids));
    free(ids);
}
/* One walk a query, the walk the CPU and GPU indexes share: the GPU's auto mode gives a batch
 * under a wave several walks a query (graft/graph.h, `mode`), whose results can be better than
 * the CPU reference's, so a test that compares results across devices (a CPU index read back
 * onto the GPU) fixes the single walk. Flat indexes and the PQ storage have one walk and no mode. */
static inline void single_walk(FaissIndex* index) {
    double storage = -1;
    if (faiss_graft_get_param(index, "storage", &storage) == 0 && storage != 3)
        FAISS_OK(faiss_graft_set_param(index, "search_mode", 1));
}
static double param(FaissIndex* index, const char* name) {
    double v = NAN;
    FAISS_OK(faiss_graft_get_param(index, name, &v));
    return v;
}
/* The exact top-K of FAISS's IndexFlatL2, optionally restricted to sel, as int32 truth. */
static int32_t* exact_truth(const FaissIDSelector* sel) {
    FaissIndexFlatL2* flat = NULL;
    FAISS_OK(faiss_IndexFlatL2_new_with(&flat, s.d));
    FAISS_OK(faiss_Index_add((FaissIndex*)flat, s.nb, s.xb));
    results r = search_with((FaissIndex*)flat, sel);
    int32_t* gt = malloc(sizeof(int32_t) * s.nq * K);
    for (int64_t i = 0; i < s.nq * K; i++) gt[i] = (int32_t)r.I[i];
    free_results(&r);
    faiss_Index_free((FaissIndex*)flat);
    return gt;
}

/* Results of a filtered search: no id outside the selector, recall against the exact search
 * restricted to it at least min_recall. */
static void filtered(FaissIndex* g, const FaissIDSelector* sel, const char* what, double min_recall) {
    int32_t* gt = exact_truth(sel);
    results r = search_with(g, sel);
    int64_t outside = 0, missing = 0;
    for (int64_t i = 0; i < s.nq * K; i++) {
        if (r.I[i] < 0) missing++;
        else if (!faiss_IDSelector_is_member(sel, r.I[i])) outside++;
    }
    double rec = recall_vs(r, gt);
    printf("  %-34s recall@10 %.4f vs exact filtered search, %lld slots empty\n", what, rec, (long long)missing);
    CHECK(outside == 0, "%s: %lld returned ids outside the selector", what, (long long)outside);
    CHECK(rec >= min_recall, "%s: recall@10 %.4f < %.2f", what, rec, min_recall);
    free_results(&r);
    free(gt);
}

/* remove_ids of ids [0, 10) from an index of 500 vectors, FAISS's contract: the count back, the
 * rest renumbered in order (tests/unit/test_living.c covers removals in depth). */
static inline void check_remove_first_ten(FaissIndex* g) {
    FaissIDSelectorRange* sel = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&sel, 0, 10));
    size_t removed = 0;
    FAISS_OK(faiss_Index_remove_ids(g, (FaissIDSelector*)sel, &removed));
    faiss_IDSelector_free((FaissIDSelector*)sel);
    CHECK(removed == 10 && faiss_Index_ntotal(g) == 490, "remove_ids: %zu removed, ntotal %lld", removed,
          (long long)faiss_Index_ntotal(g));
    float rec[128];
    FAISS_OK(faiss_Index_reconstruct(g, 7, rec));
    CHECK(!memcmp(rec, s.xb + 17 * s.d, sizeof rec), "remove_ids: id 7 is the vector that was 17");
}

static const char* path(char* buf, const char* name) {
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}

#endif
