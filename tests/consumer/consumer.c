/* A program outside graft's tree, as a user writes it: only installed headers, FAISS's C API
 * calls, and graft's factory. It builds an index from a factory string, wraps it in IndexIDMap with
 * ids 1000 + row, searches sift5k, writes and reads the index back and checks that the reloaded
 * index answers the same, then prints recall@10 against the ground truth.
 *   consumer DATA_DIR [FACTORY]      (DATA_DIR holds sift5k/; FACTORY defaults to "GraftGraph")
 * Exit 0 when recall@10 >= 0.90 and the round trip agrees, 1 otherwise. */
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <graft/graft_faiss_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "consumer"
#include "consumer_common.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: consumer DATA_DIR [FACTORY]\n");
        return 2;
    }
    const char* factory = argc > 2 ? argv[2] : "GraftGraph";
    const int k = 10;
    int64_t nb, d, nq, dq, ngt, kgt;
    float* xb = read_f32(argv[1], "sift5k_base.fvecs", &nb, &d);
    float* xq = read_f32(argv[1], "sift5k_query.fvecs", &nq, &dq);
    float* gt = read_f32(argv[1], "sift5k_groundtruth.ivecs", &ngt, &kgt);
    if (!xb || !xq || !gt) return 1;

    FaissIndex* inner;
    FaissIndexIDMap* index;
    CHECK(faiss_graft_index_factory(&inner, (int)d, factory, METRIC_L2));
    CHECK(faiss_IndexIDMap_new(&index, inner));
    faiss_IndexIDMap_set_own_fields(index, 1);
    int64_t* ids = malloc(sizeof(int64_t) * nb);
    for (int64_t i = 0; i < nb; i++) ids[i] = 1000 + i;
    CHECK(faiss_Index_train(index, nb, xb));
    CHECK(faiss_Index_add_with_ids(index, nb, xb, ids));

    float* D = malloc(sizeof(float) * nq * k);
    int64_t* I = malloc(sizeof(int64_t) * nq * k);
    float* D2 = malloc(sizeof(float) * nq * k);
    int64_t* I2 = malloc(sizeof(int64_t) * nq * k);
    CHECK(faiss_Index_search(index, nq, xq, k, D, I));

    const char* path = "consumer_index.graft";
    FaissIndex* back;
    CHECK(faiss_graft_write_index_fname(index, path));
    CHECK(faiss_graft_read_index_fname(path, 0, &back));
    CHECK(faiss_Index_search(back, nq, xq, k, D2, I2));
    int same = memcmp(I, I2, sizeof(int64_t) * nq * k) == 0;
    remove(path);

    int64_t hits = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++)
                if (I[q * k + i] == 1000 + (int64_t)gt[q * kgt + j]) hits++;
    double recall = (double)hits / (double)(nq * k);
    printf("consumer: graft %s, %s on sift5k (%lld x %lld): recall@10 %.4f, reloaded index %s\n",
           graft_version_string(), factory, (long long)nb, (long long)d, recall,
           same ? "identical" : "DIFFERENT");

    faiss_Index_free(back);
    faiss_Index_free(index);
    free(xb), free(xq), free(gt), free(ids), free(D), free(I), free(D2), free(I2);
    return recall >= 0.90 && same ? 0 : 1;
}
