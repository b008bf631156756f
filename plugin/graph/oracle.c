/* The exact-k-NN start of a graph build (graft_grnnd_params.init_exact): each vertex's exact R
 * nearest, from the flat index's k-NN graph (exact/, on the build's GPU or the CPU), as the
 * builder's initial neighbours. With the same rounds and pruning as every build, the graph it
 * gives is the best that pruning rule reaches: the oracle GRNND's graph is measured against
 * (bench/RESULTS.md, "A build that converges"). n^2 d work: for small sets and for measuring. */
#include <stdlib.h>

#include "core/error.h"
#include "graft/flat.h"
#include "graph/build.h"

int graft_graph_exact_init(const float* x, int64_t n, int64_t d, const graft_grnnd_params* b, int gpu,
                           int32_t** ids, int* k_out) {
    const int64_t k = b->base.R < n - 1 ? b->base.R : (n - 1 > 0 ? n - 1 : 1);
    graft_flat_params fp;
    graft_flat_params_defaults(&fp);
    fp.metric = b->base.metric;
    fp.device = gpu ? b->device : -1;
    graft_flat* flat = NULL;
    float* D = malloc((size_t)n * (size_t)k * sizeof(float));
    int64_t* I = malloc((size_t)n * (size_t)k * sizeof(int64_t));
    int32_t* out = malloc((size_t)n * (size_t)k * sizeof(int32_t));
    int rc = D && I && out ? graft_flat_new(d, &fp, &flat)
                           : graft_fail(GRAFT_ENOMEM, "graft_graph_exact_init: out of host memory");
    if (rc == GRAFT_OK) rc = graft_flat_add(flat, n, x);
    if (rc == GRAFT_OK) rc = graft_flat_knn_graph(flat, k, D, I);
    graft_flat_free(flat);
    if (rc == GRAFT_OK) {
        const int64_t m = n * k;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++) out[i] = (int32_t)I[i];
    }
    free(D);
    free(I);
    if (rc != GRAFT_OK) {
        free(out);
        return rc;
    }
    *ids = out;
    *k_out = (int)k;
    return GRAFT_OK;
}
