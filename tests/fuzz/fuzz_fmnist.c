/* libFuzzer target: graft_fmnist_read, the IDX reader (gzip-compressed or plain images). The
 * first byte picks the row limit (0: all rows). */
#include "fuzz_common.h"
#include "graft/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* path = fuzz_temp_file(data + 1, size - 1, ".idx");
    float* x = NULL;
    int64_t n = 0, d = 0;
    if (graft_fmnist_read(path, data[0] ? data[0] : -1, &x, &n, &d) == GRAFT_OK) {
        volatile float acc = 0;
        for (int64_t i = 0; i < n * d; i++) acc += x[i];
        free(x);
    }
    return 0;
}
