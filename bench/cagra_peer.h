// CAGRA (NVIDIA cuVS; ../shared/peers/cuvs) as a graft-bench peer: a plain C++17 face over cuVS's
// C++20/CUDA API, so that graft-bench itself stays C++17. scripts/device/build_cuvs.sh compiles
// cagra_peer.cu against its cuVS build into libgraft_cagra_peer.so; graft-bench links it where
// bench/CMakeLists.txt is given GRAFT_CAGRA_PEER_LIB (GRAFT_BENCH_CAGRA).
#ifndef GRAFT_BENCH_CAGRA_PEER_H
#define GRAFT_BENCH_CAGRA_PEER_H

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct CagraPeer;

// How CAGRA's search runs (cuvs::neighbors::cagra::search_algo): one CTA a query, several CTAs a
// query, or cuVS's own choice from the batch size.
enum class CagraAlgo { single_cta, multi_cta, automatic };

// An empty CAGRA index on GPU 0 for d-dimensional float vectors, L2 or inner product. Its memory
// comes from an RMM pool, as in cuVS's own benchmarks.
CagraPeer* cagra_peer_new(int64_t d, bool ip);
void cagra_peer_free(CagraPeer* p);

// Builds CAGRA's graph over the n vectors (copied) with cuVS's default build: NN-descent while the
// data fits the GPU, else IVF-PQ; then CAGRA's optimization to graph_degree (0: cuVS's defaults,
// 64 from an intermediate 128). *algo_used names the build that ran.
bool cagra_peer_build(CagraPeer* p, int64_t n, const float* x, int graph_degree, std::string* algo_used,
                      std::string* err);

// Takes a graph built elsewhere (n x degree ids, every entry in [0, n)) over the n vectors.
bool cagra_peer_set_graph(CagraPeer* p, int64_t n, const float* x, const uint32_t* graph, int degree,
                          std::string* err);

// The index's graph (n x degree, row-major) into *graph.
bool cagra_peer_graph(const CagraPeer* p, std::vector<uint32_t>* graph, int* degree, std::string* err);

// The k nearest of nq host queries (ids into I, distances into D: squared L2, or the inner
// product), queries and results through pageable host memory as a user's call has them.
bool cagra_peer_search(CagraPeer* p, int64_t nq, const float* xq, int k, int itopk, int search_width,
                       CagraAlgo algo, float* D, int64_t* I, std::string* err);

}  // namespace bench

#endif
