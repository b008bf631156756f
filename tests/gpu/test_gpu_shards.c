/* Sharded graft indexes on a GPU (issue 25): "gpus=0,0" puts two shards on GPU 0, each built and
 * searched on its own thread at once, the one-GPU form of a multi-GPU "gpus=0,1". Compared on
 * sift5k with the same shards on the CPU references ("shards=2,cpu") and with a single index on
 * the GPU: recall within 0.01 (sharded at least the single index's less 0.01 at the default beam,
 * within 0.01 at L = 128 where both converged), every shard on device 0 with its own graph built
 * by GRNND, GRFTSHRD read back onto GPU 0 and onto the CPU. SKIPPED without a GPU. With two or
 * more GPUs it also runs "gpus=all" and reports each device's bytes (the multi-GPU check). */
#include <time.h>

#include <faiss/c_api/IndexShards_c.h>
#include <faiss/c_api/Index_c.h>

#include "faiss_sift_fixture.h"

static double recall_at(FaissIndex* index, int L) {
    if (L) FAISS_OK(faiss_graft_set_param(index, "L", L));
    return recall_of(index);
}

static FaissIndex* built(const char* desc, int train) {
    FaissIndex* index = make(desc);
    if (!index) return NULL;
    if (train) FAISS_OK(faiss_Index_train(index, s.nb, s.xb));
    FAISS_OK(faiss_Index_add(index, s.nb, s.xb));
    return index;
}

static void per_shard(FaissIndex* sh, const char* desc, int graph) {
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(sh, &n));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double dev = -9, pieces = -9, secs = 0, bytes = 0;
        FAISS_OK(faiss_graft_get_shard_param(sh, i, "device", &dev));
        if (graph) {
            FAISS_OK(faiss_graft_get_shard_param(sh, i, "build_pieces", &pieces));
            FAISS_OK(faiss_graft_get_shard_param(sh, i, "build_seconds", &secs));
            CHECK(pieces == 1, "%s shard %d: build_pieces %g (want 1: GRNND on the GPU)", desc, i, pieces);
        }
        if (strstr(desc, "PQ")) {
            double budget = 0;
            FAISS_OK(faiss_graft_get_shard_param(sh, i, "gpu_bytes", &bytes));
            FAISS_OK(faiss_graft_get_shard_param(sh, i, "gpu_budget", &budget));
            /* Two shards on one GPU: a quarter of it each (half the device split in two). */
            if (strstr(desc, "gpus=0,0"))
                CHECK(budget > 0 && budget <= graft_gpu_memory(0) / 4.0, "%s shard %d: gpu_budget %.0f of %zu",
                      desc, i, budget, graft_gpu_memory(0));
        }
        sum += bytes;
        printf("    shard %d: device %g, build %.3f s, gpu_bytes %.0f\n", i, dev, secs, bytes);
        CHECK(dev >= 0, "%s shard %d on device %g", desc, i, dev);
    }
    if (strstr(desc, "PQ"))  /* the sharded index's gpu_bytes: all shards' */
        CHECK(sum > 0 && param(sh, "gpu_bytes") == sum, "%s: gpu_bytes %g, shards' sum %g", desc,
              param(sh, "gpu_bytes"), sum);
}

static void compare(const char* kind, int train, int exact) {
    char gpu_sh[96], cpu_sh[96], gpu_one[96];
    snprintf(gpu_sh, sizeof gpu_sh, "%s,gpus=0,0", kind);
    snprintf(cpu_sh, sizeof cpu_sh, "%s,shards=2,cpu", kind);
    snprintf(gpu_one, sizeof gpu_one, "%s,gpu=0", kind);
    /* The shards' adds run on their own threads at once (a graph index's add only appends and
     * encodes; its build runs at the first search, on the shards' threads at once: on one GPU the
     * two builds share its SMs). */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    FaissIndex* g = built(gpu_sh, train);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %-28s train + add %.3f s wall\n", gpu_sh, (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    FaissIndex* c = built(cpu_sh, train);
    FaissIndex* one = built(gpu_one, train);
    const int graph = strstr(kind, "Graph") != NULL;
    double rg = recall_of(g), rc = recall_of(c), r1 = recall_of(one);
    printf("  %-28s recall@10 %.4f; CPU shards %.4f; single GPU index %.4f\n", gpu_sh, rg, rc, r1);
    CHECK(fabs(rg - rc) <= 0.01, "%s: recall %.4f vs the CPU shards' %.4f", gpu_sh, rg, rc);
    CHECK(rg >= r1 - 0.01, "%s: recall %.4f below the single GPU index's %.4f", gpu_sh, rg, r1);
    if (exact) CHECK(rg >= 0.999, "%s: exact search with recall %.4f", gpu_sh, rg);
    per_shard(g, gpu_sh, graph);
    if (graph) {
        double hg = recall_at(g, 128), h1 = recall_at(one, 128);
        printf("  %-28s at L = 128: %.4f; single GPU index %.4f\n", gpu_sh, hg, h1);
        CHECK(fabs(hg - h1) <= 0.01, "%s at L = 128: recall %.4f vs the single index's %.4f", gpu_sh, hg, h1);
    }
    /* GRFTSHRD back onto GPU 0 (both shards) and onto the CPU. */
    char p[512];
    FAISS_OK(faiss_graft_write_index_fname(g, path(p, "gpu_shards.idx")));
    const char* placements[] = {"gpus=0", "cpu", "gpus=0,shards=3"};
    for (int i = 0; i < 3; i++) {
        FaissIndex* back = NULL;
        FAISS_OK(faiss_graft_read_index_placed_fname(p, 0, placements[i], &back));
        if (!back) continue;
        if (graph) FAISS_OK(faiss_graft_set_param(back, "L", 128));
        double rb = recall_of(back), rw = recall_of(g);
        printf("  %-28s read \"%s\": recall@10 %.4f (written %.4f)\n", gpu_sh, placements[i], rb, rw);
        CHECK(fabs(rb - rw) <= 0.01, "%s read \"%s\": recall %.4f vs %.4f", gpu_sh, placements[i], rb, rw);
        faiss_Index_free(back);
    }
    faiss_Index_free(g);
    faiss_Index_free(c);
    faiss_Index_free(one);
}

/* FAISS's own threaded IndexShards, built by hand over two graft graph indexes on GPU 0 (on
 * GPUs 0 and 1 where there are two). */
static void hand_built(void) {
    FaissIndexShards* sh = NULL;
    FAISS_OK(faiss_IndexShards_new_with_options(&sh, s.d, 1, 1));
    const int second = graft_gpu_count() >= 2 ? 1 : 0;
    FaissIndex* parts[2] = {make("GraftGraph,gpu=0"), make(second ? "GraftGraph,gpu=1" : "GraftGraph,gpu=0")};
    for (int i = 0; i < 2; i++) FAISS_OK(faiss_IndexShards_add_shard(sh, parts[i]));
    FAISS_OK(faiss_Index_add((FaissIndex*)sh, s.nb, s.xb));
    FaissIndex* one = built("GraftGraph,gpu=0", 0);
    double rs = recall_of((FaissIndex*)sh), r1 = recall_of(one);
    printf("  FAISS IndexShards over GraftGraph on GPUs 0 and %d: recall@10 %.4f (one index %.4f)\n", second, rs, r1);
    CHECK(rs >= r1 - 0.01, "hand-built IndexShards: recall %.4f below one index's %.4f", rs, r1);
    faiss_Index_free(one);
    faiss_Index_free((FaissIndex*)sh);
    for (int i = 0; i < 2; i++) faiss_Index_free(parts[i]);
}

/* Every visible GPU used: one shard each, each shard's device different, memory per device. */
static void all_gpus(void) {
    FaissIndex* g = built("GraftGraph,PQ16,gpus=all", 1);
    int n = 0;
    FAISS_OK(faiss_graft_shard_count(g, &n));
    double r = recall_of(g);
    printf("  GraftGraph,PQ16,gpus=all: %d shards, recall@10 %.4f\n", n, r);
    for (int i = 0; i < n; i++) {
        double dev = -1;
        FAISS_OK(faiss_graft_get_shard_param(g, i, "device", &dev));
        CHECK(dev == i, "gpus=all: shard %d on device %g", i, dev);
    }
    per_shard(g, "GraftGraph,PQ16,gpus=all", 1);
    CHECK(r >= 0.95, "gpus=all: recall@10 %.4f", r);
    faiss_Index_free(g);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_temp_dir(dir, sizeof dir, "gpu_shards");
    graft_test_load_sift5k(&s);
    (void)filtered, (void)same_results;  /* the fixture's helpers this test does not use */
    truth = exact_truth(NULL);
    compare("GraftFlat", 0, 1);
    compare("GraftGraph", 0, 0);
    compare("GraftGraph32,PQ16", 1, 0);
    hand_built();
    if (graft_gpu_count() >= 2) all_gpus();
    graft_test_remove_dir(dir);
    free(truth);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_shards");
}
