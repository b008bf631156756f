/* Insertion into a graph on the GPU, host side (plugin/graph/insert_gpu.h): rounds of the GPU walk
 * and gpu/graph_insert.cu, and the one-shot graft_graph_insert_gpu / graft_graph_insert_round_gpu
 * of graft/graph.h. */
#include "graph/insert_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/index_common.h"
#include "core/validate.h"

static int gpu_status(int rc, const char* fn) {
    return graft_fail(rc, "%s: %s", fn, graft_gpu_last_error());
}

/* The device's live bitmap (uint32 words of `bits` bits) from a host dead bitmap. */
static int upload_live(graft_gpu_ctx* ctx, const uint8_t* dead, int64_t bits, uint32_t** out) {
    const size_t words = (size_t)(bits + 31) / 32;
    uint32_t* live = malloc(words * 4);
    if (!live) return GRAFT_ENOMEM;
    memset(live, 0, words * 4);
    for (int64_t v = 0; v < bits; v++)
        if (!(dead[v >> 3] >> (v & 7) & 1)) live[v >> 5] |= 1u << (v & 31);
    int rc = graft_gpu_malloc(ctx, (void**)out, words * 4);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, *out, live, words * 4);
    free(live);
    return rc;
}

int graft_gindex_insert_gpu(graft_gpu_ctx* ctx, const gindex_gpu_graph* g, int64_t d,
                            graft_metric metric, int64_t m, int L, const int64_t* cand_given, int C,
                            graft_insert_report* rep) {
    const char* fn = "graft_graph_insert_gpu";
    if (rep) memset(rep, 0, sizeof *rep);
    if (g->R < 1 || g->R > GRAFT_GRAPH_INSERT_MAX_R || L < 1 || L > 1024 || m < 0 || g->n < 1 ||
        g->cap < g->n + m)
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments (R=%d L=%d m=%lld n=%lld cap=%lld)", fn,
                          g->R, L, (long long)m, (long long)g->n, (long long)g->cap);
    const size_t rbytes = (size_t)g->R * sizeof(int32_t);
    int rc = g->out == g->nbrs ? GRAFT_OK
                               : graft_gpu_copy_d2d(ctx, g->out, g->nbrs, (size_t)g->n * rbytes);
    if (rc != GRAFT_OK || m == 0) return rc == GRAFT_OK ? GRAFT_OK : gpu_status(rc, fn);
    const int64_t total = g->n + m;
    uint32_t* live = NULL;
    if (g->dead) rc = upload_live(ctx, g->dead, total, &live);
    if (rc == GRAFT_ENOMEM) return graft_fail(rc, "%s: out of host memory", fn);
    /* One round's walk results and the insert's scratch, sized for the largest round. */
    const int W = cand_given ? C : L;
    int64_t most = cand_given ? m : graft_insert_round_size(total);
    if (most > m) most = m;
    float *dD = NULL, *dQ = NULL, *dN = NULL, *dKD = NULL;
    int64_t *dI = NULL, *dKI = NULL;
    void* scratch = NULL;
    const int K = g->R; /* the round's own k-NN: R candidates more */
    const size_t sbytes = graft_gpu_graph_insert_scratch(most, g->R, W);
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dD, (size_t)most * L * sizeof(float));
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dI, (size_t)most * L * sizeof(int64_t));
    /* The walk's queries in a buffer of their own: a search's queries start aligned as a
     * cudaMalloc'd block (row n of the vectors is only 4-byte aligned for some d). */
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dQ, (size_t)most * d * sizeof(float));
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dN, (size_t)most * sizeof(float));
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dKD, (size_t)most * K * sizeof(float));
    if (rc == GRAFT_OK && !cand_given) rc = graft_gpu_malloc(ctx, (void**)&dKI, (size_t)most * K * sizeof(int64_t));
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, &scratch, sbytes);
    graft_gpu_insert_counts counts = {0, 0, 0};
    int rounds = 0;
    for (int64_t n = g->n; rc == GRAFT_OK && n < total; rounds++) {
        int64_t r = cand_given ? m : graft_insert_round_size(n);
        if (r > total - n) r = total - n;
        const int64_t* cand = cand_given;
        if (!cand) {
            /* The walk of the round's vectors over the graph as the rounds before left it: the L
             * best live vertices each saw (removed ones passed through, never returned). */
            graft_gpu_search_args a;
            memset(&a, 0, sizeof a);
            a.x = g->x;
            a.n = n;
            a.d = d;
            a.graph = g->out;
            a.R = g->R;
            a.entry = g->entry;
            rc = graft_gpu_copy_d2d(ctx, dQ, g->x + n * d, (size_t)r * d * sizeof(float));
            a.xq = dQ;
            a.nq = r;
            a.k = L;
            a.L = L;
            a.probes = 1;
            a.visited = GRAFT_VISITED_HASH;
            a.merge = GRAFT_MERGE_SORT;
            a.bloom_log2 = 17;
            a.l2 = metric == GRAFT_METRIC_L2;
            a.allowed = live;
            a.D = dD;
            a.I = dI;
            a.storage = GRAFT_STORAGE_FP32;
            if (rc == GRAFT_OK) rc = graft_gpu_graph_search(ctx, &a, NULL);
            cand = dI;
            /* The round's vectors among themselves, which the walk cannot see (insert.c's step 1):
             * exact, each one's K nearest but itself. */
            graft_gpu_knn_args k;
            memset(&k, 0, sizeof k);
            k.xb = dQ;
            k.xb_norms = dN;
            k.nb = r;
            k.xq = dQ;
            k.nq = r;
            k.d = d;
            k.k = K;
            k.metric = metric;
            k.exclude_self = 0;
            k.D = dKD;
            k.I = dKI;
            if (rc == GRAFT_OK && metric == GRAFT_METRIC_L2) rc = graft_gpu_row_norms(ctx, dQ, r, d, dN);
            if (rc == GRAFT_OK) rc = graft_gpu_exact_knn(ctx, &k);
        }
        graft_gpu_insert_args ia = {.x = g->x, .n = n, .m = r, .d = d, .graph = g->out, .R = g->R,
                                    .cand = cand, .C = W, .cand_round = cand_given ? NULL : dKI,
                                    .K = cand_given ? 0 : K, .live = live,
                                    .l2 = metric == GRAFT_METRIC_L2, .scratch = scratch};
        if (rc == GRAFT_OK) rc = graft_gpu_graph_insert(ctx, &ia, &counts);
        n += r;
    }
    graft_gpu_free(ctx, dD);
    graft_gpu_free(ctx, dQ);
    graft_gpu_free(ctx, dI);
    graft_gpu_free(ctx, dN);
    graft_gpu_free(ctx, dKD);
    graft_gpu_free(ctx, dKI);
    graft_gpu_free(ctx, scratch);
    graft_gpu_free(ctx, live);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    if (rep) {
        rep->rounds = rounds;
        rep->reverse_edges = counts.offers;
        rep->repruned = counts.repruned;
        rep->forced = counts.forced;
    }
    return GRAFT_OK;
}

/* The one-shot forms: the graph and vectors up, the insertion, the rows back. */
static int insert_once(graft_graph* graph, const float* x, int64_t d, graft_metric metric, int64_t m,
                       const uint8_t* dead, int L, const int64_t* cand, int C, int device,
                       graft_insert_report* rep, const char* fn) {
    GRAFT_TRY(graft_check_graph(graph, fn));
    if (!x || d < 1 || m < 0 || graph->n + m > INT32_MAX || (cand && C < 1))
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments (m=%lld)", fn, (long long)m);
    if (graph->R > GRAFT_GRAPH_INSERT_MAX_R)
        return graft_fail(GRAFT_EINVAL, "%s: degree R=%d over %d", fn, graph->R, GRAFT_GRAPH_INSERT_MAX_R);
    if (L == 0) L = graft_insert_default_L(graph->R);
    if (L < 1 || L > 1024) return graft_fail(GRAFT_EINVAL, "%s: L=%d outside 1..1024", fn, L);
    GRAFT_TRY(graft_check_finite(x + graph->n * d, m, d, fn));
    const int64_t total = graph->n + m;
    const size_t xbytes = (size_t)total * d * sizeof(float), gbytes = (size_t)total * graph->R * sizeof(int32_t);
    graft_gpu_ctx* ctx = NULL;
    int rc = graft_gpu_ctx_create(device, (size_t)1 << 30, &ctx);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    float* dx = NULL;
    int32_t* dg = NULL;
    int64_t* dc = NULL;
    rc = graft_gpu_malloc(ctx, (void**)&dx, xbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dg, gbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dx, x, xbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dg, graph->nbrs, (size_t)graph->n * graph->R * sizeof(int32_t));
    if (rc == GRAFT_OK && cand) rc = graft_gpu_malloc(ctx, (void**)&dc, (size_t)m * C * sizeof(int64_t));
    if (rc == GRAFT_OK && cand) rc = graft_gpu_upload(ctx, dc, cand, (size_t)m * C * sizeof(int64_t));
    if (rc != GRAFT_OK) rc = gpu_status(rc, fn);
    const gindex_gpu_graph gg = {dx, dg, graph->n, graph->R, graph->entry, total, dead, dg};
    if (rc == GRAFT_OK) rc = graft_gindex_insert_gpu(ctx, &gg, d, metric, m, L, dc, C, rep);
    if (rc == GRAFT_OK) rc = graft_gpu_download(ctx, graph->nbrs, dg, gbytes);
    if (rc == GRAFT_OK) graph->n = total;
    graft_gpu_free(ctx, dx);
    graft_gpu_free(ctx, dg);
    graft_gpu_free(ctx, dc);
    graft_gpu_ctx_destroy(ctx);
    return rc;
}

int graft_graph_insert_gpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                           int64_t m, const uint8_t* dead, int L, int device,
                           graft_insert_report* report) {
    return insert_once(graph, x, d, metric, m, dead, L, NULL, 0, device, report,
                       "graft_graph_insert_gpu");
}

int graft_graph_insert_round_gpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                                 int64_t m, const uint8_t* dead, const int64_t* cand, int C,
                                 int device, graft_insert_report* report) {
    if (!cand) return graft_fail(GRAFT_EINVAL, "graft_graph_insert_round_gpu: NULL candidates");
    return insert_once(graph, x, d, metric, m, dead, 1, cand, C, device, report,
                       "graft_graph_insert_round_gpu");
}
