/* graph_build: a proximity graph built by GRNND on the GPU (the CPU RNN-Descent reference where no
 * GPU is visible, or with --cpu), then searched on the CPU at a few beam widths.
 *
 *   usage: graph_build [--cpu] [BASE QUERY GROUNDTRUTH]
 *
 * Any .fvecs/.bvecs/.fbin/.u8bin base and query files with an .ivecs/.ibin ground truth (exact
 * neighbours, nearest first); default: sift5k from the configured data folder. Prints the build
 * time, the graph's mean degree and reachability, and recall@10 with queries per second by L. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graft/dataset.h"
#include "graft/graph.h"

#ifndef GRAFT_DATA_DIR
#define GRAFT_DATA_DIR "."
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void die(const char* what) {
    fprintf(stderr, "graph_build: %s: %s\n", what, graft_last_error());
    exit(1);
}

int main(int argc, char** argv) {
    int cpu = argc > 1 && strcmp(argv[1], "--cpu") == 0;
    char base[4096], query[4096], gt_path[4096];
    if (argc - cpu >= 4) {
        snprintf(base, sizeof base, "%s", argv[1 + cpu]);
        snprintf(query, sizeof query, "%s", argv[2 + cpu]);
        snprintf(gt_path, sizeof gt_path, "%s", argv[3 + cpu]);
    } else {
        const char* env = getenv("GRAFT_DATA_DIR");
        const char* dir = env && env[0] ? env : GRAFT_DATA_DIR;
        snprintf(base, sizeof base, "%s/sift5k/sift5k_base.fvecs", dir);
        snprintf(query, sizeof query, "%s/sift5k/sift5k_query.fvecs", dir);
        snprintf(gt_path, sizeof gt_path, "%s/sift5k/sift5k_groundtruth.ivecs", dir);
    }
    float *xb = NULL, *xq = NULL;
    graft_dataset gts = {0};
    int64_t nb, nq, d, dq;
    if (graft_dataset_read_f32(base, 0, -1, &xb, &nb, &d) != GRAFT_OK) die(base);
    if (graft_dataset_read_f32(query, 0, -1, &xq, &nq, &dq) != GRAFT_OK) die(query);
    if (graft_dataset_read(gt_path, 0, -1, &gts) != GRAFT_OK) die(gt_path);
    const int32_t* gt = gts.data;
    const int64_t ngt = gts.n, kgt = gts.d;
    if (gts.dtype != GRAFT_DTYPE_I32 || dq != d || ngt < nq || kgt < 10) {
        fprintf(stderr, "graph_build: queries (d=%lld) or int32 ground truth (%lld x %lld) do not match the base (d=%lld)\n",
                (long long)dq, (long long)ngt, (long long)kgt, (long long)d);
        return 1;
    }
    cpu |= !graft_gpu_available();
    graft_grnnd_params p;
    graft_grnnd_params_defaults(&p);
    graft_graph g = {0};
    double t0 = now();
    int rc = cpu ? graft_rnnd_build_cpu(xb, nb, d, &p.base, &g) : graft_grnnd_build_gpu(xb, nb, d, &p, &g, NULL);
    double t = now() - t0;
    if (rc != GRAFT_OK) die("build");
    double mean, reach;
    int maxd;
    if (graft_graph_stats(&g, &mean, &maxd, NULL, &reach) != GRAFT_OK) die("stats");
    printf("%s: n=%lld d=%lld, built by %s in %.3f s (S=%d R=%d T1=%d T2=%d rho=%.2f): mean degree %.2f, "
           "max %d, reachable %.5f\n",
           base, (long long)nb, (long long)d, cpu ? "the CPU reference (RNN-Descent)" : "GRNND on the GPU",
           t, p.base.S, p.base.R, p.base.T1, p.base.T2, (double)p.base.rho, mean, maxd, reach);
    float* D = malloc(sizeof(float) * nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * nq * 10);
    if (!D || !I) return 1;
    for (int L = 16; L <= 128; L *= 2) {
        double s0 = now();
        if (graft_graph_search_cpu(&g, xb, d, GRAFT_METRIC_L2, xq, nq, 10, L, D, I) != GRAFT_OK) die("search");
        double st = now() - s0;
        int64_t hit = 0;
        for (int64_t q = 0; q < nq; q++)
            for (int i = 0; i < 10; i++)
                for (int j = 0; j < 10; j++) hit += I[q * 10 + i] == gt[q * kgt + j];
        printf("  L=%-4d recall@10 %.4f  %9.0f QPS (CPU search)\n", L, hit / (10.0 * nq), nq / st);
    }
    graft_graph_free(&g);
    free(D);
    free(I);
    free(xb);
    free(xq);
    graft_dataset_free(&gts);
    return 0;
}
