/* What the consumer programs share (consumer.c, filtered.c): a faiss_c call checked, and sift5k
 * read with graft's dataset reader. PROGRAM names the program in messages. */
#ifndef GRAFT_CONSUMER_COMMON_H
#define GRAFT_CONSUMER_COMMON_H

#include <faiss/c_api/error_c.h>
#include <graft/dataset.h>
#include <stdio.h>

#define CHECK(call)                                                                           \
    do {                                                                                      \
        if ((call) != 0) {                                                                    \
            fprintf(stderr, PROGRAM ": %s failed: %s\n", #call, faiss_get_last_error());      \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

/* DIR/sift5k/NAME (.fvecs or .ivecs, as floats), NULL with a message when it cannot be read. */
static float* read_f32(const char* dir, const char* name, int64_t* n, int64_t* d) {
    char path[4096];
    float* x = NULL;
    snprintf(path, sizeof path, "%s/sift5k/%s", dir, name);
    if (graft_dataset_read_f32(path, 0, -1, &x, n, d) != 0) {
        fprintf(stderr, PROGRAM ": cannot read %s: %s\n", path, graft_last_error());
        return NULL;
    }
    return x;
}

#endif
