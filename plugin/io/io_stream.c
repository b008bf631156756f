/* Byte-level pieces of graft's record formats (io_stream.h). Every multi-byte field is encoded
 * little-endian by hand; 32-bit payloads are written as they sit in memory on little-endian
 * hosts and byte-swapped on the others. */
#define _POSIX_C_SOURCE 200809L /* ftello, fseeko */
#include "io/io_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/error.h"
#include "graft/io.h"

#define HEADER_MAX 4096u        /* larger header sizes are taken as corruption */
#define CHUNK ((size_t)1 << 20) /* bytes per write (and per byte-swap on big-endian hosts) */

uint64_t graft_io_checksum(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull; /* FNV-1a 64 prime */
    }
    return h;
}

graft_stream graft_stream_at(FILE* f, const char* fn, const char* kind) {
    graft_stream s = {f, GRAFT_IO_CHECKSUM_INIT, 0, fn, kind};
    return s;
}

static int host_le(void) {
    const uint16_t one = 1;
    return *(const unsigned char*)&one;
}
void graft_put_le(unsigned char* p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
uint64_t graft_get_le(const unsigned char* p, int n) {
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

int graft_stream_put(graft_stream* s, const void* p, size_t n) {
    s->h = graft_io_checksum(s->h, p, n);
    errno = 0;
    if (fwrite(p, 1, n, s->f) != n)
        return graft_fail(GRAFT_EIO, "%s: write failed at byte %lld: %s", s->fn, s->pos, why());
    s->pos += (long long)n;
    return GRAFT_OK;
}

int graft_stream_get(graft_stream* s, void* p, size_t n, const char* what) {
    errno = 0;
    size_t got = fread(p, 1, n, s->f);
    s->h = graft_io_checksum(s->h, p, got);
    s->pos += (long long)got;
    if (got == n) return GRAFT_OK;
    if (ferror(s->f))
        return graft_fail(GRAFT_EIO, "%s: read error at byte %lld: %s", s->fn, s->pos, why());
    if (s->pos == 0)
        return graft_fail(GRAFT_EFORMAT, "%s: empty stream, not a graft %s", s->fn, s->kind);
    return graft_fail(GRAFT_EFORMAT, "%s: truncated: the stream ends at byte %lld, in the %s", s->fn,
                      s->pos, what);
}

int graft_stream_put_words(graft_stream* s, const void* p, size_t bytes) {
    const unsigned char* x = p;
    unsigned char* buf = NULL;
    if (!host_le() && bytes > 0 && !(buf = malloc(CHUNK)))
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", s->fn);
    int rc = GRAFT_OK;
    for (size_t off = 0; off < bytes && rc == GRAFT_OK; off += CHUNK) {
        size_t m = bytes - off < CHUNK ? bytes - off : CHUNK;
        const unsigned char* q = x + off;
        if (buf) {
            memcpy(buf, q, m);
            swap32(buf, m / 4);
            q = buf;
        }
        rc = graft_stream_put(s, q, m);
    }
    free(buf);
    return rc;
}

int graft_stream_get_words(graft_stream* s, void* p, size_t bytes, const char* what) {
    GRAFT_TRY(graft_stream_get(s, p, bytes, what));
    if (!host_le()) swap32(p, bytes / 4);
    return GRAFT_OK;
}

int graft_stream_put_checksum(graft_stream* s) {
    unsigned char sum[8];
    graft_put_le(sum, s->h, 8);
    GRAFT_TRY(graft_stream_put(s, sum, sizeof sum));
    errno = 0;
    if (fflush(s->f) != 0) return graft_fail(GRAFT_EIO, "%s: flush failed: %s", s->fn, why());
    return GRAFT_OK;
}

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
int graft_fuzzing_ignore_checksums = 0;
#define CHECKSUMS_CHECKED (!graft_fuzzing_ignore_checksums)
#else
#define CHECKSUMS_CHECKED 1
#endif

int graft_stream_check_checksum(graft_stream* s) {
    uint64_t want = s->h;
    unsigned char sum[8];
    GRAFT_TRY(graft_stream_get(s, sum, sizeof sum, "checksum"));
    if (graft_get_le(sum, 8) != want && CHECKSUMS_CHECKED)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: checksum mismatch (stored %016llx, computed %016llx): the record is "
                          "corrupt",
                          s->fn, (unsigned long long)graft_get_le(sum, 8), (unsigned long long)want);
    return GRAFT_OK;
}

int graft_stream_read_header(graft_stream* s, const char* magic, uint32_t version_max,
                             uint32_t header_v1, unsigned char* hdr) {
    uint32_t version, hsize;
    return graft_stream_read_header_ex(s, magic, version_max, header_v1, header_v1, hdr, &version,
                                       &hsize);
}

int graft_stream_read_header_ex(graft_stream* s, const char* magic, uint32_t version_max,
                                uint32_t header_v1, uint32_t hdr_cap, unsigned char* hdr,
                                uint32_t* version_out, uint32_t* hsize_out) {
    if (magic) GRAFT_TRY(graft_stream_get(s, hdr, 8, "magic"));
    if (magic && memcmp(hdr, magic, 8) != 0) {
        char shown[9];
        for (int i = 0; i < 8; i++) shown[i] = hdr[i] >= 32 && hdr[i] < 127 ? (char)hdr[i] : '?';
        shown[8] = '\0';
        return graft_fail(GRAFT_EFORMAT, "%s: not a graft %s (magic \"%s\")", s->fn, s->kind, shown);
    }
    GRAFT_TRY(graft_stream_get(s, hdr + 8, 8, "header"));
    uint32_t version = (uint32_t)graft_get_le(hdr + 8, 4), hsize = (uint32_t)graft_get_le(hdr + 12, 4);
    if (version > version_max)
        return graft_fail(GRAFT_EFORMAT, "%s: written by a newer graft, format version %u "
                          "(this graft reads up to %u)", s->fn, version, version_max);
    if (version == 0) return graft_fail(GRAFT_EFORMAT, "%s: invalid format version 0", s->fn);
    if (hsize < header_v1 || hsize > HEADER_MAX)
        return graft_fail(GRAFT_EFORMAT, "%s: header size %u out of range [%u, %u]", s->fn, hsize,
                          header_v1, HEADER_MAX);
    const uint32_t take = hsize < hdr_cap ? hsize : hdr_cap;
    GRAFT_TRY(graft_stream_get(s, hdr + 16, take - 16, "header"));
    for (uint32_t skip = hsize - take; skip > 0;) { /* fields of a later minor revision */
        unsigned char tmp[256];
        uint32_t m = skip < sizeof tmp ? skip : (uint32_t)sizeof tmp;
        GRAFT_TRY(graft_stream_get(s, tmp, m, "header"));
        skip -= m;
    }
    *version_out = version;
    *hsize_out = hsize;
    return GRAFT_OK;
}

int graft_stream_check_room(graft_stream* s, uint64_t need) {
    off_t here = ftello(s->f), end;
    if (here < 0 || fseeko(s->f, 0, SEEK_END) != 0) return GRAFT_OK;
    end = ftello(s->f);
    if (fseeko(s->f, here, SEEK_SET) != 0)
        return graft_fail(GRAFT_EIO, "%s: cannot seek back to byte %lld", s->fn, s->pos);
    if (end >= here && (uint64_t)(end - here) < need)
        return graft_fail(GRAFT_EFORMAT,
                          "%s: truncated: the header needs %llu more bytes after byte %lld, "
                          "the stream ends at byte %lld",
                          s->fn, (unsigned long long)need, s->pos, s->pos + (long long)(end - here));
    return GRAFT_OK;
}
