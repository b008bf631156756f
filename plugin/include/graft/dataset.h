/* graft: readers for the vector file formats ANN users have.
 *
 *   .fvecs / .ivecs / .bvecs   TEXMEX: each row is an int32 dimension d, then d values
 *                              (float32 / int32 / uint8). Every row must repeat the same d.
 *   .fbin / .ibin / .u8bin     big-ann-benchmarks: header int32 n, int32 d, then n*d values
 *                              (float32 / int32 / uint8), row-major.
 *   Fashion-MNIST IDX (.gz or plain), see graft_fmnist_read.
 *
 * The format is chosen by the file name's extension. Every reader checks sizes against the file's
 * length before reading, so a truncated file, a bad header, a dimension that changes mid-file or a
 * size that overflows is a GRAFT_EFORMAT error whose message names the file and the byte offset.
 */
#ifndef GRAFT_DATASET_H
#define GRAFT_DATASET_H

#include "graft/graft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum graft_dtype {
    GRAFT_DTYPE_F32 = 0,
    GRAFT_DTYPE_I32 = 1,
    GRAFT_DTYPE_U8 = 2
} graft_dtype;

/* A dense row-major matrix of n rows by d columns. `data` is owned by the struct: release it with
 * graft_dataset_free. */
typedef struct graft_dataset {
    void* data;
    int64_t n;
    int64_t d;
    graft_dtype dtype;
} graft_dataset;

/* Rows and dimension of a vector file without reading its values. */
int graft_dataset_info(const char* path, int64_t* n, int64_t* d, graft_dtype* dtype);

/* Reads rows [first, first + count) of a vector file; count < 0 means "to the end". Reading past
 * the end is an error (GRAFT_EINVAL), not a short read. On success *out owns a new buffer. */
int graft_dataset_read(const char* path, int64_t first, int64_t count, graft_dataset* out);

/* Same, converted to float32 (uint8 and int32 values are converted exactly where representable).
 * On success *out is a malloc'd n*d array that the caller frees with free(). */
int graft_dataset_read_f32(const char* path, int64_t first, int64_t count, float** out,
                           int64_t* n, int64_t* d);

/* Writes a matrix in the format given by the path's extension (same list as above; the dtype must
 * match the extension). Used by tools and tests. */
int graft_dataset_write(const char* path, const void* data, int64_t n, int64_t d, graft_dtype dtype);

/* Fashion-MNIST (or MNIST) images in IDX format, as installed by Debian's dataset-fashion-mnist in
 * /usr/share/datasets/fashion-mnist/ (train-images-idx3-ubyte.gz: 60000 x 784; t10k-images-idx3-ubyte.gz:
 * 10000 x 784). Accepts gzip-compressed or plain files. Values are the pixels 0..255 as float32.
 * On success *out is a malloc'd n*d array that the caller frees with free(). */
int graft_fmnist_read(const char* path, int64_t max_rows, float** out, int64_t* n, int64_t* d);

void graft_dataset_free(graft_dataset* ds);

#ifdef __cplusplus
}
#endif
#endif
