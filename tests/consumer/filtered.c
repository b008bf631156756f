/* A program written against FAISS 1.15's C API (faiss_get_version, search parameters with
 * IDSelector trees, faiss_Index_search_with_params), in which graft is swapped in by one line: the factory call (faiss_graft_index_factory takes FAISS's strings too). It builds
 * IDMap,<FACTORY> on sift5k with ids 1000 + row, searches with an IDSelectorAnd(IDSelectorRange,
 * IDSelectorNot(IDSelectorBitmap)) on those ids, and checks every label against the selector and
 * recall@10 against the exact filtered neighbours (brute force here).
 *   filtered DATA_DIR FACTORY          (e.g. HNSW32, GraftGraph, GraftFlat)
 * Exit 0 when recall@10 >= 0.90 and no label breaks the filter. Built by tests/consumer/check.sh
 * where the installed FAISS's C API has faiss_Index_search_with_params. */
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>
#include <faiss/c_api/utils/utils_c.h>
#include <graft/graft_faiss_c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PROGRAM "filtered"
#include "consumer_common.h"

enum { K = 10, BASE = 1000 };

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: filtered DATA_DIR FACTORY\n");
        return 2;
    }
    int64_t nb, d, nq, dq;
    float* xb = read_f32(argv[1], "sift5k_base.fvecs", &nb, &d);
    float* xq = read_f32(argv[1], "sift5k_query.fvecs", &nq, &dq);
    if (!xb || !xq) return 1;

    FaissIndex* inner = NULL;
    /* The one line: was faiss_index_factory(&inner, (int)d, argv[2], METRIC_L2). */
    CHECK(faiss_graft_index_factory(&inner, (int)d, argv[2], METRIC_L2));
    FaissIndexIDMap* index = NULL;
    CHECK(faiss_IndexIDMap_new(&index, inner));
    faiss_IndexIDMap_set_own_fields(index, 1);
    idx_t* ids = malloc(sizeof(idx_t) * nb);
    for (int64_t i = 0; i < nb; i++) ids[i] = BASE + i;
    CHECK(faiss_Index_train(index, nb, xb));
    CHECK(faiss_Index_add_with_ids(index, nb, xb, ids));

    /* The filter, on the ids the program gave: rows [500, 4000) that are not in the bitmap
     * (every third row). */
    const int64_t hi = BASE + nb;
    uint8_t* bits = calloc((size_t)(hi + 7) / 8, 1);
    for (int64_t i = 0; i < nb; i += 3) bits[(BASE + i) >> 3] |= (uint8_t)(1u << ((BASE + i) & 7));
    FaissIDSelectorRange* range = NULL;
    FaissIDSelectorBitmap* bitmap = NULL;
    FaissIDSelectorNot* not_bitmap = NULL;
    FaissIDSelectorAnd* filter = NULL;
    CHECK(faiss_IDSelectorRange_new(&range, BASE + 500, BASE + 4000));
    CHECK(faiss_IDSelectorBitmap_new(&bitmap, (size_t)(hi + 7) / 8, bits));
    CHECK(faiss_IDSelectorNot_new(&not_bitmap, (FaissIDSelector*)bitmap));
    CHECK(faiss_IDSelectorAnd_new(&filter, (FaissIDSelector*)range, (FaissIDSelector*)not_bitmap));
    FaissSearchParameters* params = NULL;
    CHECK(faiss_SearchParameters_new(&params, (FaissIDSelector*)filter));

    float* D = malloc(sizeof(float) * nq * K);
    idx_t* I = malloc(sizeof(idx_t) * nq * K);
    CHECK(faiss_Index_search_with_params(index, nq, xq, K, params, D, I));

    /* The exact filtered neighbours, by brute force. */
    int64_t broken = 0, hits = 0;
    for (int64_t q = 0; q < nq; q++) {
        int64_t best[K];
        float bestd[K];
        int m = 0;
        for (int64_t i = 0; i < nb; i++) {
            const int64_t id = BASE + i;
            if (id < BASE + 500 || id >= BASE + 4000 || i % 3 == 0) continue;
            float s = 0;
            for (int64_t j = 0; j < d; j++) {
                float t = xb[i * d + j] - xq[q * d + j];
                s += t * t;
            }
            if (m < K || s < bestd[m - 1]) {
                int p = m < K ? m++ : K - 1;
                while (p > 0 && bestd[p - 1] > s) {
                    bestd[p] = bestd[p - 1];
                    best[p] = best[p - 1];
                    p--;
                }
                bestd[p] = s;
                best[p] = id;
            }
        }
        for (int j = 0; j < K; j++) {
            const idx_t l = I[q * K + j];
            const int64_t i = l - BASE;
            if (l < BASE + 500 || l >= BASE + 4000 || i % 3 == 0) broken++;
            for (int t = 0; t < m; t++) hits += best[t] == l;
        }
    }
    const double recall = (double)hits / (double)(nq * K);
    printf("filtered: FAISS %s, graft %s, %s: recall@10 %.4f with And(Range, Not(Bitmap)), %lld labels "
           "outside the filter\n",
           faiss_get_version(), graft_version_string(), argv[2], recall, (long long)broken);
    faiss_SearchParameters_free(params);
    faiss_IDSelector_free((FaissIDSelector*)filter);
    faiss_IDSelector_free((FaissIDSelector*)not_bitmap);
    faiss_IDSelector_free((FaissIDSelector*)bitmap);
    faiss_IDSelector_free((FaissIDSelector*)range);
    faiss_Index_free(index);
    free(bits);
    free(ids);
    free(D);
    free(I);
    free(xb);
    free(xq);
    return recall >= 0.90 && broken == 0 ? 0 : 1;
}
