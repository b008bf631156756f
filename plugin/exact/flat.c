/* The exact flat index: host copy of the vectors (reconstruct, I/O, CPU search) and, when it
 * searches on a GPU, a device copy with precomputed norms. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/flat.h"
#include "graft_gpu.h"
#include "core/validate.h"
#include "exact/int8_range.h"

/* Default scratch budget: a quarter of the device's memory, at most 8 GiB. Larger tiles let
 * more queries share one GEMM (cuBLAS reaches 42.7 TFLOP/s at 2048 x 1M x 128 on an H100 and
 * 36.4 at 1024 rows); a quarter leaves room for the vectors and for the rest of the pipeline. */
#define GRAFT_MAX_DEFAULT_BUDGET ((size_t)8 << 30)
/* Queries, distances and labels of one GPU batch stay under this many bytes. */
#define GRAFT_IO_BATCH_BYTES ((size_t)256 << 20)

struct graft_flat {
    int64_t d, ntotal, capacity;
    graft_flat_params p;
    float* xb; /* capacity x d, host */
    /* GPU state; `lock` serializes GPU work (one stream, one scratch arena) so that concurrent
     * searches are safe, as FAISS requires of const search. */
    pthread_mutex_t lock;
    graft_gpu_ctx* ctx;
    float* d_xb;
    float* d_norms;
    int64_t d_capacity;
    void* d_io; /* grow-only search batch buffer */
    size_t d_io_bytes;
    int exact_path;           /* the resolved GPU path: GRAFT_EXACT_FP32, _TF32_CERTIFIED (also
                                 INT8's fallback) or _FP16_CERTIFIED */
    graft_flat_exact_counts counts; /* what the GPU paths did, all searches */
    int last_path;            /* path of the last search (graft_flat_last_path) */
    /* The exact INT8 path: int8 codes of the stored vectors on the device, kept while every
     * stored value is an integer that fits them (exact/int8_range.h). */
    graft_int8_range range;   /* of the stored vectors */
    int8_t* d_x8;             /* d_capacity x graft_gpu_int8_row_bytes(d) */
    int32_t* d_x8_term;       /* d_capacity rank terms (graft_gpu_int8_encode) */
    int64_t x8_capacity;
    int64_t x8_rows;          /* leading rows coded with x8_shift; the path needs all ntotal */
    int x8_shift;             /* 128 or 0; -1: no codes */
    /* The certified FP16 path: scaled FP16 codes of the stored vectors and their inverse scales
     * (graft_gpu_fp16_encode), kept while the index may take that path (fp16_allowed). */
    uint16_t* d_x16;          /* x16_capacity x graft_gpu_fp16_row_halves(d) */
    float* d_x16_scale;       /* x16_capacity */
    int64_t x16_capacity;
    int64_t x16_rows;         /* leading rows coded; the path needs all ntotal */
};

/* What auto (exact_path 0) takes on a GPU. Fused certified FP16, which is certified FP16 (path 4)
 * where the fusion does not apply: the fastest path on an H100 in every case measured
 * (bench/RESULTS.md, "Exact k-NN without the distance matrix"; 1M x 128, 10k queries, k = 10, run
 * at 1715bba): 471k QPS on dense-SIFT, 371k uniform, 367k uint8, against path 4's 245k-256k (which
 * was ahead of certified TF32 and INT8 everywhere: run at 43eb449). INT8 is taken only when asked
 * for (exact_path 3). */
#define GRAFT_EXACT_AUTO_GPU GRAFT_EXACT_FP16_FUSED

static const graft_int8_range empty_range = {1, INFINITY, -INFINITY};

void graft_flat_params_defaults(graft_flat_params* p) {
    p->metric = GRAFT_METRIC_L2;
    p->device = graft_gpu_available() ? 0 : -1;
    p->memory_budget = 0; /* auto, see GRAFT_MAX_DEFAULT_BUDGET */
    p->allow_tf32 = 0;
    p->exact_path = GRAFT_EXACT_AUTO;
    p->cpu_knn = NULL;
}

static int gpu_status(int rc) { return graft_fail(rc, "%s", graft_gpu_last_error()); }
#define GPU_TRY(expr)                                  \
    do {                                               \
        int rc_ = (expr);                              \
        if (rc_ != GRAFT_OK) return gpu_status(rc_);   \
    } while (0)

int graft_flat_new(int64_t d, const graft_flat_params* params, graft_flat** out) {
    if (!out) return graft_fail(GRAFT_EINVAL, "graft_flat_new: out is NULL");
    if (d < 1 || d > (1 << 20))
        return graft_fail(GRAFT_EINVAL, "graft_flat_new: dimension %lld out of range [1, 2^20]", (long long)d);
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    if (params) p = *params;
    if (p.metric != GRAFT_METRIC_L2 && p.metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EINVAL, "graft_flat_new: unknown metric %d", (int)p.metric);
    if (p.exact_path < GRAFT_EXACT_AUTO || p.exact_path > GRAFT_EXACT_FP16_FUSED)
        return graft_fail(GRAFT_EINVAL, "graft_flat_new: exact_path %d not in 0 (auto), 1 (fp32), "
                          "2 (tf32 certified), 3 (int8), 4 (fp16 certified), 5 (fp16 fused)", p.exact_path);
    if (p.memory_budget == 0 && p.device >= 0) {
        size_t quarter = graft_gpu_device_memory(p.device) / 4;
        p.memory_budget = quarter && quarter < GRAFT_MAX_DEFAULT_BUDGET ? quarter : GRAFT_MAX_DEFAULT_BUDGET;
    }
    graft_flat* f = calloc(1, sizeof *f);
    if (!f) return graft_fail(GRAFT_ENOMEM, "graft_flat_new: out of host memory");
    f->d = d;
    f->p = p;
    f->range = empty_range;
    f->x8_shift = -1;
    pthread_mutex_init(&f->lock, NULL);
    if (p.device >= 0) {
        int rc = graft_gpu_ctx_create(p.device, p.memory_budget, &f->ctx);
        if (rc != GRAFT_OK) {
            rc = gpu_status(rc);
            graft_flat_free(f);
            return rc;
        }
        graft_gpu_ctx_set_tf32(f->ctx, p.allow_tf32);
        const int path = p.exact_path == GRAFT_EXACT_AUTO ? GRAFT_EXACT_AUTO_GPU : p.exact_path;
        /* INT8 is decided per search (int8_ready); certified TF32 serves what it cannot. */
        f->exact_path = path == GRAFT_EXACT_INT8 ? GRAFT_EXACT_TF32_CERTIFIED : path;
        graft_gpu_ctx_set_certified_tf32(f->ctx, f->exact_path != GRAFT_EXACT_FP32);
        graft_gpu_ctx_set_fused(f->ctx, f->exact_path == GRAFT_EXACT_FP16_FUSED);
    } else {
        f->exact_path = GRAFT_EXACT_FP32;
    }
    *out = f;
    return GRAFT_OK;
}

void graft_flat_free(graft_flat* f) {
    if (!f) return;
    if (f->ctx) {
        graft_gpu_free(f->ctx, f->d_xb);
        graft_gpu_free(f->ctx, f->d_norms);
        graft_gpu_free(f->ctx, f->d_io);
        graft_gpu_free(f->ctx, f->d_x8);
        graft_gpu_free(f->ctx, f->d_x8_term);
        graft_gpu_free(f->ctx, f->d_x16);
        graft_gpu_free(f->ctx, f->d_x16_scale);
        graft_gpu_ctx_destroy(f->ctx);
    }
    pthread_mutex_destroy(&f->lock);
    free(f->xb);
    free(f);
}

/* Replaces the device arrays *a and *b (rows of a_row and b_row bytes) with new ones of a_rows
 * and b_rows rows that keep their first `keep` rows; the new *a starts zeroed when zero_a. On
 * failure both stay as they were. */
static int regrow_pair(graft_flat* f, void** a, size_t a_row, int64_t a_rows, int zero_a, void** b,
                       size_t b_row, int64_t b_rows, int64_t keep) {
    size_t bytes;
    if (graft_mul_overflow((size_t)a_rows, a_row, &bytes))
        return graft_fail(GRAFT_ENOMEM, "graft_flat_add: size overflow");
    void *na = NULL, *nb = NULL;
    int rc = graft_gpu_malloc(f->ctx, &na, bytes);
    if (rc == GRAFT_OK && zero_a) rc = graft_gpu_memset_async(f->ctx, na, 0, bytes, NULL);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(f->ctx, &nb, (size_t)b_rows * b_row);
    if (rc == GRAFT_OK && keep > 0) {
        rc = graft_gpu_copy_d2d(f->ctx, na, *a, (size_t)keep * a_row);
        if (rc == GRAFT_OK) rc = graft_gpu_copy_d2d(f->ctx, nb, *b, (size_t)keep * b_row);
    }
    if (rc != GRAFT_OK) {
        graft_gpu_free(f->ctx, na);
        graft_gpu_free(f->ctx, nb);
        return gpu_status(rc);
    }
    graft_gpu_free(f->ctx, *a);
    graft_gpu_free(f->ctx, *b);
    *a = na;
    *b = nb;
    return GRAFT_OK;
}

/* Makes room for `need` vectors on the device, keeping the first ntotal. */
static int gpu_reserve(graft_flat* f, int64_t need) {
    if (need <= f->d_capacity) return GRAFT_OK;
    int64_t cap = f->d_capacity * 2 > need ? f->d_capacity * 2 : need;
    GRAFT_TRY(regrow_pair(f, (void**)&f->d_xb, (size_t)f->d * sizeof(float), cap, 0, (void**)&f->d_norms,
                          sizeof(float), cap, f->ntotal));
    f->d_capacity = cap;
    return GRAFT_OK;
}

/* INT8 codes are kept only for a GPU index asked for the INT8 path, d within the int32 bound
 * (auto does not take it: measured slower than certified TF32, above). */
static int int8_allowed(const graft_flat* f) {
    return f->ctx && f->p.exact_path == GRAFT_EXACT_INT8 && f->d <= GRAFT_GPU_INT8_MAX_D;
}

/* Every stored vector has codes (none stored counts). */
static int int8_ready(const graft_flat* f) {
    return int8_allowed(f) && (f->ntotal == 0 || (f->x8_shift >= 0 && f->x8_rows == f->ntotal));
}

/* Room for d_capacity rows of INT8 codes, keeping the first x8_rows. The code rows are rounded
 * up to a multiple of 4 (the INT8 GEMM reads that many, graft_gpu.h) and start zeroed. */
static int x8_reserve(graft_flat* f) {
    if (f->x8_capacity >= f->d_capacity) return GRAFT_OK;
    const int64_t cap = f->d_capacity;
    GRAFT_TRY(regrow_pair(f, (void**)&f->d_x8, (size_t)graft_gpu_int8_row_bytes(f->d), (cap + 3) / 4 * 4, 1,
                          (void**)&f->d_x8_term, sizeof(int32_t), cap, f->x8_rows));
    f->x8_capacity = cap;
    return GRAFT_OK;
}

/* Codes for rows [x8_rows, need) of the device vectors (all of them when the shift changes). On
 * failure x8_rows still counts only rows coded with x8_shift, so the index stays consistent. */
static int x8_update(graft_flat* f, int64_t need, int shift) {
    GRAFT_TRY(x8_reserve(f));
    if (shift != f->x8_shift) {
        f->x8_rows = 0;
        f->x8_shift = shift;
    }
    const int64_t dp = graft_gpu_int8_row_bytes(f->d), r0 = f->x8_rows;
    GPU_TRY(graft_gpu_int8_encode(f->ctx, f->d_xb + r0 * f->d, need - r0, f->d, shift, (int)f->p.metric,
                                  f->d_x8 + r0 * dp, f->d_x8_term + r0));
    f->x8_rows = need;
    return GRAFT_OK;
}

static void x8_release(graft_flat* f) {
    graft_gpu_free(f->ctx, f->d_x8);
    graft_gpu_free(f->ctx, f->d_x8_term);
    f->d_x8 = NULL;
    f->d_x8_term = NULL;
    f->x8_capacity = f->x8_rows = 0;
    f->x8_shift = -1;
}

/* FP16 codes are kept only for a GPU index whose searches take the certified FP16 path (not
 * while allow_tf32 makes them approximate TF32). */
static int fp16_allowed(const graft_flat* f) {
    return f->ctx && (f->exact_path == GRAFT_EXACT_FP16_CERTIFIED || f->exact_path == GRAFT_EXACT_FP16_FUSED) &&
           !f->p.allow_tf32;
}

static int fp16_ready(const graft_flat* f) { return fp16_allowed(f) && f->x16_rows == f->ntotal; }

/* Room for d_capacity rows of FP16 codes, keeping the first x16_rows. */
static int x16_reserve(graft_flat* f) {
    if (f->x16_capacity >= f->d_capacity) return GRAFT_OK;
    const int64_t cap = f->d_capacity;
    GRAFT_TRY(regrow_pair(f, (void**)&f->d_x16, (size_t)graft_gpu_fp16_row_halves(f->d) * sizeof(uint16_t), cap, 0,
                          (void**)&f->d_x16_scale, sizeof(float), cap, f->x16_rows));
    f->x16_capacity = cap;
    return GRAFT_OK;
}

/* Codes for rows [x16_rows, need) of the device vectors; on failure x16_rows is unchanged. */
static int x16_update(graft_flat* f, int64_t need) {
    GRAFT_TRY(x16_reserve(f));
    const int64_t r0 = f->x16_rows;
    GPU_TRY(graft_gpu_fp16_encode(f->ctx, f->d_xb + r0 * f->d, need - r0, f->d,
                                  f->d_x16 + r0 * graft_gpu_fp16_row_halves(f->d), f->d_x16_scale + r0));
    f->x16_rows = need;
    return GRAFT_OK;
}

static int gpu_io(graft_flat* f, size_t bytes, void** out) {
    if (bytes > f->d_io_bytes) {
        graft_gpu_free(f->ctx, f->d_io);
        f->d_io = NULL;
        f->d_io_bytes = 0;
        GPU_TRY(graft_gpu_malloc(f->ctx, &f->d_io, bytes));
        f->d_io_bytes = bytes;
    }
    *out = f->d_io;
    return GRAFT_OK;
}

static int flat_add_locked(graft_flat* f, int64_t n, const float* x) {
    int64_t need = f->ntotal + n;
    if (need >= (int64_t)UINT32_MAX && f->ctx)
        return graft_fail(GRAFT_EUNSUPPORTED, "graft_flat_add: a GPU flat index holds at most %u vectors",
                          UINT32_MAX - 1);
    if (need > f->capacity) {
        int64_t cap = f->capacity * 2 > need ? f->capacity * 2 : need;
        size_t bytes;
        if (graft_mul_overflow((size_t)cap, (size_t)f->d * sizeof(float), &bytes))
            return graft_fail(GRAFT_ENOMEM, "graft_flat_add: size overflow");
        float* xb = realloc(f->xb, bytes);
        if (!xb) return graft_fail(GRAFT_ENOMEM, "graft_flat_add: out of host memory (%zu bytes)", bytes);
        f->xb = xb;
        f->capacity = cap;
    }
    graft_int8_range range = f->range;
    int shift = -1;
    if (int8_allowed(f)) {
        graft_int8_range r;
        graft_int8_range_scan(x, n, f->d, &r);
        range = graft_int8_range_union(range, r);
        shift = graft_int8_shift(range);
    }
    if (f->ctx) {
        GRAFT_TRY(gpu_reserve(f, need));
        float* dst = f->d_xb + f->ntotal * f->d;
        GPU_TRY(graft_gpu_upload(f->ctx, dst, x, (size_t)n * f->d * sizeof(float)));
        GPU_TRY(graft_gpu_row_norms(f->ctx, dst, n, f->d, f->d_norms + f->ntotal));
        if (shift >= 0) GRAFT_TRY(x8_update(f, need, shift));
        if (fp16_allowed(f)) GRAFT_TRY(x16_update(f, need));
    }
    memcpy(f->xb + f->ntotal * f->d, x, (size_t)n * f->d * sizeof(float));
    f->ntotal = need;
    f->range = range;
    if (shift < 0 && f->d_x8) x8_release(f); /* no longer integer data: the codes go */
    return GRAFT_OK;
}

int graft_flat_add(graft_flat* f, int64_t n, const float* x) {
    if (!f || (!x && n > 0)) return graft_fail(GRAFT_EINVAL, "graft_flat_add: NULL argument");
    if (n < 0) return graft_fail(GRAFT_EINVAL, "graft_flat_add: n = %lld < 0", (long long)n);
    if (n == 0) return GRAFT_OK;
    GRAFT_TRY(graft_check_finite(x, n, f->d, "graft_flat_add"));
    pthread_mutex_lock(&f->lock);
    int rc = flat_add_locked(f, n, x);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int graft_flat_reset(graft_flat* f) {
    if (!f) return graft_fail(GRAFT_EINVAL, "graft_flat_reset: NULL index");
    pthread_mutex_lock(&f->lock);
    f->ntotal = 0;
    f->range = empty_range;
    f->x8_rows = 0;
    f->x16_rows = 0;
    pthread_mutex_unlock(&f->lock);
    return GRAFT_OK;
}

int64_t graft_flat_ntotal(const graft_flat* f) { return f ? f->ntotal : 0; }
int64_t graft_flat_d(const graft_flat* f) { return f ? f->d : 0; }
graft_metric graft_flat_metric(const graft_flat* f) { return f ? f->p.metric : GRAFT_METRIC_L2; }
int graft_flat_device(const graft_flat* f) { return f && f->ctx ? f->p.device : -1; }
const float* graft_flat_vectors(const graft_flat* f) { return f ? f->xb : NULL; }
int graft_flat_exact_path(const graft_flat* f, int64_t* fp32_fallbacks) {
    if (fp32_fallbacks) *fp32_fallbacks = f ? f->counts.fp32_fallbacks : 0;
    if (!f) return GRAFT_EXACT_FP32;
    if (f->ctx && (f->p.exact_path == GRAFT_EXACT_INT8 || (int8_ready(f) && f->ntotal > 0)))
        return GRAFT_EXACT_INT8;
    return f->exact_path;
}
int graft_flat_last_path(const graft_flat* f) { return f ? f->last_path : 0; }
void graft_flat_get_exact_counts(const graft_flat* f, graft_flat_exact_counts* out) {
    if (!out) return;
    if (f) {
        pthread_mutex_lock(&((graft_flat*)f)->lock);
        *out = f->counts;
        pthread_mutex_unlock(&((graft_flat*)f)->lock);
    } else {
        memset(out, 0, sizeof *out);
    }
}
size_t graft_flat_host_bytes(const graft_flat* cf) {
    graft_flat* f = (graft_flat*)cf;
    if (!f) return 0;
    pthread_mutex_lock(&f->lock); /* an add may be growing xb */
    const size_t b = (size_t)f->capacity * (size_t)f->d * sizeof(float);
    pthread_mutex_unlock(&f->lock);
    return b;
}

size_t graft_flat_gpu_scratch_peak(const graft_flat* f) {
    return f && f->ctx ? graft_gpu_ctx_scratch_peak(f->ctx) : 0;
}

/* GPU search of nq queries: from the host (xq != NULL) or the stored vectors themselves
 * (xq == NULL: the k-NN graph, self excluded). */
static int gpu_search_locked(graft_flat* f, int64_t nq, const float* xq, int64_t k, float* D,
                             int64_t* I) {
    size_t per_q = (size_t)k * (sizeof(float) + sizeof(int64_t)) + (xq ? (size_t)f->d * sizeof(float) : 0);
    int64_t batch = (int64_t)(GRAFT_IO_BATCH_BYTES / per_q);
    if (batch < 1) batch = 1;
    if (batch > nq) batch = nq;
    /* INT8 when the stored vectors have codes and the queries fit them too (checked here, on the
     * host, like their finiteness); the k-NN graph's queries are the stored vectors. */
    int use8 = int8_ready(f) && f->ntotal > 0;
    int queries_fit = 1;
    if (use8 && xq) {
        graft_int8_range r;
        graft_int8_range_scan(xq, nq, f->d, &r);
        queries_fit = use8 = graft_int8_fits(r, f->x8_shift);
    }
    if (f->p.exact_path == GRAFT_EXACT_INT8 && !use8 && f->ntotal > 0)
        return graft_fail(GRAFT_EINVAL,
                          "graft_flat_search: exact_path 3 (int8) needs integer vectors in [0, 255] or "
                          "[-128, 127] (the same range for stored vectors and queries); %s",
                          f->d > GRAFT_GPU_INT8_MAX_D ? "the dimension is over 32768"
                          : !queries_fit              ? "the queries do not fit the stored vectors' codes"
                                                      : "the stored vectors are not such integers");
    void* io = NULL;
    GRAFT_TRY(gpu_io(f, (size_t)batch * per_q + 512, &io));
    float* dD = io;
    int64_t* dI = (int64_t*)((char*)io + (((size_t)batch * k * sizeof(float) + 255) / 256 * 256));
    float* dq = (float*)((char*)dI + (((size_t)batch * k * sizeof(int64_t) + 255) / 256 * 256));
    for (int64_t q0 = 0; q0 < nq; q0 += batch) {
        int64_t nb = nq - q0 < batch ? nq - q0 : batch;
        graft_gpu_knn_args a = {f->d_xb, f->d_norms, f->ntotal, NULL, nb, f->d, k, (int)f->p.metric,
                                -1, dD, dI, NULL, NULL, 0};
        if (use8) {
            a.xb8 = f->d_x8;
            a.xb8_term = f->d_x8_term;
            a.shift8 = f->x8_shift;
        } else if (fp16_ready(f)) {
            a.xb16 = f->d_x16;
            a.xb16_scale = f->d_x16_scale;
        }
        if (xq) {
            GPU_TRY(graft_gpu_upload(f->ctx, dq, xq + q0 * f->d, (size_t)nb * f->d * sizeof(float)));
            a.xq = dq;
        } else {
            a.xq = f->d_xb + q0 * f->d;
            a.exclude_self = q0;
        }
        GPU_TRY(graft_gpu_exact_knn(f->ctx, &a));
        int64_t band = 0, second = 0;
        graft_gpu_ctx_last_band(f->ctx, &band, &second);
        f->counts.queries += nb;
        f->counts.fp32_fallbacks += graft_gpu_ctx_last_fallbacks(f->ctx);
        f->counts.band_reranks += band;
        f->counts.second_passes += second;
        f->last_path = graft_gpu_ctx_last_path(f->ctx);
        GPU_TRY(graft_gpu_download(f->ctx, D + q0 * k, dD, (size_t)nb * k * sizeof(float)));
        GPU_TRY(graft_gpu_download(f->ctx, I + q0 * k, dI, (size_t)nb * k * sizeof(int64_t)));
    }
    return GRAFT_OK;
}

static int check_k(int64_t k, const char* fn) {
    if (k < 1) return graft_fail(GRAFT_EINVAL, "%s: k must be >= 1, got %lld", fn, (long long)k);
    return GRAFT_OK;
}

int graft_flat_search(const graft_flat* cf, int64_t nq, const float* xq, int64_t k, float* D,
                      int64_t* I) {
    graft_flat* f = (graft_flat*)cf; /* the lock is the only mutable part */
    if (!f || ((!xq || !D || !I) && nq > 0))
        return graft_fail(GRAFT_EINVAL, "graft_flat_search: NULL argument");
    if (nq < 0) return graft_fail(GRAFT_EINVAL, "graft_flat_search: nq = %lld < 0", (long long)nq);
    GRAFT_TRY(check_k(k, "graft_flat_search"));
    if (nq == 0) return GRAFT_OK;
    GRAFT_TRY(graft_check_finite(xq, nq, f->d, "graft_flat_search: queries"));
    pthread_mutex_lock(&f->lock);
    if (!f->ctx) f->last_path = GRAFT_EXACT_FP32;
    int rc = f->ctx         ? gpu_search_locked(f, nq, xq, k, D, I)
             : f->p.cpu_knn ? f->p.cpu_knn(f->xb, f->ntotal, xq, nq, f->d, k, f->p.metric, D, I)
                            : graft_knn_cpu(f->xb, f->ntotal, xq, nq, f->d, k, f->p.metric, -1, D, I);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int graft_flat_knn_graph(const graft_flat* cf, int64_t k, float* D, int64_t* I) {
    graft_flat* f = (graft_flat*)cf;
    if (!f || !D || !I) return graft_fail(GRAFT_EINVAL, "graft_flat_knn_graph: NULL argument");
    GRAFT_TRY(check_k(k, "graft_flat_knn_graph"));
    if (f->ntotal == 0) return GRAFT_OK;
    pthread_mutex_lock(&f->lock);
    int rc = f->ctx ? gpu_search_locked(f, f->ntotal, NULL, k, D, I)
                    : graft_knn_cpu(f->xb, f->ntotal, f->xb, f->ntotal, f->d, k, f->p.metric, 0, D, I);
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int graft_flat_reconstruct(const graft_flat* f, int64_t key, float* out) {
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "graft_flat_reconstruct: NULL argument");
    if (key < 0 || key >= f->ntotal)
        return graft_fail(GRAFT_EINVAL, "graft_flat_reconstruct: key %lld not in [0, %lld)",
                          (long long)key, (long long)f->ntotal);
    memcpy(out, f->xb + key * f->d, (size_t)f->d * sizeof(float));
    return GRAFT_OK;
}
