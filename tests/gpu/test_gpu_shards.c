/* Sharded and replicated graft indexes on GPUs (issues 25 and 33), on sift5k, for each device
 * list: "gpus=0,0" (two shards on GPU 0: the one-GPU form of every case), "gpus=0-1" with two or
 * more GPUs and "gpus=0-3" with four or more. SKIPPED without a GPU.
 *  - Shards of GraftFlat, GraftGraph and GraftGraph32,PQ16: each shard on its listed device; the
 *    first search after the adds returns with every shard's graph built by GRNND in one piece
 *    (build_pending 0, build_pieces 1); each shard holds device memory (its gpu_bytes printed,
 *    their sum the index's); the sharded search equals the shards searched one by one and merged
 *    (ids offset by each shard's first id, best distance first, ties to the smaller id);
 *    GraftFlat's equals one GraftFlat on GPU 0 (ids, except among equal distances; distances
 *    within 1e-5); graph recall at least the single GPU index's less 0.01 and within 0.01 of the
 *    CPU shards' (and of the single index at L = 128, where both converged); the GRFTSHRD record
 *    read back onto the same GPUs gives the same results, onto GPU 0, the CPU and 3 shards the
 *    same recall within 0.01.
 *  - Replicas of GraftGraph and GraftGraph32,PQ16: the first search builds once (replica 0 by
 *    GRNND) and every other replica holds a copy of that graph on its own device; a search of
 *    5,000 queries (split over the replicas by their weights) equals each replica's own
 *    search, pass after pass, and a batch of 100 (one replica) too.
 *  - FAISS's own threaded IndexShards built by hand over graft indexes on the list's first two
 *    devices, and "GraftGraph,PQ16,gpus=all": one shard per visible GPU. */
#include <float.h>
#include <time.h>

#include <faiss/c_api/IndexReplicas_c.h>
#include <faiss/c_api/IndexShards_c.h>
#include <faiss/c_api/Index_c.h>

#include "faiss_sift_fixture.h"

/* A device list: the factory's option, and the device of each shard. */
typedef struct {
    const char* gpus;
    int n;
    int dev[4];
} placement;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double shard_param(FaissIndex* index, int shard, const char* name) {
    double v = NAN;
    FAISS_OK(faiss_graft_get_shard_param(index, shard, name, &v));
    return v;
}

/* train + add + a one-query search: the index as the first search after the adds leaves it. */
static FaissIndex* built(const char* desc, int train, double* seconds) {
    const double t0 = now();
    FaissIndex* index = make(desc);
    if (!index) return NULL;
    if (train) FAISS_OK(faiss_Index_train(index, s.nb, s.xb));
    FAISS_OK(faiss_Index_add(index, s.nb, s.xb));
    float D1[K];
    idx_t I1[K];
    FAISS_OK(faiss_Index_search(index, 1, s.xq, K, D1, I1));
    if (seconds) *seconds = now() - t0;
    return index;
}

/* Every shard (or replica) on its listed device with nothing left to build; graph shards built
 * by GRNND in one piece (replicas: replica 0, the others a copy of its graph). Prints and checks
 * each one's device bytes. */
static void per_shard(FaissIndex* sh, const char* desc, const placement* P, int graph, int replicas) {
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(sh, &n));
    CHECK(n == P->n, "%s: %d shards, want %d", desc, n, P->n);
    double sum = 0;
    for (int i = 0; i < n && i < P->n; i++) {
        const double dev = shard_param(sh, i, "device");
        double bytes = 0, secs = 0, pieces = 0;
        CHECK(dev == P->dev[i], "%s shard %d on device %g, want %d", desc, i, dev, P->dev[i]);
        if (graph) {
            pieces = shard_param(sh, i, "build_pieces");
            secs = shard_param(sh, i, "build_seconds");
            bytes = shard_param(sh, i, "gpu_bytes");
            const double pending = shard_param(sh, i, "build_pending");
            const double want = replicas && i > 0 ? -1 : 1;
            CHECK(pending == 0, "%s shard %d: build_pending %g after the first search", desc, i, pending);
            CHECK(pieces == want, "%s shard %d: build_pieces %g (want %g: %s)", desc, i, pieces, want,
                  want == 1 ? "GRNND on the GPU" : "replica 0's graph copied");
            CHECK(bytes > 0, "%s shard %d: no device memory after the first search", desc, i);
        }
        sum += bytes;
        printf("    %s %d: device %g, build %.3f s (pieces %g), gpu_bytes %.0f\n", replicas ? "replica" : "shard",
               i, dev, secs, pieces, bytes);
        if (graph && strstr(desc, "PQ") && strstr(desc, "gpus=0,0")) {
            /* Two shards on one GPU: a quarter of it each (half the device split in two). */
            const double budget = shard_param(sh, i, "gpu_budget");
            CHECK(budget > 0 && budget <= graft_gpu_memory(0) / 4.0, "%s shard %d: gpu_budget %.0f of %zu",
                  desc, i, budget, graft_gpu_memory(0));
        }
    }
    if (graph)  /* the sharded index's gpu_bytes: all shards' */
        CHECK(sum > 0 && param(sh, "gpu_bytes") == sum, "%s: gpu_bytes %g, shards' sum %g", desc,
              param(sh, "gpu_bytes"), sum);
}

/* The shards of sh (one add of sift5k: shard i holds ids [i nb / n, (i + 1) nb / n)) searched one
 * by one and merged as a single index orders its results. */
static results merged_shards(FaissIndex* sh) {
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(sh, &n));
    results* part = malloc(sizeof(results) * n);
    for (int i = 0; i < n; i++) part[i] = search_with(faiss_IndexShards_at((FaissIndexShards*)sh, i), NULL);
    results m = {malloc(sizeof(float) * s.nq * K), malloc(sizeof(idx_t) * s.nq * K)};
    for (int64_t q = 0; q < s.nq; q++) {
        int pos[4] = {0, 0, 0, 0};
        for (int j = 0; j < K; j++) {
            int best = -1;
            float bd = 0;
            idx_t bi = -1;
            for (int i = 0; i < n; i++) {
                if (pos[i] >= K) continue;
                const idx_t local = part[i].I[q * K + pos[i]];
                if (local < 0) continue;
                const idx_t id = local + (idx_t)i * s.nb / n;
                const float dist = part[i].D[q * K + pos[i]];
                if (best < 0 || dist < bd || (dist == bd && id < bi)) best = i, bd = dist, bi = id;
            }
            m.D[q * K + j] = best < 0 ? FLT_MAX : bd;
            m.I[q * K + j] = bi;
            if (best >= 0) pos[best]++;
        }
    }
    for (int i = 0; i < n; i++) free_results(&part[i]);
    free(part);
    return m;
}

/* Exact results against exact results: the same ids except among equal distances, distances equal
 * within 1e-5 (relative) rank by rank. */
static void same_exact(results a, results b, const char* what) {
    int64_t bad = 0, moved = 0;
    for (int64_t i = 0; i < s.nq * K; i++) {
        const double tol = 1e-5 * fmax(1.0, fabs(a.D[i]));
        if (fabs(a.D[i] - b.D[i]) > tol) bad++;
        else if (a.I[i] != b.I[i]) moved++;
    }
    printf("    %s: %lld of %lld ranks with another distance, %lld ids swapped among equal distances\n", what,
           (long long)bad, (long long)(s.nq * K), (long long)moved);
    CHECK(bad == 0, "%s: %lld ranks differ in distance", what, (long long)bad);
    CHECK(moved <= s.nq * K / 1000, "%s: %lld ids differ", what, (long long)moved);
}

static void shards_case(const char* kind, int train, const placement* P) {
    char sh_desc[96], cpu_desc[96], one_desc[96];
    snprintf(sh_desc, sizeof sh_desc, "%s,%s", kind, P->gpus);
    snprintf(cpu_desc, sizeof cpu_desc, "%s,shards=%d,cpu", kind, P->n);
    snprintf(one_desc, sizeof one_desc, "%s,gpu=0", kind);
    const int graph = strstr(kind, "Graph") != NULL;
    double t_sh = 0, t_one = 0;
    FaissIndex* g = built(sh_desc, train, &t_sh);
    FaissIndex* one = built(one_desc, train, &t_one);
    printf("  %-28s train + add + first search %.3f s (one GPU %.3f s)\n", sh_desc, t_sh, t_one);
    per_shard(g, sh_desc, P, graph, 0);
    results a = search_with(g, NULL), m = merged_shards(g);
    CHECK(same_results(a, m), "%s: the sharded search differs from its shards searched one by one and merged",
          sh_desc);
    free_results(&m);
    if (!graph) {
        results b = search_with(one, NULL);
        same_exact(a, b, "sharded GraftFlat vs one GraftFlat");
        free_results(&b);
    } else {
        FaissIndex* c = built(cpu_desc, train, NULL);
        double rg = recall_vs(a, truth), rc = recall_of(c), r1 = recall_of(one);
        printf("  %-28s recall@10 %.4f; CPU shards %.4f; single GPU index %.4f\n", sh_desc, rg, rc, r1);
        CHECK(fabs(rg - rc) <= 0.01, "%s: recall %.4f vs the CPU shards' %.4f", sh_desc, rg, rc);
        CHECK(rg >= r1 - 0.01, "%s: recall %.4f below the single GPU index's %.4f", sh_desc, rg, r1);
        FAISS_OK(faiss_graft_set_param(g, "L", 128));
        FAISS_OK(faiss_graft_set_param(one, "L", 128));
        double hg = recall_of(g), h1 = recall_of(one);
        printf("  %-28s at L = 128: %.4f; single GPU index %.4f\n", sh_desc, hg, h1);
        CHECK(fabs(hg - h1) <= 0.01, "%s at L = 128: recall %.4f vs the single index's %.4f", sh_desc, hg, h1);
        faiss_Index_free(c);
    }
    free_results(&a);
    /* GRFTSHRD back onto the same devices (the same graphs: the same results), GPU 0, the CPU and
     * 3 shards on GPU 0 (graphs built again: recall within 0.01). */
    results w = search_with(g, NULL);
    char p[512], same[64];
    snprintf(same, sizeof same, "%s", P->gpus);
    FAISS_OK(faiss_graft_write_index_fname(g, path(p, "gpu_shards.idx")));
    const char* placements[] = {same, "gpus=0", "cpu", "gpus=0,shards=3"};
    for (int i = 0; i < 4; i++) {
        FaissIndex* back = NULL;
        FAISS_OK(faiss_graft_read_index_placed_fname(p, 0, placements[i], &back));
        if (!back) continue;
        if (graph) FAISS_OK(faiss_graft_set_param(back, "L", 128));
        results b = search_with(back, NULL);
        const double rb = recall_vs(b, truth), rw = recall_vs(w, truth);
        printf("  %-28s read \"%s\": recall@10 %.4f (written %.4f)\n", sh_desc, placements[i], rb, rw);
        if (i == 0) CHECK(same_results(w, b), "%s read onto \"%s\": results differ", sh_desc, placements[i]);
        CHECK(fabs(rb - rw) <= 0.01, "%s read \"%s\": recall %.4f vs %.4f", sh_desc, placements[i], rb, rw);
        free_results(&b);
        faiss_Index_free(back);
    }
    free_results(&w);
    faiss_Index_free(g);
    faiss_Index_free(one);
}

/* nt queries of xt (sift5k's 500 repeated, so that a batch splits over every replica). */
static results search_n(const FaissIndex* index, int64_t nt, const float* xt) {
    results r = {malloc(sizeof(float) * nt * K), malloc(sizeof(idx_t) * nt * K)};
    FAISS_OK(faiss_Index_search(index, nt, xt, K, r.D, r.I));
    return r;
}
static int same_n(results a, results b, int64_t nt) {
    return !memcmp(a.D, b.D, sizeof(float) * nt * K) && !memcmp(a.I, b.I, sizeof(idx_t) * nt * K);
}

static void replicas_case(const char* kind, int train, const placement* P) {
    char desc[96], one_desc[96];
    snprintf(desc, sizeof desc, "%s,%s,replicas", kind, P->gpus);
    snprintf(one_desc, sizeof one_desc, "%s,gpu=0", kind);
    double t_rep = 0, t_one = 0;
    FaissIndex* rep = built(desc, train, &t_rep);
    FaissIndex* one = built(one_desc, train, &t_one);
    printf("  %-28s train + add + first search %.3f s (one GPU %.3f s)\n", desc, t_rep, t_one);
    per_shard(rep, desc, P, 1, 1);
    /* 5,000 queries: every replica's part (1,250 or more) and each replica's own search walk in
     * the same kernel mode (a warp a query; batches under one block a query per resident block
     * walk a query with a whole block, gpu/graph_search.cu), so only the split differs. */
    const int64_t nt = 10 * s.nq;
    float* xt = malloc(sizeof(float) * nt * s.d);
    for (int64_t i = 0; i < nt; i++) memcpy(xt + i * s.d, s.xq + (i % s.nq) * s.d, sizeof(float) * s.d);
    FaissIndexReplicas* r = (FaissIndexReplicas*)rep;
    for (int i = 0; i < P->n; i++) {
        results own = search_n(faiss_IndexReplicas_at(r, i), nt, xt);
        for (int pass = 0; pass < 3; pass++) {  /* the weights move the split */
            results all = search_n(rep, nt, xt);
            CHECK(same_n(all, own, nt), "%s: %lld queries (pass %d) differ from replica %d's own search", desc,
                  (long long)nt, pass, i);
            free_results(&all);
        }
        free_results(&own);
    }
    results small = search_n(rep, 100, xt), small1 = search_n(faiss_IndexReplicas_at(r, 0), 100, xt);
    CHECK(same_n(small, small1, 100), "%s: a batch of 100 differs from replica 0's", desc);
    free_results(&small);
    free_results(&small1);
    const double rr = recall_of(rep), r1 = recall_of(one);
    printf("  %-28s recall@10 %.4f (single GPU index %.4f); every replica's results equal\n", desc, rr, r1);
    CHECK(rr >= r1 - 0.01, "%s: recall %.4f below the single GPU index's %.4f", desc, rr, r1);
    free(xt);
    faiss_Index_free(rep);
    faiss_Index_free(one);
}

/* FAISS's own threaded IndexShards, built by hand over two graft graph indexes on the list's first
 * two devices. */
static void hand_built(const placement* P) {
    FaissIndexShards* sh = NULL;
    FAISS_OK(faiss_IndexShards_new_with_options(&sh, s.d, 1, 1));
    char d0[32], d1[32];
    snprintf(d0, sizeof d0, "GraftGraph,gpu=%d", P->dev[0]);
    snprintf(d1, sizeof d1, "GraftGraph,gpu=%d", P->dev[1]);
    FaissIndex* parts[2] = {make(d0), make(d1)};
    for (int i = 0; i < 2; i++) FAISS_OK(faiss_IndexShards_add_shard(sh, parts[i]));
    FAISS_OK(faiss_Index_add((FaissIndex*)sh, s.nb, s.xb));
    FaissIndex* one = built("GraftGraph,gpu=0", 0, NULL);
    double rs = recall_of((FaissIndex*)sh), r1 = recall_of(one);
    printf("  FAISS IndexShards over GraftGraph on GPUs %d and %d: recall@10 %.4f (one index %.4f)\n", P->dev[0],
           P->dev[1], rs, r1);
    CHECK(rs >= r1 - 0.01, "hand-built IndexShards: recall %.4f below one index's %.4f", rs, r1);
    faiss_Index_free(one);
    faiss_Index_free((FaissIndex*)sh);
    for (int i = 0; i < 2; i++) faiss_Index_free(parts[i]);
}

/* Every visible GPU used: one shard each, on device i. */
static void all_gpus(void) {
    const int n = graft_gpu_count() < 4 ? graft_gpu_count() : 4;
    placement P = {"gpus=all", n, {0, 1, 2, 3}};
    FaissIndex* g = built("GraftGraph,PQ16,gpus=all", 1, NULL);
    int count = 0;
    FAISS_OK(faiss_graft_shard_count(g, &count));
    const double r = recall_of(g);
    printf("  GraftGraph,PQ16,gpus=all: %d shards, recall@10 %.4f\n", count, r);
    CHECK(count == graft_gpu_count(), "gpus=all: %d shards on %d GPUs", count, graft_gpu_count());
    if (count == n) per_shard(g, "GraftGraph,PQ16,gpus=all", &P, 1, 0);
    CHECK(r >= 0.95, "gpus=all: recall@10 %.4f", r);
    faiss_Index_free(g);
}

static void run_placement(const placement* P) {
    printf("%s (%d shards)\n", P->gpus, P->n);
    shards_case("GraftFlat", 0, P);
    shards_case("GraftGraph", 0, P);
    shards_case("GraftGraph32,PQ16", 1, P);
    replicas_case("GraftGraph", 0, P);
    replicas_case("GraftGraph32,PQ16", 1, P);
    hand_built(P);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_temp_dir(dir, sizeof dir, "gpu_shards");
    graft_test_load_sift5k(&s);
    (void)filtered;  /* the fixture's helper this test does not use */
    truth = exact_truth(NULL);
    const placement one_gpu = {"gpus=0,0", 2, {0, 0}}, two = {"gpus=0-1", 2, {0, 1}},
                    four = {"gpus=0-3", 4, {0, 1, 2, 3}};
    const int gpus = graft_gpu_count();
    printf("%d GPU(s) visible: the one-GPU cases%s\n", gpus,
           gpus >= 4 ? ", then 2 and 4 GPUs" : gpus >= 2 ? ", then 2 GPUs (4 need 4)" : " (2 and 4 GPUs need as many)");
    run_placement(&one_gpu);
    if (gpus >= 2) run_placement(&two);
    if (gpus >= 4) run_placement(&four);
    if (gpus >= 2) all_gpus();
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_shards");
}
