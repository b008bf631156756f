/* libFuzzer target: graft_vamana_read, DiskANN's in-memory graph file. The first two bytes give
 * n, the data file's vector count the reader checks the graph against; the rest is the file. */
#include "fuzz_common.h"
#include "graft/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    int64_t n = (int64_t)data[0] | (int64_t)data[1] << 8;
    const char* path = fuzz_temp_file(data + 2, size - 2, ".vamana");
    graft_graph g;
    if (graft_vamana_read(path, n, &g) == GRAFT_OK) {
        /* The promise: n rows of R ids, each -1 or below n, and an entry below n. */
        if (g.n != n || g.R < 1 || g.entry < 0 || g.entry >= n) abort();
        for (int64_t i = 0; i < g.n * g.R; i++)
            if (g.nbrs[i] < -1 || g.nbrs[i] >= n) abort();
        graft_graph_free(&g);
    }
    return 0;
}
