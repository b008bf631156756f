// GGNN (Groh et al., WACV 2023; /work/shared/peers) as a graft-bench peer: a plain C++17 face
// over GGNN's C++20/CUDA API, so that graft-bench itself stays C++17. Compiled only where
// bench/CMakeLists.txt found a GGNN build (GRAFT_GGNN_DIR; GRAFT_BENCH_GGNN).
#ifndef GRAFT_BENCH_GGNN_PEER_H
#define GRAFT_BENCH_GGNN_PEER_H

#include <cstdint>
#include <string>

namespace bench {

struct GgnnPeer;

// An empty GGNN index on GPU 0 for d-dimensional float vectors, L2 (ip: GGNN's cosine measure).
GgnnPeer* ggnn_peer_new(int64_t d, bool ip);
void ggnn_peer_free(GgnnPeer* p);

// Copies the n base vectors and builds the graph: k_build neighbours per node, tau_build its
// construction slack (GGNN's paper, section 4). False with *err set on failure.
bool ggnn_peer_build(GgnnPeer* p, int64_t n, const float* x, int k_build, float tau_build, std::string* err);

// The k nearest of nq queries (ids into I, squared distances into D, nq x k): tau_query is the
// search slack, max_iterations the bound on expansions GGNN applies.
bool ggnn_peer_search(GgnnPeer* p, int64_t nq, const float* xq, int k, float tau_query, int max_iterations,
                      float* D, int64_t* I, std::string* err);

}  // namespace bench

#endif
