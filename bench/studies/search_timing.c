/* search_timing: the C side of bench/studies/python_overhead.py. Loads an index written by
 * faiss_graft_write_index (or FAISS) and a query file, then times faiss_Index_search of all the
 * queries in one call: one warm-up, then REPEATS timed calls. Prints one line per call,
 * "search_s <seconds>", for the Python script to compare with the same search from Python.
 *
 *   usage: search_timing INDEX QUERIES.fvecs K REPEATS */
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: search_timing INDEX QUERIES.fvecs K REPEATS\n");
        return 2;
    }
    int k = atoi(argv[3]), repeats = atoi(argv[4]);
    FaissIndex* index = NULL;
    if (faiss_graft_read_index_fname(argv[1], 0, &index)) {
        fprintf(stderr, "search_timing: %s\n", faiss_get_last_error());
        return 1;
    }
    float* xq = NULL;
    int64_t nq = 0, d = 0;
    if (graft_dataset_read_f32(argv[2], 0, -1, &xq, &nq, &d) != GRAFT_OK) {
        fprintf(stderr, "search_timing: %s\n", graft_last_error());
        return 1;
    }
    float* D = malloc(sizeof(float) * nq * k);
    idx_t* I = malloc(sizeof(idx_t) * nq * k);
    for (int r = -1; r < repeats; r++) {  /* r = -1: warm-up, not printed */
        double t0 = now();
        if (faiss_Index_search(index, nq, xq, k, D, I)) {
            fprintf(stderr, "search_timing: %s\n", faiss_get_last_error());
            return 1;
        }
        if (r >= 0) printf("search_s %.6f\n", now() - t0);
    }
    free(D);
    free(I);
    free(xq);
    faiss_Index_free(index);
    return 0;
}
