/* The exact flat index: host copy of the vectors (reconstruct, I/O, CPU search) and, when it
 * searches on a GPU, a device copy with precomputed norms. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/flat.h"
#include "graft_gpu.h"
#include "core/validate.h"

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
    int exact_path;           /* the resolved GPU path: GRAFT_EXACT_FP32 or _TF32_CERTIFIED */
    int64_t fp32_fallbacks;   /* queries the certificate sent back to FP32, all searches */
};

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
    if (p.exact_path < GRAFT_EXACT_AUTO || p.exact_path > GRAFT_EXACT_TF32_CERTIFIED)
        return graft_fail(GRAFT_EINVAL, "graft_flat_new: exact_path %d not in 0 (auto), 1 (fp32), "
                          "2 (tf32 certified)", p.exact_path);
    if (p.memory_budget == 0 && p.device >= 0) {
        size_t quarter = graft_gpu_device_memory(p.device) / 4;
        p.memory_budget = quarter && quarter < GRAFT_MAX_DEFAULT_BUDGET ? quarter : GRAFT_MAX_DEFAULT_BUDGET;
    }
    graft_flat* f = calloc(1, sizeof *f);
    if (!f) return graft_fail(GRAFT_ENOMEM, "graft_flat_new: out of host memory");
    f->d = d;
    f->p = p;
    pthread_mutex_init(&f->lock, NULL);
    if (p.device >= 0) {
        int rc = graft_gpu_ctx_create(p.device, p.memory_budget, &f->ctx);
        if (rc != GRAFT_OK) {
            rc = gpu_status(rc);
            graft_flat_free(f);
            return rc;
        }
        graft_gpu_ctx_set_tf32(f->ctx, p.allow_tf32);
        /* Auto: the certified TF32 path, measured faster on an H100 for every k tried
         * (bench/RESULTS.md, "Exact k-NN on tensor cores"). */
        f->exact_path = p.exact_path == GRAFT_EXACT_FP32 ? GRAFT_EXACT_FP32 : GRAFT_EXACT_TF32_CERTIFIED;
        graft_gpu_ctx_set_certified_tf32(f->ctx, f->exact_path == GRAFT_EXACT_TF32_CERTIFIED);
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
        graft_gpu_ctx_destroy(f->ctx);
    }
    pthread_mutex_destroy(&f->lock);
    free(f->xb);
    free(f);
}

/* Makes room for `need` vectors on the device, keeping the first ntotal. */
static int gpu_reserve(graft_flat* f, int64_t need) {
    if (need <= f->d_capacity) return GRAFT_OK;
    int64_t cap = f->d_capacity * 2 > need ? f->d_capacity * 2 : need;
    size_t bytes;
    if (graft_mul_overflow((size_t)cap, (size_t)f->d * sizeof(float), &bytes))
        return graft_fail(GRAFT_ENOMEM, "graft_flat_add: size overflow");
    float *xb = NULL, *norms = NULL;
    int rc = graft_gpu_malloc(f->ctx, (void**)&xb, bytes);
    if (rc == GRAFT_OK) rc = graft_gpu_malloc(f->ctx, (void**)&norms, (size_t)cap * sizeof(float));
    if (rc == GRAFT_OK && f->ntotal > 0) {
        rc = graft_gpu_copy_d2d(f->ctx, xb, f->d_xb, (size_t)f->ntotal * f->d * sizeof(float));
        if (rc == GRAFT_OK)
            rc = graft_gpu_copy_d2d(f->ctx, norms, f->d_norms, (size_t)f->ntotal * sizeof(float));
    }
    if (rc != GRAFT_OK) {
        graft_gpu_free(f->ctx, xb);
        graft_gpu_free(f->ctx, norms);
        return gpu_status(rc);
    }
    graft_gpu_free(f->ctx, f->d_xb);
    graft_gpu_free(f->ctx, f->d_norms);
    f->d_xb = xb;
    f->d_norms = norms;
    f->d_capacity = cap;
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
    if (f->ctx) {
        GRAFT_TRY(gpu_reserve(f, need));
        float* dst = f->d_xb + f->ntotal * f->d;
        GPU_TRY(graft_gpu_upload(f->ctx, dst, x, (size_t)n * f->d * sizeof(float)));
        GPU_TRY(graft_gpu_row_norms(f->ctx, dst, n, f->d, f->d_norms + f->ntotal));
    }
    memcpy(f->xb + f->ntotal * f->d, x, (size_t)n * f->d * sizeof(float));
    f->ntotal = need;
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
    pthread_mutex_unlock(&f->lock);
    return GRAFT_OK;
}

int64_t graft_flat_ntotal(const graft_flat* f) { return f ? f->ntotal : 0; }
int64_t graft_flat_d(const graft_flat* f) { return f ? f->d : 0; }
graft_metric graft_flat_metric(const graft_flat* f) { return f ? f->p.metric : GRAFT_METRIC_L2; }
int graft_flat_device(const graft_flat* f) { return f && f->ctx ? f->p.device : -1; }
const float* graft_flat_vectors(const graft_flat* f) { return f ? f->xb : NULL; }
int graft_flat_exact_path(const graft_flat* f, int64_t* fp32_fallbacks) {
    if (fp32_fallbacks) *fp32_fallbacks = f ? f->fp32_fallbacks : 0;
    return f ? f->exact_path : GRAFT_EXACT_FP32;
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
    void* io = NULL;
    GRAFT_TRY(gpu_io(f, (size_t)batch * per_q + 512, &io));
    float* dD = io;
    int64_t* dI = (int64_t*)((char*)io + (((size_t)batch * k * sizeof(float) + 255) / 256 * 256));
    float* dq = (float*)((char*)dI + (((size_t)batch * k * sizeof(int64_t) + 255) / 256 * 256));
    for (int64_t q0 = 0; q0 < nq; q0 += batch) {
        int64_t nb = nq - q0 < batch ? nq - q0 : batch;
        graft_gpu_knn_args a = {f->d_xb, f->d_norms, f->ntotal, NULL, nb, f->d, k, (int)f->p.metric,
                                -1, dD, dI};
        if (xq) {
            GPU_TRY(graft_gpu_upload(f->ctx, dq, xq + q0 * f->d, (size_t)nb * f->d * sizeof(float)));
            a.xq = dq;
        } else {
            a.xq = f->d_xb + q0 * f->d;
            a.exclude_self = q0;
        }
        GPU_TRY(graft_gpu_exact_knn(f->ctx, &a));
        f->fp32_fallbacks += graft_gpu_ctx_last_fallbacks(f->ctx);
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
