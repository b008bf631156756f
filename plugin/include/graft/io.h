/* graft: saving and loading indexes.
 *
 * Flat index format, version 1 (all integers and floats little-endian, whatever the host):
 *
 *     offset  size        field
 *     0       8           magic "GRFTFLAT"
 *     8       4  uint32   format version (1)
 *     12      4  uint32   header size in bytes, from offset 0 (36 in version 1; a reader skips
 *                         fields it does not know up to this size)
 *     16      8  int64    d, in [1, 2^20]
 *     24      8  int64    ntotal, >= 0
 *     32      4  int32    metric (graft_metric: 0 inner product, 1 L2)
 *     36      ntotal*d*4  float32 vectors, row-major
 *     ...     8  uint64   checksum: FNV-1a 64 (graft_io_checksum) of every byte before it
 *
 * The record may sit inside a larger stream: writing starts at the current position, reading
 * stops right after the checksum.
 */
#ifndef GRAFT_IO_H
#define GRAFT_IO_H

#include <stdio.h>

#include "graft/flat.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRAFT_FLAT_MAGIC "GRFTFLAT"
#define GRAFT_FLAT_FORMAT_VERSION 1u

/* Writes index to f at its current position and flushes f; f stays open (the caller's).
 * Errors: NULL arguments -> GRAFT_EINVAL; a failed write or flush -> GRAFT_EIO (the stream then
 * holds a partial record). Must not run concurrently with add/reset on the same index. */
int graft_flat_write(const graft_flat* index, FILE* f);

/* Reads one flat index record from f's current position into a new index, *out (free it with
 * graft_flat_free). params may be NULL (defaults: GPU 0 when one is visible, else the CPU);
 * params->metric is ignored, the metric comes from the file. Errors: NULL arguments ->
 * GRAFT_EINVAL; a read error -> GRAFT_EIO; wrong magic, newer format version, sizes out of range,
 * a truncated record (the message gives the byte offset) or a checksum mismatch ->
 * GRAFT_EFORMAT; plus graft_flat_new's and graft_flat_add's errors. Nothing is allocated on
 * failure. Peak host memory is twice the vectors' size (read buffer + index copy). */
int graft_flat_read(FILE* f, const graft_flat_params* params, graft_flat** out);

/* The checksum of the formats: FNV-1a 64 of n bytes at p, continuing from state h. Start with
 * GRAFT_IO_CHECKSUM_INIT. */
#define GRAFT_IO_CHECKSUM_INIT 0xcbf29ce484222325ull
uint64_t graft_io_checksum(uint64_t h, const void* p, size_t n);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
/* Fuzz builds only (tests/fuzz): non-zero makes every record reader accept a wrong checksum, so
 * that mutated records reach the checks behind it (a hostile file can carry a valid checksum). */
extern int graft_fuzzing_ignore_checksums;
#endif

#ifdef __cplusplus
}
#endif
#endif
