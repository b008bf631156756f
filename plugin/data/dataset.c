/* TEXMEX (.fvecs/.ivecs/.bvecs) and big-ann-benchmarks (.fbin/.ibin/.u8bin) vector files.
 * Both formats are little-endian, the byte order of every host graft targets, so values are read
 * straight into memory. Files can be far larger than RAM: every size comes from the header and
 * the file length, and range reads seek to their first row. */
#define _FILE_OFFSET_BITS 64
#define _POSIX_C_SOURCE 200809L

#include "graft/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/error.h"

/* Far above any real embedding; catches garbage headers before they become huge allocations. */
#define GRAFT_MAX_DIM (1 << 20)

typedef struct vec_format {
    const char* ext;
    graft_dtype dtype;
    int texmex; /* 1: every row starts with int32 d; 0: one int32 n, int32 d header */
    int64_t elem;
} vec_format;

static const vec_format vec_formats[] = {
    {".fvecs", GRAFT_DTYPE_F32, 1, 4}, {".ivecs", GRAFT_DTYPE_I32, 1, 4},
    {".bvecs", GRAFT_DTYPE_U8, 1, 1},  {".fbin", GRAFT_DTYPE_F32, 0, 4},
    {".ibin", GRAFT_DTYPE_I32, 0, 4},  {".u8bin", GRAFT_DTYPE_U8, 0, 1},
};

/* An open vector file whose header has been validated against its length. */
typedef struct vec_file {
    const char* path;
    const vec_format* fmt;
    FILE* f;
    int64_t n, d;
    int64_t row_bytes;  /* bytes per row in the file, TEXMEX's d prefix included */
    int64_t data_start; /* offset of row 0 */
} vec_file;

static int find_format(const char* path, const vec_format** out) {
    if (!path)
        return graft_fail(GRAFT_EINVAL, "dataset path is NULL");
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof vec_formats / sizeof vec_formats[0]; i++) {
        size_t el = strlen(vec_formats[i].ext);
        if (len > el && strcmp(path + len - el, vec_formats[i].ext) == 0) {
            *out = &vec_formats[i];
            return GRAFT_OK;
        }
    }
    return graft_fail(GRAFT_EINVAL, "%s: unknown vector file extension (expected .fvecs, .ivecs, "
                                    ".bvecs, .fbin, .ibin or .u8bin)", path);
}

/* A short read is either the OS failing (EIO) or the file ending early (EFORMAT). */
static int read_exact(const vec_file* v, void* buf, size_t bytes, int64_t off) {
    if (fread(buf, 1, bytes, v->f) == bytes)
        return GRAFT_OK;
    if (ferror(v->f))
        return graft_fail(GRAFT_EIO, "%s: read of %zu bytes at offset %lld failed: %s", v->path,
                          bytes, (long long)off, strerror(errno));
    return graft_fail(GRAFT_EFORMAT, "%s: file ends inside the %zu bytes at offset %lld "
                      "(did it shrink while being read?)", v->path, bytes, (long long)off);
}

static int vec_probe(vec_file* v) {
    int64_t size = -1;
    if (fseeko(v->f, 0, SEEK_END) != 0 || (size = ftello(v->f)) < 0 || fseeko(v->f, 0, SEEK_SET) != 0)
        return graft_fail(GRAFT_EIO, "%s: cannot seek: %s", v->path, strerror(errno));
    int64_t elem = v->fmt->elem;
    int32_t hdr[2];
    if (v->fmt->texmex) {
        if (size < 4)
            return graft_fail(GRAFT_EFORMAT, "%s: file of %lld bytes ends inside the first row's "
                              "dimension at offset 0", v->path, (long long)size);
        GRAFT_TRY(read_exact(v, hdr, 4, 0));
        if (hdr[0] <= 0 || hdr[0] > GRAFT_MAX_DIM)
            return graft_fail(GRAFT_EFORMAT, "%s: bad dimension %d at offset 0 (expected 1..%d)",
                              v->path, hdr[0], GRAFT_MAX_DIM);
        v->d = hdr[0];
        v->row_bytes = 4 + v->d * elem;
        if (size % v->row_bytes != 0)
            return graft_fail(GRAFT_EFORMAT, "%s: length %lld is not a multiple of the row size "
                              "%lld (d=%lld): the row at offset %lld is truncated", v->path,
                              (long long)size, (long long)v->row_bytes, (long long)v->d,
                              (long long)(size - size % v->row_bytes));
        v->n = size / v->row_bytes;
        v->data_start = 0;
        return GRAFT_OK;
    }
    if (size < 8)
        return graft_fail(GRAFT_EFORMAT, "%s: file of %lld bytes ends inside the 8-byte header "
                          "at offset %lld", v->path, (long long)size, (long long)size);
    GRAFT_TRY(read_exact(v, hdr, 8, 0));
    if (hdr[0] <= 0)
        return graft_fail(GRAFT_EFORMAT, "%s: bad row count n=%d in the header at offset 0",
                          v->path, hdr[0]);
    if (hdr[1] <= 0 || hdr[1] > GRAFT_MAX_DIM)
        return graft_fail(GRAFT_EFORMAT, "%s: bad dimension d=%d in the header at offset 4 "
                          "(expected 1..%d)", v->path, hdr[1], GRAFT_MAX_DIM);
    size_t bytes;
    if (graft_mul_overflow((size_t)hdr[0], (size_t)hdr[1], &bytes) ||
        graft_mul_overflow(bytes, (size_t)elem, &bytes) || bytes > (size_t)(INT64_MAX - 8))
        return graft_fail(GRAFT_EFORMAT, "%s: header at offset 0 (n=%d, d=%d) gives a data size "
                          "that overflows", v->path, hdr[0], hdr[1]);
    int64_t want = 8 + (int64_t)bytes;
    if (size < want)
        return graft_fail(GRAFT_EFORMAT, "%s: truncated: header n=%d d=%d needs %lld bytes but "
                          "the file ends at offset %lld", v->path, hdr[0], hdr[1],
                          (long long)want, (long long)size);
    if (size > want)
        return graft_fail(GRAFT_EFORMAT, "%s: %lld extra bytes from offset %lld after the last "
                          "row (header n=%d d=%d)", v->path, (long long)(size - want),
                          (long long)want, hdr[0], hdr[1]);
    v->n = hdr[0];
    v->d = hdr[1];
    v->row_bytes = v->d * elem;
    v->data_start = 8;
    return GRAFT_OK;
}

static int vec_open(const char* path, vec_file* v) {
    memset(v, 0, sizeof *v);
    GRAFT_TRY(find_format(path, &v->fmt));
    v->path = path;
    v->f = fopen(path, "rb");
    if (!v->f)
        return graft_fail(GRAFT_EIO, "cannot open %s: %s", path, strerror(errno));
    int rc = vec_probe(v);
    if (rc != GRAFT_OK)
        fclose(v->f);
    return rc;
}

int graft_dataset_info(const char* path, int64_t* n, int64_t* d, graft_dtype* dtype) {
    if (!n || !d || !dtype)
        return graft_fail(GRAFT_EINVAL, "graft_dataset_info: NULL output pointer");
    vec_file v;
    GRAFT_TRY(vec_open(path, &v));
    fclose(v.f);
    *n = v.n;
    *d = v.d;
    *dtype = v.fmt->dtype;
    return GRAFT_OK;
}

static int read_rows(const vec_file* v, int64_t first, int64_t count, void** out) {
    size_t row = (size_t)(v->d * v->fmt->elem), bytes;
    if (graft_mul_overflow(row, (size_t)count, &bytes))
        return graft_fail(GRAFT_ENOMEM, "%s: %lld rows of %zu bytes overflow size_t", v->path,
                          (long long)count, row);
    char* buf = malloc(bytes ? bytes : 1);
    if (!buf)
        return graft_fail(GRAFT_ENOMEM, "%s: cannot allocate %zu bytes for %lld rows", v->path,
                          bytes, (long long)count);
    int64_t off = v->data_start + first * v->row_bytes;
    int rc = GRAFT_OK;
    if (fseeko(v->f, off, SEEK_SET) != 0)
        rc = graft_fail(GRAFT_EIO, "%s: cannot seek to offset %lld: %s", v->path, (long long)off,
                        strerror(errno));
    else if (!v->fmt->texmex)
        rc = read_exact(v, buf, bytes, off);
    /* The header check only saw row 0's d, so every row read is checked against it. */
    for (int64_t i = 0; v->fmt->texmex && rc == GRAFT_OK && i < count; i++, off += v->row_bytes) {
        int32_t d;
        rc = read_exact(v, &d, 4, off);
        if (rc == GRAFT_OK && d != v->d)
            rc = graft_fail(GRAFT_EFORMAT, "%s: row %lld at offset %lld has dimension %d but the "
                            "first row has %lld", v->path, (long long)(first + i),
                            (long long)off, d, (long long)v->d);
        if (rc == GRAFT_OK)
            rc = read_exact(v, buf + (size_t)i * row, row, off + 4);
    }
    if (rc != GRAFT_OK) {
        free(buf);
        return rc;
    }
    *out = buf;
    return GRAFT_OK;
}

int graft_dataset_read(const char* path, int64_t first, int64_t count, graft_dataset* out) {
    if (!out)
        return graft_fail(GRAFT_EINVAL, "graft_dataset_read: out is NULL");
    vec_file v;
    GRAFT_TRY(vec_open(path, &v));
    int rc = GRAFT_OK;
    if (first < 0 || first > v.n)
        rc = graft_fail(GRAFT_EINVAL, "%s: first row %lld is outside 0..%lld", path,
                        (long long)first, (long long)v.n);
    else if (count > v.n - first)
        rc = graft_fail(GRAFT_EINVAL, "%s: rows [%lld, %lld) run past the end (%lld rows)", path,
                        (long long)first, (long long)(first + count), (long long)v.n);
    if (count < 0)
        count = v.n - first;
    void* data = NULL;
    if (rc == GRAFT_OK)
        rc = read_rows(&v, first, count, &data);
    fclose(v.f);
    if (rc != GRAFT_OK)
        return rc;
    out->data = data;
    out->n = count;
    out->d = v.d;
    out->dtype = v.fmt->dtype;
    return GRAFT_OK;
}

int graft_dataset_read_f32(const char* path, int64_t first, int64_t count, float** out,
                           int64_t* n, int64_t* d) {
    if (!out || !n || !d)
        return graft_fail(GRAFT_EINVAL, "graft_dataset_read_f32: NULL output pointer");
    graft_dataset ds;
    GRAFT_TRY(graft_dataset_read(path, first, count, &ds));
    size_t nd = (size_t)ds.n * (size_t)ds.d;
    unsigned char* raw = ds.data;
    if (ds.dtype == GRAFT_DTYPE_I32) {
        /* Same width, so convert in place; memcpy keeps the type punning defined. */
        for (size_t i = 0; i < nd; i++) {
            int32_t x;
            memcpy(&x, raw + 4 * i, 4);
            float f = (float)x;
            memcpy(raw + 4 * i, &f, 4);
        }
    } else if (ds.dtype == GRAFT_DTYPE_U8) {
        size_t bytes;
        if (graft_mul_overflow(nd, sizeof(float), &bytes) || !(raw = realloc(ds.data, bytes ? bytes : 1))) {
            graft_dataset_free(&ds);
            return graft_fail(GRAFT_ENOMEM, "%s: cannot allocate %zu floats", path, nd);
        }
        /* Widen in place from the end: float i covers bytes 4i..4i+3, which hold only bytes
         * already converted (index >= i), so no input byte is overwritten before it is read. */
        for (size_t i = nd; i-- > 0;) {
            float f = (float)raw[i];
            memcpy(raw + 4 * i, &f, 4);
        }
    }
    *out = (float*)raw;
    *n = ds.n;
    *d = ds.d;
    return GRAFT_OK;
}

int graft_dataset_write(const char* path, const void* data, int64_t n, int64_t d, graft_dtype dtype) {
    const vec_format* fmt = NULL;
    GRAFT_TRY(find_format(path, &fmt));
    if (!data)
        return graft_fail(GRAFT_EINVAL, "%s: data is NULL", path);
    if (fmt->dtype != dtype)
        return graft_fail(GRAFT_EINVAL, "%s: dtype %d does not match the extension %s", path,
                          (int)dtype, fmt->ext);
    /* The readers would reject anything outside these bounds, so never write it. */
    if (n <= 0 || d <= 0 || d > GRAFT_MAX_DIM || (!fmt->texmex && n > INT32_MAX))
        return graft_fail(GRAFT_EINVAL, "%s: cannot write n=%lld d=%lld (need n >= 1%s, "
                          "1 <= d <= %d)", path, (long long)n, (long long)d,
                          fmt->texmex ? "" : " and n < 2^31", GRAFT_MAX_DIM);
    FILE* f = fopen(path, "wb");
    if (!f)
        return graft_fail(GRAFT_EIO, "cannot create %s: %s", path, strerror(errno));
    size_t row = (size_t)(d * fmt->elem);
    int32_t hdr[2] = {(int32_t)n, (int32_t)d};
    int ok;
    if (fmt->texmex) {
        ok = 1;
        for (int64_t i = 0; ok && i < n; i++)
            ok = fwrite(&hdr[1], 4, 1, f) == 1 &&
                 fwrite((const char*)data + (size_t)i * row, 1, row, f) == row;
    } else {
        ok = fwrite(hdr, 4, 2, f) == 2 && fwrite(data, row, (size_t)n, f) == (size_t)n;
    }
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        remove(path); /* a partial file would later read as a format error far from its cause */
        return graft_fail(GRAFT_EIO, "%s: write failed: %s", path, strerror(err));
    }
    return GRAFT_OK;
}

void graft_dataset_free(graft_dataset* ds) {
    if (!ds)
        return;
    free(ds->data);
    ds->data = NULL;
    ds->n = ds->d = 0;
}
