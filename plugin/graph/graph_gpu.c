/* Graph search on the GPU, host side: device copies of a graph and its vectors, batches that fit
 * the memory budget, the one-shot graft_graph_search_gpu. The kernel is gpu/graph_search.cu. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_gpu.h"
#include "core/threads.h"
#include "core/validate.h"
#include "storage/decode.h"

#define GRAFT_SEARCH_DEFAULT_BUDGET ((size_t)1 << 30)

static int gpu_status(int rc, const char* fn) {
    return graft_fail(rc, "%s: %s", fn, graft_gpu_last_error());
}

void graft_graph_dev_release(graft_graph_dev* dev) {
    if (!dev) return;
    if (dev->ctx) {
        graft_gpu_free(dev->ctx, dev->x);
        graft_gpu_free(dev->ctx, dev->nbrs);
        graft_gpu_free(dev->ctx, dev->io);
        graft_gpu_host_free(dev->ctx, dev->host_io);
        graft_gpu_free(dev->ctx, dev->allowed);
        graft_gpu_free(dev->ctx, dev->codes);
        graft_gpu_free(dev->ctx, dev->sq);
        for (int l = 0; l < 2; l++)
            if (dev->streams[l]) graft_gpu_stream_destroy(dev->ctx, dev->streams[l]);
    }
    memset(dev, 0, sizeof *dev);
}

int graft_graph_dev_upload(graft_gpu_ctx* ctx, const graft_graph* g, const float* x, int64_t d,
                           graft_graph_dev* out) {
    return graft_graph_dev_upload_store(ctx, g, x, NULL, NULL, d, out);
}

int graft_graph_dev_upload_store(graft_gpu_ctx* ctx, const graft_graph* g, const float* x,
                                 const graft_storage* st, const uint8_t* codes, int64_t d,
                                 graft_graph_dev* out) {
    const char* fn = "graft_graph_dev_upload";
    const int kind = st ? st->kind : GRAFT_STORAGE_FP32;
    if (!ctx || !g || !g->nbrs || !x || !out || d < 1 || g->n < 1 || g->R < 1 ||
        (kind != GRAFT_STORAGE_FP32 && (!codes || !st->trained)))
        return graft_fail(GRAFT_EINVAL, "%s: bad arguments", fn);
    graft_graph_dev dev;
    memset(&dev, 0, sizeof dev);
    dev.ctx = ctx;
    dev.n = g->n;
    dev.d = d;
    dev.R = g->R;
    dev.entry = g->entry;
    size_t xbytes, gbytes;
    if (graft_mul_overflow((size_t)g->n, (size_t)d * sizeof(float), &xbytes) ||
        graft_mul_overflow((size_t)g->n, (size_t)g->R * sizeof(int32_t), &gbytes))
        return graft_fail(GRAFT_ENOMEM, "%s: size overflow", fn);
    int rc = graft_gpu_malloc(ctx, (void**)&dev.x, xbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dev.nbrs, gbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.x, x, xbytes);
    if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.nbrs, g->nbrs, gbytes);
    dev.storage = kind;
    dev.bytes = xbytes + gbytes;
    if (rc == GRAFT_OK && kind != GRAFT_STORAGE_FP32) {
        /* n x code bytes <= n x 4 d: no overflow past xbytes' check */
        const size_t cbytes = (size_t)g->n * graft_storage_code_size(kind, d);
        rc = graft_gpu_malloc(ctx, &dev.codes, cbytes);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.codes, codes, cbytes);
        dev.bytes += cbytes;
    }
    if (rc == GRAFT_OK && kind == GRAFT_STORAGE_SQ8) {
        float* so = malloc((size_t)d * 2 * sizeof(float));
        if (!so) rc = GRAFT_ENOMEM;
        if (so) graft_sq8_affine(st, so); /* the walk's decode: one FMA a dimension */
        if (rc == GRAFT_OK) rc = graft_gpu_malloc(ctx, (void**)&dev.sq, (size_t)d * 2 * sizeof(float));
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev.sq, so, (size_t)d * 2 * sizeof(float));
        free(so);
        dev.bytes += (size_t)d * 2 * sizeof(float);
    }
    if (rc == GRAFT_ENOMEM) {
        graft_graph_dev_release(&dev);
        return graft_fail(rc, "%s: out of host memory", fn);
    }
    if (rc != GRAFT_OK) {
        rc = gpu_status(rc, fn);
        graft_graph_dev_release(&dev);
        return rc;
    }
    *out = dev;
    return GRAFT_OK;
}

/* Grows a device buffer to at least `bytes` (contents dropped). */
static int grow(graft_gpu_ctx* ctx, void** buf, size_t* have, size_t bytes) {
    if (bytes <= *have) return GRAFT_OK;
    graft_gpu_free(ctx, *buf);
    *buf = NULL;
    *have = 0;
    GRAFT_TRY(graft_gpu_malloc(ctx, buf, bytes));
    *have = bytes;
    return GRAFT_OK;
}

/* The same for page-locked host memory. */
static int grow_pinned(graft_gpu_ctx* ctx, void** buf, size_t* have, size_t bytes) {
    if (bytes <= *have) return GRAFT_OK;
    graft_gpu_host_free(ctx, *buf);
    *buf = NULL;
    *have = 0;
    GRAFT_TRY(graft_gpu_host_alloc(ctx, buf, bytes));
    *have = bytes;
    return GRAFT_OK;
}

/* One io set, for `chunk` queries: Bloom filters | queries | D | I, 16-byte aligned pieces
 * (offsets in bytes; the kernel reads the queries as float4s). The host's pinned set is the same
 * without the Bloom filters (offsets minus q). */
typedef struct {
    size_t q, d, i, bytes;
} io_set;

static io_set io_set_of(int64_t chunk, int64_t d, int64_t k, size_t bloom_bytes) {
    io_set s;
    s.q = bloom_bytes;
    s.d = s.q + ((size_t)chunk * d * sizeof(float) + 15) / 16 * 16;
    s.i = s.d + ((size_t)chunk * k * sizeof(float) + 15) / 16 * 16;
    s.bytes = s.i + ((size_t)chunk * k * sizeof(int64_t) + 15) / 16 * 16;
    return s;
}

/* A chunk whose results are on their way to the host: nb queries from q0, in io set `set`. */
typedef struct {
    int64_t q0, nb;
    int set;
} chunk_in_flight;

/* Waits for chunk c's copies and moves its results from pinned memory to D and I. A query that
 * holds NaN or Inf was not walked (the kernel checks each query as it reads it, so the host makes
 * no pass over the queries but the copy): its first id says so (GRAFT_GPU_BAD_QUERY); then the
 * chunk's results are not moved, and *bad_query is set with the error. */
static int chunk_finish(graft_graph_dev* dev, io_set s, chunk_in_flight c, int64_t k, float* D,
                        int64_t* I, int* bad_query) {
    GRAFT_TRY(graft_gpu_stream_sync(dev->ctx, dev->streams[c.set]));
    const char* h = (const char*)dev->host_io + (size_t)c.set * (s.bytes - s.q);
    const int64_t* hi = (const int64_t*)(h + (s.i - s.q));
    for (int64_t q = 0; q < c.nb; q++)
        if (hi[q * k] == GRAFT_GPU_BAD_QUERY) {
            *bad_query = 1;
            return graft_fail_nonfinite("graft_graph_search_gpu: queries", c.q0 + q);
        }
    memcpy(D + c.q0 * k, h + (s.d - s.q), (size_t)c.nb * k * sizeof(float));
    memcpy(I + c.q0 * k, hi, (size_t)c.nb * k * sizeof(int64_t));
    return GRAFT_OK;
}

int graft_graph_dev_search(graft_graph_dev* dev, graft_metric metric, const float* xq, int64_t nq,
                           int64_t k, const graft_search_params* params, float* D, int64_t* I,
                           graft_search_report* report) {
    const char* fn = "graft_graph_search_gpu";
    if (!dev || !dev->ctx) return graft_fail(GRAFT_EINVAL, "%s: no graph on the GPU", fn);
    graft_search_params p;
    if (params)
        p = *params;
    else
        graft_search_params_defaults(&p);
    /* The arguments were checked where the search entered the core (graft_graph_search_gpu,
     * graft_gindex_search); here only what the device data must allow. */
    if (dev->R > 256)
        return graft_fail(GRAFT_EINVAL, "%s: graph degree R=%d over the GPU search's 256", fn,
                          dev->R);
    if (report) memset(report, 0, sizeof *report);
    if (nq == 0) return GRAFT_OK;
    graft_gpu_ctx* ctx = dev->ctx;
    if (p.allowed) {
        int rc = grow(ctx, (void**)&dev->allowed, &dev->allowed_bytes, ((size_t)dev->n + 31) / 32 * 4);
        if (rc == GRAFT_OK) rc = graft_gpu_upload(ctx, dev->allowed, p.allowed, ((size_t)dev->n + 7) / 8);
        if (rc != GRAFT_OK) return gpu_status(rc, fn);
    }
    graft_gpu_search_args a = {dev->x, dev->n, dev->d, dev->nbrs, dev->R, dev->entry, NULL, nq, k,
                               p.L, p.probes, p.visited, p.merge, p.bloom_log2,
                               metric == GRAFT_METRIC_L2, p.allowed ? dev->allowed : NULL, NULL, NULL,
                               NULL, NULL, dev->storage, dev->codes, dev->sq,
                               dev->sq ? dev->sq + dev->d : NULL, p.rerank, 1};
    /* The wave: queries the device holds resident at once (the pipeline's chunks below). */
    const int64_t wave = graft_gpu_graph_search_resident(ctx, &a);
    /* The mode (graft/graph.h): walks a query for the whole call, from its size. */
    if (p.mode != GRAFT_SEARCH_SINGLE) {
        const int w = graft_gpu_graph_search_walks(wave, nq, k);
        a.walks = p.mode == GRAFT_SEARCH_MULTI ? (p.walks ? p.walks : w > 2 ? w : 2) : w;
    }
    /* Per query: the query, its results and its scratch (Bloom filter; the multi mode's walks'
     * results); 16 bytes of counters besides. */
    const size_t budget = p.memory_budget ? p.memory_budget : GRAFT_SEARCH_DEFAULT_BUDGET;
    const size_t io_per_q = (size_t)dev->d * sizeof(float) + (size_t)k * (sizeof(float) + 8);
    a.nq = 1;
    const size_t per_q = io_per_q + graft_gpu_graph_search_scratch(&a);
    if (per_q > budget)
        return graft_fail(GRAFT_EGPU_NOMEM, "%s: one query needs %zu bytes, over the budget of %zu",
                          fn, per_q, budget);
    int64_t batch = (int64_t)(budget / per_q);
    if (batch > nq) batch = nq;
    /* Every call is a pipeline of chunks over two io sets, each with its stream: the host copies
     * a chunk's queries into pinned memory while the other set's kernel runs, the
     * copies up and down are asynchronous, and the host moves a chunk's results out of pinned
     * memory while the next chunk's kernel runs. So a caller's pageable buffers cost what pinned
     * ones would, and the host work of a call is a memcpy (on a few threads once a chunk's
     * queries pass 4 MiB, graft_memcpy_wide), no allocation once the buffers have grown.
     * The pipeline starts with a small chunk (an eighth of the call) so that the GPU starts early,
     * and each chunk after is twice the one before (up to half the call): its kernel is launched
     * while the previous one runs, and fills the multiprocessors that the previous one's last
     * queries leave idle; a large second chunk also keeps the GPU busy while the host finishes
     * the first and copies the third (equal chunks of 3,334 at 10k ran 0.84x on dense SIFT). The
     * last chunk takes the rest when it is under twice the next size. No chunk is under a wave
     * (the queries the device holds resident at once, ~2.6k on the H100 at dense-SIFT's L): a
     * smaller kernel leaves multiprocessors idle for a whole walk, and with two streams at most
     * two run at once (a 2.5k-query call as 1024 + 1250 + 226 took two walks' time, as one
     * chunk one). A call under a wave is one chunk; one of one to two waves is two halves, side
     * by side on the two streams, the second copied while the first runs (1.2x one chunk at 5k
     * on dense SIFT). With a report (benchmarks), each chunk's kernel is timed alone and the
     * chunks run one after the other. GRAFT_SEARCH_PIPE_MIN=N (benchmarks only) sets the
     * smallest chunk instead of the wave, to compare rules (bench/RESULTS.md, "The pipeline's
     * chunks"). */
    int64_t pipe_min = wave;
    /* GRAFT_SEARCH_COPY_THREADS=N (benchmarks only): the query copy's threads at most (1: the
     * calling thread alone, as before 4-thread copies were measured). */
    const char* ct = getenv("GRAFT_SEARCH_COPY_THREADS");
    const int copy_threads = ct && atoi(ct) > 0 ? atoi(ct) : 4;
    const char* pm = getenv("GRAFT_SEARCH_PIPE_MIN");
    if (pm && atoll(pm) > 0) pipe_min = atoll(pm);
    if (pipe_min < 1) pipe_min = 1024; /* the device's attributes unreadable */
    const int sets = !report && nq >= pipe_min && batch >= pipe_min ? 2 : 1;
    int64_t chunk = batch, first = batch;
    if (sets == 2) {
        chunk = (nq + 1) / 2 < batch / 2 ? (nq + 1) / 2 : batch / 2; /* the largest */
        first = (nq + 7) / 8 > pipe_min ? (nq + 7) / 8 : pipe_min;
        if (first > chunk) first = chunk;
    }
    a.nq = chunk;
    const size_t bbytes = graft_gpu_graph_search_scratch(&a);
    const io_set set = io_set_of(chunk, dev->d, k, bbytes);
    int rc = grow(ctx, &dev->io, &dev->io_bytes, sets * set.bytes + 16); /* + 2 counters */
    if (rc == GRAFT_OK)
        rc = grow_pinned(ctx, &dev->host_io, &dev->host_io_bytes, sets * (set.bytes - set.q));
    for (int l = 0; rc == GRAFT_OK && l < sets; l++)
        if (!dev->streams[l]) rc = graft_gpu_stream_create(ctx, &dev->streams[l]);
    if (rc != GRAFT_OK) return gpu_status(rc, fn); /* names the allocation ("cudaHostAlloc ...") */
    /* Distance and iteration counters only when a report asks for them: zeroing them is a
     * synchronous copy, which a batch-1 search would pay on every call. */
    int64_t* counters = report ? (int64_t*)((char*)dev->io + sets * set.bytes) : NULL;
    const int64_t zero[2] = {0, 0};
    if (counters) rc = graft_gpu_upload(ctx, counters, zero, sizeof zero);
    a.counters = counters;
    double gpu_s = 0;
    int batches = 0, bad_query = 0;
    chunk_in_flight prev = {0, 0, -1}; /* the chunk whose results are still on their way */
    for (int64_t q0 = 0, nb = first; q0 < nq && rc == GRAFT_OK; q0 += nb, batches++) {
        if (batches > 0) nb = 2 * nb < chunk ? 2 * nb : chunk;
        if (nq - q0 - nb < 2 * nb && nq - q0 <= chunk) nb = nq - q0; /* the rest, when it fits */
        const int l = batches % sets;
        const graft_gpu_stream st = dev->streams[l];
        char* io = (char*)dev->io + l * set.bytes;
        char* host = (char*)dev->host_io + l * (set.bytes - set.q);
        a.bloom = bbytes ? (uint32_t*)io : NULL;
        a.xq = (float*)(io + set.q);
        a.D = (float*)(io + set.d);
        a.I = (int64_t*)(io + set.i);
        a.nq = nq - q0 < nb ? nq - q0 : nb;
        /* Set l is free: its last chunk finished below, in the previous round but one. */
        graft_memcpy_wide(host, xq + q0 * dev->d, (size_t)a.nq * dev->d * sizeof(float), copy_threads);
        rc = graft_gpu_copy_async(ctx, (void*)a.xq, host, (size_t)a.nq * dev->d * sizeof(float), st);
        if (rc == GRAFT_OK && report) {
            /* Timed, on the context's stream after the copy on st: one after the other. */
            float ms = 0;
            rc = graft_gpu_stream_sync(ctx, st);
            if (rc == GRAFT_OK) rc = graft_gpu_graph_search(ctx, &a, &ms);
            gpu_s += ms / 1000.0;
        } else if (rc == GRAFT_OK) {
            rc = graft_gpu_graph_search_async(ctx, &a, st);
        }
        if (rc == GRAFT_OK)
            rc = graft_gpu_copy_async(ctx, host + (set.d - set.q), a.D, (size_t)a.nq * k * sizeof(float), st);
        if (rc == GRAFT_OK)
            rc = graft_gpu_copy_async(ctx, host + (set.i - set.q), a.I, (size_t)a.nq * k * sizeof(int64_t), st);
        if (rc == GRAFT_OK && prev.set >= 0) rc = chunk_finish(dev, set, prev, k, D, I, &bad_query);
        prev = (chunk_in_flight){q0, a.nq, l};
        if (rc == GRAFT_OK && sets == 1) {
            rc = chunk_finish(dev, set, prev, k, D, I, &bad_query);
            prev.set = -1;
        }
    }
    if (rc == GRAFT_OK && prev.set >= 0) rc = chunk_finish(dev, set, prev, k, D, I, &bad_query);
    for (int l = 0; l < sets && rc != GRAFT_OK; l++)
        graft_gpu_stream_sync(ctx, dev->streams[l]); /* nothing in flight after a failure */
    int64_t counts[2] = {0, 0};
    if (rc == GRAFT_OK && report) rc = graft_gpu_download(ctx, counts, counters, sizeof counts);
    if (rc != GRAFT_OK) return bad_query ? rc : gpu_status(rc, fn);
    if (report) {
        report->gpu_seconds = gpu_s;
        report->distances = counts[0];
        report->iterations = counts[1];
        report->batches = batches;
    }
    return GRAFT_OK;
}

int graft_graph_search_gpu(const graft_graph* g, const float* x, int64_t d, graft_metric metric,
                           const float* xq, int64_t nq, int64_t k, const graft_search_params* params,
                           float* D, int64_t* I, graft_search_report* report) {
    const char* fn = "graft_graph_search_gpu";
    graft_search_params p;
    if (params)
        p = *params;
    else
        graft_search_params_defaults(&p);
    GRAFT_TRY(graft_check_search_args(g, x, d, metric, xq, nq, k, &p, D, I, 1, fn));
    const size_t budget = p.memory_budget ? p.memory_budget : GRAFT_SEARCH_DEFAULT_BUDGET;
    graft_gpu_ctx* ctx = NULL;
    int rc = graft_gpu_ctx_create(p.device, budget, &ctx);
    if (rc != GRAFT_OK) return gpu_status(rc, fn);
    graft_graph_dev dev;
    rc = graft_graph_dev_upload(ctx, g, x, d, &dev);
    if (rc == GRAFT_OK) {
        rc = graft_graph_dev_search(&dev, metric, xq, nq, k, &p, D, I, report);
        graft_graph_dev_release(&dev);
    }
    graft_gpu_ctx_destroy(ctx);
    return rc;
}
