/* The memory model (graft/graph_index.h, docs/memory.md) against what real indexes allocate on
 * the host, on the CPU references: for FP32, FP16, SQ8 and PQ16 over sift5k, the host bytes of
 * an index built from one add, given its data by set_data, or read from a file equal the model's
 * per_vector n + fixed; adds that grow the capacity and removals that make tombstones hold more,
 * by the amounts docs/memory.md says; reset keeps only the codec; FP16 and SQ8 with keep_fp32 = 0
 * (the codes the only copy) hold codes + graph, from one add + build too. The model's own numbers at
 * d = 128, R = 64 (the table of docs/memory.md) and its refusals. The flat index's host bytes.
 * The GPU side is tests/gpu/test_gpu_storage.c, which checks graft_gindex_gpu_bytes against the
 * same model. */
#include <string.h>

#include "graft/flat.h"
#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include "testutil.h"

#define PQ_M 16

static graft_memory_model model(graft_memory_side side, int storage, graft_bang_mode placement,
                                int keep_fp32, int64_t d, int R, int M) {
    graft_memory_model m = {0, 0};
    CHECK_OK(graft_gindex_memory_model_ex(side, storage, placement, keep_fp32, d, R, M, &m));
    if (keep_fp32) { /* the plain call is keep_fp32 = 1 */
        graft_memory_model m1 = {0, 0};
        CHECK_OK(graft_gindex_memory_model(side, storage, placement, d, R, M, &m1));
        CHECK(m1.per_vector == m.per_vector && m1.fixed == m.fixed, "memory_model vs _ex(keep_fp32 = 1)");
    }
    return m;
}

/* The table of docs/memory.md: bytes a vector and fixed bytes at d = 128, R = 64, PQ16. */
static void model_numbers(void) {
    const struct {
        graft_memory_side side;
        int storage;
        graft_bang_mode placement;
        int keep_fp32;
        size_t per_vector, fixed;
    } rows[] = {
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO, 1, 768, 0},
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP16, GRAFT_BANG_AUTO, 1, 1024, 0},
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO, 1, 896, 1024},
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_PQ, GRAFT_BANG_OUT_OF_CORE, 1, 784, 131072},
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP16, GRAFT_BANG_AUTO, 0, 512, 0},
        {GRAFT_MEMORY_HOST, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO, 0, 384, 1024},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_FP32, GRAFT_BANG_IN_MEMORY, 1, 768, 0},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_FP16, GRAFT_BANG_AUTO, 1, 1024, 0},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO, 1, 896, 1024},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_PQ, GRAFT_BANG_IN_MEMORY, 1, 784, 131072},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_PQ, GRAFT_BANG_OUT_OF_CORE, 1, 16, 131072},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_FP16, GRAFT_BANG_IN_MEMORY, 0, 512, 0},
        {GRAFT_MEMORY_GPU, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO, 0, 384, 1024},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const graft_memory_model m = model(rows[i].side, rows[i].storage, rows[i].placement,
                                           rows[i].keep_fp32, 128, 64, PQ_M);
        printf("  %-4s %-5s placement %d keep_fp32 %d: %zu B a vector + %zu B\n",
               rows[i].side == GRAFT_MEMORY_HOST ? "host" : "GPU", graft_storage_name(rows[i].storage),
               (int)rows[i].placement, rows[i].keep_fp32, m.per_vector, m.fixed);
        CHECK(m.per_vector == rows[i].per_vector && m.fixed == rows[i].fixed,
              "row %zu: %zu + %zu, docs/memory.md says %zu + %zu", i, m.per_vector, m.fixed,
              rows[i].per_vector, rows[i].fixed);
    }
    /* The billion: SQ8 codes and a degree-64 graph, 384 B a vector, is keep_fp32 = 0 (rows
     * above), GPU-resident; out-of-core stays PQ's. keep_fp32 = 0 is refused as graft_gindex_new
     * refuses it. */
    graft_memory_model m;
    CHECK_ERR(graft_gindex_memory_model_ex(GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO, 0,
                                           128, 64, 0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model_ex(GRAFT_MEMORY_HOST, GRAFT_STORAGE_PQ, GRAFT_BANG_AUTO, 0,
                                           128, 64, PQ_M, &m), GRAFT_EUNSUPPORTED);
    CHECK_ERR(graft_gindex_memory_model_ex(GRAFT_MEMORY_HOST, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO, 2,
                                           128, 64, 0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model_ex(GRAFT_MEMORY_GPU, GRAFT_STORAGE_SQ8, GRAFT_BANG_OUT_OF_CORE,
                                           0, 128, 64, 0, &m), GRAFT_EUNSUPPORTED);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_GPU, GRAFT_STORAGE_SQ8, GRAFT_BANG_OUT_OF_CORE,
                                        128, 64, 0, &m), GRAFT_EUNSUPPORTED);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_GPU, GRAFT_STORAGE_PQ, GRAFT_BANG_AUTO, 128, 64,
                                        PQ_M, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_HOST, GRAFT_STORAGE_PQ, GRAFT_BANG_AUTO, 128, 64,
                                        0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_HOST, 7, GRAFT_BANG_AUTO, 128, 64, 0, &m),
              GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model((graft_memory_side)2, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO,
                                        128, 64, 0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO, 0,
                                        64, 0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO, 128,
                                        0, 0, &m), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_memory_model(GRAFT_MEMORY_HOST, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO, 128,
                                        64, 0, NULL), GRAFT_EINVAL);
}

static graft_gindex* new_index(int storage, int keep_fp32, const graft_test_sift* s) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.storage = storage;
    p.keep_fp32 = keep_fp32;
    p.pq.M = PQ_M;
    p.pq.max_train = 10000;
    p.pq.kmeans = graft_faiss_kmeans;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(s->d, &p, &g));
    if (g && storage != GRAFT_STORAGE_FP32) CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    return g;
}

static void check_host(graft_gindex* g, int storage, int keep, int64_t n, int R, const char* what) {
    const graft_memory_model m = model(GRAFT_MEMORY_HOST, storage, GRAFT_BANG_AUTO, keep,
                                       graft_gindex_d(g), R, PQ_M);
    const size_t bytes = graft_gindex_host_bytes(g), expect = graft_memory_model_bytes(&m, n);
    printf("  %-5s keep_fp32 %d %-28s host bytes %zu (%.1f a vector), model %zu\n",
           graft_storage_name(storage), keep, what, bytes, (double)bytes / n, expect);
    CHECK(bytes == expect, "%s keep_fp32 %d %s: host_bytes %zu, model %zu", graft_storage_name(storage),
          keep, what, bytes, expect);
}

/* Host bytes of tombstones while removed vectors wait for consolidation: the dead bitmap over the
 * capacity and the live bitmap over the slots, both word-padded, and a rank word a 64 slots plus
 * one (plugin/graph/gindex_snap.c, gindex_living.c). */
static size_t tombstone_bytes(int64_t cap, int64_t n) {
    return (size_t)((cap + 63) / 64) * 8 + (size_t)((n + 63) / 64) * 8 + (size_t)((n + 63) / 64 + 1) * 8;
}

int main(void) {
    printf("the model at d = 128, R = 64, PQ%d\n", PQ_M);
    model_numbers();

    graft_test_sift s;
    graft_test_load_sift5k(&s);
    const int64_t n = s.nb, d = s.d;
    printf("sift5k (%lld x %lld) on the CPU\n", (long long)n, (long long)d);

    /* FP32 through one add and the build: the capacity is the vectors added. */
    graft_gindex* g = new_index(GRAFT_STORAGE_FP32, 1, &s);
    if (!g) return graft_test_finish("test_memory_model");
    CHECK_OK(graft_gindex_add(g, n, s.xb));
    CHECK(graft_gindex_host_bytes(g) == (size_t)n * d * 4, "before the build: vectors only, %zu",
          graft_gindex_host_bytes(g));
    CHECK_OK(graft_gindex_build(g));
    const graft_graph* built = graft_gindex_graph(g);
    CHECK(built != NULL, "no graph after the build");
    if (!built) return graft_test_finish("test_memory_model");
    const int R = built->R;
    graft_graph graph = {built->n, R, malloc((size_t)built->n * R * sizeof(int32_t)), built->entry};
    memcpy(graph.nbrs, built->nbrs, (size_t)built->n * R * sizeof(int32_t));
    check_host(g, GRAFT_STORAGE_FP32, 1, n, R, "one add + build");
    CHECK(graft_gindex_gpu_bytes(g) == 0, "a CPU index holds no device bytes");
    graft_gindex_free(g);

    const int kinds[] = {GRAFT_STORAGE_FP32, GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8, GRAFT_STORAGE_PQ,
                         GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    const int keeps[] = {1, 1, 1, 1, 0, 0};
    for (int c = 0; c < 6; c++) {
        const int kind = kinds[c], keep = keeps[c];
        if (!keep) { /* codes only, from one add: the build's decode is transient */
            g = new_index(kind, keep, &s);
            if (!g) continue;
            CHECK_OK(graft_gindex_add(g, n, s.xb));
            CHECK(graft_gindex_host_bytes(g) == graft_memory_model_bytes(&(graft_memory_model){
                          graft_storage_code_size(kind, d), kind == GRAFT_STORAGE_SQ8 ? 8 * (size_t)d : 0}, n),
                  "%s keep_fp32 0 before the build: codes and codec only, %zu", graft_storage_name(kind),
                  graft_gindex_host_bytes(g));
            CHECK_OK(graft_gindex_build(g));
            const graft_graph* gb = graft_gindex_graph(g);
            if (gb) check_host(g, kind, keep, n, gb->R, "one add + build");
            graft_gindex_free(g);
        }
        g = new_index(kind, keep, &s);
        if (!g) continue;
        CHECK_OK(graft_gindex_set_data(g, n, s.xb, &graph));
        check_host(g, kind, keep, n, R, "set_data");

        /* Written and read back: the reader allocates as set_data does. */
        FILE* f = tmpfile();
        CHECK(f != NULL, "tmpfile");
        if (f) {
            graft_gindex* r = NULL;
            CHECK_OK(graft_gindex_write(g, f));
            rewind(f);
            graft_gindex_params rp;
            graft_gindex_params_defaults(&rp);
            rp.device = -1;
            CHECK_OK(graft_gindex_read(f, &rp, &r));
            if (r) check_host(r, kind, keep, n, R, "read from a file");
            graft_gindex_free(r);
            fclose(f);
        }

        /* Removals: tombstones hold their bitmaps until consolidation. */
        const int64_t gone[] = {1, 17, 4000};
        int64_t removed = 0;
        CHECK_OK(graft_gindex_remove_ids(g, 3, gone, &removed));
        const graft_memory_model m = model(GRAFT_MEMORY_HOST, kind, GRAFT_BANG_AUTO, keep, d, R, PQ_M);
        const size_t with_dead = graft_memory_model_bytes(&m, n) + tombstone_bytes(n, n);
        CHECK(removed == 3 && graft_gindex_host_bytes(g) == with_dead,
              "%s: %lld removed, host_bytes %zu with tombstones, expected %zu", graft_storage_name(kind),
              (long long)removed, graft_gindex_host_bytes(g), with_dead);

        /* An add past the capacity doubles the vectors' and codes' buffers (rows added are
         * inserted into the graph, whose rows are copied with room for them alone). */
        const int64_t m_add = 100;
        CHECK_OK(graft_gindex_add(g, m_add, s.xq));
        const int64_t slots = n + m_add, cap = 2 * n;
        const size_t row = m.per_vector - (size_t)R * 4; /* vector + code */
        const size_t grown = graft_memory_model_bytes(&m, slots) + (size_t)(cap - slots) * row +
                             tombstone_bytes(cap, slots);
        printf("  %-5s keep_fp32 %d %-28s host bytes %zu, expected %zu\n", graft_storage_name(kind),
               keep, "removals + an add", graft_gindex_host_bytes(g), grown);
        CHECK(graft_gindex_host_bytes(g) == grown, "%s: host_bytes %zu after the add, expected %zu",
              graft_storage_name(kind), graft_gindex_host_bytes(g), grown);

        /* Reset keeps the codec alone. */
        CHECK_OK(graft_gindex_reset(g));
        CHECK(graft_gindex_host_bytes(g) == m.fixed, "%s: host_bytes %zu after reset, codec %zu",
              graft_storage_name(kind), graft_gindex_host_bytes(g), m.fixed);
        graft_gindex_free(g);
    }
    CHECK(graft_gindex_host_bytes(NULL) == 0, "NULL index");

    /* The flat index: the vectors' buffer, grown by doubling. */
    graft_flat_params fp;
    graft_flat_params_defaults(&fp);
    fp.device = -1;
    graft_flat* flat = NULL;
    CHECK_OK(graft_flat_new(d, &fp, &flat));
    if (flat) {
        CHECK_OK(graft_flat_add(flat, n, s.xb));
        CHECK(graft_flat_host_bytes(flat) == (size_t)n * d * 4, "flat: %zu after one add",
              graft_flat_host_bytes(flat));
        CHECK_OK(graft_flat_add(flat, 1, s.xq));
        CHECK(graft_flat_host_bytes(flat) == (size_t)2 * n * d * 4, "flat: %zu after the doubling",
              graft_flat_host_bytes(flat));
        printf("  flat  host bytes %zu after %lld vectors (capacity %lld)\n", graft_flat_host_bytes(flat),
               (long long)n + 1, (long long)2 * n);
        graft_flat_free(flat);
    }
    CHECK(graft_flat_host_bytes(NULL) == 0, "NULL flat index");
    graft_graph_free(&graph);
    graft_test_free_sift(&s);
    return graft_test_finish("test_memory_model");
}
