// Export of a graft graph to FAISS's HNSW indexes: a single-level IndexHNSWFlat (any FAISS), or
// IndexHNSWCagra (FAISS >= 1.9: FAISS's type for a graph built on the GPU, searched on its base
// level). Header-only so that programs linked against another FAISS build (the benchmarks' FAISS
// with GPU support) can use it too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <faiss/IndexHNSW.h>

#include "faiss_compat.h"
#include "graft/graph_index.h"

namespace graft {

namespace hnsw_export_detail {

// The graph of g, built first when an add is pending since the last build (as a search would),
// with removed vectors consolidated away (FAISS's HNSW has no tombstones: its ids are the slots).
inline const graft_graph* built_graph(const graft_gindex* g, const char* where) {
    if (graft_gindex_ntotal(g) > 0 && !graft_gindex_graph(g) &&
        graft_gindex_build(const_cast<graft_gindex*>(g)) != GRAFT_OK)
        FAISS_THROW_FMT("%s: %s", where, graft_last_error());
    if (graft_gindex_slots(g) != graft_gindex_ntotal(g) &&
        graft_gindex_consolidate(const_cast<graft_gindex*>(g)) != GRAFT_OK)
        FAISS_THROW_FMT("%s: %s", where, graft_last_error());
    return graft_gindex_graph(g);
}

// M = ceil(R / 2): FAISS's level 0 holds 2M links a vertex, at least our R.
inline int export_M(const graft_gindex* g, const graft_graph* graph) {
    const int R = graph ? graph->R : graft_gindex_get_params(g).build.base.R;
    return std::max((R + 1) / 2, 1);
}

// Fills h, a new IndexHNSW (of M = export_M) over an empty flat storage, with g's vectors and
// graph on one level: every vertex on level 0 (also for later adds through FAISS), each row our
// neighbours (valid ids first, in our order) padded with -1, where FAISS's search stops; entry
// point = our entry, efSearch = our default L.
inline void fill_base_level(const graft_gindex* g, const graft_graph* graph, int M,
                            faiss::IndexHNSW& h) {
    faiss::HNSW& hnsw = h.hnsw;
    hnsw.assign_probas.assign(1, 1.0);
    hnsw.cum_nneighbor_per_level = {0, 2 * M};
    hnsw.efSearch = graft_gindex_get_params(g).search.L;
    const int64_t n = graft_gindex_ntotal(g);
    if (n == 0) return;

    if (const float* x = graft_gindex_vectors(g)) {
        h.storage->add(n, x);
    } else {  // keep_fp32 = 0: the decoded codes (what reconstruct returns), in blocks
        const int64_t d = graft_gindex_d(g), block = 4096;
        std::vector<float> buf((size_t)block * d);
        for (int64_t i0 = 0; i0 < n; i0 += block) {
            const int64_t m = std::min(block, n - i0);
            for (int64_t i = 0; i < m; i++) graft_gindex_reconstruct(g, i0 + i, &buf[(size_t)i * d]);
            h.storage->add(m, buf.data());
        }
    }
    const size_t width = (size_t)(2 * M);
    hnsw.levels.assign((size_t)n, 1);  // FAISS stores level + 1
    hnsw.offsets.resize((size_t)n + 1);
    for (int64_t i = 0; i <= n; i++) hnsw.offsets[i] = (size_t)i * width;
    // clear + resize: FAISS >= 1.10 holds neighbors in a MaybeOwnedVector, without assign().
    hnsw.neighbors.clear();
    hnsw.neighbors.resize((size_t)n * width, -1);
    for (int64_t v = 0; v < n; v++) {
        const int32_t* row = graph->nbrs + v * graph->R;
        size_t j = 0;
        for (int c = 0; c < graph->R; c++)
            if (row[c] >= 0) hnsw.neighbors[(size_t)v * width + j++] = row[c];
    }
    hnsw.entry_point = (faiss::HNSW::storage_idx_t)graph->entry;
    hnsw.max_level = 0;
    h.ntotal = n;
}

}  // namespace hnsw_export_detail

// See GraftIndexGraph.h. A new object owned by the caller.
inline faiss::IndexHNSWFlat* export_hnsw(const graft_gindex* g, faiss::MetricType metric) {
    const graft_graph* graph = hnsw_export_detail::built_graph(g, "export_hnsw");
    const int M = hnsw_export_detail::export_M(g, graph);
    std::unique_ptr<faiss::IndexHNSWFlat> h(new faiss::IndexHNSWFlat((int)graft_gindex_d(g), M, metric));
    hnsw_export_detail::fill_base_level(g, graph, M, *h);
    return h.release();
}

// See GraftIndexGraph.h. A new object owned by the caller; throws where FAISS has no
// IndexHNSWCagra.
inline faiss_compat::IndexHNSWCagra* export_hnsw_cagra(const graft_gindex* g, faiss::MetricType metric) {
    if (!faiss_compat::kHasHNSWCagra)
        FAISS_THROW_FMT("export_hnsw_cagra: FAISS %s has no IndexHNSWCagra (FAISS >= 1.9 has); "
                        "export_hnsw gives an IndexHNSWFlat of the same graph",
                        kFaissVersion);
    const graft_graph* graph = hnsw_export_detail::built_graph(g, "export_hnsw_cagra");
    const int M = hnsw_export_detail::export_M(g, graph);
    std::unique_ptr<faiss_compat::IndexHNSWCagra> h(
            new faiss_compat::IndexHNSWCagra((int)graft_gindex_d(g), M, metric));
    // Searched on level 0 alone, as FAISS keeps a graph copied from GpuIndexCagra; it also makes
    // the index immutable (FAISS's add refuses, there being no upper levels to insert into).
    h->base_level_only = true;
    hnsw_export_detail::fill_base_level(g, graph, M, *h);
    return h.release();
}

}  // namespace graft
