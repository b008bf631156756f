/* Fashion-MNIST / MNIST image files in IDX format: big-endian magic 0x00000803 (unsigned bytes,
 * 3 dimensions), n, rows, cols, then n*rows*cols pixels. zlib's gz* functions read gzip and
 * plain files alike, so the Debian .gz files and unpacked copies both work. Offsets in messages
 * are offsets into the decompressed stream. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "graft/dataset.h"

#define IDX_MAGIC_U8_3D 0x00000803u

/* gzread takes an unsigned length and reports a truncated gzip stream only through gzerror, so
 * both are handled here in one place. */
static int gz_read_exact(gzFile g, const char* path, void* buf, size_t bytes, int64_t off,
                         const char* what) {
    unsigned char* p = buf;
    size_t done = 0;
    while (done < bytes) {
        unsigned chunk = (unsigned)(bytes - done < (1u << 30) ? bytes - done : (1u << 30));
        int got = gzread(g, p + done, chunk);
        if (got > 0)
            done += (size_t)got;
        if (got < (int)chunk)
            break;
    }
    if (done == bytes)
        return GRAFT_OK;
    int err;
    const char* msg = gzerror(g, &err);
    long long at = (long long)(off + (int64_t)done);
    if (err == Z_ERRNO)
        return graft_fail(GRAFT_EIO, "%s: read error at offset %lld: %s", path, at, strerror(errno));
    if (err == Z_MEM_ERROR)
        return graft_fail(GRAFT_ENOMEM, "%s: zlib out of memory at offset %lld", path, at);
    if (err != Z_OK)
        return graft_fail(GRAFT_EFORMAT, "%s: corrupt or truncated gzip data at offset %lld while "
                          "reading %s: %s", path, at, what, msg);
    return graft_fail(GRAFT_EFORMAT, "%s: truncated: %s needs %zu bytes from offset %lld but the "
                      "data ends at offset %lld", path, what, bytes, (long long)off, at);
}

static uint32_t be32(const unsigned char* b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int fmnist_load(gzFile g, const char* path, int64_t max_rows, float** out, int64_t* n_out,
                       int64_t* d_out) {
    unsigned char h[16];
    GRAFT_TRY(gz_read_exact(g, path, h, sizeof h, 0, "the IDX header"));
    if (be32(h) != IDX_MAGIC_U8_3D)
        return graft_fail(GRAFT_EFORMAT, "%s: bad magic 0x%08x at offset 0 (expected 0x%08x, IDX "
                          "images of unsigned bytes)", path, be32(h), IDX_MAGIC_U8_3D);
    static const char* const field[3] = {"image count", "rows", "cols"};
    uint32_t dim[3];
    for (int i = 0; i < 3; i++) {
        dim[i] = be32(h + 4 + 4 * i);
        /* Bounds keep rows*cols and n*rows*cols*sizeof(float) far from overflow. */
        if (dim[i] == 0 || dim[i] > (i == 0 ? (uint32_t)INT32_MAX : 4096u))
            return graft_fail(GRAFT_EFORMAT, "%s: bad %s %u in the IDX header at offset %d", path,
                              field[i], dim[i], 4 + 4 * i);
    }
    int64_t n = dim[0], d = (int64_t)dim[1] * dim[2];
    int all = max_rows < 0 || max_rows >= n;
    if (!all)
        n = max_rows;
    size_t nd = (size_t)n * (size_t)d, bytes;
    if (graft_mul_overflow(nd, sizeof(float), &bytes))
        return graft_fail(GRAFT_ENOMEM, "%s: %lld x %lld floats overflow size_t", path,
                          (long long)n, (long long)d);
    /* The header's counts are not trusted with memory: the pixels are read into a buffer that
     * grows as they arrive (doubling from 1 MiB), so a 20-byte file claiming 2^31 images fails
     * as truncated instead of asking for terabytes. Found by tests/fuzz/fuzz_fmnist. */
    size_t cap = nd < ((size_t)1 << 20) ? nd : ((size_t)1 << 20), done = 0;
    unsigned char* raw = malloc(cap ? cap : 1);
    if (!raw)
        return graft_fail(GRAFT_ENOMEM, "%s: cannot allocate %zu bytes", path, cap);
    int rc = GRAFT_OK;
    while (rc == GRAFT_OK && done < nd) {
        if (done == cap) {
            size_t grown = cap > nd / 2 ? nd : 2 * cap;
            unsigned char* r = realloc(raw, grown);
            if (!r) {
                rc = graft_fail(GRAFT_ENOMEM, "%s: cannot allocate %zu bytes", path, grown);
                break;
            }
            raw = r, cap = grown;
        }
        rc = gz_read_exact(g, path, raw + done, cap - done, 16 + (int64_t)done, "the pixel data");
        done = cap;
    }
    /* Reading one byte past the pixels makes zlib check the gzip trailer's CRC and length, and
     * catches trailing garbage, as the .fbin reader does. */
    unsigned char extra;
    if (rc == GRAFT_OK && all) {
        int got = gzread(g, &extra, 1);
        int err;
        const char* msg = gzerror(g, &err);
        if (got > 0)
            rc = graft_fail(GRAFT_EFORMAT, "%s: extra data after the last image at offset %lld",
                            path, (long long)(16 + nd));
        else if (err != Z_OK && err != Z_BUF_ERROR)
            rc = graft_fail(GRAFT_EFORMAT, "%s: corrupt gzip data after offset %lld: %s", path,
                            (long long)(16 + nd), msg);
        else if (err == Z_BUF_ERROR)
            rc = graft_fail(GRAFT_EFORMAT, "%s: gzip stream truncated after offset %lld: %s",
                            path, (long long)(16 + nd), msg);
    }
    /* Widened in place: float i covers bytes 4i..4i+3, all at index >= i, which are already
     * converted when it is written. */
    float* x = NULL;
    if (rc == GRAFT_OK && !(x = realloc(raw, bytes ? bytes : 1)))
        rc = graft_fail(GRAFT_ENOMEM, "%s: cannot allocate %zu bytes", path, bytes);
    if (rc != GRAFT_OK) {
        free(raw);
        return rc;
    }
    raw = (unsigned char*)x;
    for (size_t i = nd; i-- > 0;) {
        float f = (float)raw[i];
        memcpy(raw + 4 * i, &f, sizeof f);
    }
    *out = x;
    *n_out = n;
    *d_out = d;
    return GRAFT_OK;
}

int graft_fmnist_read(const char* path, int64_t max_rows, float** out, int64_t* n, int64_t* d) {
    if (!path || !out || !n || !d)
        return graft_fail(GRAFT_EINVAL, "graft_fmnist_read: NULL argument");
    errno = 0;
    gzFile g = gzopen(path, "rb");
    if (!g)
        return graft_fail(GRAFT_EIO, "cannot open %s: %s", path,
                          errno ? strerror(errno) : "out of memory");
    int rc = fmnist_load(g, path, max_rows, out, n, d);
    gzclose(g);
    return rc;
}
