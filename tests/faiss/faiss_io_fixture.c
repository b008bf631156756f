/* graft's index files across FAISS versions: graft's records (GRFTFLAT, GRFTGRPH of every storage,
 * GRFTIDMP, GRFTSHRD) hold no FAISS object, so a file written by graft built against one FAISS
 * reads into graft built against another, and searches the same.
 *   faiss_io_fixture write DIR   writes the set below into DIR: each index NAME.grft and its
 *                                search results NAME.expect (100 x 10 int64 labels, then float32
 *                                distances, little-endian)
 *   faiss_io_fixture check DIR   reads each NAME.grft of the set and checks that its search gives
 *                                NAME.expect (labels equal but near-tie swaps, distances within
 *                                1e-5 relative: FAISS's brute force may round differently)
 * tests/fixtures/faiss-1.7.3/ holds the set written by graft 0.2.0 built against FAISS 1.7.3
 * (CPU); test_faiss_io_fixtures checks it with whatever FAISS this tree uses, and .ci/run writes
 * with its FAISS 1.15 tree and checks with the FAISS 1.7.3 one. The set: the first 300 sift5k
 * vectors under GraftFlat, GraftGraph (FP32, SQ8, PQ16: codebooks from FAISS's k-means, stored in
 * the record), IDMap2 over GraftGraph, and two shards; all on the CPU references, queried with the
 * first 100 sift5k queries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>

#include "graft_faiss_c.h"
#include "testutil.h"

enum { N = 300, NQ = 100, K = 10 };

static const struct {
    const char* name;
    const char* factory;
    int train, ids;
} kSet[] = {
        {"flat", "GraftFlat,cpu", 0, 0},
        {"graph", "GraftGraph32,cpu,L=32", 0, 0},
        {"graph_sq8", "GraftGraph32,SQ8,cpu,L=32", 1, 0},
        {"graph_pq16", "GraftGraph32,PQ16,cpu,L=32", 1, 0},
        {"idmap2_graph", "IDMap2,GraftGraph32,cpu,L=32", 0, 1},
        {"shards_graph", "GraftGraph32,shards=2,cpu,L=32", 0, 0},
};

static const char* path(const char* dir, const char* name, const char* ext) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s.%s", dir, name, ext);
    return buf;
}

#define FAISS_TRY(call)                                                                         \
    do {                                                                                        \
        if ((call) != 0) {                                                                      \
            fprintf(stderr, "%s: %s: %s\n", set_name, #call, faiss_get_last_error());           \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

static int write_one(const char* dir, int i, const graft_test_sift* s) {
    const char* set_name = kSet[i].name;
    FaissIndex* index = NULL;
    FAISS_TRY(faiss_graft_index_factory(&index, (int)s->d, kSet[i].factory, METRIC_L2));
    /* PQ16 needs 256 training vectors at least; N covers that. */
    if (kSet[i].train) FAISS_TRY(faiss_Index_train(index, N, s->xb));
    if (kSet[i].ids) {
        idx_t ids[N];
        for (int j = 0; j < N; j++) ids[j] = 1000 + 7 * (idx_t)j;
        FAISS_TRY(faiss_Index_add_with_ids(index, N, s->xb, ids));
    } else {
        FAISS_TRY(faiss_Index_add(index, N, s->xb));
    }
    float D[NQ * K];
    idx_t I[NQ * K];
    FAISS_TRY(faiss_Index_search(index, NQ, s->xq, K, D, I));
    FAISS_TRY(faiss_graft_write_index_fname(index, path(dir, set_name, "grft")));
    FILE* f = fopen(path(dir, set_name, "expect"), "wb");
    if (!f || fwrite(I, sizeof I, 1, f) != 1 || fwrite(D, sizeof D, 1, f) != 1 || fclose(f)) {
        fprintf(stderr, "%s: cannot write %s\n", set_name, path(dir, set_name, "expect"));
        return 1;
    }
    faiss_Index_free(index);
    printf("wrote %s (%s)\n", set_name, kSet[i].factory);
    return 0;
}

static int check_one(const char* dir, int i, const graft_test_sift* s) {
    const char* set_name = kSet[i].name;
    idx_t want_I[NQ * K];
    float want_D[NQ * K];
    FILE* f = fopen(path(dir, set_name, "expect"), "rb");
    if (!f || fread(want_I, sizeof want_I, 1, f) != 1 || fread(want_D, sizeof want_D, 1, f) != 1) {
        fprintf(stderr, "%s: cannot read %s\n", set_name, path(dir, set_name, "expect"));
        return 1;
    }
    fclose(f);
    FaissIndex* index = NULL;
    FAISS_TRY(faiss_graft_read_index_fname(path(dir, set_name, "grft"), 0, &index));
    /* Written on the CPU, read onto the GPU where there is one: the single walk, the CPU's (the
     * GPU's auto mode gives a small batch more walks, and better results; graft/graph.h). */
    double storage = -1;
    if (faiss_graft_get_param(index, "storage", &storage) == 0 && storage != 3)
        FAISS_TRY(faiss_graft_set_param(index, "search_mode", 1));
    idx_t I[NQ * K];
    float D[NQ * K];
    FAISS_TRY(faiss_Index_search(index, NQ, s->xq, K, D, I));
    int64_t moved = 0, bad = 0;
    for (int q = 0; q < NQ; q++)
        for (int j = 0; j < K; j++) {
            const int o = q * K + j;
            if (fabsf(D[o] - want_D[o]) > 1e-5f * (1.0f + fabsf(want_D[o]))) bad++;
            if (I[o] == want_I[o]) continue;
            moved++;
            /* A tie: the label is elsewhere in the row at the same distance, or the row's last. */
            int tie = j == K - 1;
            for (int m = 0; m < K; m++)
                if (want_I[q * K + m] == I[o] && fabsf(want_D[q * K + m] - D[o]) <= 1e-5f * (1.0f + D[o])) tie = 1;
            bad += !tie;
        }
    CHECK(bad == 0, "%s: %lld results differ from those written (%lld labels moved)", set_name,
          (long long)bad, (long long)moved);
    printf("read %s: %d x %d results as written (%lld tie swaps)\n", set_name, NQ, K, (long long)moved);
    faiss_Index_free(index);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "check") != 0)) {
        fprintf(stderr, "usage: %s write|check DIR\n", argv[0]);
        return 2;
    }
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    printf("graft %s\n", graft_version_string());
    const int writing = strcmp(argv[1], "write") == 0;
    for (size_t i = 0; i < sizeof kSet / sizeof kSet[0]; i++) {
        int rc = writing ? write_one(argv[2], (int)i, &s) : check_one(argv[2], (int)i, &s);
        CHECK(rc == 0, "%s %s failed", argv[1], kSet[i].name);
    }
    graft_test_free_sift(&s);
    return graft_test_finish(writing ? "faiss_io_fixture write" : "faiss_io_fixture check");
}
