/* graft: product quantization (Jégou et al.), the compressed vectors of the out-of-core graph
 * index (BANG, ../shared/papers/bang-billion-scale-single-gpu.txt sections 2.3, 3.2 and 4.2).
 *
 * A vector of dimension d is cut into M sub-vectors of dsub = d / M dimensions; sub-space m has
 * 256 centroids (8-bit codes) and a vector's code is the M bytes naming its nearest centroid in
 * every sub-space (L2, whatever the search metric). Layout as FAISS's ProductQuantizer
 * (nbits = 8): centroids M x 256 x dsub, codes n x M bytes, so codebooks can be moved between the
 * two. The k-means of each sub-space is not graft's own: the caller passes one (the FAISS adapter
 * passes FAISS's kmeans_clustering, graft_faiss_kmeans in graft_faiss_c.h).
 */
#ifndef GRAFT_PQ_H
#define GRAFT_PQ_H

#include "graft/graft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRAFT_PQ_KSUB 256 /* centroids per sub-space (8-bit codes) */

/* k-means of n points x (n x d) into k centroids (k x d, written); returns GRAFT_OK or a
 * negative status (its message through the caller's error, set on the calling thread). FAISS's
 * kmeans_clustering fits. graft_pq_train calls it from several threads at once, one sub-space
 * each, unless graft_pq_params.kmeans_threads is 1: it must then be thread-safe (FAISS's
 * Clustering is; its own OpenMP regions run single-threaded inside graft's). */
typedef int (*graft_kmeans_fn)(void* ctx, int64_t d, int64_t n, int64_t k, const float* x,
                               float* centroids);

typedef struct graft_pq_params {
    int M;              /* sub-quantizers = code bytes per vector; must divide d. Default 0 =
                           the largest divisor of d not above d / 4 (4 dimensions per byte) */
    int64_t max_train;  /* training points used; more are sampled down (seeded) to this many.
                           Default 65536 (256 per centroid, FAISS's own cap) */
    uint64_t seed;      /* sampling seed. Default 1234 */
    graft_kmeans_fn kmeans; /* required for training; NULL = GRAFT_EINVAL naming the fix */
    void* kmeans_ctx;
    int kmeans_threads; /* sub-spaces trained at once: 0 (default) = OpenMP's thread count
                           (capped at M), 1 = one after the other (a k-means that is not
                           thread-safe, or one that is parallel itself). The codebooks do not
                           depend on it when the k-means is deterministic per call (FAISS's is) */
} graft_pq_params;

void graft_pq_params_defaults(graft_pq_params* params);

typedef struct graft_pq {
    int64_t d;
    int M, dsub;        /* d = M * dsub */
    float* centroids;   /* M x 256 x dsub, malloc'd, owned: graft_pq_free */
} graft_pq;

/* Frees the centroids and zeroes the struct; NULL and a freed pq are fine. */
void graft_pq_free(graft_pq* pq);

/* The M the index uses for dimension d when params->M is 0 (see graft_pq_params). */
int graft_pq_default_M(int64_t d);

/* Trains the codebooks on n vectors x (n x d, not kept). On success *out holds new codebooks;
 * on failure it is untouched. Errors (GRAFT_EINVAL): NULL pointers, d < 1, M < 1 or M not
 * dividing d, n < 256 ("too few training points": every centroid needs a point), NaN/Inf in x,
 * no kmeans; the k-means' own failure is passed on. Codebooks trained on fewer than 39 x 256
 * points (FAISS's advice) are usable but coarser. */
int graft_pq_train(int64_t d, int64_t n, const float* x, const graft_pq_params* params,
                   graft_pq* out);

/* codes (n x M bytes) = the nearest centroid of each sub-vector (ties: smaller index). OpenMP. */
int graft_pq_encode(const graft_pq* pq, int64_t n, const float* x, uint8_t* codes);

/* graft_pq_encode on the GPU (CUDA device `device`): the same codes bit for bit (squared L2
 * summed in the CPU's order, no FMA), the vectors streamed through in chunks of about 256 MB.
 * Errors: graft_pq_encode's, GRAFT_ENODEVICE (no GPU, or graft built without CUDA),
 * GRAFT_EGPU_NOMEM, GRAFT_ECUDA. The graph + PQ index encodes on its GPU this way. */
int graft_pq_encode_gpu(const graft_pq* pq, int64_t n, const float* x, uint8_t* codes, int device);

/* Decoded vectors (n x d) of codes. */
int graft_pq_decode(const graft_pq* pq, int64_t n, const uint8_t* codes, float* x);

/* Distance table of one query (M x 256, written): squared L2 of each sub-vector to each centroid
 * (l2 != 0), or minus their dot product (l2 == 0). The asymmetric distance of a code c is
 * sum_m table[m * 256 + c[m]], summed in order m = 0..M-1. No checks (hot path). */
void graft_pq_table(const graft_pq* pq, const float* q, int l2, float* table);

/* Checks a codebook struct (non-NULL centroids, d = M * dsub, finite values). */
int graft_pq_check(const graft_pq* pq, const char* fn);
/* graft_pq_check, then the arrays of an encode or decode of n vectors (non-NULL unless n = 0,
 * n >= 0). */
int graft_pq_check_coding(const graft_pq* pq, int64_t n, const void* x, const void* codes,
                          const char* fn);

#ifdef __cplusplus
}
#endif
#endif
