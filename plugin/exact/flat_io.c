/* Flat index I/O: the GRFTFLAT record described in graft/io.h, through the shared record helpers
 * of io_stream.h. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/io.h"
#include "io/io_stream.h"

#define HEADER_V1 36u /* bytes of the version-1 header, magic included */

int graft_flat_write(const graft_flat* index, FILE* f) {
    if (!index || !f) return graft_fail(GRAFT_EINVAL, "graft_flat_write: NULL argument");
    int64_t d = graft_flat_d(index), n = graft_flat_ntotal(index);
    unsigned char hdr[HEADER_V1];
    memcpy(hdr, GRAFT_FLAT_MAGIC, 8);
    graft_put_le(hdr + 8, GRAFT_FLAT_FORMAT_VERSION, 4);
    graft_put_le(hdr + 12, HEADER_V1, 4);
    graft_put_le(hdr + 16, (uint64_t)d, 8);
    graft_put_le(hdr + 24, (uint64_t)n, 8);
    graft_put_le(hdr + 32, (uint32_t)graft_flat_metric(index), 4);
    graft_stream s = graft_stream_at(f, "graft_flat_write", "flat index");
    GRAFT_TRY(graft_stream_put(&s, hdr, sizeof hdr));
    /* the index holds the vectors: n * d * 4 does not overflow */
    GRAFT_TRY(graft_stream_put_words(&s, graft_flat_vectors(index), (size_t)n * (size_t)d * sizeof(float)));
    return graft_stream_put_checksum(&s);
}

int graft_flat_read(FILE* f, const graft_flat_params* params, graft_flat** out) {
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "graft_flat_read: NULL argument");
    unsigned char hdr[HEADER_V1];
    graft_stream s = graft_stream_at(f, "graft_flat_read", "flat index");
    GRAFT_TRY(graft_stream_read_header(&s, GRAFT_FLAT_MAGIC, GRAFT_FLAT_FORMAT_VERSION, HEADER_V1, hdr));
    int64_t d = (int64_t)graft_get_le(hdr + 16, 8), n = (int64_t)graft_get_le(hdr + 24, 8);
    int32_t metric = (int32_t)(uint32_t)graft_get_le(hdr + 32, 4);
    if (d < 1 || d > (1 << 20))
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: dimension %lld out of range [1, 2^20]",
                          (long long)d);
    if (n < 0) return graft_fail(GRAFT_EFORMAT, "graft_flat_read: ntotal %lld < 0", (long long)n);
    if (metric != GRAFT_METRIC_L2 && metric != GRAFT_METRIC_INNER_PRODUCT)
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: unknown metric %d", (int)metric);
    size_t bytes;
    if (graft_mul_overflow((size_t)n, (size_t)d * sizeof(float), &bytes) || bytes > (size_t)INT64_MAX - 8)
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: %lld vectors of dimension %lld overflow the "
                          "address space", (long long)n, (long long)d);
    GRAFT_TRY(graft_stream_check_room(&s, (uint64_t)bytes + 8));

    float* x = NULL;
    if (bytes > 0 && !(x = malloc(bytes)))
        return graft_fail(GRAFT_ENOMEM, "graft_flat_read: out of host memory (%zu bytes of vectors)", bytes);
    int rc = bytes > 0 ? graft_stream_get_words(&s, x, bytes, "vectors") : GRAFT_OK;
    if (rc == GRAFT_OK) rc = graft_stream_check_checksum(&s);
    graft_flat* index = NULL;
    if (rc == GRAFT_OK) {
        graft_flat_params p;
        graft_flat_params_defaults(&p);
        if (params) p = *params;
        p.metric = (graft_metric)metric;
        rc = graft_flat_new(d, &p, &index);
    }
    if (rc == GRAFT_OK) rc = graft_flat_add(index, n, x);
    free(x);
    if (rc != GRAFT_OK) {
        graft_flat_free(index);
        return rc;
    }
    *out = index;
    return GRAFT_OK;
}
