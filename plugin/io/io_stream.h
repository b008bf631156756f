/* Internal: the byte-level pieces shared by graft's record formats (the flat index record of
 * graft/io.h, the graph index record of graft/graph_index.h): little-endian fields, a stream that
 * checksums what goes through it and knows its byte offset for messages, 32-bit payloads
 * byte-swapped on big-endian hosts, and the common header prefix (magic, version, header size). */
#ifndef GRAFT_IO_STREAM_H
#define GRAFT_IO_STREAM_H

#include <stdint.h>
#include <stdio.h>

/* A stream position and the checksum (graft_io_checksum) of the bytes that went through it.
 * fn names the public function in messages ("graft_flat_read"), kind the record ("flat index"). */
typedef struct graft_stream {
    FILE* f;
    uint64_t h;
    long long pos;
    const char* fn;
    const char* kind;
} graft_stream;

/* A stream at f's current position with a fresh checksum. */
graft_stream graft_stream_at(FILE* f, const char* fn, const char* kind);

void graft_put_le(unsigned char* p, uint64_t v, int n);
uint64_t graft_get_le(const unsigned char* p, int n);

/* GRAFT_EIO naming the byte offset when the write fails. */
int graft_stream_put(graft_stream* s, const void* p, size_t n);
/* GRAFT_EIO on a read error; GRAFT_EFORMAT when the stream ends early ("truncated: the stream
 * ends at byte B, in the <what>", or "empty stream" at byte 0). */
int graft_stream_get(graft_stream* s, void* p, size_t n, const char* what);

/* `bytes` bytes of 32-bit words (float32, int32) in host order, written little-endian. */
int graft_stream_put_words(graft_stream* s, const void* p, size_t bytes);
/* Reads `bytes` bytes of little-endian 32-bit words into p, in host order. */
int graft_stream_get_words(graft_stream* s, void* p, size_t bytes, const char* what);

/* Appends the checksum of everything written so far and flushes the stream. */
int graft_stream_put_checksum(graft_stream* s);
/* Reads the stored checksum and compares it with the bytes read so far (GRAFT_EFORMAT on a
 * mismatch). */
int graft_stream_check_checksum(graft_stream* s);

/* Reads and checks the header prefix: `magic` (8 bytes), uint32 version in [1, version_max],
 * uint32 header size in [header_v1, 4096]; then the rest of the version-1 header into
 * hdr[16 .. header_v1), skipping fields of later minor revisions up to the header size.
 * hdr holds header_v1 bytes. GRAFT_EFORMAT naming what is wrong. */
int graft_stream_read_header(graft_stream* s, const char* magic, uint32_t version_max,
                             uint32_t header_v1, unsigned char* hdr);

/* The same for records whose header grew with their version: reads min(header size, hdr_cap)
 * bytes into hdr (hdr_cap >= header_v1), skips the rest, and returns the version and header
 * size found. magic NULL: the caller read the magic into hdr[0 .. 8) and checked it (a reader of
 * two record kinds). */
int graft_stream_read_header_ex(graft_stream* s, const char* magic, uint32_t version_max,
                                uint32_t header_v1, uint32_t hdr_cap, unsigned char* hdr,
                                uint32_t* version, uint32_t* hsize);
/* On a seekable stream, GRAFT_EFORMAT ("truncated") unless `need` more bytes follow the current
 * position, so that an absurd size is reported before anything is allocated. Pipes pass. */
int graft_stream_check_room(graft_stream* s, uint64_t need);

#endif
