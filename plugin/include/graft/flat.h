/* graft: exact k-NN (brute force), the IndexFlat-style index and the oracle for everything else.
 *
 * On the GPU, distances are a cuBLAS GEMM (FP32, certified TF32 or FP16, or INT8 for integer data; see
 * exact_path) and selection is the warp-ballot quick multi-select (gpu/qms_select.cu); on the
 * CPU, the reference below.
 * Results follow FAISS's IndexFlat exactly: row-major nq x k; L2 gives squared distances,
 * ascending; inner product gives dot products, descending; ties go to the smaller id; when k
 * exceeds the number of vectors, the remaining slots hold label -1 and distance FLT_MAX (L2) or
 * -FLT_MAX (inner product). Any k >= 1 works, and any batch size.
 */
#ifndef GRAFT_FLAT_H
#define GRAFT_FLAT_H

#include "graft/graft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct graft_flat_params {
    graft_metric metric;   /* GRAFT_METRIC_L2 (default) or GRAFT_METRIC_INNER_PRODUCT */
    int device;            /* CUDA device that searches; -1: the CPU reference. Default: 0 when a
                              GPU is visible, else -1 */
    size_t memory_budget;  /* GPU scratch for distance tiles and selection, bytes; 0 (default):
                              a quarter of the device's memory, at most 8 GiB. Larger budgets let
                              more queries share one GEMM. */
    int allow_tf32;        /* 1 lets the GEMM use TF32 tensor cores (faster, ~1e-3 relative error
                              in distances, not exact); default 0 */
    /* The CPU search when the index has no GPU (and for none of the GPU paths): NULL (default)
     * is graft_knn_cpu, the double-precision reference; the FAISS adapter passes FAISS's own
     * brute force (graft_faiss_knn), so that a CPU GraftFlat is FAISS's IndexFlat in speed and
     * results. */
    graft_cpu_knn_fn cpu_knn;
    int exact_path;        /* GPU path of the exact search (still exact): GRAFT_EXACT_AUTO (0,
                              default: fused certified FP16 (5), which is certified FP16 (4)
                              where the fusion does not apply; the fastest measured on the
                              H100, even on uint8 data: bench/RESULTS.md),
                              GRAFT_EXACT_FP32 (1: FP32 GEMM), GRAFT_EXACT_TF32_CERTIFIED (2: TF32
                              tensor-core candidates with a certified error bound, FP32
                              re-ranking, FP32 again for a query whose certificate fails),
                              GRAFT_EXACT_INT8 (3: INT8 only; a search whose stored vectors or
                              queries do not qualify fails with GRAFT_EINVAL; a device whose
                              cuBLAS refuses the INT8 GEMM searches in certified TF32, as
                              graft_flat_last_path then says).
                              INT8 (exact_path 3): when every stored value is an integer in
                              [0, 255] (uint8 data: SIFT bvecs / u8bin, pixels) or in
                              [-128, 127], and d <= 32768, the index keeps int8 codes of its
                              vectors on the GPU beside the FP32
                              copy: n x d bytes (d rounded up to 16), a quarter of the FP32
                              copy's n x d x 4, plus 4 bytes a vector. A search whose queries are
                              integers in the same range then takes an int8 tensor-core GEMM
                              with int32 accumulation: distances are exact integers (ranked
                              exactly, ties to the smaller id) rounded once to float, equal to or
                              more accurate than FP32's. On the H100 at 1M x 128 it ran at
                              171k / 131k QPS (k = 10 / 1024) against certified TF32's 209k /
                              153k: the int32 distance matrix costs what the FP32 one does, and
                              the TF32 GEMM it saves is the smaller part.
                              GRAFT_EXACT_FP16_CERTIFIED (4): as certified TF32, with candidates
                              from an FP16 tensor-core GEMM (FP32 accumulation, FP16 output: half
                              the distance matrix's bytes, twice TF32's GEMM rate) of the vectors
                              each scaled by a power of two (no FP16 overflow at any magnitude;
                              vectors of norm over 2^60 fail the certificate and run in FP32).
                              The index keeps FP16 codes of its vectors on the GPU beside the FP32
                              copy: n x d x 2 bytes (d rounded up to 8) plus 4 bytes a vector. A
                              device whose cuBLAS refuses the FP16 GEMM searches in certified
                              TF32, as graft_flat_last_path then says.
                              GRAFT_EXACT_FP16_FUSED (5): certified FP16 with no distance
                              matrix: a tensor-core GEMM kernel of graft's own keeps, per query,
                              only the vectors at or below a threshold set from an evenly spaced
                              sample (about 1k a query), and the certificate and FP32 re-ranking
                              follow as on path 4. A query whose certificate fails (equal or
                              near-duplicate vectors crowding its k-th distance) is answered
                              exactly all the same: the candidates within the certificate's
                              error band are re-ranked in FP32, from its list or after a second
                              pass of the fused GEMM (graft_flat_get_exact_counts); only a band
                              of over 64k vectors goes to FP32. It applies where d <= 256 and the sample is
                              at most a quarter of the base (k + margin <= 256 or so at 1M
                              vectors); elsewhere the search takes path 4 (graft_flat_last_path
                              says which ran). Same FP16 codes as path 4. Ignored on the CPU. */
} graft_flat_params;

enum {
    GRAFT_EXACT_AUTO = 0,
    GRAFT_EXACT_FP32 = 1,
    GRAFT_EXACT_TF32_CERTIFIED = 2,
    GRAFT_EXACT_INT8 = 3,
    GRAFT_EXACT_FP16_CERTIFIED = 4,
    GRAFT_EXACT_FP16_FUSED = 5
};

void graft_flat_params_defaults(graft_flat_params* params);

/* ---- one-shot functions (no index object) ---------------------------------------------------- */

/* CPU reference: exact k-NN of nq queries among nb base vectors (row-major, d columns), OpenMP
 * over queries, distances accumulated in double. exclude_self >= 0 makes query i skip base id
 * exclude_self + i. D (nq x k) and I (nq x k) are written by the caller's buffers. */
int graft_knn_cpu(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int64_t k,
                  graft_metric metric, int64_t exclude_self, float* D, int64_t* I);

/* ---- the index ---------------------------------------------------------------------------------- */

typedef struct graft_flat graft_flat;

/* New empty index of dimension d. params may be NULL (defaults). *out is owned by the caller:
 * release it with graft_flat_free. Fails with GRAFT_ENODEVICE when params->device >= 0 and no
 * such CUDA device exists. */
int graft_flat_new(int64_t d, const graft_flat_params* params, graft_flat** out);
void graft_flat_free(graft_flat* index);

/* Appends n vectors (copied). NaN/Inf values are rejected (GRAFT_EINVAL) and nothing is added. */
int graft_flat_add(graft_flat* index, int64_t n, const float* x);
/* Removes every vector. */
int graft_flat_reset(graft_flat* index);

int64_t graft_flat_ntotal(const graft_flat* index);
int64_t graft_flat_d(const graft_flat* index);
graft_metric graft_flat_metric(const graft_flat* index);
/* -1 when the index searches on the CPU. */
int graft_flat_device(const graft_flat* index);
/* The GPU path the index's searches take (GRAFT_EXACT_FP32, GRAFT_EXACT_TF32_CERTIFIED,
 * GRAFT_EXACT_FP16_CERTIFIED, GRAFT_EXACT_FP16_FUSED, or GRAFT_EXACT_INT8 while the stored vectors have INT8 codes:
 * integer queries in their range take it; FP32 on the CPU), and how many queries of its searches
 * so far the certificate sent back to FP32. */
int graft_flat_exact_path(const graft_flat* index, int64_t* fp32_fallbacks);
/* What the GPU paths did with the queries of the index's searches so far (zeros on the CPU). */
typedef struct graft_flat_exact_counts {
    int64_t queries;         /* queries searched on the GPU (k-NN graph rows included) */
    int64_t fp32_fallbacks;  /* searched again, or directly, in FP32 (graft_flat_exact_path's) */
    int64_t band_reranks;    /* fused path (5): certificate failed; answered by re-ranking in FP32
                                the candidates of their list within the error band */
    int64_t second_passes;   /* fused path: answered after a second fused pass whose threshold is
                                the band's edge (where the list overflowed, or the band reached
                                past it; those whose band overflowed again are fp32_fallbacks too) */
} graft_flat_exact_counts;
void graft_flat_get_exact_counts(const graft_flat* index, graft_flat_exact_counts* out);
/* The path the last search (or k-NN graph) took: GRAFT_EXACT_FP32 (also every CPU search),
 * GRAFT_EXACT_TF32_CERTIFIED, GRAFT_EXACT_INT8, GRAFT_EXACT_FP16_CERTIFIED or
 * GRAFT_EXACT_FP16_FUSED; 0 before the first. */
int graft_flat_last_path(const graft_flat* index);
/* The stored vectors (ntotal x d, row-major), owned by the index, valid until the next add/reset. */
const float* graft_flat_vectors(const graft_flat* index);

/* k nearest stored vectors of each query. Safe to call from several threads at once (GPU work
 * of one index is serialized). Errors: NULL pointers, k < 1, NaN/Inf in xq -> GRAFT_EINVAL. */
int graft_flat_search(const graft_flat* index, int64_t nq, const float* xq, int64_t k, float* D,
                      int64_t* I);

/* k-NN graph of the stored vectors: row i holds the k nearest other vectors of vector i (i itself
 * excluded; duplicates of it are not). D and I are ntotal x k. */
int graft_flat_knn_graph(const graft_flat* index, int64_t k, float* D, int64_t* I);

/* Copies stored vector `key` to out (d floats). */
int graft_flat_reconstruct(const graft_flat* index, int64_t key, float* out);

/* Host bytes of the stored vectors' buffer: capacity x d x 4, the capacity growing by doubling
 * (up to twice ntotal; exactly ntotal after one add). The device's copy and codes:
 * docs/memory.md. */
size_t graft_flat_host_bytes(const graft_flat* index);
/* Peak GPU scratch used by searches so far, bytes (0 on the CPU). */
size_t graft_flat_gpu_scratch_peak(const graft_flat* index);

#ifdef __cplusplus
}
#endif
#endif
