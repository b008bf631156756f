/* BANG search on the GPU, host side (plugin/graph/bang_gpu.h): device copies of the codebooks, codes
 * and (in-memory) graph and vectors; batches under the memory budget; the iteration loop of
 * Algorithm 2 (../shared/papers/bang-billion-scale-single-gpu.txt) over the kernels of
 * gpu/bang_search.cu; the one-shot graft_bang_search_gpu.
 *
 * Out-of-core pipeline (BANG 4.3 and 4.6). A batch is split into two halves, half 0 on the
 * context's stream and half 1 on a second stream; a third stream files the vectors of both. For
 * each half, one iteration is
 *     host:  wait for the half's next nodes (event), drop finished queries, gather each live
 *            query's node's neighbour row (R int32) into pinned memory (OpenMP,
 *            params->threads)
 *     queue: H2D live ids + rows | step A (writes the next nodes into mapped pinned memory),
 *            event | step B, by the calling thread while the other threads of the same OpenMP
 *            region go on to
 *     host:  gather the same nodes' full vectors (d floats) into pinned memory (the calling
 *            thread joins them once the steps are queued)
 *     queue on the third stream: H2D live ids + vectors, event | store into the re-rank slots
 * and the host visits the halves in turn: while it works on half 0, the device runs half 1's
 * kernels and copies and half 0's step B (which the eager selection of step A moved off the
 * critical path, 4.6); then the roles swap. Copies overlap kernels of the other half. The
 * vectors (2/3 of the bytes at R = 64, d = 128, 92% at d = 784) are needed only by the re-rank,
 * so they are gathered while the steps are queued and travel on their own stream: neither the
 * next nodes nor the half's next steps wait for them. (Measured at cf25786 with one gather of
 * rows and vectors before step A, and at e3c8b7d with the vectors' copy queued between steps A
 * and B of the half's stream, where at d = 784 the host waited on the GPU ~40% of the loop;
 * bench/RESULTS.md.) In the tail of a batch, where few queries still search and the calls, not
 * the bytes, cost, a half's vectors under graft_bang_params.vector_stream_bytes go on the half's
 * own stream instead, between steps A and B, and step B files them (5 queueing calls, not 7).
 * Step A writes the next nodes to the host itself (no D2H copy: each CUDA call costs the host
 * ~10 us, graft_bang_report api_seconds), and the staged vectors rotate through
 * GRAFT_BANG_STAGED pinned buffers, so that the host waits only for the copy of the one it
 * filled that many iterations ago, before the iteration's gathers start.
 * Per expansion of a query the bus carries 4 (live id) + 4 R (row) + 4 (live id) + 4 d (vector)
 * bytes to the device (and up to 12 bytes of padding a half-iteration) and 4 (next node) back:
 * 776 bytes at R = 64, d = 128, BANG's scheme, whose floor is 772 (the second copy of the id
 * buys the vectors their own stream; the row is skipped at the last permitted expansion, whose
 * row cannot matter). Queries and results add 4 d and 12 k bytes per query once.
 *
 * In-memory mode runs the same kernels reading rows and vectors from device memory, so its
 * results are those of out-of-core mode bit for bit. The host only queues iterations and polls
 * a device counter of live queries every BANG_POLL iterations.
 */
#include "graph/bang_gpu.h"

#include <float.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/validate.h"

#define BANG_DEFAULT_BUDGET ((size_t)1 << 30)
/* In-memory mode learns that a batch has finished from a 4-byte copy of the live counter, a
 * round trip of ~10-20 us; a step pair of a finished query costs a warp that exits at once. The
 * host therefore queues BANG_POLL iterations between polls: at most BANG_POLL - 1 empty step
 * pairs per batch instead of one round trip per iteration (~1.1-1.6 L iterations, BANG 6). */
#define BANG_POLL 8
/* Out-of-core: staged vectors of at least this many bytes a half-iteration travel on a stream
 * of their own (graft_bang_params.vector_stream_bytes). At d = 128 vectors on the half's stream
 * (5 queueing calls a half-iteration) were never slower and up to 17% faster at L >= 48, where
 * the long tail of iterations with few live queries weighs; at d = 784 their own stream (7
 * calls) was 4-54% faster up to L = 96, where a half's 15.7 MB copy held up its next step A
 * (bench/RESULTS.md, e3c8b7d against 673e381). 1 MiB is ~20 us of copy at the measured ~50 GB/s,
 * about what the two calls and the wait saved cost. */
#define BANG_VEC_STREAM_BYTES ((size_t)1 << 20)
/* Batch cap: live lists hold int32 query indices; 2^24 queries is far past saturation (BANG's
 * batches are 10^4). */
#define BANG_MAX_BATCH ((int64_t)1 << 24)
/* Each piece of the batch buffers starts 256-byte aligned; this many pieces at most. */
#define BANG_PIECES 13

static int gpu_status(int rc, const char* fn) {
    return graft_fail(rc, "%s: %s", fn, graft_gpu_last_error());
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t graft_bang_dev_resident_bytes(int64_t n, int64_t d, int R, int M, int in_memory) {
    if (n < 0 || d < 0 || R < 0 || M < 0) return SIZE_MAX;
    size_t cent, codes, graph = 0, x = 0, s;
    if (graft_mul_overflow((size_t)d, (size_t)256 * sizeof(float), &cent) ||
        graft_mul_overflow((size_t)n, (size_t)M, &codes))
        return SIZE_MAX;
    if (in_memory && (graft_mul_overflow((size_t)n, (size_t)R * sizeof(int32_t), &graph) ||
                      graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &x)))
        return SIZE_MAX;
    s = cent + codes;
    if (s < cent || s + graph < s || s + graph + x < s + graph) return SIZE_MAX;
    return s + graph + x;
}

void graft_bang_dev_release(graft_bang_dev* dev) {
    if (!dev) return;
    graft_gpu_ctx* ctx = dev->ctx;
    if (ctx) {
        /* The second stream first: destroying it waits for its work, which may read the buffers
         * below (graft_gpu_free waits for the context's stream). */
        graft_gpu_stream_destroy(ctx, dev->stream1);
        graft_gpu_stream_destroy(ctx, dev->stream2);
        for (int h = 0; h < 2; h++) {
            graft_gpu_event_destroy(ctx, dev->ev_next[h]);
            for (int b = 0; b < GRAFT_BANG_STAGED; b++)
                graft_gpu_event_destroy(ctx, dev->ev_staged[h][b]);
        }
        graft_gpu_event_destroy(ctx, dev->ev_init);
        graft_gpu_event_destroy(ctx, dev->ev_join);
        graft_gpu_event_destroy(ctx, dev->ev_join2);
        graft_gpu_event_destroy(ctx, dev->ev_t0);
        graft_gpu_event_destroy(ctx, dev->ev_t1);
        graft_gpu_free(ctx, dev->centroids);
        graft_gpu_free(ctx, dev->codes);
        graft_gpu_free(ctx, dev->nbrs);
        graft_gpu_free(ctx, dev->x);
        graft_gpu_free(ctx, dev->scratch);
        graft_gpu_free(ctx, dev->allowed);
        graft_gpu_host_free(ctx, dev->pinned);
    }
    memset(dev, 0, sizeof *dev);
}

/* The pipeline's streams and events into dev (its ctx set). */
static int open_pipeline(graft_gpu_ctx* ctx, graft_bang_dev* dev) {
    int rc = graft_gpu_stream_create(ctx, &dev->stream1);
    if (rc == GRAFT_OK) rc = graft_gpu_stream_create(ctx, &dev->stream2);
    for (int h = 0; h < 2 && rc == GRAFT_OK; h++) {
        rc = graft_gpu_event_create(ctx, 0, &dev->ev_next[h]);
        for (int b = 0; b < GRAFT_BANG_STAGED && rc == GRAFT_OK; b++)
            rc = graft_gpu_event_create(ctx, 0, &dev->ev_staged[h][b]);
    }
    if (rc == GRAFT_OK) rc = graft_gpu_event_create(ctx, 0, &dev->ev_init);
    if (rc == GRAFT_OK) rc = graft_gpu_event_create(ctx, 0, &dev->ev_join);
    if (rc == GRAFT_OK) rc = graft_gpu_event_create(ctx, 0, &dev->ev_join2);
    if (rc == GRAFT_OK) rc = graft_gpu_event_create(ctx, 1, &dev->ev_t0);
    if (rc == GRAFT_OK) rc = graft_gpu_event_create(ctx, 1, &dev->ev_t1);
    return rc;
}

int graft_bang_dev_open(graft_gpu_ctx* ctx, graft_bang_dev* out) {
    graft_bang_dev dev;
    memset(&dev, 0, sizeof dev);
    dev.ctx = ctx;
    const int rc = open_pipeline(ctx, &dev);
    if (rc != GRAFT_OK) {
        const int st = gpu_status(rc, "graft_bang_dev_open");
        graft_bang_dev_release(&dev);
        return st;
    }
    *out = dev;
    return GRAFT_OK;
}

int graft_bang_dev_upload(graft_gpu_ctx* ctx, const graft_graph* g, const graft_pq* pq,
                          const uint8_t* codes, const float* x, int64_t d, graft_metric metric,
                          int in_memory, graft_bang_dev* out) {
    const char* fn = "graft_bang_dev_upload";
    if (!ctx || !pq || !codes || !x || !out)
        return graft_fail(GRAFT_EINVAL, "%s: NULL pointer argument", fn);
    GRAFT_TRY(graft_check_graph(g, fn));
    if (!pq->centroids || pq->M < 1 || pq->d != d || pq->dsub < 1 ||
        (int64_t)pq->M * pq->dsub != d)
        return graft_fail(GRAFT_EINVAL, "%s: codebooks of dimension %lld (M=%d, dsub=%d) for "
                          "vectors of dimension %lld", fn, (long long)pq->d, pq->M, pq->dsub,
                          (long long)d);
    if (g->R > 256)
        return graft_fail(GRAFT_EINVAL, "%s: graph degree R=%d over the GPU search's 256", fn, g->R);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "%s: unknown metric %d", fn, (int)metric);
    const size_t total = graft_bang_dev_resident_bytes(g->n, d, g->R, pq->M, in_memory);
    if (total == SIZE_MAX) return graft_fail(GRAFT_ENOMEM, "%s: size overflow", fn);
    graft_bang_dev dev;
    memset(&dev, 0, sizeof dev);
    dev.ctx = ctx;
    dev.n = g->n;
    dev.d = d;
    dev.entry = g->entry;
    dev.R = g->R;
    dev.M = pq->M;
    dev.metric = metric;
    dev.in_memory = in_memory != 0;
    dev.resident_bytes = total;
    const size_t cbytes = (size_t)d * 256 * sizeof(float), kbytes = (size_t)g->n * pq->M;
    const size_t gbytes = (size_t)g->n * g->R * sizeof(int32_t);
    const size_t xbytes = (size_t)g->n * d * sizeof(float);
    int rc = graft_gpu_malloc(ctx, (void**)&dev.centroids, cbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dev.codes, kbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.centroids, pq->centroids, cbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.codes, codes, kbytes);
    if (rc == GRAFT_OK && dev.in_memory) {
        rc = graft_gpu_malloc(ctx, (void**)&dev.nbrs, gbytes);
        if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dev.x, xbytes);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.nbrs, g->nbrs, gbytes);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.x, x, xbytes);
    }
    if (rc == GRAFT_OK) rc = open_pipeline(ctx, &dev);
    if (rc != GRAFT_OK) {
        rc = gpu_status(rc, fn);
        graft_bang_dev_release(&dev);
        return rc;
    }
    *out = dev;
    return GRAFT_OK;
}

/* Grows a device buffer to at least `bytes` (contents dropped). */
static int grow_dev(graft_gpu_ctx* ctx, void** buf, size_t* have, size_t bytes) {
    if (bytes <= *have) return GRAFT_OK;
    graft_gpu_free(ctx, *buf);
    *buf = NULL;
    *have = 0;
    GRAFT_TRY(graft_gpu_malloc(ctx, buf, bytes));
    *have = bytes;
    return GRAFT_OK;
}

static int grow_pinned(graft_gpu_ctx* ctx, void** buf, size_t* have, size_t bytes) {
    if (bytes <= *have) return GRAFT_OK;
    graft_gpu_host_free(ctx, *buf);
    *buf = NULL;
    *have = 0;
    GRAFT_TRY(graft_gpu_host_alloc(ctx, buf, bytes));
    *have = bytes;
    return GRAFT_OK;
}

/* The kernels' argument block of this device data and search (batch fields set per batch). */
static graft_gpu_bang_args make_args(const graft_bang_dev* dev, const graft_bang_params* p) {
    graft_gpu_bang_args a;
    memset(&a, 0, sizeof a);
    a.centroids = dev->centroids;
    a.codes = dev->codes;
    a.graph = dev->in_memory ? dev->nbrs : NULL;
    a.x = dev->in_memory ? dev->x : NULL;
    a.n = dev->n;
    a.d = dev->d;
    a.entry = dev->entry;
    a.R = dev->R;
    a.M = dev->M;
    a.l2 = dev->metric == GRAFT_METRIC_L2;
    a.L = p->L;
    a.max_expand = graft_bang_max_expand(p);
    a.bloom_log2 = p->bloom_log2;
    return a;
}

/* The two halves of a batch of b queries: ceil(b / 2) and floor(b / 2). */
static int64_t half0(int64_t b) { return (b + 1) / 2; }

/* Byte offsets in the device batch buffer (capacity B queries) and in the pinned buffer. */
typedef struct {
    size_t state, xq, D, I, ir[2], staged[2], end;
} dev_layout;
typedef struct {
    size_t ir[2], staged[2][GRAFT_BANG_STAGED], next[2], cur[2], counters, end;
} host_layout;

static size_t take(size_t* off, size_t bytes, size_t align) {
    const size_t at = *off;
    *off = align_up(at + bytes, align);
    return at;
}

/* The staged vectors of nl live queries, as the host writes them and one copy moves them: the
 * query ids, then the vectors from the next 16-byte boundary (graft_gpu_bang_store's float4s). */
static size_t staged_vec_off(size_t nl) { return align_up(nl * sizeof(int32_t), 16); }
static size_t staged_bytes(size_t nl, int64_t d) {
    return staged_vec_off(nl) + nl * (size_t)d * sizeof(float);
}

static dev_layout make_dev_layout(size_t state_bytes, int64_t B, int64_t d, int R, int64_t k,
                                  int ooc) {
    dev_layout l;
    memset(&l, 0, sizeof l);
    const size_t b = (size_t)B, b0 = (size_t)half0(B), b1 = b - b0;
    size_t off = 0;
    l.state = take(&off, state_bytes, 256);
    l.xq = take(&off, b * d * sizeof(float), 256);
    l.D = take(&off, b * k * sizeof(float), 256);
    l.I = take(&off, b * k * sizeof(int64_t), 256);
    if (ooc)
        for (int h = 0; h < 2; h++) {
            const size_t bh = h ? b1 : b0;
            l.ir[h] = take(&off, bh * (1 + R) * sizeof(int32_t), 256);
            l.staged[h] = take(&off, staged_bytes(bh, d), 256);
        }
    l.end = off;
    return l;
}

static host_layout make_host_layout(int64_t B, int64_t d, int R, int E, int ooc) {
    host_layout l;
    memset(&l, 0, sizeof l);
    size_t off = 0;
    if (ooc)
        for (int h = 0; h < 2; h++) {
            const size_t bh = (size_t)(h ? B - half0(B) : half0(B));
            l.ir[h] = take(&off, bh * (1 + R) * sizeof(int32_t), 64);
            for (int b = 0; b < GRAFT_BANG_STAGED; b++)
                l.staged[h][b] = take(&off, staged_bytes(bh, d), 64);
            l.next[h] = take(&off, bh * sizeof(int32_t), 64);
            l.cur[h] = take(&off, bh * sizeof(int32_t), 64);
        }
    l.counters = take(&off, (size_t)E * sizeof(int32_t), 64);
    l.end = off;
    return l;
}

typedef struct {
    double gpu_s, gather_s, wait_s, loop_s, api_s;
    int64_t h2d, d2h, expansions;
} stats;

static int timed_event_sync(graft_gpu_ctx* ctx, graft_gpu_event e, stats* st) {
    const double t = omp_get_wtime();
    const int rc = graft_gpu_event_sync(ctx, e);
    st->wait_s += omp_get_wtime() - t;
    return rc;
}

/* In-memory iterations of one batch (every query on the context's stream). */
static int run_in_memory(graft_bang_dev* dev, const graft_gpu_bang_args* a, int32_t* pin_counters,
                         stats* st) {
    graft_gpu_ctx* ctx = dev->ctx;
    int32_t* counters = graft_gpu_bang_counters(a);
    const int E = a->max_expand;
    graft_gpu_bang_step s;
    memset(&s, 0, sizeof s);
    s.q0 = 0;
    s.nq = a->nq;
    int it = 0;
    while (it < E) {
        const int chunk = E - it < BANG_POLL ? E - it : BANG_POLL;
        for (int j = 0; j < chunk; j++) {
            s.iteration = it + j;
            GRAFT_TRY(graft_gpu_bang_step_a(ctx, a, &s, NULL));
            GRAFT_TRY(graft_gpu_bang_step_b(ctx, a, &s, NULL));
        }
        it += chunk;
        /* counters[t] = queries that chose a node in iteration t: 0 once all have finished. */
        GRAFT_TRY(graft_gpu_copy_async(ctx, pin_counters + it - 1, counters + it - 1,
                                       sizeof(int32_t), NULL));
        GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_next[0], NULL));
        GRAFT_TRY(timed_event_sync(ctx, dev->ev_next[0], st));
        st->d2h += sizeof(int32_t);
        if (pin_counters[it - 1] == 0) break;
    }
    /* Expansions: every query's entry, then counters[t] in iteration t. */
    GRAFT_TRY(graft_gpu_copy_async(ctx, pin_counters, counters, (size_t)it * sizeof(int32_t), NULL));
    GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_next[0], NULL));
    GRAFT_TRY(timed_event_sync(ctx, dev->ev_next[0], st));
    st->d2h += (int64_t)it * (int64_t)sizeof(int32_t);
    st->expansions += a->nq;
    for (int t = 0; t < it; t++) st->expansions += pin_counters[t];
    return GRAFT_OK;
}

/* One half batch of the out-of-core pipeline. */
typedef struct {
    int64_t q0, nq;    /* batch queries [q0, q0 + nq) */
    int64_t nlive;     /* queries still searching */
    int it;            /* the next iteration (= expansion slot) of the half */
    graft_gpu_stream stream;
    graft_gpu_event ev_next, ev_staged[GRAFT_BANG_STAGED];
    int32_t* ir;       /* pinned: nlive live query indices, then their nodes' rows */
    char* staged[GRAFT_BANG_STAGED]; /* pinned, iteration t uses staged[t % GRAFT_BANG_STAGED]:
                          the live query indices, then their nodes' vectors (staged_vec_off) */
    int32_t* next;     /* pinned, mapped: step A's next nodes */
    int32_t* d_next;   /* the device's address of `next` */
    int32_t* cur;      /* the live queries' nodes being expanded, compacted from `next`: the
                          vectors are gathered from it after step A, which rewrites `next`, is
                          queued */
    int32_t* d_ir;     /* device copies of ir and of the staged ids and vectors */
    char* d_staged;
    size_t vec_stream_bytes; /* staged vectors of at least this many bytes go on stream2 */
    int on_stream2[GRAFT_BANG_STAGED]; /* the last copy out of staged[b] was on stream2 */
} half;

/* Queues a half-iteration's steps: rows in, step A (next nodes out, event), and step B unless
 * it waits for the vectors (fused: they come on the half's stream). */
static int queue_steps(graft_bang_dev* dev, const graft_gpu_bang_args* a, const half* h,
                       const graft_gpu_bang_step* s, size_t ir_bytes, int step_b) {
    graft_gpu_ctx* ctx = dev->ctx;
    GRAFT_TRY(graft_gpu_copy_async(ctx, h->d_ir, h->ir, ir_bytes, h->stream));
    GRAFT_TRY(graft_gpu_bang_step_a(ctx, a, s, h->stream));
    GRAFT_TRY(graft_gpu_event_record(ctx, h->ev_next, h->stream));
    if (step_b) GRAFT_TRY(graft_gpu_bang_step_b(ctx, a, s, h->stream));
    return GRAFT_OK;
}

/* One iteration of a half whose live list and nodes (ir, cur) are set. In one OpenMP region the
 * host threads gather the live queries' nodes' neighbour rows; then the calling thread queues
 * rows in, step A (next nodes out) and step B while the others go on to gather the nodes' full
 * vectors, which it joins when done; then the vectors are queued on stream2: vectors in, their
 * store. When the vectors are few (under vec_stream_bytes: the tail of a batch), they go on the
 * half's stream instead, and step B, queued after them, files them: 5 queueing calls instead of
 * 7. */
static int half_iteration(graft_bang_dev* dev, const graft_gpu_bang_args* a, half* h, int threads,
                          stats* st) {
    graft_gpu_ctx* ctx = dev->ctx;
    const int64_t nl = h->nlive, R = dev->R, d = dev->d;
    /* The last permitted expansion's row cannot matter: not gathered, not sent. */
    const int rows = h->it + 1 < a->max_expand;
    const size_t ir_bytes = (size_t)nl * (size_t)(1 + (rows ? R : 0)) * sizeof(int32_t);
    const size_t staged = staged_bytes((size_t)nl, d);
    const int side = staged >= h->vec_stream_bytes;
    const int b = h->it % GRAFT_BANG_STAGED, prev = (h->it + GRAFT_BANG_STAGED - 1) % GRAFT_BANG_STAGED;
    graft_gpu_bang_step s;
    memset(&s, 0, sizeof s);
    s.q0 = h->q0;
    s.nq = h->nq;
    s.iteration = h->it;
    s.live = h->d_ir;
    s.nlive = nl;
    s.rows = rows ? h->d_ir + nl : NULL;
    s.next = h->d_next;
    /* The pinned buffers. The live ids and rows are free: their last copy preceded the last
     * step A, which the event of the next nodes just waited for follows. staged[b] is free once
     * its last copy, GRAFT_BANG_STAGED iterations ago, is done: on the half's stream, that copy
     * preceded a step A whose next nodes the host has waited for since; on stream2, its event
     * says (one never recorded counts as done), which three buffers make the host rarely wait
     * for. The vectors wait for re-ranking only (4.3): gathered while step A is queued and
     * runs, so that the host's path to the next nodes does not wait for them, and on stream2 so
     * that the half's next steps do not either. */
    if (h->on_stream2[b]) GRAFT_TRY(timed_event_sync(ctx, h->ev_staged[b], st));
    char* out = h->staged[b];
    float* out_vecs = (float*)(out + staged_vec_off((size_t)nl));
    int32_t* out_rows = h->ir + nl;
    const int32_t* nodes = h->cur;
    memcpy(out, h->ir, (size_t)nl * sizeof(int32_t));
    int rc = GRAFT_OK;
    double api = 0;
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) if (nl >= 64)
    {
        if (rows) {
#pragma omp for schedule(static)
            for (int64_t w = 0; w < nl; w++)
                memcpy(out_rows + w * R, dev->host_nbrs + (int64_t)nodes[w] * R,
                       (size_t)R * sizeof(int32_t));
        }
        /* After the rows' barrier. The calling thread (its CUDA calls and error message stay
         * on it), then the vectors' loop, whose dynamic chunks the others start on meanwhile. */
#pragma omp master
        {
            const double t = omp_get_wtime();
            rc = queue_steps(dev, a, h, &s, ir_bytes, side);
            api = omp_get_wtime() - t;
        }
#pragma omp for schedule(dynamic, 64)
        for (int64_t w = 0; w < nl; w++)
            memcpy(out_vecs + w * d, dev->host_x + (int64_t)nodes[w] * d, (size_t)d * sizeof(float));
    }
    st->gather_s += omp_get_wtime() - t0;
    st->api_s += api;
    if (rc != GRAFT_OK) return rc;
    const double t = omp_get_wtime();
    h->on_stream2[b] = side;
    if (side) {
        s.live = (const int32_t*)h->d_staged;
        s.vecs = (const float*)(h->d_staged + staged_vec_off((size_t)nl));
        GRAFT_TRY(graft_gpu_copy_async(ctx, h->d_staged, out, staged, dev->stream2));
        GRAFT_TRY(graft_gpu_event_record(ctx, h->ev_staged[b], dev->stream2));
        GRAFT_TRY(graft_gpu_bang_store(ctx, a, &s, dev->stream2));
    } else {
        /* The first time on the half's stream: the copy into d_staged waits for the last
         * store on stream2, which reads it (staged[b]'s event is free: its copy was just
         * waited for, and it is not waited for again before a copy on stream2 records it
         * anew). */
        if (h->on_stream2[prev]) {
            GRAFT_TRY(graft_gpu_event_record(ctx, h->ev_staged[b], dev->stream2));
            GRAFT_TRY(graft_gpu_stream_wait(ctx, h->stream, h->ev_staged[b]));
        }
        /* The staged ids equal s.live's (the rows' copy): only the vectors are read. */
        s.vecs = (const float*)(h->d_staged + staged_vec_off((size_t)nl));
        GRAFT_TRY(graft_gpu_copy_async(ctx, h->d_staged, out, staged, h->stream));
        GRAFT_TRY(graft_gpu_bang_step_b(ctx, a, &s, h->stream));
    }
    st->api_s += omp_get_wtime() - t;
    st->h2d += (int64_t)(ir_bytes + staged);
    st->d2h += (int64_t)((size_t)nl * sizeof(int32_t));
    st->expansions += nl;
    h->it++;
    return GRAFT_OK;
}

/* Out-of-core iterations of one batch: the two halves in turn until both have finished. */
static int run_out_of_core(graft_bang_dev* dev, const graft_gpu_bang_args* a, const dev_layout* dl,
                           const host_layout* hl, int threads, size_t vec_stream_bytes, stats* st) {
    graft_gpu_ctx* ctx = dev->ctx;
    char* dbase = (char*)dev->scratch;
    char* hbase = (char*)dev->pinned;
    const int64_t nb = a->nq, nb0 = half0(nb);
    half H[2];
    for (int h = 0; h < 2; h++) {
        half* x = &H[h];
        memset(x, 0, sizeof *x);
        x->q0 = h ? nb0 : 0;
        x->nq = h ? nb - nb0 : nb0;
        x->nlive = x->nq;
        x->stream = h ? dev->stream1 : NULL;
        x->ev_next = dev->ev_next[h];
        x->ir = (int32_t*)(hbase + hl->ir[h]);
        for (int b = 0; b < GRAFT_BANG_STAGED; b++) {
            x->ev_staged[b] = dev->ev_staged[h][b];
            x->staged[b] = hbase + hl->staged[h][b];
        }
        x->next = (int32_t*)(hbase + hl->next[h]);
        GRAFT_TRY(graft_gpu_host_device_ptr(ctx, x->next, (void**)&x->d_next));
        x->cur = (int32_t*)(hbase + hl->cur[h]);
        x->d_ir = (int32_t*)(dbase + dl->ir[h]);
        x->d_staged = dbase + dl->staged[h];
        x->vec_stream_bytes = vec_stream_bytes;
        for (int64_t w = 0; w < x->nq; w++) {
            x->ir[w] = (int32_t)(x->q0 + w);
            x->cur[w] = (int32_t)dev->entry; /* slot 0 of every query */
        }
    }
    /* Half 1's stream and the vectors' start after the tables and worklists exist (and so after
     * the last batch's re-rank, which read the store). */
    GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_init, NULL));
    GRAFT_TRY(graft_gpu_stream_wait(ctx, dev->stream1, dev->ev_init));
    GRAFT_TRY(graft_gpu_stream_wait(ctx, dev->stream2, dev->ev_init));
    for (int h = 0; h < 2; h++)
        if (H[h].nlive > 0) GRAFT_TRY(half_iteration(dev, a, &H[h], threads, st));
    for (;;) {
        int active = 0;
        for (int h = 0; h < 2; h++) {
            half* x = &H[h];
            if (x->nlive == 0) continue;
            GRAFT_TRY(timed_event_sync(ctx, x->ev_next, st));
            int64_t nl = 0;
            for (int64_t w = 0; w < x->nlive; w++)
                if (x->next[w] >= 0) {
                    x->ir[nl] = x->ir[w];
                    x->cur[nl] = x->next[w];
                    nl++;
                }
            x->nlive = nl;
            if (nl == 0) continue;
            active = 1;
            GRAFT_TRY(half_iteration(dev, a, x, threads, st));
        }
        if (!active) break;
    }
    /* The re-rank runs on the context's stream, after half 1's last step and the last store. */
    GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_join, dev->stream1));
    GRAFT_TRY(graft_gpu_stream_wait(ctx, NULL, dev->ev_join));
    GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_join2, dev->stream2));
    GRAFT_TRY(graft_gpu_stream_wait(ctx, NULL, dev->ev_join2));
    return GRAFT_OK;
}

/* One batch of nb queries: upload, tables, iterations, re-rank, results to D and I. */
static int run_batch(graft_bang_dev* dev, graft_gpu_bang_args a, const graft_bang_params* p,
                     const dev_layout* dl, const host_layout* hl, const float* xq, int64_t nb,
                     int64_t k, float* D, int64_t* I, int threads, int timed, stats* st) {
    graft_gpu_ctx* ctx = dev->ctx;
    char* dbase = (char*)dev->scratch;
    float* dq = (float*)(dbase + dl->xq);
    float* dD = (float*)(dbase + dl->D);
    int64_t* dI = (int64_t*)(dbase + dl->I);
    a.nq = nb;
    a.xq = dq;
    a.scratch = dbase + dl->state;
    const size_t qbytes = (size_t)nb * dev->d * sizeof(float);
    GRAFT_TRY(graft_gpu_upload(ctx, dq, xq, qbytes));
    st->h2d += (int64_t)qbytes;
    if (timed) GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_t0, NULL));
    GRAFT_TRY(graft_gpu_bang_init(ctx, &a, NULL));
    const double t_loop = omp_get_wtime();
    if (dev->in_memory)
        GRAFT_TRY(run_in_memory(dev, &a, (int32_t*)((char*)dev->pinned + hl->counters), st));
    else
        GRAFT_TRY(run_out_of_core(dev, &a, dl, hl, threads,
                                  p->vector_stream_bytes ? p->vector_stream_bytes : BANG_VEC_STREAM_BYTES,
                                  st));
    st->loop_s += omp_get_wtime() - t_loop;
    graft_gpu_bang_rerank_args r;
    memset(&r, 0, sizeof r);
    r.k = k;
    r.rerank = p->rerank;
    r.allowed = p->allowed ? dev->allowed : NULL;
    r.D = dD;
    r.I = dI;
    GRAFT_TRY(graft_gpu_bang_rerank(ctx, &a, &r, NULL));
    if (timed) GRAFT_TRY(graft_gpu_event_record(ctx, dev->ev_t1, NULL));
    GRAFT_TRY(graft_gpu_download(ctx, D, dD, (size_t)nb * k * sizeof(float)));
    GRAFT_TRY(graft_gpu_download(ctx, I, dI, (size_t)nb * k * sizeof(int64_t)));
    st->d2h += (int64_t)((size_t)nb * k * (sizeof(float) + sizeof(int64_t)));
    if (timed) {
        float ms = 0;
        GRAFT_TRY(graft_gpu_event_elapsed_ms(ctx, dev->ev_t0, dev->ev_t1, &ms));
        st->gpu_s += ms / 1000.0;
    }
    return GRAFT_OK;
}

int graft_bang_dev_search(graft_bang_dev* dev, const int32_t* host_nbrs, const float* host_x,
                          const float* xq, int64_t nq, int64_t k,
                          const graft_bang_params* params, float* D, int64_t* I,
                          graft_bang_report* report) {
    const char* fn = "graft_bang_search_gpu";
    const double t_start = omp_get_wtime();
    if (!dev || !dev->ctx || !dev->codes)
        return graft_fail(GRAFT_EINVAL, "%s: no BANG data on the GPU", fn);
    if (!dev->in_memory && (!host_nbrs || !host_x))
        return graft_fail(GRAFT_EINVAL, "%s: out-of-core search without the host graph or vectors", fn);
    dev->host_nbrs = host_nbrs;
    dev->host_x = host_x;
    graft_bang_params p;
    if (params)
        p = *params;
    else
        graft_bang_params_defaults(&p);
    /* The arguments were checked where the search entered the core (graft_bang_search_gpu,
     * graft_gindex_search); the queries' values are checked here, where they are read. */
    GRAFT_TRY(graft_check_finite(xq, nq, dev->d, fn));
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    graft_gpu_ctx* ctx = dev->ctx;
    const int ooc = !dev->in_memory;
    const int64_t d = dev->d;
    const int R = dev->R;
    graft_gpu_bang_args a = make_args(dev, &p);
    const int E = a.max_expand;

    /* The batch: its working set is fixed + B x per_q bytes (device), under the budget. */
    size_t state_q = 0, state_fixed = 0;
    graft_gpu_bang_scratch_size(&a, &state_q, &state_fixed);
    const size_t per_q = state_q + (size_t)d * sizeof(float) + (size_t)k * 12 +
                         (ooc ? (size_t)(1 + R) * 4 + (size_t)d * 4 + 4 : 0);
    const size_t fixed = state_fixed + BANG_PIECES * 256;
    const size_t budget = p.memory_budget ? p.memory_budget : BANG_DEFAULT_BUDGET;
    if (state_q == 0 || budget < fixed || budget - fixed < per_q)
        return graft_fail(GRAFT_EGPU_NOMEM,
                          "%s: one query needs %zu bytes of GPU memory (%zu per query: PQ table, "
                          "worklist of L=%d, 2^%d-bit Bloom filter, re-rank store of max_expand=%d%s, "
                          "query and results; %zu per batch), over the memory budget of %zu bytes",
                          fn, fixed + per_q, per_q, p.L, p.bloom_log2, E,
                          ooc ? " with its vectors, staged rows" : "", fixed, budget);
    int64_t B = (int64_t)((budget - fixed) / per_q);
    if (B > nq) B = nq;
    if (B > BANG_MAX_BATCH) B = BANG_MAX_BATCH;
    const dev_layout dl = make_dev_layout(state_fixed + (size_t)B * state_q, B, d, R, k, ooc);
    const host_layout hl = make_host_layout(B, d, R, E, ooc);
    stats st;
    memset(&st, 0, sizeof st);
    int rc = GRAFT_OK;
    if (p.allowed) {
        /* The FAISS bitmap's bytes are the kernels' uint32 words on a little-endian host; the
         * last word's bytes past the bitmap are zeroed (read with it, never tested). */
        const size_t bytes = ((size_t)dev->n + 7) / 8, words = ((size_t)dev->n + 31) / 32;
        rc = grow_dev(ctx, (void**)&dev->allowed, &dev->allowed_bytes, words * 4);
        if (rc == GRAFT_OK) rc = graft_gpu_memset_async(ctx, dev->allowed + words - 1, 0, 4, NULL);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev->allowed, p.allowed, bytes);
        st.h2d += (int64_t)bytes;
    }
    if (rc == GRAFT_OK) rc = grow_dev(ctx, &dev->scratch, &dev->scratch_bytes, dl.end);
    if (rc == GRAFT_OK) rc = grow_pinned(ctx, &dev->pinned, &dev->pinned_bytes, hl.end);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    const int threads = p.threads > 0 ? p.threads : omp_get_max_threads();
    int batches = 0;
    for (int64_t q0 = 0; q0 < nq && rc == GRAFT_OK; q0 += B) {
        const int64_t nb = nq - q0 < B ? nq - q0 : B;
        rc = run_batch(dev, a, &p, &dl, &hl, xq + q0 * d, nb, k, D + q0 * k, I + q0 * k, threads,
                       report != NULL, &st);
        batches++;
    }
    if (rc != GRAFT_OK) {
        rc = gpu_status(rc, fn);
        /* Nothing queued may outlive the call: the next one may grow or free the buffers. */
        graft_gpu_stream_sync(ctx, dev->stream1);
        graft_gpu_stream_sync(ctx, dev->stream2);
        graft_gpu_stream_sync(ctx, NULL);
        return rc;
    }
    if (report) {
        report->wall_seconds = omp_get_wtime() - t_start;
        /* Per batch, the device's span from the tables kernel to the end of the re-rank (events
         * on the context's stream): kernels and the copies between them, and any time the
         * device waited for the host's gathering. */
        report->gpu_seconds = st.gpu_s;
        report->gather_seconds = st.gather_s;
        report->wait_seconds = st.wait_s;
        report->loop_seconds = st.loop_s;
        report->api_seconds = st.api_s;
        report->h2d_bytes = st.h2d;
        report->d2h_bytes = st.d2h;
        report->iterations = st.expansions;
        report->batches = batches;
        report->out_of_core = ooc;
        report->gpu_peak_bytes = dev->resident_bytes + dev->scratch_bytes + dev->allowed_bytes;
    }
    return GRAFT_OK;
}

/* graft_bang_encode_ctx after its checks. */
static int encode_chunks(graft_gpu_ctx* ctx, const graft_pq* pq, int64_t n, const float* x,
                         uint8_t* codes, const char* fn) {
    if (n == 0) return GRAFT_OK;
    const int64_t d = pq->d, M = pq->M;
    /* Chunks of about 256 MB of vectors: upload, encode, download codes (the context's stream). */
    int64_t chunk = ((int64_t)256 << 20) / (d * (int64_t)sizeof(float));
    chunk = chunk < 1 ? 1 : chunk > n ? n : chunk;
    float *dx = NULL, *dc = NULL;
    uint8_t* dcodes = NULL;
    const size_t cbytes = (size_t)d * GRAFT_PQ_KSUB * sizeof(float); /* M x 256 x dsub */
    int rc = graft_gpu_malloc(ctx, (void**)&dc, cbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dx, (size_t)chunk * d * sizeof(float));
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dcodes, (size_t)chunk * M);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dc, pq->centroids, cbytes);
    for (int64_t i0 = 0; rc == GRAFT_OK && i0 < n; i0 += chunk) {
        const int64_t m = n - i0 < chunk ? n - i0 : chunk;
        rc = graft_gpu_upload(ctx, dx, x + i0 * d, (size_t)m * d * sizeof(float));
        if (rc == GRAFT_OK) rc = graft_gpu_pq_encode(ctx, dx, m, (int)d, (int)M, dc, dcodes, NULL);
        if (rc == GRAFT_OK) rc = graft_gpu_download(ctx, codes + i0 * M, dcodes, (size_t)m * M);
    }
    graft_gpu_free(ctx, dx);
    graft_gpu_free(ctx, dc);
    graft_gpu_free(ctx, dcodes);
    return rc == GRAFT_OK ? GRAFT_OK : gpu_status(rc, fn);
}

int graft_bang_encode_ctx(graft_gpu_ctx* ctx, const graft_pq* pq, int64_t n, const float* x,
                          uint8_t* codes, const char* fn) {
    GRAFT_TRY(graft_pq_check_coding(pq, n, x, codes, fn));
    return encode_chunks(ctx, pq, n, x, codes, fn);
}

int graft_pq_encode_gpu(const graft_pq* pq, int64_t n, const float* x, uint8_t* codes, int device) {
    const char* fn = "graft_pq_encode_gpu";
    GRAFT_TRY(graft_pq_check_coding(pq, n, x, codes, fn));
    if (n == 0) return GRAFT_OK;
    graft_gpu_ctx* ctx = NULL;
    int rc = graft_gpu_ctx_create(device, (size_t)512 << 20, &ctx);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    rc = encode_chunks(ctx, pq, n, x, codes, fn);
    graft_gpu_ctx_destroy(ctx);
    return rc;
}

int graft_bang_search_gpu(const graft_graph* g, const graft_pq* pq, const uint8_t* codes,
                          const float* x, int64_t d, graft_metric metric, const float* xq,
                          int64_t nq, int64_t k, const graft_bang_params* params,
                          graft_bang_mode mode, float* D, int64_t* I, graft_bang_report* report) {
    const char* fn = "graft_bang_search_gpu";
    const double t_start = omp_get_wtime();
    graft_bang_params p;
    if (params)
        p = *params;
    else
        graft_bang_params_defaults(&p);
    /* graft_bang_search_cpu's checks, then the GPU's own. */
    GRAFT_TRY(graft_bang_check_args(g, pq, codes, x, d, metric, xq, nq, k, &p, D, I, 1, fn));
    if (mode != GRAFT_BANG_IN_MEMORY && mode != GRAFT_BANG_OUT_OF_CORE)
        return graft_fail(GRAFT_EINVAL, "%s: mode %d must be GRAFT_BANG_IN_MEMORY or "
                          "GRAFT_BANG_OUT_OF_CORE", fn, (int)mode);
    if (g->R > 256)
        return graft_fail(GRAFT_EINVAL, "%s: graph degree R=%d over the GPU search's 256", fn, g->R);
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    graft_gpu_ctx* ctx = NULL;
    int rc = graft_gpu_ctx_create(p.device, p.memory_budget ? p.memory_budget : BANG_DEFAULT_BUDGET,
                                  &ctx);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    graft_bang_dev dev;
    rc = graft_bang_dev_upload(ctx, g, pq, codes, x, d, metric, mode == GRAFT_BANG_IN_MEMORY, &dev);
    if (rc == GRAFT_OK) {
        rc = graft_bang_dev_search(&dev, g->nbrs, x, xq, nq, k, &p, D, I, report);
        graft_bang_dev_release(&dev);
    }
    graft_gpu_ctx_destroy(ctx);
    if (rc == GRAFT_OK && report) report->wall_seconds = omp_get_wtime() - t_start;
    return rc;
}
