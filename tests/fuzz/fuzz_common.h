/* What graft's libFuzzer targets share: the readers under test take paths, so each input is
 * written to a per-process temporary file first. */
#ifndef GRAFT_FUZZ_COMMON_H
#define GRAFT_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes data to $TMPDIR/graft-fuzz-<pid><suffix> and returns that path (static buffer). */
static inline const char* fuzz_temp_file(const uint8_t* data, size_t size, const char* suffix) {
    static char path[512];
    const char* dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/graft-fuzz-%d%s", dir && *dir ? dir : "/tmp", (int)getpid(),
             suffix);
    FILE* f = fopen(path, "wb");
    if (!f) abort();  // the harness's own failure, not the reader's
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

#endif
