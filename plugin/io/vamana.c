/* DiskANN's in-memory Vamana graph file (graft/graph.h: graft_vamana_read / graft_vamana_write),
 * the layout of DiskANN's InMemGraphStore::save_graph / load_impl (src/in_mem_graph_store.cpp):
 *
 *     0   8  uint64 file size in bytes, header included
 *     8   4  uint32 max degree (the longest row's count: save_graph rewrites it at the end)
 *     12  4  uint32 start vertex (the search entry; a frozen point in dynamic indexes)
 *     16  8  uint64 frozen points (rows after the data's; 0 for a static build)
 *     24  ...    for every vertex: uint32 count, then count uint32 ids
 *
 * all little-endian. DiskANN's reader stops at the file size; here the size must also match the
 * file and the rows, so that a truncated or foreign file is reported, not half-loaded. */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/error.h"
#include "graft/graph.h"
#include "io/io_stream.h"
#include "core/validate.h"

#define VAMANA_HEADER 24

/* The file's length in bytes, or -1 when it cannot be told (not seekable); f is left at 0. */
static long long file_length(FILE* f) {
    if (fseeko(f, 0, SEEK_END) != 0) return -1;
    off_t end = ftello(f);
    if (fseeko(f, 0, SEEK_SET) != 0) return -1;
    return end < 0 ? -1 : (long long)end;
}

/* Reads the rows after the header. nbrs (n x R, -1 filled) gets the first n rows, ids >= n
 * dropped; *frozen_first gets the first id below n of row `start` when start >= n (-1 if none).
 * ids: scratch of max(max_degree, 1) words. */
static int read_rows(graft_stream* s, int64_t n, uint64_t frozen, uint32_t max_degree,
                     uint64_t file_size, uint32_t start, int R, int32_t* nbrs, uint32_t* ids,
                     int64_t* frozen_first) {
    const int64_t vertices = n + (int64_t)frozen; /* frozen <= file size / 4: no overflow */
    int64_t rows = 0;
    *frozen_first = -1;
    while ((uint64_t)s->pos < file_size) {
        unsigned char c4[4];
        const long long at = s->pos;
        GRAFT_TRY(graft_stream_get(s, c4, 4, "rows")); /* the byte offset names the place */
        const uint32_t count = (uint32_t)graft_get_le(c4, 4);
        if (count > max_degree)
            return graft_fail(GRAFT_EFORMAT,
                              "%s: row %lld (byte %lld) holds %u neighbours, above the header's max "
                              "degree %u",
                              s->fn, (long long)rows, at, count, max_degree);
        if ((uint64_t)s->pos + 4ull * count > file_size)
            return graft_fail(GRAFT_EFORMAT,
                              "%s: row %lld (byte %lld) of %u neighbours runs past the header's file "
                              "size %llu",
                              s->fn, (long long)rows, at, count, (unsigned long long)file_size);
        GRAFT_TRY(graft_stream_get_words(s, ids, 4ull * count, "rows"));
        if (rows < vertices) {
            for (uint32_t j = 0; j < count; j++)
                if (ids[j] >= (uint64_t)vertices)
                    return graft_fail(GRAFT_EFORMAT,
                                      "%s: row %lld (byte %lld) holds id %u, but n = %lld vectors + "
                                      "%llu frozen points make %lld vertices (is n the vector count "
                                      "of the graph's data file?)",
                                      s->fn, (long long)rows, at, ids[j], (long long)n,
                                      (unsigned long long)frozen, (long long)vertices);
            if (rows < n) {
                int32_t* row = nbrs + rows * (int64_t)R;
                int kept = 0;
                for (uint32_t j = 0; j < count; j++)
                    if (ids[j] < (uint64_t)n) row[kept++] = (int32_t)ids[j];
            } else if (rows == (int64_t)start) {
                for (uint32_t j = 0; j < count && *frozen_first < 0; j++)
                    if (ids[j] < (uint64_t)n) *frozen_first = ids[j];
            }
        }
        rows++;
    }
    if (rows != vertices)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: the file holds %lld rows, but n = %lld vectors + %llu frozen points "
                          "make %lld (%s)",
                          s->fn, (long long)rows, (long long)n, (unsigned long long)frozen,
                          (long long)vertices,
                          rows < n ? "fewer rows than n: is n the vector count of the graph's data "
                                     "file?"
                                   : "is n the vector count of the graph's data file?");
    return GRAFT_OK;
}

/* The header checked against the file; *R the graph's column count. */
static int check_header(const graft_stream* s, int64_t n, long long length, uint64_t file_size,
                        uint32_t max_degree, uint32_t start, uint64_t frozen, int* R) {
    if (file_size < VAMANA_HEADER)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: the header's file size %llu is smaller than the header (%d bytes): "
                          "not a DiskANN Vamana graph file",
                          s->fn, (unsigned long long)file_size, VAMANA_HEADER);
    if (length >= 0 && (uint64_t)length < file_size)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: truncated: the file ends at byte %lld, the header's file size is %llu",
                          s->fn, length, (unsigned long long)file_size);
    if (length >= 0 && (uint64_t)length > file_size)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: %lld bytes after the header's file size %llu: trailing data, or not "
                          "a DiskANN Vamana graph file",
                          s->fn, length - (long long)file_size, (unsigned long long)file_size);
    /* Every row takes at least its 4-byte count. */
    const uint64_t room = (file_size - VAMANA_HEADER) / 4;
    if (frozen > room || (uint64_t)n > room - frozen)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: %llu bytes of rows cannot hold n = %lld vectors + %llu frozen points "
                          "(4 bytes each at least): fewer rows than n, or a corrupt header",
                          s->fn, (unsigned long long)(file_size - VAMANA_HEADER), (long long)n,
                          (unsigned long long)frozen);
    if (max_degree > INT32_MAX || (uint64_t)max_degree + 1 > room)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: max degree %u in the header: no row of a %llu-byte file can hold that "
                          "many ids",
                          s->fn, max_degree, (unsigned long long)file_size);
    if ((uint64_t)start >= (uint64_t)n + frozen)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: start vertex %u outside the n = %lld vectors + %llu frozen points",
                          s->fn, start, (long long)n, (unsigned long long)frozen);
    /* A graph without edges still needs one column: rows of -1. */
    *R = max_degree > 0 ? (int)max_degree : 1;
    return GRAFT_OK;
}

int graft_vamana_read(const char* path, int64_t n, graft_graph* out) {
    if (!path || !out) return graft_fail(GRAFT_EINVAL, "graft_vamana_read: NULL path or out");
    if (n < 1 || n > INT32_MAX)
        return graft_fail(GRAFT_EINVAL,
                          "graft_vamana_read: n = %lld out of range [1, 2^31) (n is the vector count "
                          "of the graph's data file)",
                          (long long)n);
    char fn[600];
    snprintf(fn, sizeof fn, "graft_vamana_read('%s')", path);
    errno = 0;
    FILE* f = fopen(path, "rb");
    if (!f)
        return graft_fail(GRAFT_EIO, "%s: cannot open: %s", fn,
                          errno ? strerror(errno) : "unknown error");
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return graft_fail(GRAFT_EIO, "%s: cannot read: is a directory", fn);
    }
    const long long length = file_length(f);
    graft_stream s = graft_stream_at(f, fn, "DiskANN Vamana graph file");
    unsigned char hdr[VAMANA_HEADER] = {0};
    int32_t* nbrs = NULL;
    uint32_t* ids = NULL;
    int R = 0;
    int64_t frozen_first = -1;
    int rc = length == 0 ? graft_fail(GRAFT_EFORMAT, "%s: empty file, not a DiskANN Vamana graph", fn)
                         : graft_stream_get(&s, hdr, sizeof hdr, "header");
    const uint64_t file_size = graft_get_le(hdr, 8), frozen = graft_get_le(hdr + 16, 8);
    const uint32_t max_degree = (uint32_t)graft_get_le(hdr + 8, 4);
    const uint32_t start = (uint32_t)graft_get_le(hdr + 12, 4);
    if (rc == GRAFT_OK)
        rc = check_header(&s, n, length, file_size, max_degree, start, frozen, &R);
    size_t bytes = 0;
    if (rc == GRAFT_OK) {
        if (graft_mul_overflow((size_t)n, (size_t)R * sizeof(int32_t), &bytes) ||
            !(nbrs = malloc(bytes)) || !(ids = malloc(sizeof(uint32_t) * (size_t)R)))
            rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory for %lld x %d graph rows", fn,
                            (long long)n, R);
    }
    if (rc == GRAFT_OK) {
        memset(nbrs, 0xff, bytes); /* -1 */
        rc = read_rows(&s, n, frozen, max_degree, file_size, start, R, nbrs, ids, &frozen_first);
    }
    int64_t entry = start;
    if (rc == GRAFT_OK && start >= n) {
        entry = frozen_first;
        if (entry < 0)
            rc = graft_fail(GRAFT_EFORMAT,
                            "%s: the start vertex %u is a frozen point with no neighbour among the "
                            "n = %lld vectors: no entry point",
                            fn, start, (long long)n);
    }
    fclose(f);
    free(ids);
    if (rc != GRAFT_OK) {
        free(nbrs);
        return rc;
    }
    out->n = n;
    out->R = R;
    out->nbrs = nbrs;
    out->entry = entry;
    return GRAFT_OK;
}

int graft_vamana_write(const char* path, const graft_graph* graph) {
    const char* fn = "graft_vamana_write";
    if (!path) return graft_fail(GRAFT_EINVAL, "%s: NULL path", fn);
    GRAFT_TRY(graft_check_graph(graph, fn));
    const int64_t n = graph->n;
    const int R = graph->R;
    uint64_t size = VAMANA_HEADER;
    uint32_t max_degree = 0;
    for (int64_t v = 0; v < n; v++) {
        uint32_t count = 0;
        for (int j = 0; j < R; j++) {
            const int32_t id = graph->nbrs[v * R + j];
            if (id < -1 || id >= n)
                return graft_fail(GRAFT_EINVAL, "%s: row %lld of the graph holds id %d, outside "
                                  "[-1, %lld)", fn, (long long)v, (int)id, (long long)n);
            count += id >= 0;
        }
        if (count > max_degree) max_degree = count;
        size += 4ull * (1 + count);
    }
    uint32_t* row = malloc(sizeof(uint32_t) * ((size_t)R + 1));
    if (!row) return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    errno = 0;
    FILE* f = fopen(path, "wb");
    if (!f) {
        free(row);
        return graft_fail(GRAFT_EIO, "%s: cannot open '%s' for writing: %s", fn, path,
                          errno ? strerror(errno) : "unknown error");
    }
    unsigned char hdr[VAMANA_HEADER];
    graft_put_le(hdr, size, 8);
    graft_put_le(hdr + 8, max_degree, 4);
    graft_put_le(hdr + 12, (uint64_t)graph->entry, 4);
    graft_put_le(hdr + 16, 0, 8); /* no frozen points */
    graft_stream s = graft_stream_at(f, fn, "DiskANN Vamana graph file");
    int rc = graft_stream_put(&s, hdr, sizeof hdr);
    for (int64_t v = 0; v < n && rc == GRAFT_OK; v++) {
        uint32_t count = 0;
        for (int j = 0; j < R; j++)
            if (graph->nbrs[v * R + j] >= 0) row[1 + count++] = (uint32_t)graph->nbrs[v * R + j];
        row[0] = count;
        rc = graft_stream_put_words(&s, row, 4ull * (1 + count));
    }
    free(row);
    errno = 0;
    if (fclose(f) != 0 && rc == GRAFT_OK)
        rc = graft_fail(GRAFT_EIO, "%s: writing '%s' failed: %s", fn, path,
                        errno ? strerror(errno) : "unknown error");
    if (rc != GRAFT_OK) { /* never leave half a graph behind */
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) remove(path);
    }
    return rc;
}
