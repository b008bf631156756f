/* Sharded and replicated graft indexes through faiss_c (issue 25), on the CPU references so that
 * CI runs the code path a multi-GPU machine runs with ",gpus=LIST": "X,shards=N,cpu" against a
 * single X on sift5k (recall within 0.01; GraftFlat exactly equal), ids as a single index gives
 * them over several adds, replicas, IDMap over shards, selectors through the shards, GRFTSHRD
 * write/read onto the same, fewer and more shards, set_param reaching every shard, a hand-built
 * FAISS IndexShards over graft indexes, and bad option strings and placements failing with clear
 * messages; replicas built once (the first search leaves every replica with the first one's graph)
 * and equal to one replica searched alone at any split of the batch. tests/gpu/test_gpu_shards.c
 * runs the same on one GPU ("gpus=0,0") and on 2 and 4 GPUs. */
#include <pthread.h>

#include <faiss/c_api/IndexReplicas_c.h>
#include <faiss/c_api/IndexShards_c.h>
#include <faiss/c_api/MetaIndexes_c.h>

#include "faiss_sift_fixture.h"

/* Single index vs the same index sharded: recall within 0.01 (GraftFlat: equal results). */
static void compare(const char* single_desc, const char* sharded_desc, int exact, int train) {
    FaissIndex* one = make(single_desc);
    FaissIndex* sh = make(sharded_desc);
    if (train) {
        FAISS_OK(faiss_Index_train(one, s.nb, s.xb));
        FAISS_OK(faiss_Index_train(sh, s.nb, s.xb));
    }
    FAISS_OK(faiss_Index_add(one, s.nb, s.xb));
    FAISS_OK(faiss_Index_add(sh, s.nb, s.xb));
    CHECK(faiss_Index_ntotal(sh) == s.nb, "%s: ntotal %lld", sharded_desc, (long long)faiss_Index_ntotal(sh));
    results a = search_with(one, NULL), b = search_with(sh, NULL);
    int64_t outside = 0;
    for (int64_t i = 0; i < s.nq * K; i++)
        if (b.I[i] < 0 || b.I[i] >= s.nb) outside++;
    CHECK(outside == 0, "%s: %lld labels outside [0, nb)", sharded_desc, (long long)outside);
    double ra = recall_vs(a, truth), rb = recall_vs(b, truth);
    printf("  %-34s recall@10 %.4f, %-28s %.4f\n", single_desc, ra, sharded_desc, rb);
    /* At the same L every shard keeps L candidates of its own part, so shards search more than
     * one index and may find more (PQ16 on sift5k: 0.975 one, 0.992 two shards at L = 64): at
     * the default L sharding must lose nothing, and at a beam where both have converged the two
     * agree within 0.01. */
    CHECK(rb >= ra - 0.01, "%s: recall %.4f below the single index's %.4f", sharded_desc, rb, ra);
    if (exact) CHECK(same_results(a, b), "%s: results differ from %s's", sharded_desc, single_desc);
    free_results(&a);
    free_results(&b);
    if (!exact && strstr(single_desc, "Graph")) {
        FAISS_OK(faiss_graft_set_param(one, "L", 128));
        FAISS_OK(faiss_graft_set_param(sh, "L", 128));
        ra = recall_of(one);
        rb = recall_of(sh);
        printf("  %-34s at L = 128: %.4f vs %.4f\n", sharded_desc, rb, ra);
        CHECK(fabs(ra - rb) <= 0.01, "%s at L = 128: recall %.4f vs the single index's %.4f",
              sharded_desc, rb, ra);
    }
    faiss_Index_free(one);
    faiss_Index_free(sh);
}

static void test_against_single(void) {
    compare("GraftFlat,cpu", "GraftFlat,shards=2,cpu", 1, 0);
    compare("GraftFlat,cpu", "GraftFlat,shards=3,cpu", 1, 0);
    compare("GraftGraph,cpu", "GraftGraph,shards=2,cpu", 0, 0);
    compare("GraftGraph32,PQ16,cpu", "GraftGraph32,PQ16,shards=2,cpu", 0, 1);
    compare("GraftFlat,cpu", "GraftFlat,shards=2,replicas,cpu", 1, 0);
    compare("GraftGraph,cpu", "GraftGraph,shards=2,replicas,cpu", 1, 0);
}

/* nt queries: sift5k's queries repeated, so that a batch splits over 3 replicas of >= kMinPart (256). */
static float* tiled_queries(int64_t nt) {
    float* q = malloc(sizeof(float) * nt * s.d);
    for (int64_t i = 0; i < nt; i++) memcpy(q + i * s.d, s.xq + (i % s.nq) * s.d, sizeof(float) * s.d);
    return q;
}
static int same_search(const FaissIndex* a, const FaissIndex* b, int64_t n, const float* xq) {
    float* Da = malloc(sizeof(float) * n * K);
    float* Db = malloc(sizeof(float) * n * K);
    idx_t* Ia = malloc(sizeof(idx_t) * n * K);
    idx_t* Ib = malloc(sizeof(idx_t) * n * K);
    FAISS_OK(faiss_Index_search(a, n, xq, K, Da, Ia));
    FAISS_OK(faiss_Index_search(b, n, xq, K, Db, Ib));
    const int same = !memcmp(Da, Db, sizeof(float) * n * K) && !memcmp(Ia, Ib, sizeof(idx_t) * n * K);
    free(Da), free(Db), free(Ia), free(Ib);
    return same;
}

/* Replicas (issue 33): the first search after the adds builds once and leaves every replica
 * with that graph; a replicated search then equals each replica's own search, however the batch
 * is split (by the replicas' weights, or one replica for a small batch). */
static void test_replicas(void) {
    const char* descs[] = {"GraftGraph,shards=3,replicas,cpu", "GraftGraph32,PQ16,shards=2,replicas,cpu"};
    const int64_t nt = 1000;  /* 3 parts of >= 256 */
    float* xt = tiled_queries(nt);
    for (int c = 0; c < 2; c++) {
        FaissIndex* rep = make(descs[c]);
        if (!faiss_Index_is_trained(rep)) FAISS_OK(faiss_Index_train(rep, s.nb, s.xb));
        FAISS_OK(faiss_Index_add(rep, s.nb, s.xb));
        int n = 0;
        FAISS_OK(faiss_graft_shard_count(rep, &n));
        double v = 0;
        for (int i = 0; i < n; i++) {
            FAISS_OK(faiss_graft_get_shard_param(rep, i, "build_pending", &v));
            CHECK(v == 1, "%s replica %d: build_pending %g after the add", descs[c], i, v);
        }
        float D1[K];
        idx_t I1[K];
        FAISS_OK(faiss_Index_search(rep, 1, s.xq, K, D1, I1));  /* one query: one replica searches */
        for (int i = 0; i < n; i++) {
            double pending = -1, pieces = -9;
            FAISS_OK(faiss_graft_get_shard_param(rep, i, "build_pending", &pending));
            FAISS_OK(faiss_graft_get_shard_param(rep, i, "build_pieces", &pieces));
            /* Replica 0 built by RNN-Descent on the CPU (0), the others took its graph (-1). */
            CHECK(pending == 0 && pieces == (i == 0 ? 0 : -1),
                  "%s replica %d after the first search: build_pending %g, build_pieces %g", descs[c], i,
                  pending, pieces);
        }
        FaissIndexReplicas* r = (FaissIndexReplicas*)rep;
        for (int pass = 0; pass < 3; pass++)  /* the weights move the split between passes */
            CHECK(same_search(rep, faiss_IndexReplicas_at(r, pass % n), nt, xt),
                  "%s: %lld queries (pass %d) differ from replica %d's own results", descs[c],
                  (long long)nt, pass, pass % n);
        CHECK(same_search(rep, faiss_IndexReplicas_at(r, 1), 100, xt), "%s: 100 queries (one replica)", descs[c]);
        const double rr = recall_of(rep);
        printf("  %-40s %d replicas, recall@10 %.4f, every replica equal to the first\n", descs[c], n, rr);
        CHECK(rr >= 0.9, "%s: recall@10 %.4f", descs[c], rr);
        /* Adds after the build: the next search builds again, once. */
        FAISS_OK(faiss_Index_add(rep, 10, s.xb));
        FAISS_OK(faiss_Index_search(rep, 1, s.xq, K, D1, I1));
        for (int i = 0; i < n; i++) {
            FAISS_OK(faiss_graft_get_shard_param(rep, i, "build_pending", &v));
            CHECK(v == 0, "%s replica %d: build_pending %g after a second add and search", descs[c], i, v);
        }
        CHECK(same_search(rep, faiss_IndexReplicas_at(r, n - 1), nt, xt), "%s: after the second add", descs[c]);
        faiss_Index_free(rep);
    }
    free(xt);
}

/* Adds in several calls number the vectors as a single index does. */
static void test_several_adds(void) {
    FaissIndex* one = make("GraftFlat,cpu");
    FaissIndex* sh = make("GraftFlat,shards=3,cpu");
    /* 0, 1000, 1001, 3100, 4500 at full size; the same shares of the quick set. */
    const int64_t cuts[] = {0, 2 * s.nb / 9, 2 * s.nb / 9 + 1, 31 * s.nb / 45, s.nb};
    for (int c = 0; c < 4; c++) {
        FAISS_OK(faiss_Index_add(one, cuts[c + 1] - cuts[c], s.xb + cuts[c] * s.d));
        FAISS_OK(faiss_Index_add(sh, cuts[c + 1] - cuts[c], s.xb + cuts[c] * s.d));
    }
    results a = search_with(one, NULL), b = search_with(sh, NULL);
    CHECK(same_results(a, b), "4 adds into 3 shards: results differ from a single index's");
    float row[128], want[128];
    const idx_t mid = 5 * s.nb / 9; /* 2500 at full size: in the third add, the third shard */
    FAISS_OK(faiss_Index_reconstruct(sh, mid, row));
    FAISS_OK(faiss_Index_reconstruct(one, mid, want));
    CHECK(!memcmp(row, want, sizeof(float) * s.d), "reconstruct(%lld) through the shards", (long long)mid);
    /* A row with NaN fails before any shard takes its part. */
    float* bad = malloc(sizeof(float) * 4 * s.d);
    memcpy(bad, s.xb, sizeof(float) * 4 * s.d);
    bad[3 * s.d + 5] = NAN;
    FAISS_FAILS(faiss_Index_add(sh, 4, bad), "vector 3 holds NaN");
    CHECK(faiss_Index_ntotal(sh) == s.nb, "a failed add changed ntotal to %lld", (long long)faiss_Index_ntotal(sh));
    free(bad);
    /* Selectors see the sharded index's ids. */
    FaissIDSelectorRange* range = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&range, 900, 3300));
    results fa = search_with(one, (FaissIDSelector*)range), fb = search_with(sh, (FaissIDSelector*)range);
    CHECK(same_results(fa, fb), "selector through the shards: results differ from a single index's");
    FaissIndex* rep = make("GraftFlat,shards=3,replicas,cpu");
    FAISS_OK(faiss_Index_add(rep, s.nb, s.xb));
    results fr = search_with(rep, (FaissIDSelector*)range);
    CHECK(same_results(fa, fr), "selector through replicas: results differ from a single index's");
    free_results(&fr);
    faiss_Index_free(rep);
    free_results(&fa);
    free_results(&fb);
    faiss_IDSelector_free((FaissIDSelector*)range);
    /* reset empties every shard, ids start again at 0. */
    FAISS_OK(faiss_Index_reset(sh));
    FAISS_OK(faiss_Index_add(sh, s.nb, s.xb));
    results c = search_with(sh, NULL);
    CHECK(same_results(a, c), "after reset and add: results differ");
    free_results(&a);
    free_results(&b);
    free_results(&c);
    faiss_Index_free(one);
    faiss_Index_free(sh);
}

static void test_idmap(void) {
    FaissIndex* m = make("IDMap,GraftFlat,shards=2,cpu");
    idx_t* ids = malloc(sizeof(idx_t) * s.nb);
    for (int64_t i = 0; i < s.nb; i++) ids[i] = 1000000 + 7 * i;
    FAISS_OK(faiss_Index_add_with_ids(m, s.nb, s.xb, ids));
    results r = search_with(m, NULL);
    int64_t wrong = 0;
    for (int64_t i = 0; i < s.nq * K; i++)
        if (r.I[i] != 1000000 + 7 * (idx_t)truth[i]) wrong++;
    /* Exact search: only ties with the true top-10 may differ. */
    CHECK(wrong <= s.nq * K / 1000, "IDMap over shards: %lld labels differ from the mapped truth", (long long)wrong);
    free_results(&r);
    free(ids);
    faiss_Index_free(m);
}

static void test_params(void) {
    FaissIndex* sh = make("GraftGraph,shards=3,cpu,L=40");
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(sh, &n));
    CHECK(n == 3, "shard count %d", n);
    FAISS_OK(faiss_graft_set_param(sh, "L", 72));
    for (int i = 0; i < n; i++) {
        double v = 0;
        FAISS_OK(faiss_graft_get_shard_param(sh, i, "L", &v));
        CHECK(v == 72, "shard %d: L %g after set_param", i, v);
        FAISS_OK(faiss_graft_get_shard_param(sh, i, "device", &v));
        CHECK(v == -1, "shard %d: device %g", i, v);
    }
    CHECK(param(sh, "L") == 72, "get_param L");
    /* The shards build at once (their builds, pending since the add, run in the first search's
     * threads): the sharded index's build_seconds is the longest. */
    FAISS_OK(faiss_Index_add(sh, 1500, s.xb));
    {
        float D1[K];
        idx_t I1[K];
        FAISS_OK(faiss_Index_search(sh, 1, s.xq, K, D1, I1));
    }
    double longest = 0;
    for (int i = 0; i < n; i++) {
        double b = 0, pending = -1;
        FAISS_OK(faiss_graft_get_shard_param(sh, i, "build_seconds", &b));
        FAISS_OK(faiss_graft_get_shard_param(sh, i, "build_pending", &pending));
        CHECK(pending == 0, "shard %d: build_pending %g after the first search", i, pending);
        longest = b > longest ? b : longest;
    }
    CHECK(longest > 0 && param(sh, "build_seconds") == longest, "build_seconds %g, longest shard's %g",
          param(sh, "build_seconds"), longest);
    double v = 0;
    FAISS_FAILS(faiss_graft_get_shard_param(sh, 3, "L", &v), "shard 3 of 3");
    FAISS_FAILS(faiss_graft_set_param(sh, "L", 0), "L");
    CHECK(param(sh, "L") == 72, "a refused value changed L");
    FaissIndex* one = make("GraftFlat,cpu");
    FAISS_FAILS(faiss_graft_get_shard_param(one, 0, "device", &v), "not a sharded");
    FAISS_OK(faiss_graft_shard_count(one, &n));
    CHECK(n == 1, "a single index counts %d shards", n);
    faiss_Index_free(one);
    faiss_Index_free(sh);
}

/* FAISS's own IndexShards (threaded, successive ids) over graft indexes, built by hand. */
static void test_hand_built(void) {
    FaissIndexShards* sh = NULL;
    FAISS_OK(faiss_IndexShards_new_with_options(&sh, s.d, 1, 1));
    FaissIndex* parts[2] = {make("GraftFlat,cpu"), make("GraftFlat,cpu")};
    for (int i = 0; i < 2; i++) FAISS_OK(faiss_IndexShards_add_shard(sh, parts[i]));
    FAISS_OK(faiss_Index_add((FaissIndex*)sh, s.nb, s.xb));
    FaissIndex* one = make("GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(one, s.nb, s.xb));
    results a = search_with(one, NULL), b = search_with((FaissIndex*)sh, NULL);
    double ra = recall_vs(a, truth), rb = recall_vs(b, truth);
    printf("  FAISS IndexShards over 2 GraftFlat     recall@10 %.4f (single %.4f)\n", rb, ra);
    CHECK(fabs(ra - rb) <= 0.0, "hand-built IndexShards: recall %.4f vs %.4f", rb, ra);
    FAISS_OK(faiss_graft_set_param((FaissIndex*)sh, "device_budget_mb", 64));
    /* Written as GRFTSHRD, read back as graft's own shards with the same results. */
    char p[512];
    FAISS_OK(faiss_graft_write_index_fname((FaissIndex*)sh, path(p, "faiss_shards.idx")));
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_read_index_placed_fname(p, 0, "cpu", &back));
    results c = search_with(back, NULL);
    CHECK(same_results(a, c), "hand-built IndexShards read back: results differ");
    free_results(&a);
    free_results(&b);
    free_results(&c);
    faiss_Index_free(back);
    faiss_Index_free(one);
    faiss_Index_free((FaissIndex*)sh);
    for (int i = 0; i < 2; i++) faiss_Index_free(parts[i]);
}

static void round_trip(const char* desc, int train, int exact) {
    FaissIndex* sh = make(desc);
    if (train) FAISS_OK(faiss_Index_train(sh, s.nb, s.xb));
    /* Two adds: the id runs go through the record too. */
    const int64_t first = 4 * s.nb / 9; /* 2000 at full size */
    FAISS_OK(faiss_Index_add(sh, first, s.xb));
    FAISS_OK(faiss_Index_add(sh, s.nb - first, s.xb + first * s.d));
    results a = search_with(sh, NULL);
    double ra = recall_vs(a, truth);
    char p[512];
    FAISS_OK(faiss_graft_write_index_fname(sh, path(p, "shards.idx")));
    const char* placements[] = {NULL, "cpu", "cpu,shards=1", "shards=3,cpu", "gpus=0,shards=2"};
    const int counts[] = {2, 2, 1, 3, 2};
    for (int i = 0; i < 5; i++) {
        if (i == 4 && !graft_gpu_available()) continue;
        FaissIndex* back = NULL;
        FAISS_OK(faiss_graft_read_index_placed_fname(p, 0, placements[i], &back));
        if (!back) continue;
        single_walk(back); /* "as written" places it on the GPU when there is one */
        int n = 0;
        FAISS_OK(faiss_graft_shard_count(back, &n));
        CHECK(n == counts[i], "%s read with \"%s\": %d shards, want %d", desc,
              placements[i] ? placements[i] : "(as written)", n, counts[i]);
        CHECK(faiss_Index_ntotal(back) == s.nb, "read back: ntotal %lld", (long long)faiss_Index_ntotal(back));
        results b = search_with(back, NULL);
        double rb = recall_vs(b, truth);
        printf("  %-30s read \"%s\": %d shards, recall@10 %.4f (written %.4f)\n", desc,
               placements[i] ? placements[i] : "", n, rb, ra);
        /* Same shard count on the CPU: the same graphs, the same results. */
        if (exact || (i <= 1 && counts[i] == 2))
            CHECK(same_results(a, b), "%s read with \"%s\": results differ", desc, placements[i] ? placements[i] : "");
        if (counts[i] == 2 || exact) {
            CHECK(fabs(ra - rb) <= 0.01, "%s read with \"%s\": recall %.4f vs %.4f", desc,
                  placements[i] ? placements[i] : "", rb, ra);
        } else {  /* another shard count searches another amount: compare where both converged */
            FAISS_OK(faiss_graft_set_param(sh, "L", 128));
            FAISS_OK(faiss_graft_set_param(back, "L", 128));
            double wa = recall_of(sh), wb = recall_of(back);
            printf("    at L = 128: %.4f (written %.4f)\n", wb, wa);
            CHECK(fabs(wa - wb) <= 0.01, "%s read with \"%s\" at L = 128: recall %.4f vs %.4f", desc,
                  placements[i], wb, wa);
        }
        free_results(&b);
        faiss_Index_free(back);
    }
    free_results(&a);
    faiss_Index_free(sh);
}

static void test_io(void) {
    round_trip("GraftFlat,shards=2,cpu", 0, 1);
    round_trip("GraftGraph,shards=2,cpu", 0, 0);
    round_trip("GraftGraph32,PQ16,shards=2,cpu", 1, 0);
    /* A single index's record spread over 3 shards. */
    FaissIndex* one = make("GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(one, s.nb, s.xb));
    char p[512];
    FAISS_OK(faiss_graft_write_index_fname(one, path(p, "one.idx")));
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_read_index_placed_fname(p, 0, "shards=3,cpu", &back));
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(back, &n));
    CHECK(n == 3, "single index read onto 3 shards: %d", n);
    results a = search_with(one, NULL), b = search_with(back, NULL);
    CHECK(same_results(a, b), "single index read onto 3 shards: results differ");
    free_results(&a);
    free_results(&b);
    faiss_Index_free(back);
    back = NULL;
    FAISS_FAILS(faiss_graft_read_index_placed_fname(p, 0, "shards=x", &back), "placement");
    FAISS_FAILS(faiss_graft_read_index_placed_fname(p, 0, "cpu,gpus=0", &back), "placement");
    FAISS_FAILS(faiss_graft_read_index_placed_fname(p, 0, "gpus=2-1", &back), "placement");
    CHECK(back == NULL, "a failed read set *p_out");
    faiss_Index_free(one);
}

/* Searches of one sharded index from several threads at once (FAISS's worker threads take each
 * caller's shard searches in turn): every thread gets the single-thread results. */
typedef struct {
    FaissIndex* index;
    results want;
    int same;
} searcher;
static void* search_thread(void* arg) {
    searcher* t = arg;
    for (int rep = 0; rep < 3; rep++) {
        results r = search_with(t->index, NULL);
        t->same += same_results(r, t->want);
        free_results(&r);
    }
    return NULL;
}
static void test_concurrent_searches(void) {
    FaissIndex* sh = make("GraftGraph,shards=2,cpu");
    FAISS_OK(faiss_Index_add(sh, s.nb, s.xb));
    results want = search_with(sh, NULL);
    searcher t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (searcher){sh, want, 0};
        pthread_create(&th[i], NULL, search_thread, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(t[i].same == 3, "thread %d: %d of 3 searches gave the single-thread results", i, t[i].same);
    }
    free_results(&want);
    faiss_Index_free(sh);
}

/* Shards inside FAISS's other wrappers, as a single graft index composes. */
static void test_wrappers(void) {
    const char* descs[] = {"PCA64,GraftFlat,shards=2,cpu", "GraftGraph,shards=2,cpu,RFlat",
                           "IDMap2,GraftGraph,shards=3,cpu"};
    const double floors[] = {0, 0.99, 0.99}; /* measured 0.9976, 0.9994 */
    for (int i = 0; i < 3; i++) {
        FaissIndex* w = make(descs[i]);
        if (!w) continue;
        if (!faiss_Index_is_trained(w)) FAISS_OK(faiss_Index_train(w, s.nb, s.xb));
        if (i == 2) {
            idx_t* ids = malloc(sizeof(idx_t) * s.nb);
            for (int64_t j = 0; j < s.nb; j++) ids[j] = j;
            FAISS_OK(faiss_Index_add_with_ids(w, s.nb, s.xb, ids));
            free(ids);
        } else {
            FAISS_OK(faiss_Index_add(w, s.nb, s.xb));
        }
        int n = 0;
        FAISS_OK(faiss_graft_shard_count(w, &n));
        double r = recall_of(w);
        printf("  %-34s %d shards, recall@10 %.4f\n", descs[i], n, r);
        /* RFlat's refine index is FAISS's, outside the shards: shard_count sees only the wrappers
         * graft looks through (IDMap, PreTransform). */
        CHECK(n == (i == 1 ? 1 : i == 0 ? 2 : 3), "%s: %d shards", descs[i], n);
        if (i == 0) {  /* PCA loses what it loses, the same with and without shards */
            FaissIndex* one = make("PCA64,GraftFlat,cpu");
            FAISS_OK(faiss_Index_train(one, s.nb, s.xb));
            FAISS_OK(faiss_Index_add(one, s.nb, s.xb));
            const double r1 = recall_of(one);
            CHECK(fabs(r - r1) <= 0.001, "%s: recall@10 %.4f, one PCA64,GraftFlat %.4f", descs[i], r, r1);
            faiss_Index_free(one);
        } else {
            CHECK(r >= floors[i], "%s: recall@10 %.4f < %.2f", descs[i], r, floors[i]);
        }
        faiss_Index_free(w);
    }
}

static void test_bad_strings(void) {
    const char* bad[][2] = {
            {"GraftGraph,gpus=", "bad GPU list"},
            {"GraftGraph,gpus=3-1", "bad GPU list"},
            {"GraftGraph,gpus=a", "bad GPU list"},
            {"GraftGraph,shards=0", "shards=N"},
            {"GraftGraph,shards=2,shards=3", "shards=N"},
            {"GraftGraph,replicas", "replicas of what"},
            {"GraftGraph,gpus=0,cpu", "gpus=LIST"},
            {"GraftGraph,gpus=0,shards=2", "gpus=LIST"},
            {"GraftFlat,shards=2,cpu,replicas,replicas", "replicas twice"},
            {"GraftFlat,gpus=0,gpus=1", "gpus= twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FaissIndex* index = NULL;
        FAISS_FAILS(faiss_graft_index_factory(&index, (int)s.d, bad[i][0], METRIC_L2), bad[i][1]);
        CHECK(index == NULL, "%s: an index came back", bad[i][0]);
    }
    if (!graft_gpu_available()) {
        FaissIndex* index = NULL;
        FAISS_FAILS(faiss_graft_index_factory(&index, (int)s.d, "GraftGraph,gpus=all", METRIC_L2),
                    "no CUDA device");
        FAISS_FAILS(faiss_graft_index_factory(&index, (int)s.d, "GraftFlat,gpus=0,0", METRIC_L2), "GRAFT_ENODEVICE");
    }
    /* xids into shards: refused, naming IDMap. */
    FaissIndex* sh = make("GraftFlat,shards=2,cpu");
    idx_t ids[2] = {5, 6};
    FAISS_FAILS(faiss_Index_add_with_ids(sh, 2, s.xb, ids), "IndexIDMap");
    CHECK(faiss_Index_ntotal(sh) == 0, "refused add_with_ids added");
    faiss_Index_free(sh);
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "shards");
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, QUICK_NB, QUICK_NQ); /* GRAFT_TEST_QUICK: faiss_sift_fixture.h */
    (void)filtered;  /* the fixture's helpers this test does not use */
    truth = exact_truth(NULL);
    test_against_single();
    test_replicas();
    test_several_adds();
    test_idmap();
    test_params();
    test_hand_built();
    test_concurrent_searches();
    test_wrappers();
    test_io();
    test_bad_strings();
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_faiss_shards");
}
