/* graft: GPU graph indexes for FAISS — public C API of the core (plugin layer).
 *
 * Conventions (as in faiss_c and SQLite):
 *  - every public symbol starts with graft_ / GRAFT_;
 *  - every function that can fail returns an int status: GRAFT_OK (0) or a negative GRAFT_E* code;
 *    the message of the last failure on the calling thread is graft_last_error();
 *  - output parameters come last, and a failed call leaves them and every object it was given in
 *    their previous state unless its comment says otherwise;
 *  - ownership of every pointer is stated beside the function.
 */
#ifndef GRAFT_GRAFT_H
#define GRAFT_GRAFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The project's version (CMakeLists.txt's project(); CMake checks that the two agree). */
#define GRAFT_VERSION_MAJOR 0
#define GRAFT_VERSION_MINOR 2
#define GRAFT_VERSION_PATCH 0

/* Status codes. Values are stable: they are written in logs and compared by callers. */
typedef enum graft_status {
    GRAFT_OK = 0,
    GRAFT_EINVAL = -1,       /* bad argument: null pointer, size, k, d, metric, NaN/Inf input */
    GRAFT_EIO = -2,          /* the operating system refused a read or write */
    GRAFT_EFORMAT = -3,      /* a file is truncated, corrupt, or not in the expected format */
    GRAFT_ENOMEM = -4,       /* host allocation failed or a size computation overflowed */
    GRAFT_EGPU_NOMEM = -5,   /* device allocation failed (out of GPU memory or over the budget) */
    GRAFT_ECUDA = -6,        /* a CUDA or cuBLAS call failed */
    GRAFT_ENODEVICE = -7,    /* no usable CUDA device, or graft was built without CUDA */
    GRAFT_EUNSUPPORTED = -8, /* the operation exists but this object does not support it */
    GRAFT_ESTATE = -9,       /* the object is not in a state that allows the call (e.g. empty) */
    GRAFT_EINTERNAL = -10    /* a bug in graft: please report it with the message */
} graft_status;

/* Distance metrics, with FAISS's numbering (METRIC_INNER_PRODUCT = 0, METRIC_L2 = 1). L2 results
 * are squared distances, smallest first; inner-product results are largest first. Cosine is
 * inner product on normalized vectors. */
typedef enum graft_metric {
    GRAFT_METRIC_INNER_PRODUCT = 0,
    GRAFT_METRIC_L2 = 1
} graft_metric;

/* A CPU brute-force k-NN (the contract of graft_knn_cpu in graft/flat.h, without exclude_self):
 * the exact searches take one when given (graft_flat_params.cpu_knn, graft_gindex_params.cpu_knn),
 * else graft_knn_cpu, the double-precision reference. The FAISS adapter passes FAISS's own brute
 * force (graft_faiss_knn in graft_faiss_c.h). */
typedef int (*graft_cpu_knn_fn)(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d,
                                int64_t k, graft_metric metric, float* D, int64_t* I);

/* Message of the last failed call on this thread ("" when none). The pointer stays valid until
 * the next graft call on the same thread; do not free it. */
const char* graft_last_error(void);

/* Short name of a status code, e.g. "GRAFT_EFORMAT". Static storage. */
const char* graft_status_name(int status);

/* Clears this thread's last error. */
void graft_clear_error(void);

/* "0.2.0 (cuda 80-real,86-real,89-real,90, faiss 1.7.3)" (the CUDA architectures built and the
 * FAISS the adapter was built against) or "0.2.0 (cpu-only, faiss 1.15.0)". Static storage. */
const char* graft_version_string(void);

/* 1 when graft was built with CUDA and a device is visible, 0 otherwise (never an error). */
int graft_gpu_available(void);
/* How many CUDA devices are visible (0 without CUDA or a device; never an error): the devices a
 * sharded index's "gpus=all" spreads over. */
int graft_gpu_count(void);
/* Total memory of CUDA device `device` in bytes (0 without CUDA or such a device). */
size_t graft_gpu_memory(int device);

#ifdef __cplusplus
}
#endif
#endif
