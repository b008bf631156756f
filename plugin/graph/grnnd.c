/* GRNND on the GPU, host side (see graft/graph.h): checks the arguments as the CPU reference
 * does, uploads the vectors (or a storage's codes: graph/build.h, graft_build_vectors), runs
 * gpu/grnnd_build.cu and takes the graph back in graft_graph form with the same entry-point rule
 * as the reference. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host_memory.h"
#include "graft/graph.h"
#include "graft_gpu.h"
#include "core/index_common.h"
#include "core/validate.h"
#include "graph/build.h"
#include "storage/decode.h"

void graft_grnnd_params_defaults(graft_grnnd_params* p) {
    if (!p) return;
    graft_rnnd_params_defaults(&p->base);
    p->order = GRAFT_GRNND_SORTED;
    p->pairs = 128;
    p->staged = -1;
    p->device = 0;
    p->memory_budget = 0;
    p->init_exact = 0;
    p->build_from = GRAFT_BUILD_FROM_FP32;
    p->fill = 0;
}

/* The device scratch GRNND takes: two pools of n x R 8-byte keys, each rounded up to 256 bytes,
 * and 256 bytes for the convergence rule's counter. */
enum { kPoolsOverhead = 3 * 256 };
static size_t pools_bytes(size_t n, size_t R) { return 2 * n * R * 2 * sizeof(int32_t) + kPoolsOverhead; }

int64_t graft_grnnd_max_vectors(int64_t d, const graft_grnnd_params* p) {
    return d < 1 ? 0 : graft_grnnd_max_vectors_of((size_t)d * sizeof(float), p);
}

int64_t graft_grnnd_max_vectors_of(size_t row_bytes, const graft_grnnd_params* p) {
    if (!p || row_bytes < 1 || p->base.R < 1) return 0;
    const size_t R = (size_t)p->base.R, per = pools_bytes(1, R) - kPoolsOverhead; /* 16 R */
    const size_t room = graft_gpu_device_memory(p->device) / 10 * 8;
    int64_t m = (int64_t)(room / (per + row_bytes));
    if (p->memory_budget) {
        const int64_t mb = p->memory_budget > kPoolsOverhead
                               ? (int64_t)((p->memory_budget - kPoolsOverhead) / per) : 0;
        m = mb < m ? mb : m;
    }
    return m;
}

int graft_grnnd_build_gpu(const float* x, int64_t n, int64_t d, const graft_grnnd_params* params,
                          graft_graph* out, graft_grnnd_report* report) {
    return graft_grnnd_build_gpu_on(x, NULL, n, d, params, out, report);
}

int graft_grnnd_build_gpu_on(const float* x, const float* dx, int64_t n, int64_t d,
                             const graft_grnnd_params* params, graft_graph* out,
                             graft_grnnd_report* report) {
    const graft_build_vectors src = {.x = x, .dx = dx};
    return graft_grnnd_build_gpu_from(&src, n, d, params, out, report);
}

int graft_grnnd_build_gpu_from(const graft_build_vectors* src, int64_t n, int64_t d,
                               const graft_grnnd_params* params, graft_graph* out,
                               graft_grnnd_report* report) {
    graft_grnnd_params p;
    if (params)
        p = *params;
    else
        graft_grnnd_params_defaults(&p);
    const graft_rnnd_params* b = &p.base;
    const double t0 = graft_now_s();
    /* Vectors already on the device are an index's, checked finite when they were added. */
    GRAFT_TRY(graft_check_build_vectors(src, n, d, b, out, "graft_grnnd_build_gpu"));
    const int codes = graft_build_reads_codes(src);
    const void* given = codes ? src->dcodes : (const void*)src->dx;
    if (b->R > 64 || p.pairs < 0 || p.pairs > 256 || p.staged < -1 || p.staged > 1 ||
        (p.order != GRAFT_GRNND_SORTED && p.order != GRAFT_GRNND_RANDOM) ||
        (p.order == GRAFT_GRNND_RANDOM && b->alpha != 1.0f))
        return graft_fail(GRAFT_EINVAL,
                          "graft_grnnd_build_gpu: R=%d order=%d pairs=%d staged=%d alpha=%g (the GPU "
                          "builder needs R <= 64, order GRAFT_GRNND_SORTED or GRAFT_GRNND_RANDOM, "
                          "0 <= pairs <= 256, staged -1, 0 or 1, alpha 1 with the random order)",
                          b->R, p.order, p.pairs, p.staged, (double)b->alpha);
    /* Automatic: Algorithm 2's own pairs for the sorted order (bench/RESULTS.md: 1.5x faster on
     * 1M dense SIFT, 2x on Fashion-MNIST), shared-memory tiles for the random order. */
    const int staged = p.staged >= 0 ? p.staged : p.order == GRAFT_GRNND_RANDOM;
    size_t xbytes, gbytes, pool_bytes;
    if (graft_mul_overflow((size_t)n, graft_build_row_bytes(src, d), &xbytes) ||
        graft_mul_overflow((size_t)n, (size_t)b->R * sizeof(int32_t), &gbytes) ||
        graft_mul_overflow(gbytes, 2, &pool_bytes))
        return graft_fail(GRAFT_ENOMEM, "graft_grnnd_build_gpu: n x d = %lld x %lld overflows",
                          (long long)n, (long long)d);
    const size_t need = pools_bytes((size_t)n, (size_t)b->R);
    const size_t budget = p.memory_budget ? p.memory_budget : need;
    int rounds = 0;
    graft_gpu_grnnd_params gp = {b->S, b->R, b->T1, b->T2, b->rho,
                                 p.order == GRAFT_GRNND_SORTED, p.pairs, staged,
                                 b->metric == GRAFT_METRIC_L2, b->seed,
                                 b->delta > 0.0f ? graft_rnnd_converged_below(n, b->R, b->delta) : -1,
                                 GRAFT_RNND_CHURN_FLOOR, &rounds, NULL, 0, b->alpha * b->alpha,
                                 b->verbose};
    const double t1 = graft_now_s();
    graft_gpu_ctx* ctx = NULL;
    int rc = graft_gpu_ctx_create(p.device, budget, &ctx);
    if (rc != GRAFT_OK)
        return graft_fail(rc, "graft_grnnd_build_gpu: %s", graft_gpu_last_error());
    const double t1b = graft_now_s();
    int32_t* nbrs = malloc(gbytes);
    if (!nbrs) {
        graft_gpu_ctx_destroy(ctx);
        return graft_fail(GRAFT_ENOMEM, "graft_grnnd_build_gpu: out of host memory");
    }
    /* Fault the pages in on all cores, 2 MiB at a time where the host allows: the graph's copy
     * back to fresh pageable memory otherwise spends most of its time in page faults (0.19 s of a
     * 1M build on the H100 machine). */
    graft_host_huge_pages(nbrs, gbytes);
    const int64_t nrows = n;
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < nrows; v++) memset(nbrs + v * b->R, 0xff, (size_t)b->R * sizeof(int32_t));
    const double t2 = graft_now_s();
    void* dx = (void*)given;
    float ms = 0;
    if (!given) rc = graft_gpu_malloc(ctx, &dx, xbytes);
    if (rc == GRAFT_OK && !given)
        rc = graft_gpu_upload(ctx, dx, codes ? (const void*)src->codes : src->x, xbytes);
    /* SQ8: the walk's per-dimension decode (2 d floats) beside the codes. */
    float* dsq = NULL;
    const int sq8 = codes && src->st->kind == GRAFT_STORAGE_SQ8;
    const size_t sq_bytes = sq8 ? (size_t)d * 2 * sizeof(float) : 0;
    if (rc == GRAFT_OK && sq_bytes) {
        float* so = malloc(sq_bytes);
        rc = so ? graft_gpu_malloc(ctx, (void**)&dsq, sq_bytes) : GRAFT_ENOMEM;
        if (rc == GRAFT_OK) graft_sq8_affine(src->st, so);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dsq, so, sq_bytes);
        free(so);
    }
    /* Given initial neighbours (the oracle graph) go up beside the vectors. */
    int32_t* dinit = NULL;
    const size_t init_bytes = b->init ? (size_t)n * (size_t)b->init_k * sizeof(int32_t) : 0;
    if (rc == GRAFT_OK && b->init) rc = graft_gpu_malloc(ctx, (void**)&dinit, init_bytes);
    if (rc == GRAFT_OK && b->init) rc = graft_gpu_upload(ctx, dinit, b->init, init_bytes);
    gp.init = dinit;
    gp.init_k = b->init ? b->init_k : 0;
    const double t3 = graft_now_s();
    const graft_gpu_vectors gv = {codes ? src->st->kind : GRAFT_STORAGE_FP32, dx, dsq,
                                  dsq ? dsq + d : NULL};
    if (rc == GRAFT_OK) rc = graft_gpu_grnnd_build(ctx, &gv, n, d, &gp, nbrs, &ms);
    const double t4 = graft_now_s();
    const size_t peak = xbytes + sq_bytes + init_bytes + graft_gpu_ctx_scratch_peak(ctx);
    if (rc == GRAFT_ENOMEM) rc = graft_fail(rc, "graft_grnnd_build_gpu: out of host memory");
    else if (rc != GRAFT_OK) rc = graft_fail(rc, "graft_grnnd_build_gpu: %s", graft_gpu_last_error());
    if (!given) graft_gpu_free(ctx, dx);
    if (dsq) graft_gpu_free(ctx, dsq);
    if (dinit) graft_gpu_free(ctx, dinit);
    graft_gpu_ctx_destroy(ctx);
    if (rc != GRAFT_OK) {
        free(nbrs);
        return rc;
    }
    const double t5 = graft_now_s();
    /* The pools have no rule that keeps an outlier's last in-edge (graph/orphans.c). */
    graft_graph g = {n, b->R, nbrs, graft_graph_entry_point_of(src, n, d)};
    int64_t linked = 0;
    rc = graft_graph_link_orphans_of(&g, src, d, b->metric, &linked);
    if (rc != GRAFT_OK) {
        free(nbrs);
        return rc;
    }
    *out = g;
    if (report) {
        report->gpu_seconds = ms / 1000.0;
        report->upload_seconds = (t1b - t1) + (t3 - t2);
        report->download_seconds = (t4 - t3) - ms / 1000.0;
        report->host_seconds = (t1 - t0) + (t2 - t1b) + (graft_now_s() - t5);
        report->gpu_peak_bytes = peak;
        report->rounds = rounds;
        report->linked = linked;
    }
    return GRAFT_OK;
}
