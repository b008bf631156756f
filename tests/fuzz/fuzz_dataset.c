/* libFuzzer target: the vector file readers of graft/dataset.h (fvecs, ivecs, bvecs, fbin, ibin,
 * u8bin). The first byte picks the format (the readers choose by extension), the rest is the
 * file. Every input must give GRAFT_OK or an error status; a sanitizer report is a bug. */
#include "fuzz_common.h"
#include "graft/dataset.h"

static const char* const kExt[] = {".fvecs", ".ivecs", ".bvecs", ".fbin", ".ibin", ".u8bin"};

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const char* path = fuzz_temp_file(data + 1, size - 1, kExt[data[0] % 6]);
    int64_t n = 0, d = 0;
    graft_dtype t;
    if (graft_dataset_info(path, &n, &d, &t) != GRAFT_OK) return 0;
    graft_dataset ds;
    if (graft_dataset_read(path, 0, -1, &ds) == GRAFT_OK) {
        /* Touch every value: a reader that claims more than it filled shows up under ASan. */
        size_t bytes = (size_t)(ds.n * ds.d) * (ds.dtype == GRAFT_DTYPE_U8 ? 1 : 4);
        volatile uint8_t acc = 0;
        for (size_t i = 0; i < bytes; i++) acc ^= ((const uint8_t*)ds.data)[i];
        graft_dataset_free(&ds);
    }
    /* A row range from the middle, and the float conversion. */
    float* x = NULL;
    int64_t rn = 0, rd = 0;
    if (n > 1 && graft_dataset_read_f32(path, n / 2, n - n / 2, &x, &rn, &rd) == GRAFT_OK) free(x);
    return 0;
}
