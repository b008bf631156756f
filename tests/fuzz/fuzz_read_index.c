/* libFuzzer target: faiss_graft_read_index on graft's records (GRFTFLAT, GRFTGRPH, the legacy GRFTBANG,
 * GRFTIDMP before an inner record and GRFTSHRD before its shards' records), loaded on the CPU.
 * Inputs with any other magic are skipped: they go to faiss::read_index, which is FAISS's to
 * harden. Checksums are ignored in this build (graft_fuzzing_ignore_checksums) so mutations
 * reach the checks behind them, as a hostile file with a recomputed checksum would. A loaded
 * index is then searched and written back: what the reader accepted must be safe to use. */
#include <string.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "fuzz_common.h"
#include "graft/io.h"
#include "graft_faiss_c.h"

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    graft_fuzzing_ignore_checksums = 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const char* const kMagic[] = {"GRFTFLAT", "GRFTGRPH", "GRFTBANG", "GRFTIDMP", "GRFTSHRD"};
    int graft = 0;
    for (int i = 0; i < 5; i++) graft |= size >= 8 && memcmp(data, kMagic[i], 8) == 0;
    if (!graft) return 0;
    FILE* f = fmemopen((void*)data, size, "rb");
    if (!f) return 0;
    FaissIndex* idx = NULL;
    int rc = faiss_graft_read_index_device(f, 0, -1, &idx);
    fclose(f);
    if (rc != 0) {
        if (idx) abort();  // failed reads leave *p_out untouched
        if (!faiss_get_last_error() || !faiss_get_last_error()[0]) abort();
        return 0;
    }
    int d = faiss_Index_d(idx);
    idx_t ntotal = faiss_Index_ntotal(idx);
    /* A few queries made of the input's bytes; big indexes are searched once only. */
    enum { NQ = 2, K = 4 };
    if (d > 0 && d <= 4096) {
        float* q = calloc((size_t)NQ * d, sizeof(float));
        for (size_t i = 0; i < (size_t)NQ * d; i++) q[i] = (float)data[i % size] - 128.0f;
        float D[NQ * K];
        idx_t I[NQ * K];
        if (faiss_Index_search(idx, ntotal < 4096 ? NQ : 1, q, K, D, I) == 0)
            /* Labels are row numbers (or -1), except under an id map, whose stored ids are any
             * int64 as FAISS's IndexIDMap allows (an input of tests/fuzz/regressions/read_index/
             * holds negative ones). */
            for (int i = 0; i < (ntotal < 4096 ? NQ : 1) * K; i++)
                if (memcmp(data, "GRFTIDMP", 8) != 0 && (I[i] < -1 || I[i] >= ntotal)) abort();
        free(q);
    }
    /* Written back, the record must read again (a reader that accepts what its writer cannot
     * reproduce has lost something). */
    char* buf = NULL;
    size_t len = 0;
    FILE* w = open_memstream(&buf, &len);
    if (w && faiss_graft_write_index(idx, w) == 0) {
        fflush(w);
        FILE* r = fmemopen(buf, len, "rb");
        FaissIndex* again = NULL;
        if (!r || faiss_graft_read_index_device(r, 0, -1, &again) != 0) abort();
        if (faiss_Index_ntotal(again) != ntotal || faiss_Index_d(again) != d) abort();
        faiss_Index_free(again);
        fclose(r);
    }
    if (w) fclose(w);
    free(buf);
    faiss_Index_free(idx);
    return 0;
}
