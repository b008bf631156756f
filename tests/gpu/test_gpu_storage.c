/* The graph index's storages on the GPU against the CPU reference (label gpu): for FP32, FP16,
 * SQ8 (GPU-resident) and PQ (in-memory and out-of-core, BANG's pipeline), a GPU index and a CPU
 * index over the same vectors, graph and SQ8 training / PQ codebooks answer the same queries; as in test_gpu_search.c, the GPU's recall@10 must be within 0.01 of the CPU's and 99%
 * of the result ids equal (the walks differ only by float rounding: the GPU sums in another
 * order, and decodes SQ8 as code * scale + offset where the CPU follows FAISS's formula), and
 * the distances of equal ids must agree within FP32 rounding (re-ranked: both exact FP32).
 * Data: sift5k, sift5k normalized (L2 and inner product: real values, SQ8 lossy) and a 20k
 * Fashion-MNIST subset. Variants: hash / Bloom visited sets, sort-merge / insertion, probes 2,
 * rerank = k, a filter (PQ: L = 32, rerank = k, max_expand = L, a filter). Also the device
 * bytes of each storage and placement against the memory model (graft_gindex_memory_model,
 * docs/memory.md). The PQ walk's only other difference: the GPU's Bloom
 * filter's rare false positives (graft/bang.h). FP16 and SQ8 with keep_fp32 = 0 (the codes the
 * only copy: no FP32 on the device, no re-rank): the same comparisons, on the codes' distances,
 * their device bytes (codes + graph + codec), and an index built on the GPU from its decoded codes
 * that then inserts over them. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include "testutil.h"

typedef struct {
    const char* name;
    const float *xb, *xq;
    int64_t nb, nq, d;
    graft_metric metric;
    int32_t* gt;
    graft_graph g;
} dataset;

/* PQ: codebooks trained once (by the CPU index, FAISS's k-means) and given to the GPU index, as
 * the sharded indexes do, so that both code the vectors the same way. */
static graft_gindex* make_kept(const dataset* s, int kind, int device, graft_bang_mode mode,
                               const graft_pq* pq, int keep_fp32) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.keep_fp32 = keep_fp32;
    p.device = device;
    p.metric = s->metric;
    p.storage = kind;
    p.mode = mode;
    p.pq.kmeans = graft_faiss_kmeans;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(s->d, &p, &g));
    if (!g) return NULL;
    if (kind == GRAFT_STORAGE_PQ && pq) CHECK_OK(graft_gindex_set_pq(g, pq));
    else if (kind != GRAFT_STORAGE_FP32) CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK_OK(graft_gindex_set_data(g, s->nb, s->xb, &s->g));
    return g;
}

static graft_gindex* make_placed(const dataset* s, int kind, int device, graft_bang_mode mode,
                                 const graft_pq* pq) {
    return make_kept(s, kind, device, mode, pq, 1);
}

static graft_gindex* make(const dataset* s, int kind, int device) {
    return make_placed(s, kind, device, GRAFT_BANG_AUTO, NULL);
}

/* bound_scale: the distance bound's multiple (1 but for SQ8 codes only, below). */
static void compare_scaled(const dataset* s, int kind, graft_gindex* cpu, graft_gindex* gpu,
                           const graft_search_params* p, const char* what, double bound_scale) {
    const int64_t nq = s->nq, k = 10;
    float *Dc = malloc(sizeof(float) * nq * k), *Dg = malloc(sizeof(float) * nq * k);
    int64_t *Ic = malloc(sizeof(int64_t) * nq * k), *Ig = malloc(sizeof(int64_t) * nq * k);
    graft_search_params one = *p; /* auto: one walk, the CPU's (the GPU may give a batch more) */
    if (one.mode == GRAFT_SEARCH_AUTO) one.mode = GRAFT_SEARCH_SINGLE;
    CHECK_OK(graft_gindex_search(cpu, nq, s->xq, k, &one, Dc, Ic, NULL));
    CHECK_OK(graft_gindex_search(gpu, nq, s->xq, k, &one, Dg, Ig, NULL));
    const double rc = graft_test_recall(Ic, k, s->gt, 10, nq, 10);
    const double rg = graft_test_recall(Ig, k, s->gt, 10, nq, 10);
    int64_t same = 0, outside = 0;
    double maxrel = 0;
    for (int64_t i = 0; i < nq * k; i++) {
        same += Ic[i] == Ig[i];
        if (p->allowed && Ig[i] >= 0 && !(p->allowed[Ig[i] >> 3] >> (Ig[i] & 7) & 1)) outside++;
        if (Ic[i] == Ig[i] && Ic[i] >= 0) {
            const double rel = fabs((double)Dc[i] - Dg[i]) / (fabs((double)Dc[i]) + 1e-6);
            if (rel > maxrel) maxrel = rel;
        }
    }
    printf("  %-5s %-30s recall@10 cpu %.4f gpu %.4f; equal ids %.4f; max rel dist diff %.1e\n",
           graft_storage_name(kind), what, rc, rg, (double)same / (nq * k), maxrel);
    CHECK(rg >= rc - 0.01, "%s %s %s: GPU recall %.4f vs CPU %.4f", s->name, graft_storage_name(kind),
          what, rg, rc);
    CHECK(same >= 0.99 * nq * k, "%s %s %s: only %.4f of the ids equal the CPU's", s->name,
          graft_storage_name(kind), what, (double)same / (nq * k));
    /* Both sides' returned distances are FP32 sums of d terms (re-ranked: exact FP32) in two
     * orders; for terms of one sign they differ by at most (d - 1) 2^-24 relative. */
    const double bound = bound_scale * (double)(s->d - 1) / 16777216.0;
    CHECK(maxrel <= bound, "%s %s %s: distances differ by %.1e relative (bound %.1e)", s->name,
          graft_storage_name(kind), what, maxrel, bound);
    CHECK(outside == 0, "%s %s: %lld ids outside the filter", s->name, what, (long long)outside);
    free(Dc), free(Dg), free(Ic), free(Ig);
}

static void compare(const dataset* s, int kind, graft_gindex* cpu, graft_gindex* gpu,
                    const graft_search_params* p, const char* what) {
    compare_scaled(s, kind, cpu, gpu, p, what, 1.0);
}

/* keep_fp32 = 0: the GPU walk on the codes against the CPU reference on the same codes. FP16
 * decodes exactly on both sides, so the returned distances (the codes' distances, not
 * re-ranked) keep the FP32 bound; SQ8's two decodes (FAISS's formula, the GPU's code * scale +
 * offset) differ by an ulp or so a dimension, which the bound allows twice over (an estimate from
 * the decodes' error, to be confirmed on the device). Then an index of the codes only built on the
 * GPU (GRNND over the decoded codes) and grown by an insert, with its device bytes. */
static void run_codes_only(dataset* s) {
    const int kinds[] = {GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    for (int c = 0; c < 2; c++) {
        graft_gindex *cpu = make_kept(s, kinds[c], -1, GRAFT_BANG_AUTO, NULL, 0),
                     *gpu = make_kept(s, kinds[c], 0, GRAFT_BANG_AUTO, NULL, 0);
        if (!cpu || !gpu) {
            graft_gindex_free(cpu);
            graft_gindex_free(gpu);
            continue;
        }
        const double scale = kinds[c] == GRAFT_STORAGE_SQ8 ? 2.0 : 1.0;
        graft_memory_model model = {0, 0};
        CHECK_OK(graft_gindex_memory_model_ex(GRAFT_MEMORY_GPU, kinds[c], GRAFT_BANG_IN_MEMORY, 0, s->d,
                                              s->g.R, 0, &model));
        const size_t bytes = graft_gindex_gpu_bytes(gpu), expect = graft_memory_model_bytes(&model, s->nb);
        printf("  %-5s keep_fp32=0 device bytes %zu (%.1f a vector: graph %d, codes %zu, no FP32)\n",
               graft_storage_name(kinds[c]), bytes, (double)bytes / s->nb, 4 * s->g.R,
               graft_storage_code_size(kinds[c], s->d));
        CHECK(bytes == expect, "%s %s keep_fp32=0: gpu_bytes %zu, expected %zu", s->name,
              graft_storage_name(kinds[c]), bytes, expect);
        CHECK(graft_gindex_get_params(gpu).search.rerank == 0 && graft_gindex_vectors(gpu) == NULL,
              "keep_fp32=0: rerank 0, no FP32");
        graft_search_params p;
        graft_search_params_defaults(&p);
        compare_scaled(s, kinds[c], cpu, gpu, &p, "codes L=64 hash sort-merge", scale);
        p.L = 32, p.probes = 2, p.visited = GRAFT_VISITED_BLOOM;
        compare_scaled(s, kinds[c], cpu, gpu, &p, "codes L=32 probes=2 bloom", scale);
        graft_search_params_defaults(&p);
        p.rerank = 10; /* ignored: nothing to re-rank from */
        compare_scaled(s, kinds[c], cpu, gpu, &p, "codes L=64 rerank=k asked", scale);
        graft_search_params_defaults(&p);
        p.L = 32, p.mode = GRAFT_SEARCH_MULTI, p.walks = 4;
        compare_scaled(s, kinds[c], cpu, gpu, &p, "codes L=32 multi walks=4", scale);
        graft_gindex_free(gpu);
        graft_gindex_free(cpu);

        /* Built on the GPU from the codes (a transient decode until GRNND reads codes), then an
         * insert over them (the CPU reference over a decode; the device gets codes and rows). */
        graft_gindex_params gp;
        graft_gindex_params_defaults(&gp);
        gp.device = 0;
        gp.metric = s->metric;
        gp.storage = kinds[c];
        gp.keep_fp32 = 0;
        gp.living.policy = GRAFT_ADD_INSERT;
        graft_gindex* g = NULL;
        CHECK_OK(graft_gindex_new(s->d, &gp, &g));
        if (!g) continue;
        if (kinds[c] == GRAFT_STORAGE_SQ8) CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
        const int64_t first = s->nb - s->nb / 10;
        CHECK_OK(graft_gindex_add(g, first, s->xb));
        CHECK_OK(graft_gindex_build(g));
        CHECK_OK(graft_gindex_add(g, s->nb - first, s->xb + first * s->d));
        float* D = malloc(sizeof(float) * s->nq * 10);
        int64_t* I = malloc(sizeof(int64_t) * s->nq * 10);
        CHECK_OK(graft_gindex_search(g, s->nq, s->xq, 10, NULL, D, I, NULL));
        const double r = graft_test_recall(I, 10, s->gt, 10, s->nq, 10);
        graft_living_report rep;
        CHECK_OK(graft_gindex_living_report(g, &rep));
        const int R = graft_gindex_graph(g)->R;
        CHECK_OK(graft_gindex_memory_model_ex(GRAFT_MEMORY_GPU, kinds[c], GRAFT_BANG_IN_MEMORY, 0, s->d, R,
                                              0, &model));
        printf("  %-5s keep_fp32=0 GRNND + %lld inserted: recall@10 L=64 %.4f, gpu_bytes %zu (model %zu)\n",
               graft_storage_name(kinds[c]), (long long)(s->nb - first), r, graft_gindex_gpu_bytes(g),
               graft_memory_model_bytes(&model, s->nb));
        CHECK(rep.last_add == GRAFT_ADD_INSERT && rep.on_gpu_inserts == 0, "inserted on the CPU reference");
        CHECK(graft_gindex_gpu_bytes(g) == graft_memory_model_bytes(&model, s->nb),
              "%s keep_fp32=0 after an insert: gpu_bytes %zu", graft_storage_name(kinds[c]),
              graft_gindex_gpu_bytes(g));
        /* a sanity bar, not a measurement: the device run sets the floor */
        CHECK(r >= 0.9, "%s keep_fp32=0 GRNND + insert: recall %.4f", graft_storage_name(kinds[c]), r);
        free(D), free(I);
        graft_gindex_free(g);
    }
}

static void run(dataset* s) {
    printf("%s (%lld x %lld, %s)\n", s->name, (long long)s->nb, (long long)s->d,
           s->metric == GRAFT_METRIC_L2 ? "L2" : "IP");
    uint8_t* even = malloc((size_t)(s->nb + 7) / 8);
    memset(even, 0x55, (size_t)(s->nb + 7) / 8); /* bits 0, 2, 4, ...: even ids */
    const int kinds[] = {GRAFT_STORAGE_FP32, GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    for (int c = 0; c < 3; c++) {
        graft_gindex *cpu = make(s, kinds[c], -1), *gpu = make(s, kinds[c], 0);
        if (!cpu || !gpu) {
            graft_gindex_free(cpu);
            graft_gindex_free(gpu);
            continue;
        }
        const size_t bytes = graft_gindex_gpu_bytes(gpu);
        const size_t code = graft_storage_code_size(kinds[c], s->d);
        graft_memory_model model = {0, 0};
        CHECK_OK(graft_gindex_memory_model(GRAFT_MEMORY_GPU, kinds[c], GRAFT_BANG_IN_MEMORY, s->d,
                                           s->g.R, 0, &model));
        const size_t expect = graft_memory_model_bytes(&model, s->nb);
        printf("  %-5s device bytes %zu (%.1f a vector: graph %d, walk %zu, FP32 re-rank copy %s)\n",
               graft_storage_name(kinds[c]), bytes, (double)bytes / s->nb, 4 * s->g.R,
               kinds[c] == GRAFT_STORAGE_FP32 ? 4 * (size_t)s->d : code,
               kinds[c] == GRAFT_STORAGE_FP32 ? "none" : "yes");
        CHECK(bytes == expect, "%s %s: gpu_bytes %zu, expected %zu", s->name,
              graft_storage_name(kinds[c]), bytes, expect);
        graft_search_params p;
        graft_search_params_defaults(&p);
        compare(s, kinds[c], cpu, gpu, &p, "L=64 hash sort-merge");
        p.L = 32;
        p.probes = 2;
        p.visited = GRAFT_VISITED_BLOOM;
        compare(s, kinds[c], cpu, gpu, &p, "L=32 probes=2 bloom");
        graft_search_params_defaults(&p);
        p.merge = GRAFT_MERGE_INSERT;
        p.L = 128;
        compare(s, kinds[c], cpu, gpu, &p, "L=128 insert");
        graft_search_params_defaults(&p);
        p.rerank = 10;
        compare(s, kinds[c], cpu, gpu, &p, "L=64 rerank=k");
        graft_search_params_defaults(&p);
        p.L = 32, p.mode = GRAFT_SEARCH_MULTI, p.walks = 4;
        compare(s, kinds[c], cpu, gpu, &p, "L=32 multi walks=4");
        graft_search_params_defaults(&p);
        p.allowed = even;
        /* The storage's filtered walk on both sides: the filtered search's own choice between
         * exact and walk (graft/graph.h) differs by device and is tested in test_gpu_filter. */
        p.filter_exact_below = 0;
        compare(s, kinds[c], cpu, gpu, &p, "L=64 even ids only");
        graft_gindex_free(cpu);
        graft_gindex_free(gpu);
    }
    graft_gindex* cpu = make(s, GRAFT_STORAGE_PQ, -1);
    for (int m = GRAFT_BANG_IN_MEMORY; cpu && m <= GRAFT_BANG_OUT_OF_CORE; m++) {
        graft_gindex* gpu = make_placed(s, GRAFT_STORAGE_PQ, 0, (graft_bang_mode)m, graft_gindex_pq(cpu));
        if (!gpu) continue;
        const int M = graft_gindex_pq(gpu)->M;
        const size_t bytes = graft_gindex_gpu_bytes(gpu);
        graft_memory_model model = {0, 0};
        CHECK_OK(graft_gindex_memory_model(GRAFT_MEMORY_GPU, GRAFT_STORAGE_PQ, (graft_bang_mode)m,
                                           s->d, s->g.R, M, &model));
        const size_t expect = graft_memory_model_bytes(&model, s->nb);
        const char* place = m == GRAFT_BANG_IN_MEMORY ? "in-memory" : "out-of-core";
        printf("  PQ%-3d %s: device bytes %zu\n", M, place, bytes);
        CHECK(graft_gindex_mode(gpu) == m && bytes == expect, "%s PQ %s: mode %d, gpu_bytes %zu, "
              "expected %zu", s->name, place, (int)graft_gindex_mode(gpu), bytes, expect);
        graft_search_params p;
        graft_search_params_defaults(&p);
        compare(s, GRAFT_STORAGE_PQ, cpu, gpu, &p, m == GRAFT_BANG_IN_MEMORY ? "in-memory L=64" : "out-of-core L=64");
        p.L = 32;
        compare(s, GRAFT_STORAGE_PQ, cpu, gpu, &p, m == GRAFT_BANG_IN_MEMORY ? "in-memory L=32" : "out-of-core L=32");
        graft_search_params_defaults(&p);
        p.rerank = 10;
        p.max_expand = p.L;
        compare(s, GRAFT_STORAGE_PQ, cpu, gpu, &p, m == GRAFT_BANG_IN_MEMORY ? "in-memory rerank=k max_expand=L"
                                                                           : "out-of-core rerank=k max_expand=L");
        graft_search_params_defaults(&p);
        p.allowed = even;
        p.filter_exact_below = 0; /* the walk on both sides, as above */
        compare(s, GRAFT_STORAGE_PQ, cpu, gpu, &p, m == GRAFT_BANG_IN_MEMORY ? "in-memory even ids only"
                                                                           : "out-of-core even ids only");
        graft_gindex_free(gpu);
    }
    graft_gindex_free(cpu);
    free(even);
    run_codes_only(s);
}

static void make_dataset(dataset* s, const char* name, const float* xb, int64_t nb, const float* xq,
                         int64_t nq, int64_t d, graft_metric metric) {
    *s = (dataset){name, xb, xq, nb, nq, d, metric, NULL, {0}};
    s->gt = graft_test_exact_topk(xb, nb, xq, nq, d, metric, 10);
    graft_rnnd_params bp;
    graft_rnnd_params_defaults(&bp);
    bp.metric = metric;
    CHECK_OK(graft_rnnd_build_cpu(xb, nb, d, &bp, &s->g));
    run(s);
    free(s->gt);
    graft_graph_free(&s->g);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    dataset ds;
    make_dataset(&ds, "sift5k", s.xb, s.nb, s.xq, s.nq, s.d, GRAFT_METRIC_L2);
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
    make_dataset(&ds, "sift5k normalized", xn, s.nb, qn, s.nq, s.d, GRAFT_METRIC_L2);
    make_dataset(&ds, "sift5k normalized", xn, s.nb, qn, s.nq, s.d, GRAFT_METRIC_INNER_PRODUCT);
    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    if (graft_test_load_fmnist(20000, 500, &fb, &fnb, &fq, &fnq, &fd) == 0)
        make_dataset(&ds, "fashion-mnist 20k", fb, fnb, fq, fnq, fd, GRAFT_METRIC_L2);
    free(fb), free(fq), free(xn), free(qn);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_storage");
}
