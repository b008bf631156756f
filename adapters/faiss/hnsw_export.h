// Export of a graft graph to a single-level FAISS IndexHNSWFlat, header-only so that programs
// linked against another FAISS build (the benchmarks' FAISS with GPU support) can use it too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include <faiss/IndexHNSW.h>

#include "graft/graph_index.h"

namespace graft {

// See GraftIndexGraph.h: M = ceil(R / 2) so that level 0 holds 2M >= R links per vertex, each row
// our neighbours (valid ids first) padded with -1, entry point = our entry, efSearch = the index's
// default L. A new object owned by the caller.
inline faiss::IndexHNSWFlat* export_hnsw(const graft_gindex* g, faiss::MetricType metric) {
    // A build pending since the last add runs first, as a search would run it; removed vectors
    // are consolidated away (FAISS's HNSW has no tombstones: its ids must be the slots).
    if (graft_gindex_ntotal(g) > 0 && !graft_gindex_graph(g) &&
        graft_gindex_build(const_cast<graft_gindex*>(g)) != GRAFT_OK)
        FAISS_THROW_FMT("export_hnsw: %s", graft_last_error());
    if (graft_gindex_slots(g) != graft_gindex_ntotal(g) &&
        graft_gindex_consolidate(const_cast<graft_gindex*>(g)) != GRAFT_OK)
        FAISS_THROW_FMT("export_hnsw: %s", graft_last_error());
    const graft_graph* graph = graft_gindex_graph(g);
    const int64_t n = graft_gindex_ntotal(g);
    const int R = graph ? graph->R : graft_gindex_get_params(g).build.base.R;
    const int M = std::max((R + 1) / 2, 1);
    std::unique_ptr<faiss::IndexHNSWFlat> h(
            new faiss::IndexHNSWFlat((int)graft_gindex_d(g), M, metric));
    faiss::HNSW& hnsw = h->hnsw;
    // One level: every vertex lands on level 0 (also for later adds through FAISS), whose rows
    // hold 2M links (FAISS's level-0 width), at least R.
    hnsw.assign_probas.assign(1, 1.0);
    hnsw.cum_nneighbor_per_level = {0, 2 * M};
    hnsw.efSearch = graft_gindex_get_params(g).search.L;
    if (n == 0) return h.release();

    h->storage->add(n, graft_gindex_vectors(g));
    const size_t width = (size_t)(2 * M);
    hnsw.levels.assign((size_t)n, 1);  // FAISS stores level + 1
    hnsw.offsets.resize((size_t)n + 1);
    for (int64_t i = 0; i <= n; i++) hnsw.offsets[i] = (size_t)i * width;
    // FAISS's HNSW stops at the first -1 of a row: valid ids first, in our order.
    hnsw.neighbors.assign((size_t)n * width, -1);
    for (int64_t v = 0; v < n; v++) {
        const int32_t* row = graph->nbrs + v * graph->R;
        size_t j = 0;
        for (int c = 0; c < graph->R; c++)
            if (row[c] >= 0) hnsw.neighbors[(size_t)v * width + j++] = row[c];
    }
    hnsw.entry_point = (faiss::HNSW::storage_idx_t)graph->entry;
    hnsw.max_level = 0;
    h->ntotal = n;
    return h.release();
}

}  // namespace graft
