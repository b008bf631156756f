/* Flat index I/O: the GRFTFLAT record described in graft/io.h. Every multi-byte field is encoded
 * little-endian by hand; the vectors are written as they sit in memory on little-endian hosts
 * and byte-swapped on the others. */
#define _POSIX_C_SOURCE 200809L /* ftello, fseeko */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "error.h"
#include "graft/io.h"

#define HEADER_V1 36u         /* bytes of the version-1 header, magic included */
#define HEADER_MAX 4096u      /* larger header sizes are taken as corruption */
#define CHUNK ((size_t)1 << 20) /* bytes per write (and per byte-swap on big-endian hosts) */

uint64_t graft_io_checksum(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull; /* FNV-1a 64 prime */
    }
    return h;
}

static int host_le(void) {
    const uint16_t one = 1;
    return *(const unsigned char*)&one;
}
static void put_le(unsigned char* p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le(const unsigned char* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void swap32(void* p, size_t nwords) {
    unsigned char* b = p;
    for (size_t i = 0; i < nwords; i++, b += 4) {
        unsigned char t = b[0]; b[0] = b[3]; b[3] = t;
        t = b[1]; b[1] = b[2]; b[2] = t;
    }
}
static const char* why(void) { return errno ? strerror(errno) : "unknown stream error"; }

/* A stream position and the checksum of the bytes that went through it. */
typedef struct stream {
    FILE* f;
    uint64_t h;
    long long pos;
} stream;

static int put(stream* s, const void* p, size_t n) {
    s->h = graft_io_checksum(s->h, p, n);
    errno = 0;
    if (fwrite(p, 1, n, s->f) != n)
        return graft_fail(GRAFT_EIO, "graft_flat_write: write failed at byte %lld: %s", s->pos, why());
    s->pos += (long long)n;
    return GRAFT_OK;
}

static int get(stream* s, void* p, size_t n, const char* what) {
    errno = 0;
    size_t got = fread(p, 1, n, s->f);
    s->h = graft_io_checksum(s->h, p, got);
    s->pos += (long long)got;
    if (got == n) return GRAFT_OK;
    if (ferror(s->f))
        return graft_fail(GRAFT_EIO, "graft_flat_read: read error at byte %lld: %s", s->pos, why());
    if (s->pos == 0)
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: empty stream, not a graft flat index");
    return graft_fail(GRAFT_EFORMAT, "graft_flat_read: truncated: the stream ends at byte %lld, in the %s",
                      s->pos, what);
}

int graft_flat_write(const graft_flat* index, FILE* f) {
    if (!index || !f) return graft_fail(GRAFT_EINVAL, "graft_flat_write: NULL argument");
    int64_t d = graft_flat_d(index), n = graft_flat_ntotal(index);
    unsigned char hdr[HEADER_V1];
    memcpy(hdr, GRAFT_FLAT_MAGIC, 8);
    put_le(hdr + 8, GRAFT_FLAT_FORMAT_VERSION, 4);
    put_le(hdr + 12, HEADER_V1, 4);
    put_le(hdr + 16, (uint64_t)d, 8);
    put_le(hdr + 24, (uint64_t)n, 8);
    put_le(hdr + 32, (uint32_t)graft_flat_metric(index), 4);
    stream s = {f, GRAFT_IO_CHECKSUM_INIT, 0};
    GRAFT_TRY(put(&s, hdr, sizeof hdr));

    const unsigned char* x = (const unsigned char*)graft_flat_vectors(index);
    size_t bytes = (size_t)n * (size_t)d * sizeof(float); /* the index holds them: no overflow */
    unsigned char* buf = NULL;
    if (!host_le() && bytes > 0 && !(buf = malloc(CHUNK)))
        return graft_fail(GRAFT_ENOMEM, "graft_flat_write: out of host memory");
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t m = bytes - off < CHUNK ? bytes - off : CHUNK;
        const unsigned char* p = x + off;
        if (buf) {
            memcpy(buf, p, m);
            swap32(buf, m / 4);
            p = buf;
        }
        int rc = put(&s, p, m);
        if (rc != GRAFT_OK) {
            free(buf);
            return rc;
        }
    }
    free(buf);
    unsigned char sum[8];
    put_le(sum, s.h, 8);
    GRAFT_TRY(put(&s, sum, sizeof sum));
    errno = 0;
    if (fflush(f) != 0) return graft_fail(GRAFT_EIO, "graft_flat_write: flush failed: %s", why());
    return GRAFT_OK;
}

/* On a seekable stream, fails unless `need` more bytes follow the current position: an absurd
 * ntotal is reported as truncation before anything is allocated. Pipes are not checked. */
static int check_room(FILE* f, long long pos, uint64_t need) {
    off_t here = ftello(f), end;
    if (here < 0 || fseeko(f, 0, SEEK_END) != 0) return GRAFT_OK;
    end = ftello(f);
    if (fseeko(f, here, SEEK_SET) != 0)
        return graft_fail(GRAFT_EIO, "graft_flat_read: cannot seek back to byte %lld", pos);
    if (end >= here && (uint64_t)(end - here) < need)
        return graft_fail(GRAFT_EFORMAT,
                          "graft_flat_read: truncated: the header needs %llu more bytes after byte %lld, "
                          "the stream ends at byte %lld",
                          (unsigned long long)need, pos, pos + (long long)(end - here));
    return GRAFT_OK;
}

int graft_flat_read(FILE* f, const graft_flat_params* params, graft_flat** out) {
    if (!f || !out) return graft_fail(GRAFT_EINVAL, "graft_flat_read: NULL argument");
    unsigned char hdr[HEADER_V1];
    stream s = {f, GRAFT_IO_CHECKSUM_INIT, 0};
    GRAFT_TRY(get(&s, hdr, 8, "magic"));
    if (memcmp(hdr, GRAFT_FLAT_MAGIC, 8) != 0) {
        char shown[9];
        for (int i = 0; i < 8; i++) shown[i] = hdr[i] >= 32 && hdr[i] < 127 ? (char)hdr[i] : '?';
        shown[8] = '\0';
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: not a graft flat index (magic \"%s\")", shown);
    }
    GRAFT_TRY(get(&s, hdr + 8, 8, "header"));
    uint32_t version = (uint32_t)get_le(hdr + 8, 4), hsize = (uint32_t)get_le(hdr + 12, 4);
    if (version > GRAFT_FLAT_FORMAT_VERSION)
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: written by a newer graft, format version %u "
                          "(this graft reads up to %u)", version, GRAFT_FLAT_FORMAT_VERSION);
    if (version == 0) return graft_fail(GRAFT_EFORMAT, "graft_flat_read: invalid format version 0");
    if (hsize < HEADER_V1 || hsize > HEADER_MAX)
        return graft_fail(GRAFT_EFORMAT, "graft_flat_read: header size %u out of range [%u, %u]", hsize,
                          HEADER_V1, HEADER_MAX);
    GRAFT_TRY(get(&s, hdr + 16, HEADER_V1 - 16, "header"));
    for (uint32_t skip = hsize - HEADER_V1; skip > 0;) { /* fields of a later minor revision */
        unsigned char tmp[256];
        uint32_t m = skip < sizeof tmp ? skip : (uint32_t)sizeof tmp;
        GRAFT_TRY(get(&s, tmp, m, "header"));
        skip -= m;
    }
    int64_t d = (int64_t)get_le(hdr + 16, 8), n = (int64_t)get_le(hdr + 24, 8);
    int32_t metric = (int32_t)(uint32_t)get_le(hdr + 32, 4);
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
    GRAFT_TRY(check_room(f, s.pos, (uint64_t)bytes + 8));

    float* x = NULL;
    if (bytes > 0 && !(x = malloc(bytes)))
        return graft_fail(GRAFT_ENOMEM, "graft_flat_read: out of host memory (%zu bytes of vectors)", bytes);
    int rc = bytes > 0 ? get(&s, x, bytes, "vectors") : GRAFT_OK;
    if (rc == GRAFT_OK) {
        uint64_t want = s.h;
        unsigned char sum[8];
        rc = get(&s, sum, sizeof sum, "checksum");
        if (rc == GRAFT_OK && get_le(sum, 8) != want)
            rc = graft_fail(GRAFT_EFORMAT, "graft_flat_read: checksum mismatch (stored %016llx, computed "
                            "%016llx): the record is corrupt", (unsigned long long)get_le(sum, 8),
                            (unsigned long long)want);
    }
    if (rc == GRAFT_OK && !host_le()) swap32(x, bytes / 4);
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
