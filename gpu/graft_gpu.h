/* graft GPU layer: the only header the core includes from gpu/.
 *
 * C-callable launchers over device pointers. Knows neither FAISS nor the plugin's objects; returns
 * graft status codes (graft/graft.h) and keeps the message of the last failure on the calling
 * thread in graft_gpu_last_error(). Every CUDA and cuBLAS call is checked.
 *
 * Memory and streams belong to a context (one per index and device), like FAISS's GpuResources:
 * a stream, a cuBLAS handle and a grow-only scratch arena capped by a memory budget, so hot paths
 * never call cudaMalloc once the arena has grown to the working size.
 */
#ifndef GRAFT_GPU_H
#define GRAFT_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_gpu_ctx graft_gpu_ctx;

const char* graft_gpu_last_error(void);

/* Number of visible CUDA devices (0 when the driver or a device is missing; never an error). */
int graft_gpu_device_count(void);

/* Total memory of `device` in bytes (0 when unknown). */
size_t graft_gpu_device_memory(int device);

/* Creates a context on `device` whose scratch arena may grow to `scratch_budget` bytes. */
int graft_gpu_ctx_create(int device, size_t scratch_budget, graft_gpu_ctx** out);
void graft_gpu_ctx_destroy(graft_gpu_ctx* ctx);
/* Allow TF32 tensor cores in the distance GEMM (off by default: exact FP32). */
void graft_gpu_ctx_set_tf32(graft_gpu_ctx* ctx, int allow);
/* Largest device scratch the context has held so far, in bytes (for benchmarks). */
size_t graft_gpu_ctx_scratch_peak(const graft_gpu_ctx* ctx);

/* Device buffers, owned by the caller, made on the context's device. */
int graft_gpu_malloc(graft_gpu_ctx* ctx, void** dptr, size_t bytes);
void graft_gpu_free(graft_gpu_ctx* ctx, void* dptr);
/* Copies on the context's stream; they return when the copy is done. */
int graft_gpu_upload(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);
int graft_gpu_download(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);
int graft_gpu_copy_d2d(graft_gpu_ctx* ctx, void* dst, const void* src, size_t bytes);

/* out[i] = ||x_i||^2 for n rows of d floats (device pointers). */
int graft_gpu_row_norms(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d, float* out);

/* Exact k-NN: for each of the nq queries, the k nearest of the nb base vectors.
 * metric: 1 = L2 (squared distances, ascending; needs xb_norms), 0 = inner product (descending).
 * Distances come from a cuBLAS GEMM, selection from the quick multi-select (qms_select.cu).
 * Results follow FAISS: row-major nq x k, ties broken by smaller id; when fewer than k
 * candidates exist, the rest is label -1 with distance FLT_MAX (L2) or -FLT_MAX (IP).
 * exclude_self >= 0 makes query i skip base id exclude_self + i (the k-NN graph).
 * All pointers are device pointers; D and I are written on return. */
typedef struct graft_gpu_knn_args {
    const float* xb;        /* nb x d */
    const float* xb_norms;  /* nb, L2 only */
    int64_t nb;
    const float* xq;        /* nq x d */
    int64_t nq;
    int64_t d;
    int64_t k;
    int metric;
    int64_t exclude_self;
    float* D;               /* nq x k */
    int64_t* I;             /* nq x k */
} graft_gpu_knn_args;
int graft_gpu_exact_knn(graft_gpu_ctx* ctx, const graft_gpu_knn_args* args);

/* Quick multi-select on its own (tests, benchmarks): for each of `rows` rows of `cols` floats
 * (row stride ld >= cols, ld % 4 == 0, 16-byte aligned), the k smallest values with their column
 * indices, sorted ascending (ties by smaller index). Missing entries (k > cols): index -1,
 * value FLT_MAX. Device pointers. */
int graft_gpu_select_k(graft_gpu_ctx* ctx, const float* vals, int64_t rows, int64_t cols,
                       int64_t ld, int64_t k, float* out_vals, int64_t* out_idx);

/* GRNND graph construction (paper: ../shared/papers/grnnd-gpu-relative-nn-descent.txt,
 * Algorithms 3-6; gpu/grnnd_build.cu). Names as in the paper. */
typedef struct graft_gpu_grnnd_params {
    int S;       /* random initial neighbours per vertex (Alg. 3, line 4) */
    int R;       /* pool capacity = maximum out-degree, 1..64 (Sec. 3.5) */
    int T1;      /* outer iterations (Alg. 3, line 6) */
    int T2;      /* inner rounds per outer iteration (Alg. 3, line 7) */
    float rho;   /* reverse-edge sampling ratio in [0, 1] (Sec. 3.6) */
    int sorted;  /* 1: Alg. 2 order (sorted candidates, new/old pairs); 0: random pairs (Sec. 3.3) */
    int pairs;   /* random order: pairs drawn per vertex and round, 0..256 */
    int staged;  /* 1 = pair distances from shared-memory tiles (sorted: all not-old-old pairs);
                    0 = Alg. 5 warp distances (sorted: only the pairs Algorithm 2 reads) */
    int l2;      /* 1: squared L2; 0: inner product (ranks by -dot) */
    uint64_t seed;
} graft_gpu_grnnd_params;

/* Builds the graph of the n vectors x (device, n x d) and copies it to graph (n x R int32, rows
 * sorted by distance, -1 padded; host or device memory). Device scratch: two pools of n x R
 * 64-bit keys from the context's arena, nothing else. gpu_ms (nullable) gets the device time of
 * the build itself (events around the kernels, copy of the graph excluded). */
int graft_gpu_grnnd_build(graft_gpu_ctx* ctx, const float* x, int64_t n, int64_t d,
                          const graft_gpu_grnnd_params* params, int32_t* graph, float* gpu_ms);

/* Graph search (SONG-style, gpu/graph_search.cu): one warp per query, the query and its worklist
 * in shared memory. Device pointers throughout. */
typedef struct graft_gpu_search_args {
    const float* x;        /* n x d base vectors */
    int64_t n, d;
    const int32_t* graph;  /* n x R neighbour ids, -1 padded */
    int R;                 /* 1..256 */
    int64_t entry;         /* start vertex */
    const float* xq;       /* nq x d queries */
    int64_t nq;
    int64_t k;             /* 1 <= k <= L */
    int L;                 /* worklist size, 1..1024 */
    int probes;            /* vertices expanded per iteration, 1..8 */
    int visited;           /* 0 = shared-memory hash, 1 = Bloom filter (global, scratch) */
    int merge;             /* 0 = sort + merge path, 1 = one-by-one insertion */
    int bloom_log2;        /* Bloom bits per query = 2^bloom_log2, 10..24 */
    int l2;                /* 1 = squared L2, 0 = inner product (results: dot, descending) */
    const uint32_t* allowed; /* NULL or n-bit filter bitmap (bit i of word i/32) */
    uint32_t* bloom;       /* Bloom filter only: graft_gpu_graph_search_scratch bytes, 16-byte
                              aligned, cleared by the kernel */
    float* D;              /* nq x k */
    int64_t* I;            /* nq x k */
    int64_t* counters;     /* NULL or 2 int64 (zeroed by the caller): distances, iterations */
} graft_gpu_search_args;

/* Bytes of the `bloom` buffer for nq queries (0 for the hash visited set). */
size_t graft_gpu_graph_search_scratch(int visited, int bloom_log2, int64_t nq);

/* Runs the search; returns when D and I are written. gpu_ms (nullable): kernel time. */
int graft_gpu_graph_search(graft_gpu_ctx* ctx, const graft_gpu_search_args* args, float* gpu_ms);

#ifdef __cplusplus
}
#endif
#endif
