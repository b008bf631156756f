/* The BANG search on the GPU (gpu/bang_search.cu, plugin/graph/bang_gpu.c) against its CPU reference
 * graft_bang_search_cpu (label gpu). One graph per data set (the CPU RNN-Descent reference's,
 * deterministic) and PQ codebooks trained by FAISS's k-means (M = 32 on sift5k, d = 128).
 *  - both modes (in-memory, out-of-core), L in {16, 32, 64, 128}: GPU recall@10 within 0.01 of
 *    the CPU's and at least 97% of the result ids equal to the CPU's (the kernels compute the
 *    CPU's distances bit for bit; only Bloom false positives may differ);
 *  - in-memory and out-of-core results identical (same kernels, same numbers);
 *  - out-of-core under a budget that forces many batches identical to one batch; repeated
 *    searches identical;
 *  - re-rank depth, expansion cap and filter against the CPU; inner product on normalized
 *    vectors; edges (k > n, n = 1, L = k); bad arguments.
 * GRAFT_TEST_QUICK=1: 40 queries, one L, both modes (for compute-sanitizer). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "graft/bang.h"
#include "graft_faiss_c.h"
#include "testutil.h"

typedef struct {
    const char* name;
    const float* xb;
    const float* xq;
    const int32_t* gt; /* nq x gt_k */
    int64_t nb, nq, d, gt_k;
    graft_metric metric;
    graft_graph g;
    graft_pq pq;
    uint8_t* codes;
} fixture;

static void fixture_make(fixture* f, const char* name, const float* xb, int64_t nb,
                         const float* xq, int64_t nq, int64_t d, const int32_t* gt, int64_t gt_k,
                         graft_metric metric) {
    memset(f, 0, sizeof *f);
    f->name = name;
    f->xb = xb;
    f->xq = xq;
    f->gt = gt;
    f->nb = nb;
    f->nq = nq;
    f->d = d;
    f->gt_k = gt_k;
    f->metric = metric;
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    rp.metric = metric;
    CHECK_OK(graft_rnnd_build_cpu(xb, nb, d, &rp, &f->g));
    graft_pq_params pp;
    graft_pq_params_defaults(&pp);
    pp.M = 32;
    pp.kmeans = graft_faiss_kmeans;
    CHECK_OK(graft_pq_train(d, nb, xb, &pp, &f->pq));
    f->codes = malloc((size_t)nb * 32);
    CHECK_OK(graft_pq_encode(&f->pq, nb, xb, f->codes));
}

static void fixture_free(fixture* f) {
    graft_graph_free(&f->g);
    graft_pq_free(&f->pq);
    free(f->codes);
}

static const char* mode_name(graft_bang_mode m) {
    return m == GRAFT_BANG_IN_MEMORY ? "in-memory" : "out-of-core";
}

static const char* variant(const graft_bang_params* p, graft_bang_mode m) {
    static char buf[128];
    snprintf(buf, sizeof buf, "%s L=%d rerank=%d max_expand=%d%s", mode_name(m), p->L, p->rerank,
             graft_bang_max_expand(p), p->allowed ? " filtered" : "");
    return buf;
}

typedef struct {
    float* D;
    int64_t* I;
} results;

static results alloc_results(int64_t nq, int64_t k) {
    results r = {malloc(sizeof(float) * (size_t)(nq * k)), malloc(sizeof(int64_t) * (size_t)(nq * k))};
    return r;
}
static void free_results(results* r) {
    free(r->D);
    free(r->I);
}

static int gpu_search(const fixture* f, const graft_bang_params* p, graft_bang_mode mode,
                      int64_t nq, int64_t k, results* r, graft_bang_report* rep) {
    return graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, nq, k, p,
                                 mode, r->D, r->I, rep);
}

static int same_results(const results* a, const results* b, int64_t n) {
    return !memcmp(a->D, b->D, sizeof(float) * (size_t)n) &&
           !memcmp(a->I, b->I, sizeof(int64_t) * (size_t)n);
}

/* GPU (mode) vs CPU on the fixture's queries: the 0.01 recall rule (when gt), 97% equal ids,
 * distances of equal ids, labels in range, report consistency. */
static void compare(const fixture* f, const graft_bang_params* p, graft_bang_mode mode,
                    const int32_t* gt, int64_t gt_k) {
    const int64_t nq = f->nq, k = 10;
    results c = alloc_results(nq, k), g = alloc_results(nq, k);
    graft_bang_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK_OK(graft_bang_search_cpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, nq, k, p,
                                   c.D, c.I));
    CHECK_OK(gpu_search(f, p, mode, nq, k, &g, &rep));
    const double rc = gt ? graft_test_recall(c.I, k, gt, gt_k, nq, 10) : 0;
    const double rg = gt ? graft_test_recall(g.I, k, gt, gt_k, nq, 10) : 0;
    int64_t same = 0;
    double maxrel = 0;
    for (int64_t i = 0; i < nq * k; i++) {
        same += c.I[i] == g.I[i];
        if (c.I[i] == g.I[i] && c.I[i] >= 0) {
            const double rel = fabs((double)c.D[i] - g.D[i]) / (fabs((double)c.D[i]) + 1e-6);
            if (rel > maxrel) maxrel = rel;
        }
    }
    const int64_t E = graft_bang_max_expand(p);
    printf("  %-44s recall@10 cpu %.4f gpu %.4f; equal ids %.4f; max rel dist diff %.1e; "
           "%.1f expansions/query, %d batch(es), %.0f B/expansion h2d\n",
           variant(p, mode), rc, rg, (double)same / (double)(nq * k), maxrel,
           (double)rep.iterations / (double)nq, rep.batches,
           rep.iterations ? (double)(rep.h2d_bytes - nq * f->d * 4) / (double)rep.iterations : 0.0);
    if (gt)
        CHECK(rg >= rc - 0.01, "%s %s: GPU recall %.4f vs CPU %.4f", f->name, variant(p, mode), rg,
              rc);
    CHECK(same >= 0.97 * (double)(nq * k), "%s %s: only %.4f of the result ids equal the CPU's",
          f->name, variant(p, mode), (double)same / (double)(nq * k));
    CHECK(maxrel < 1e-4, "%s %s: distances differ by %.2e relative", f->name, variant(p, mode),
          maxrel);
    for (int64_t i = 0; i < nq * k; i++)
        if (g.I[i] < -1 || g.I[i] >= f->nb) {
            CHECK(0, "%s %s: label %lld out of range", f->name, variant(p, mode), (long long)g.I[i]);
            break;
        }
    /* The report: every query expands at least its entry and at most max_expand nodes; out of
     * core every expansion brings back one 4-byte next node, plus 12 k bytes of results per
     * query, and carries 4 + 4 + 4 d (+ 4 R for the row) bytes to the device (the query id
     * with the row and again with the vector), with up to 12 bytes of alignment padding per
     * half-batch iteration, which expands at least one node. */
    CHECK(rep.out_of_core == (mode == GRAFT_BANG_OUT_OF_CORE), "report: out_of_core %d", rep.out_of_core);
    CHECK(rep.batches >= 1 && rep.iterations >= nq && rep.iterations <= nq * E,
          "report: %d batches, %lld expansions", rep.batches, (long long)rep.iterations);
    CHECK(rep.wall_seconds > 0 && rep.gpu_seconds > 0 && rep.gpu_peak_bytes > 0,
          "report: wall %g gpu %g peak %zu", rep.wall_seconds, rep.gpu_seconds, rep.gpu_peak_bytes);
    if (mode == GRAFT_BANG_OUT_OF_CORE && !p->allowed) {
        CHECK(rep.d2h_bytes == 4 * rep.iterations + 12 * nq * k, "report: d2h %lld bytes for %lld "
              "expansions", (long long)rep.d2h_bytes, (long long)rep.iterations);
        const int64_t base = nq * f->d * 4, per = 8 + 4 * f->d;
        CHECK(rep.h2d_bytes >= base + per * rep.iterations &&
                  rep.h2d_bytes <= base + (per + 4 * f->g.R + 12) * rep.iterations,
              "report: h2d %lld bytes for %lld expansions", (long long)rep.h2d_bytes,
              (long long)rep.iterations);
    }
    free_results(&c);
    free_results(&g);
}

/* In-memory and out-of-core: the same results bit for bit; each mode repeated too. Out-of-core
 * with the staged vectors always on their own stream, never, and switching in the tail (at the
 * vectors of a quarter of the queries: half of a half batch). */
static void modes_identical(const fixture* f, const graft_bang_params* p) {
    const int64_t nq = f->nq, k = 10;
    results a = alloc_results(nq, k), b = alloc_results(nq, k), c = alloc_results(nq, k);
    CHECK_OK(gpu_search(f, p, GRAFT_BANG_IN_MEMORY, nq, k, &a, NULL));
    const size_t vsb[] = {1, SIZE_MAX, (size_t)(nq / 4) * (size_t)(f->d * 4 + 4)};
    for (int i = 0; i < 3; i++) {
        graft_bang_params q = *p;
        q.vector_stream_bytes = vsb[i];
        CHECK_OK(gpu_search(f, &q, GRAFT_BANG_OUT_OF_CORE, nq, k, &b, NULL));
        CHECK(same_results(&a, &b, nq * k), "%s L=%d vector_stream_bytes=%zu: in-memory and "
              "out-of-core results differ", f->name, p->L, vsb[i]);
    }
    CHECK_OK(gpu_search(f, p, GRAFT_BANG_OUT_OF_CORE, nq, k, &c, NULL));
    CHECK(same_results(&b, &c, nq * k), "%s L=%d: two out-of-core runs differ", f->name, p->L);
    CHECK_OK(gpu_search(f, p, GRAFT_BANG_IN_MEMORY, nq, k, &c, NULL));
    CHECK(same_results(&a, &c, nq * k), "%s L=%d: two in-memory runs differ", f->name, p->L);
    free_results(&a);
    free_results(&b);
    free_results(&c);
}

/* A budget that forces many batches gives the one-batch results, in both modes. */
static void batches(const fixture* f) {
    const int64_t nq = f->nq, k = 10;
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    results a = alloc_results(nq, k), b = alloc_results(nq, k);
    for (int m = GRAFT_BANG_IN_MEMORY; m <= GRAFT_BANG_OUT_OF_CORE; m++) {
        graft_bang_report r1, r2;
        p.memory_budget = 0;
        CHECK_OK(gpu_search(f, &p, (graft_bang_mode)m, nq, k, &a, &r1));
        /* ~150 KB per query out-of-core at L = 64 (PQ table 32 KiB, Bloom filter 16 KiB,
         * re-rank vectors 96 KiB), ~54 KB in-memory: tens of batches. */
        p.memory_budget = (size_t)2 << 20;
        CHECK_OK(gpu_search(f, &p, (graft_bang_mode)m, nq, k, &b, &r2));
        printf("  %s: %d batch(es) at the default budget, %d under 2 MiB\n",
               mode_name((graft_bang_mode)m), r1.batches, r2.batches);
        CHECK(r1.batches == 1 && r2.batches >= 10, "%s: batches %d and %d",
              mode_name((graft_bang_mode)m), r1.batches, r2.batches);
        CHECK(same_results(&a, &b, nq * k), "%s %s: split batches changed the results", f->name,
              mode_name((graft_bang_mode)m));
        CHECK(r1.iterations == r2.iterations, "%s: %lld vs %lld expansions",
              mode_name((graft_bang_mode)m), (long long)r1.iterations, (long long)r2.iterations);
    }
    /* Under one query's working set: GRAFT_EGPU_NOMEM naming the bytes. */
    p.memory_budget = 100;
    CHECK_ERR(gpu_search(f, &p, GRAFT_BANG_OUT_OF_CORE, nq, k, &b, NULL), GRAFT_EGPU_NOMEM);
    CHECK(strstr(graft_last_error(), "bytes") != NULL, "message: %s", graft_last_error());
    CHECK_ERR(gpu_search(f, &p, GRAFT_BANG_IN_MEMORY, nq, k, &b, NULL), GRAFT_EGPU_NOMEM);
    free_results(&a);
    free_results(&b);
}

/* Filter (even ids only): no odd id, CPU agreement, recall among the allowed within 0.01. */
static void filtered(const fixture* f, graft_bang_mode mode) {
    const int64_t nq = f->nq, k = 10;
    uint8_t* allowed = calloc((size_t)(f->nb + 7) / 8, 1);
    for (int64_t i = 0; i < f->nb; i += 2) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    p.allowed = allowed;
    const int64_t ne = (f->nb + 1) / 2;
    float* xe = malloc(sizeof(float) * (size_t)(ne * f->d));
    for (int64_t i = 0; i < ne; i++)
        memcpy(xe + i * f->d, f->xb + 2 * i * f->d, sizeof(float) * (size_t)f->d);
    int32_t* gte = graft_test_exact_topk(xe, ne, f->xq, nq, f->d, f->metric, 10);
    for (int64_t i = 0; i < nq * 10; i++) gte[i] *= 2;
    compare(f, &p, mode, gte, 10);
    results g = alloc_results(nq, k);
    CHECK_OK(gpu_search(f, &p, mode, nq, k, &g, NULL));
    int odd = 0;
    for (int64_t i = 0; i < nq * k; i++) odd += g.I[i] >= 0 && (g.I[i] & 1);
    CHECK(odd == 0, "%s %s: %d filtered-out ids returned", f->name, mode_name(mode), odd);
    free_results(&g);
    free(allowed);
    free(xe);
    free(gte);
}

/* The L sweep, re-rank depths and the expansion cap, in both modes. */
static void sweep(const fixture* f, const int* Ls, int nL) {
    graft_bang_params p;
    printf("%s: n=%lld d=%lld nq=%lld R=%d M=%d\n", f->name, (long long)f->nb, (long long)f->d,
           (long long)f->nq, f->g.R, f->pq.M);
    for (int m = GRAFT_BANG_IN_MEMORY; m <= GRAFT_BANG_OUT_OF_CORE; m++) {
        graft_bang_params_defaults(&p);
        for (int i = 0; i < nL; i++) {
            p.L = Ls[i];
            compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        }
        /* re-rank depth k and 32 (sorting the expanded by PQ distance), depth above the
         * expansions (= all), and a binding expansion cap (max_expand = L) */
        graft_bang_params_defaults(&p);
        p.rerank = 10;
        compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        p.rerank = 32;
        compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        p.rerank = 8192;
        compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        p.rerank = 0;
        p.max_expand = p.L;
        compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        p.max_expand = 0;
        p.bloom_log2 = 20; /* a larger Bloom filter (fewer false positives) */
        compare(f, &p, (graft_bang_mode)m, f->gt, f->gt_k);
        filtered(f, (graft_bang_mode)m);
    }
    for (int i = 0; i < nL; i++) {
        graft_bang_params_defaults(&p);
        p.L = Ls[i];
        modes_identical(f, &p);
    }
    graft_bang_params_defaults(&p);
    p.rerank = 10;
    p.max_expand = 64;
    modes_identical(f, &p);
}

/* Sizes at the edges and bad arguments. */
static void edges(const fixture* f) {
    graft_bang_params p;
    graft_bang_params_defaults(&p);
    float D[64], Dc[64];
    int64_t I[64], Ic[64];
    for (int m = GRAFT_BANG_IN_MEMORY; m <= GRAFT_BANG_OUT_OF_CORE; m++) {
        const graft_bang_mode mode = (graft_bang_mode)m;
        /* k > n: a graph over the first 3 vectors (codes: their first 3 rows); found ones,
         * then -1 / FLT_MAX (-FLT_MAX for IP), as FAISS and the CPU reference */
        graft_graph g3 = {0};
        CHECK_OK(graft_rnnd_build_cpu(f->xb, 3, f->d, NULL, &g3));
        p.L = 16;
        for (int l2 = 0; l2 <= 1; l2++) {
            const graft_metric mt = l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT;
            CHECK_OK(graft_bang_search_gpu(&g3, &f->pq, f->codes, f->xb, f->d, mt, f->xq, 2, 8, &p,
                                           mode, D, I, NULL));
            CHECK_OK(graft_bang_search_cpu(&g3, &f->pq, f->codes, f->xb, f->d, mt, f->xq, 2, 8, &p,
                                           Dc, Ic));
            const float pad = l2 ? FLT_MAX : -FLT_MAX;
            CHECK(I[0] >= 0 && I[2] >= 0 && I[3] == -1 && I[7] == -1 && D[7] == pad && I[15] == -1,
                  "%s k > n: labels %lld %lld %lld, D[7] %g", mode_name(mode), (long long)I[0],
                  (long long)I[3], (long long)I[7], D[7]);
            CHECK(!memcmp(I, Ic, sizeof(int64_t) * 16) && !memcmp(D, Dc, sizeof(float) * 16),
                  "%s k > n: GPU and CPU results differ", mode_name(mode));
        }
        graft_graph_free(&g3);
        /* n = 1 */
        graft_graph g1 = {0};
        CHECK_OK(graft_rnnd_build_cpu(f->xb, 1, f->d, NULL, &g1));
        CHECK_OK(graft_bang_search_gpu(&g1, &f->pq, f->codes, f->xb, f->d, GRAFT_METRIC_L2, f->xq, 1,
                                       2, &p, mode, D, I, NULL));
        CHECK(I[0] == 0 && I[1] == -1 && D[1] == FLT_MAX, "%s n = 1: %lld %lld",
              mode_name(mode), (long long)I[0], (long long)I[1]);
        graft_graph_free(&g1);
        /* L = k = 10 and L = k = 1 against the CPU */
        const int Lk[] = {10, 1};
        for (int i = 0; i < 2; i++) {
            p.L = Lk[i];
            CHECK_OK(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, 4,
                                           Lk[i], &p, mode, D, I, NULL));
            CHECK_OK(graft_bang_search_cpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, 4,
                                           Lk[i], &p, Dc, Ic));
            CHECK(!memcmp(I, Ic, sizeof(int64_t) * 4 * Lk[i]), "%s L = k = %d: GPU and CPU labels "
                  "differ", mode_name(mode), Lk[i]);
        }
        /* nq = 0 */
        graft_bang_params_defaults(&p);
        CHECK_OK(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, 0, 10,
                                       &p, mode, D, I, NULL));
    }
    /* Bad arguments: EINVAL, outputs untouched. */
    graft_bang_params_defaults(&p);
    graft_bang_params e;
    const graft_bang_mode om = GRAFT_BANG_OUT_OF_CORE;
    I[0] = 4242;
#define BAD(params, mode, k, status)                                                             \
    CHECK_ERR(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, 1, k, \
                                    params, mode, D, I, NULL),                                  \
              status)
    e = p, e.bloom_log2 = 9;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.bloom_log2 = 25;
    BAD(&e, GRAFT_BANG_IN_MEMORY, 10, GRAFT_EINVAL);
    BAD(&p, GRAFT_BANG_AUTO, 10, GRAFT_EINVAL);
    BAD(&p, (graft_bang_mode)3, 10, GRAFT_EINVAL);
    e = p, e.L = 5;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.L = 1025;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.rerank = 5;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.max_expand = 32;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.max_expand = 8193;
    BAD(&e, om, 10, GRAFT_EINVAL);
    e = p, e.device = 99;
    BAD(&e, om, 10, GRAFT_EINVAL);
    BAD(&p, om, 0, GRAFT_EINVAL);
#undef BAD
    CHECK_ERR(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, 64, f->metric, f->xq, 1, 10, &p,
                                    om, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_bang_search_gpu(&f->g, &f->pq, NULL, f->xb, f->d, f->metric, f->xq, 1, 10, &p,
                                    om, D, I, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, NULL, 1, 10, &p,
                                    om, D, I, NULL), GRAFT_EINVAL);
    float* qn = malloc(sizeof(float) * (size_t)f->d);
    memcpy(qn, f->xq, sizeof(float) * (size_t)f->d);
    qn[5] = NAN;
    CHECK_ERR(graft_bang_search_gpu(&f->g, &f->pq, f->codes, f->xb, f->d, f->metric, qn, 1, 10, &p,
                                    om, D, I, NULL), GRAFT_EINVAL);
    free(qn);
    /* R above the kernels' 256 */
    graft_graph wide = {2, 257, malloc(sizeof(int32_t) * 2 * 257), 0};
    for (int i = 0; i < 2 * 257; i++) wide.nbrs[i] = -1;
    CHECK_ERR(graft_bang_search_gpu(&wide, &f->pq, f->codes, f->xb, f->d, f->metric, f->xq, 1, 10, &p,
                                    om, D, I, NULL), GRAFT_EINVAL);
    free(wide.nbrs);
    CHECK(I[0] == 4242, "a failed search wrote its output");
}

/* graft_pq_encode_gpu gives graft_pq_encode's codes bit for bit: M = 32, 8 and 1 on sift5k
 * (4, 16 and 128 dimensions a sub-space), M = 98 and 196 on Fashion-MNIST 10k, and over several
 * 256 MB chunks (sift5k repeated to 600k vectors); the errors. */
static void encode_case(const char* what, const float* x, int64_t n, int64_t d, int M) {
    graft_pq_params pp;
    graft_pq_params_defaults(&pp);
    pp.M = M;
    pp.kmeans = graft_faiss_kmeans;
    graft_pq pq = {0};
    CHECK_OK(graft_pq_train(d, n < 20000 ? n : 20000, x, &pp, &pq));
    uint8_t* cpu = malloc((size_t)n * M);
    uint8_t* gpu = malloc((size_t)n * M);
    double t0 = omp_get_wtime();
    CHECK_OK(graft_pq_encode(&pq, n, x, cpu));
    double t1 = omp_get_wtime();
    memset(gpu, 0xAB, (size_t)n * M);
    CHECK_OK(graft_pq_encode_gpu(&pq, n, x, gpu, 0));
    double t2 = omp_get_wtime();
    int64_t differ = 0;
    for (int64_t i = 0; i < n * M; i++) differ += cpu[i] != gpu[i];
    printf("PQ encode %s (n=%lld d=%lld M=%d): CPU %.3f s, GPU %.3f s, %lld of %lld codes differ\n", what,
           (long long)n, (long long)d, M, t1 - t0, t2 - t1, (long long)differ, (long long)(n * M));
    CHECK(differ == 0, "%s M=%d: %lld GPU codes differ from the CPU's", what, M, (long long)differ);
    free(cpu), free(gpu);
    graft_pq_free(&pq);
}

static void encode_gpu(const graft_test_sift* s) {
    encode_case("sift5k", s->xb, s->nb, s->d, 32);
    encode_case("sift5k", s->xb, s->nb, s->d, 8);
    encode_case("sift5k", s->xb, s->nb, s->d, 1);
    const int64_t rep = 134; /* 603k vectors, 309 MB: two chunks */
    float* big = malloc(sizeof(float) * (size_t)(s->nb * rep * s->d));
    for (int64_t r = 0; r < rep; r++) memcpy(big + r * s->nb * s->d, s->xb, sizeof(float) * (size_t)(s->nb * s->d));
    encode_case("sift5k x134", big, s->nb * rep, s->d, 32);
    free(big);
    float *xb = NULL, *xq = NULL;
    int64_t nb, nq, d;
    if (graft_test_load_fmnist(10000, 1, &xb, &nb, &xq, &nq, &d) == 0) {
        encode_case("fashion-mnist 10k", xb, nb, d, 98);
        encode_case("fashion-mnist 10k", xb, nb, d, 196);
        free(xb), free(xq);
    }
    graft_pq none = {0};
    uint8_t code;
    CHECK_ERR(graft_pq_encode_gpu(&none, 1, s->xb, &code, 0), GRAFT_EINVAL);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift sift;
    graft_test_load_sift5k(&sift);
    const int quick = getenv("GRAFT_TEST_QUICK") != NULL;
    fixture s;
    fixture_make(&s, "sift5k", sift.xb, sift.nb, sift.xq, quick ? 40 : sift.nq, sift.d, sift.gt,
                 sift.gt_k, GRAFT_METRIC_L2);
    if (quick) {
        graft_bang_params p;
        graft_bang_params_defaults(&p);
        p.L = 32;
        compare(&s, &p, GRAFT_BANG_IN_MEMORY, s.gt, s.gt_k);
        compare(&s, &p, GRAFT_BANG_OUT_OF_CORE, s.gt, s.gt_k);
        modes_identical(&s, &p);
        p.rerank = 10;
        p.max_expand = 32;
        compare(&s, &p, GRAFT_BANG_OUT_OF_CORE, s.gt, s.gt_k);
        filtered(&s, GRAFT_BANG_OUT_OF_CORE);
        edges(&s);
        fixture_free(&s);
        graft_test_free_sift(&sift);
        return graft_test_finish("test_gpu_bang (quick)");
    }
    encode_gpu(&sift);
    const int Ls[] = {16, 32, 64, 128};
    sweep(&s, Ls, 4);
    batches(&s);
    edges(&s);
    fixture_free(&s);

    /* cosine: inner product on normalized sift5k, graph and codebooks built for it */
    float* xb = malloc(sizeof(float) * (size_t)(sift.nb * sift.d));
    float* xq = malloc(sizeof(float) * (size_t)(sift.nq * sift.d));
    memcpy(xb, sift.xb, sizeof(float) * (size_t)(sift.nb * sift.d));
    memcpy(xq, sift.xq, sizeof(float) * (size_t)(sift.nq * sift.d));
    graft_test_normalize(xb, sift.nb, sift.d);
    graft_test_normalize(xq, sift.nq, sift.d);
    int32_t* gtc = graft_test_exact_topk(xb, sift.nb, xq, sift.nq, sift.d,
                                         GRAFT_METRIC_INNER_PRODUCT, 10);
    fixture c;
    fixture_make(&c, "sift5k cosine (IP)", xb, sift.nb, xq, sift.nq, sift.d, gtc, 10,
                 GRAFT_METRIC_INNER_PRODUCT);
    const int Lc[] = {16, 64};
    sweep(&c, Lc, 2);
    /* IP results: dot products, descending */
    {
        results r = alloc_results(c.nq, 10);
        graft_bang_params p;
        graft_bang_params_defaults(&p);
        CHECK_OK(gpu_search(&c, &p, GRAFT_BANG_OUT_OF_CORE, c.nq, 10, &r, NULL));
        int sorted = 1;
        for (int64_t q = 0; q < c.nq; q++)
            for (int j = 1; j < 10; j++) sorted &= r.D[q * 10 + j - 1] >= r.D[q * 10 + j];
        CHECK(sorted && r.D[0] > 0.5f && r.D[0] <= 1.0001f, "IP: not descending dot products (%g)",
              r.D[0]);
        free_results(&r);
    }
    fixture_free(&c);
    free(gtc);
    free(xb);
    free(xq);
    graft_test_free_sift(&sift);
    return graft_test_finish("test_gpu_bang");
}
