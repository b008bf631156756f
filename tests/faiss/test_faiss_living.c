/* The living graph index through faiss_c, like a user (docs/adding-and-removing.md): on sift5k,
 * every storage wrapped in IndexIDMap2 / IndexIDMap, built on 90% of the vectors under ids of the
 * user's, the other 10% in ten 1% add_with_ids (inserted: recall within 0.01 of a fresh build),
 * a random 10% removed by id (faiss_Index_remove_ids: the count back, no removed id in any
 * result, every label the right vector, recall against FAISS's exact search over the rest within
 * 0.02 of a fresh build), consolidated (faiss_graft_consolidate), written and read back; the
 * parameters and counters by name; removals on bare, sharded and replicated indexes renumber the
 * remaining ids in order, as a single IndexFlat does. tests/unit/test_living.c tests the plugin
 * in depth. */
#include <faiss/c_api/MetaIndexes_c.h>

#include "faiss_sift_fixture.h"

enum { L_AT = 32 }; /* the beam of the recall comparisons: below saturation */

static idx_t user_id(int64_t row) { return 1000 + 3 * row; }

static float l2(const float* a, const float* b) {
    double t = 0;
    for (int64_t j = 0; j < s.d; j++) t += ((double)a[j] - b[j]) * ((double)a[j] - b[j]);
    return (float)t;
}

/* Rows of sift5k in an index: keep[row] says whether it is there. The exact top-K among them,
 * as user ids (IDMap) or as rows. */
static int32_t* truth_among(const uint8_t* keep) {
    int32_t* gt = malloc(sizeof(int32_t) * s.nq * K);
    float* best = malloc(sizeof(float) * K);
    for (int64_t q = 0; q < s.nq; q++) {
        int n = 0;
        for (int64_t r = 0; r < s.nb; r++) {
            if (!keep[r]) continue;
            const float dq = l2(s.xq + q * s.d, s.xb + r * s.d);
            if (n == K && !(dq < best[K - 1])) continue;
            int j = n < K ? n++ : K - 1;
            for (; j > 0 && dq < best[j - 1]; j--) best[j] = best[j - 1], gt[q * K + j] = gt[q * K + j - 1];
            best[j] = dq;
            gt[q * K + j] = (int32_t)r;
        }
    }
    free(best);
    return gt;
}

/* recall@10 of labels (user ids) against truth (rows). */
static double recall_users(const results r, const int32_t* gt) {
    idx_t* rows = malloc(sizeof(idx_t) * s.nq * K);
    for (int64_t i = 0; i < s.nq * K; i++) rows[i] = r.I[i] >= 1000 ? (r.I[i] - 1000) / 3 : -1;
    const double rec = graft_test_recall(rows, K, gt, K, s.nq, K);
    free(rows);
    return rec;
}

static FaissIndex* make_trained(const char* desc) {
    FaissIndex* index = make(desc);
    if (strstr(desc, "PQ") || strstr(desc, "SQ8")) FAISS_OK(faiss_Index_train(index, s.nb, s.xb));
    return index;
}

/* add_with_ids of rows [r0, r1) under their user ids. */
static void add_rows(FaissIndex* index, int64_t r0, int64_t r1) {
    idx_t* ids = malloc(sizeof(idx_t) * (r1 - r0));
    for (int64_t r = r0; r < r1; r++) ids[r - r0] = user_id(r);
    FAISS_OK(faiss_Index_add_with_ids(index, r1 - r0, s.xb + r0 * s.d, ids));
    free(ids);
}

/* A fresh index of desc over the rows keep[] holds, built. */
static FaissIndex* fresh(const char* desc, const uint8_t* keep) {
    FaissIndex* f = make_trained(desc);
    float* x = malloc(sizeof(float) * s.nb * s.d);
    idx_t* ids = malloc(sizeof(idx_t) * s.nb);
    int64_t n = 0;
    for (int64_t r = 0; r < s.nb; r++)
        if (keep[r]) memcpy(x + n * s.d, s.xb + r * s.d, sizeof(float) * s.d), ids[n++] = user_id(r);
    FAISS_OK(faiss_Index_add_with_ids(f, n, x, ids));
    free(x);
    free(ids);
    FAISS_OK(faiss_graft_set_param(f, "L", L_AT));
    float D[K];
    idx_t I[K];
    FAISS_OK(faiss_Index_search(f, 1, s.xq, K, D, I)); /* builds */
    return f;
}

/* Every label a user id of a row in keep[], its distance that row's (exact for FP32, re-ranked
 * exactly for the compressed storages). */
static int64_t wrong_labels(results r, const uint8_t* keep) {
    int64_t bad = 0;
    for (int64_t q = 0; q < s.nq; q++)
        for (int j = 0; j < K; j++) {
            const idx_t id = r.I[q * K + j];
            const int64_t row = (id - 1000) / 3;
            if (id < 1000 || (id - 1000) % 3 || row >= s.nb || !keep[row]) {
                bad++;
                continue;
            }
            const float want = l2(s.xq + q * s.d, s.xb + row * s.d);
            bad += fabsf(r.D[q * K + j] - want) > 1e-3f * fmaxf(want, 1.0f);
        }
    return bad;
}

static void check_vs_fresh(FaissIndex* index, const char* desc, const uint8_t* keep, double slack,
                           const char* what) {
    int32_t* gt = truth_among(keep);
    FaissIndex* f = fresh(desc, keep);
    results a = search_with(index, NULL), b = search_with(f, NULL);
    const double ra = recall_users(a, gt), rb = recall_users(b, gt);
    printf("  %-32s %-30s recall@10 %.4f at L=%d, fresh build %.4f\n", desc, what, ra, L_AT, rb);
    CHECK(wrong_labels(a, keep) == 0, "%s %s: labels that are not the remaining vectors'", desc, what);
    CHECK(ra >= rb - slack, "%s %s: recall %.4f < fresh %.4f - %.2f", desc, what, ra, rb, slack);
    free_results(&a);
    free_results(&b);
    faiss_Index_free(f);
    free(gt);
}

static void test_idmap(const char* desc) {
    FaissIndex* index = make_trained(desc);
    FAISS_OK(faiss_graft_set_param(index, "L", L_AT));
    const int64_t n0 = s.nb * 9 / 10, step = s.nb / 100;
    uint8_t* keep = calloc((size_t)s.nb, 1);
    add_rows(index, 0, n0);
    float D[K];
    idx_t I[K];
    FAISS_OK(faiss_Index_search(index, 1, s.xq, K, D, I)); /* the graph over 90% */
    for (int64_t r = n0; r < s.nb; r += step) add_rows(index, r, r + step < s.nb ? r + step : s.nb);
    memset(keep, 1, (size_t)s.nb);
    CHECK(param(index, "inserted") == s.nb - n0 && param(index, "last_add") == 1 &&
              param(index, "builds") == 1,
          "%s: the ten adds inserted (inserted %.0f, builds %.0f)", desc, param(index, "inserted"),
          param(index, "builds"));
    check_vs_fresh(index, desc, keep, 0.01, "10% in ten inserts");

    /* A random 10% removed by user id. */
    const int64_t nr = s.nb / 10;
    idx_t* gone = malloc(sizeof(idx_t) * nr);
    uint64_t x = 7;
    for (int64_t i = 0; i < nr;) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t row = (int64_t)((x >> 33) % (uint64_t)s.nb);
        if (keep[row]) keep[row] = 0, gone[i++] = user_id(row);
    }
    FaissIDSelectorBatch* sel = NULL;
    FAISS_OK(faiss_IDSelectorBatch_new(&sel, (size_t)nr, gone));
    size_t removed = 0;
    FAISS_OK(faiss_Index_remove_ids(index, (FaissIDSelector*)sel, &removed));
    faiss_IDSelector_free((FaissIDSelector*)sel);
    CHECK(removed == (size_t)nr && faiss_Index_ntotal(index) == s.nb - nr &&
              param(index, "tombstones") == nr,
          "%s: %zu removed, ntotal %lld, tombstones %.0f", desc, removed,
          (long long)faiss_Index_ntotal(index), param(index, "tombstones"));
    check_vs_fresh(index, desc, keep, 0.02, "10% removed");
    if (strncmp(desc, "IDMap2", 6) == 0) {
        float v[128];
        FAISS_FAILS(faiss_Index_reconstruct(index, gone[0], v), "");
        int64_t row = 0;
        while (!keep[row]) row++;
        FAISS_OK(faiss_Index_reconstruct(index, user_id(row), v));
        CHECK(!memcmp(v, s.xb + row * s.d, sizeof v), "%s: reconstruct by user id after removals", desc);
    }
    FAISS_OK(faiss_graft_consolidate(index));
    CHECK(param(index, "tombstones") == 0 && param(index, "consolidations") == 1 &&
              faiss_Index_ntotal(index) == s.nb - nr,
          "%s: consolidated", desc);
    check_vs_fresh(index, desc, keep, 0.02, "10% removed, consolidated");

    /* Written and read back: the same answers. */
    char p1[512];
    FAISS_OK(faiss_graft_write_index_fname(index, path(p1, "living.idx")));
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_read_index_fname(p1, 0, &back));
    if (back) {
        single_walk(back); /* read onto the GPU when there is one */
        results a = search_with(index, NULL), b = search_with(back, NULL);
        CHECK(same_results(a, b) && faiss_Index_ntotal(back) == s.nb - nr, "%s: record round trip", desc);
        free_results(&a);
        free_results(&b);
        faiss_Index_free(back);
    }
    free(gone);
    free(keep);
    faiss_Index_free(index);
}

/* A bare index (or shards, replicas) renumbers: after removing ids, id j is the j-th remaining
 * vector in add order. */
static void test_renumbering(const char* desc) {
    /* At full size: N = 4500 in adds of 3000 and 1500, the range [1000, 1400) removed. */
    const int64_t N = s.nb, A = 2 * N / 3, R0 = 2 * N / 9, R1 = R0 + 4 * N / 45;
    FaissIndex* index = make_trained(desc);
    FAISS_OK(faiss_Index_add(index, A, s.xb));
    float D[K];
    idx_t I[K];
    FAISS_OK(faiss_Index_search(index, 1, s.xq, K, D, I));
    FAISS_OK(faiss_Index_add(index, N - A, s.xb + A * s.d)); /* in two adds: shards get two runs */
    FaissIDSelectorRange* range = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&range, R0, R1));
    size_t removed = 0;
    FAISS_OK(faiss_Index_remove_ids(index, (FaissIDSelector*)range, &removed));
    faiss_IDSelector_free((FaissIDSelector*)range);
    const idx_t odd[] = {0, 5, A - 1, A + 1, N - 1, N - 2, 77777};
    FaissIDSelectorBatch* batch = NULL;
    FAISS_OK(faiss_IDSelectorBatch_new(&batch, 7, odd)); /* ids of the numbering after the range went */
    size_t removed2 = 0;
    FAISS_OK(faiss_Index_remove_ids(index, (FaissIDSelector*)batch, &removed2));
    faiss_IDSelector_free((FaissIDSelector*)batch);
    /* The rows left, in order: N minus rows R0..R1-1, minus those the second call's ids (of the
     * N - (R1 - R0) left then: N - 2, N - 1 and 77777 are out of range) named. */
    int64_t* rows = malloc(sizeof(int64_t) * N);
    int64_t n = 0;
    for (int64_t r = 0; r < N; r++)
        if (r < R0 || r >= R1) rows[n++] = r;
    int64_t m = 0;
    for (int64_t j = 0; j < n; j++) {
        int named = 0;
        for (int i = 0; i < 7; i++) named |= odd[i] == j;
        if (!named) rows[m++] = rows[j];
    }
    CHECK(removed == (size_t)(R1 - R0) && removed2 == 4 && faiss_Index_ntotal(index) == m,
          "%s: removed %zu + %zu, ntotal %lld (expected %lld + 4, %lld)", desc, removed, removed2,
          (long long)faiss_Index_ntotal(index), (long long)(R1 - R0), (long long)m);
    float v[128];
    int ok = 1;
    for (int64_t j = 0; j < m; j += 97) {
        FAISS_OK(faiss_Index_reconstruct(index, j, v));
        ok &= !memcmp(v, s.xb + rows[j] * s.d, sizeof v);
    }
    CHECK(ok, "%s: id j is the j-th remaining vector", desc);
    results r = search_with(index, NULL);
    int64_t bad = 0;
    for (int64_t q = 0; q < s.nq; q++)
        for (int j = 0; j < K; j++) {
            const idx_t id = r.I[q * K + j];
            if (id < 0 || id >= m) {
                bad++;
                continue;
            }
            const float want = l2(s.xq + q * s.d, s.xb + rows[id] * s.d);
            bad += fabsf(r.D[q * K + j] - want) > 1e-3f * fmaxf(want, 1.0f);
        }
    CHECK(bad == 0, "%s: %lld labels that are not the renumbered vectors", desc, (long long)bad);
    printf("  %-32s removals renumbered: %lld vectors, %lld wrong labels\n", desc, (long long)m, (long long)bad);
    free_results(&r);
    if (!strstr(desc, "shards")) {
        /* FAISS's HNSW has no tombstones: the export consolidates first, ids as they are. */
        FaissIndex* h = NULL;
        FAISS_OK(faiss_graft_export_hnsw(&h, index));
        if (h) {
            FAISS_OK(faiss_Index_reconstruct(h, m - 1, v));
            CHECK(faiss_Index_ntotal(h) == m && !memcmp(v, s.xb + rows[m - 1] * s.d, sizeof v),
                  "%s: exported after removals", desc);
            faiss_Index_free(h);
        }
    }
    /* Adds continue the numbering. */
    FAISS_OK(faiss_Index_add(index, 10, s.xb));
    FAISS_OK(faiss_Index_reconstruct(index, m + 4, v));
    CHECK(!memcmp(v, s.xb + 4 * s.d, sizeof v), "%s: adds after removals continue the ids", desc);
    free(rows);
    faiss_Index_free(index);
}

static void test_params(void) {
    FaissIndex* g = make("GraftGraph,cpu");
    FAISS_OK(faiss_graft_set_param(g, "add_policy", 2));
    FAISS_OK(faiss_graft_set_param(g, "rebuild_share", 0.3));
    FAISS_OK(faiss_graft_set_param(g, "consolidate_share", 0.5));
    FAISS_OK(faiss_graft_set_param(g, "insert_L", 96));
    FAISS_OK(faiss_graft_set_param(g, "background", 0));
    CHECK(param(g, "add_policy") == 2 && param(g, "rebuild_share") == 0.3 &&
              param(g, "consolidate_share") == 0.5 && param(g, "insert_L") == 96 && param(g, "background") == 0,
          "living parameters by name");
    FAISS_FAILS(faiss_graft_set_param(g, "add_policy", 3), "policy");
    FAISS_FAILS(faiss_graft_set_param(g, "rebuild_share", 2), "rebuild_share");
    FAISS_FAILS(faiss_graft_set_param(g, "inserted", 1), "read-only");
    FAISS_OK(faiss_Index_add(g, 1000, s.xb));
    float D[K];
    idx_t I[K];
    FAISS_OK(faiss_Index_search(g, 1, s.xq, K, D, I));
    FAISS_OK(faiss_Index_add(g, 10, s.xb + 1000 * s.d));
    CHECK(param(g, "last_add") == 2 && param(g, "inserted") == 0, "policy 2: the add left the graph");
    FAISS_OK(faiss_graft_set_param(g, "add_policy", 1));
    FAISS_OK(faiss_Index_search(g, 1, s.xq, K, D, I));
    FAISS_OK(faiss_Index_add(g, 10, s.xb + 1010 * s.d));
    CHECK(param(g, "last_add") == 1 && param(g, "inserted") == 10 && param(g, "since_build") == 10 &&
              param(g, "builds") == 2 && param(g, "gpu_inserts") == 0 && param(g, "insert_seconds") > 0,
          "policy 1: inserted");
    FaissIndex* flat = make("GraftFlat,cpu");
    FAISS_FAILS(faiss_graft_consolidate(flat), "no graft graph index");
    FAISS_FAILS(faiss_graft_consolidate(NULL), "NULL");
    faiss_Index_free(flat);
    faiss_Index_free(g);
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "living");
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, QUICK_NB, QUICK_NQ); /* GRAFT_TEST_QUICK: faiss_sift_fixture.h */
    truth = exact_truth(NULL);
    test_params();
    test_idmap("IDMap2,GraftGraph,cpu");
    test_idmap("IDMap,GraftGraph,cpu");
    test_idmap("IDMap2,GraftGraph,SQ8,cpu");
    test_idmap("IDMap2,GraftGraph32,PQ16,cpu");
    test_renumbering("GraftGraph,cpu");
    test_renumbering("GraftGraph,shards=2,cpu");
    test_renumbering("GraftGraph,shards=3,cpu");
    test_renumbering("GraftGraph,shards=2,replicas,cpu");
    test_renumbering("GraftGraph32,PQ16,shards=2,cpu");
    (void)filtered; /* the fixture's, for other tests */
    (void)recall_of;
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_living");
}
