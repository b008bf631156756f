/* The checks of build parameters and outside graphs (graph/build.h); the build dispatch that uses
 * them is in build_dispatch.c. */
#include "graph/build.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/index_common.h"
#include "core/validate.h"

int graft_check_build_params(const graft_grnnd_params* b, int gpu, const char* fn) {
    const float one_vector = 0.0f;
    graft_graph unused = {0};
    if (b->base.init || (b->init_exact != 0 && b->init_exact != 1))
        return graft_fail(GRAFT_EINVAL,
                          "%s: init_exact = %d (0: S random initial neighbours, 1: the exact R "
                          "nearest); base.init is for direct builder calls, not an index's "
                          "parameters",
                          fn, b->init_exact);
    if (b->build_from != GRAFT_BUILD_FROM_FP32 && b->build_from != GRAFT_BUILD_FROM_CODES)
        return graft_fail(GRAFT_EINVAL,
                          "%s: build_from = %d (0: the FP32 vectors, 1: an FP16 or SQ8 storage's "
                          "codes)", fn, b->build_from);
    if (b->fill != 0 && b->fill != 1)
        return graft_fail(GRAFT_EINVAL, "%s: fill = %d (0: the pruned rows, 1: rows filled to R)", fn,
                          b->fill);
    GRAFT_TRY(graft_check_graph_build(&one_vector, 1, 1, &b->base, &unused, fn));
    if (gpu && (b->base.R > GRAFT_GPU_BUILD_MAX_R || b->pairs < 0 || b->pairs > 256 || b->staged < -1 ||
                b->staged > 1 || (b->order != GRAFT_GRNND_SORTED && b->order != GRAFT_GRNND_RANDOM)))
        return graft_fail(GRAFT_EINVAL,
                          "%s: R=%d order=%d pairs=%d staged=%d (a GPU index builds with GRNND: "
                          "R <= %d, order GRAFT_GRNND_SORTED or GRAFT_GRNND_RANDOM, "
                          "0 <= pairs <= 256, staged -1, 0 or 1)",
                          fn, b->base.R, b->order, b->pairs, b->staged, GRAFT_GPU_BUILD_MAX_R);
    return GRAFT_OK;
}

int graft_check_graph_rows(int64_t n, const graft_graph* graph, int gpu, const char* fn) {
    if (!graph || !graph->nbrs) return graft_fail(GRAFT_EINVAL, "%s: NULL graph", fn);
    if (n < 1 || n > INT32_MAX)
        return graft_fail(GRAFT_EINVAL, "%s: n = %lld out of range [1, 2^31)", fn, (long long)n);
    if (graph->n != n)
        return graft_fail(GRAFT_EINVAL, "%s: the graph has %lld rows for %lld vectors", fn,
                          (long long)graph->n, (long long)n);
    const int max_r = gpu ? GRAFT_GPU_SEARCH_MAX_R : GRAFT_GRAPH_MAX_R;
    if (graph->R < 1 || graph->R > max_r)
        return graft_fail(GRAFT_EINVAL, "%s: degree R = %d out of range [1, %d]%s", fn, graph->R,
                          max_r, gpu ? " (the GPU search kernel's limit)" : "");
    if (graph->entry < 0 || graph->entry >= n)
        return graft_fail(GRAFT_EINVAL, "%s: entry %lld out of range [0, %lld)", fn,
                          (long long)graph->entry, (long long)n);
    const int64_t slots = n * graph->R, bad = graft_first_id_outside(graph->nbrs, slots, n);
    if (bad < slots)
        return graft_fail(GRAFT_EINVAL, "%s: row %lld of the graph holds id %d, outside [-1, %lld)", fn,
                          (long long)(bad / graph->R), (int)graph->nbrs[bad], (long long)n);
    return GRAFT_OK;
}

int graft_check_graph_data(int64_t n, int64_t d, const float* x, const graft_graph* graph, int gpu,
                           const char* fn) {
    if (!x || !graph || !graph->nbrs) return graft_fail(GRAFT_EINVAL, "%s: NULL vectors or graph", fn);
    GRAFT_TRY(graft_check_graph_rows(n, graph, gpu, fn));
    return graft_check_finite(x, n, d, fn);
}
