/* search_loop: the speed a user's faiss_c program gets. Written as a user would write it: a
 * factory string, add, set L, then the whole query set searched five times in a row from
 * malloc'd buffers, each call timed with the wall clock. No pinned memory, no warm-up but the
 * calls themselves, and OpenMP as the environment leaves it (OMP_NUM_THREADS unset: every core).
 * graft-bench's figure for the same index, L and data is the one to compare with (issue 36: within
 * 10%, with OMP_NUM_THREADS unset and at 1).
 *
 *   usage: search_loop BASE QUERY [DESCRIPTION [L [K [CALLS]]]]
 *   e.g.   search_loop base.u8bin query.u8bin GraftGraph 48
 *
 * BASE and QUERY: any file graft/dataset.h reads (.fvecs .bvecs .fbin .u8bin, Fashion-MNIST IDX).
 * Prints the build (add) time, each call's time and QPS, and their median. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "graft/dataset.h"
#include "graft_faiss_c.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float* load(const char* path, int64_t* n, int64_t* d) {
    float* x = NULL;
    const int rc = strstr(path, "idx3-ubyte") ? graft_fmnist_read(path, -1, &x, n, d)
                                              : graft_dataset_read_f32(path, 0, -1, &x, n, d);
    if (rc != GRAFT_OK) {
        fprintf(stderr, "search_loop: %s\n", graft_last_error());
        exit(1);
    }
    return x;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

#define FAISS_OK(call)                                                                  \
    do {                                                                                \
        if ((call) != 0) {                                                              \
            fprintf(stderr, "search_loop: %s: %s\n", #call, faiss_get_last_error());   \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s BASE QUERY [DESCRIPTION [L [K [CALLS]]]]\n", argv[0]);
        return 2;
    }
    const char* desc = argc > 3 ? argv[3] : "GraftGraph";
    const int L = argc > 4 ? atoi(argv[4]) : 0; /* 0: the index's default */
    const int64_t k = argc > 5 ? atoll(argv[5]) : 10;
    const int calls = argc > 6 ? atoi(argv[6]) : 5;
    int64_t nb, nq, d, dq;
    float* xb = load(argv[1], &nb, &d);
    float* xq = load(argv[2], &nq, &dq);
    if (dq != d || k < 1 || calls < 1 || calls > 1000) {
        fprintf(stderr, "search_loop: query d %lld != base d %lld, or bad K or CALLS\n",
                (long long)dq, (long long)d);
        return 2;
    }
    float* D = malloc((size_t)nq * k * sizeof(float));
    int64_t* I = malloc((size_t)nq * k * sizeof(int64_t));
    if (!D || !I) return 1;

    FaissIndex* index = NULL;
    FAISS_OK(faiss_graft_index_factory(&index, (int)d, desc, METRIC_L2));
    double t = now();
    FAISS_OK(faiss_Index_add(index, nb, xb));
    const double add_s = now() - t;
    if (L > 0) FAISS_OK(faiss_graft_set_param(index, "L", L));
    const char* omp = getenv("OMP_NUM_THREADS");
    printf("search_loop: %s, L %d, base %lld x %lld, %lld queries, k %lld, OMP_NUM_THREADS %s; "
           "add %.3f s\n", desc, L, (long long)nb, (long long)d, (long long)nq, (long long)k,
           omp ? omp : "unset", add_s);
    double* ms = malloc((size_t)calls * sizeof(double));
    for (int c = 0; c < calls; c++) {
        t = now();
        FAISS_OK(faiss_Index_search(index, nq, xq, k, D, I));
        ms[c] = 1e3 * (now() - t);
        printf("  call %d: %.3f ms, %.0f QPS%s\n", c + 1, ms[c], nq / ms[c] * 1e3,
               c == 0 ? " (the first search after the add: builds the graph)" : "");
    }
    /* The median of the calls after the first (which builds a graph index's graph). */
    const int from = calls > 1 ? 1 : 0;
    qsort(ms + from, (size_t)(calls - from), sizeof *ms, cmp_double);
    const double med = ms[from + (calls - from) / 2];
    printf("search_loop: median %.3f ms, %.0f QPS (calls 2..%d)\n", med, nq / med * 1e3, calls);
    faiss_Index_free(index);
    free(ms);
    free(D);
    free(I);
    free(xb);
    free(xq);
    return 0;
}
