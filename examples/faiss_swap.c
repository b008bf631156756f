/* faiss_swap: graft as a drop-in for FAISS in a faiss_c program. The pipeline below is plain
 * faiss_c; the only graft-specific line is the factory call, which takes graft's strings
 * ("GraftFlat", "GraftFlat,cpu", "GraftFlat,gpu=1", "PCA64,GraftFlat") as well as FAISS's own
 * ("Flat", "HNSW32", "IVF64,Flat", ...).
 *
 *   usage: faiss_swap DESCRIPTION... [DATA_DIR]      e.g.  faiss_swap HNSW32 GraftFlat
 *
 * Runs on sift5k (DATA_DIR/sift5k/; default: the environment's GRAFT_DATA_DIR, else the folder
 * configured at build time) and prints, per description, the build (train, add and a first
 * query) and search times, queries per second and recall@10. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "graft/dataset.h"
#include "graft_faiss_c.h"

#ifndef GRAFT_DATA_DIR
#define GRAFT_DATA_DIR "."
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float* load(const char* dir, const char* file, int64_t* n, int64_t* d) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sift5k/%s", dir, file);
    float* x = NULL;
    if (graft_dataset_read_f32(path, 0, -1, &x, n, d) != GRAFT_OK) {
        fprintf(stderr, "faiss_swap: %s\n", graft_last_error());
        exit(1);
    }
    return x;
}

static int is_dir(const char* p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DESCRIPTION... [DATA_DIR]   e.g. %s HNSW32 GraftFlat\n", argv[0], argv[0]);
        return 2;
    }
    const char* env = getenv("GRAFT_DATA_DIR");
    const char* dir = env && env[0] ? env : GRAFT_DATA_DIR;
    if (argc > 2 && is_dir(argv[argc - 1])) dir = argv[--argc];
    int64_t nb, nq, d, dq;
    float* xb = load(dir, "sift5k_base.fvecs", &nb, &d);
    float* xq = load(dir, "sift5k_query.fvecs", &nq, &dq);
    char gt_path[4096];
    graft_dataset gt; /* int32 ids of the 100 true nearest neighbours of each query */
    snprintf(gt_path, sizeof gt_path, "%s/sift5k/sift5k_groundtruth.ivecs", dir);
    if (graft_dataset_read(gt_path, 0, -1, &gt) != GRAFT_OK) {
        fprintf(stderr, "faiss_swap: %s\n", graft_last_error());
        return 1;
    }
    const int32_t* truth = gt.data;
    const int k = 10;
    float* D = malloc(sizeof(float) * nq * k);
    idx_t* I = malloc(sizeof(idx_t) * nq * k);
    printf("sift5k: %lld base, %lld queries, d=%lld, k=%d\n", (long long)nb, (long long)nq, (long long)d, k);
    printf("%-24s %12s %10s %10s %10s\n", "index", "build ms", "search ms", "QPS", "recall@10");

    int status = 0;
    for (int a = 1; a < argc; a++) {
        FaissIndex* index = NULL;
        /* The one line that differs from a FAISS-only program (faiss_index_factory). */
        if (faiss_graft_index_factory(&index, (int)d, argv[a], METRIC_L2) != 0) {
            printf("%-24s error: %s\n", argv[a], faiss_get_last_error());
            status = 1;
            continue;
        }
        double t0 = now();
        int rc = faiss_Index_is_trained(index) ? 0 : faiss_Index_train(index, nb, xb);
        if (rc == 0) rc = faiss_Index_add(index, nb, xb);
        /* One query, counted in the build: a graph index builds its graph on the first
         * search after adds, and a GPU index starts cuBLAS on its first search. */
        if (rc == 0) rc = faiss_Index_search(index, 1, xq, k, D, I);
        double t1 = now(), t2 = t1;
        if (rc == 0) rc = faiss_Index_search(index, nq, xq, k, D, I);
        double t3 = now();
        if (rc != 0) {
            printf("%-24s error: %s\n", argv[a], faiss_get_last_error());
            faiss_Index_free(index);
            status = 1;
            continue;
        }
        int64_t hits = 0; /* recall@10: true top-10 ids found in the top 10 returned */
        for (int64_t q = 0; q < nq; q++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++)
                    if (I[q * k + i] == truth[q * gt.d + j]) hits++;
        printf("%-24s %12.1f %10.1f %10.0f %10.4f\n", argv[a], 1e3 * (t1 - t0), 1e3 * (t3 - t2),
               nq / (t3 - t2), (double)hits / (nq * k));
        faiss_Index_free(index);
    }
    free(xb); free(xq); free(D); free(I);
    graft_dataset_free(&gt);
    return status;
}
