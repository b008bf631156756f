// GGNN's API behind ggnn_peer.h (C++20, compiled by nvcc against GGNN's headers and libGGNNBase).
#include "ggnn_peer.h"

#include <ggnn/base/ggnn.cuh>

#include <exception>
#include <span>
#include <vector>

namespace bench {

struct GgnnPeer {
    ggnn::GGNN<int32_t, float> index;
    ggnn::Dataset<float> base;  // GGNN keeps a reference to it (setBaseReference)
    int64_t d;
    bool ip;
};

GgnnPeer* ggnn_peer_new(int64_t d, bool ip) {
    GgnnPeer* p = new GgnnPeer{};
    p->d = d;
    p->ip = ip;
    return p;
}

void ggnn_peer_free(GgnnPeer* p) { delete p; }

static ggnn::DistanceMeasure measure(const GgnnPeer* p) {
    return p->ip ? ggnn::DistanceMeasure::Cosine : ggnn::DistanceMeasure::Euclidean;
}

bool ggnn_peer_build(GgnnPeer* p, int64_t n, const float* x, int k_build, float tau_build, std::string* err) {
    try {
        p->base = ggnn::Dataset<float>::copy(std::span<const float>(x, (size_t)(n * p->d)), (uint32_t)p->d, true);
        p->index.setBaseReference(p->base);
        p->index.build((uint32_t)k_build, tau_build, 2, measure(p));
        return true;
    } catch (const std::exception& e) {
        *err = std::string("GGNN build: ") + e.what();
        return false;
    }
}

bool ggnn_peer_search(GgnnPeer* p, int64_t nq, const float* xq, int k, float tau_query, int max_iterations,
                      float* D, int64_t* I, std::string* err) {
    try {
        // GGNN reads the queries through a non-owning view; it copies them to the GPU itself.
        ggnn::Dataset<float> q =
            ggnn::Dataset<float>::referenceCPUData(const_cast<float*>(xq), (uint64_t)nq, (uint32_t)p->d);
        const auto [ids, dists] = p->index.query(q, (uint32_t)k, tau_query, (uint32_t)max_iterations, measure(p));
        for (size_t i = 0; i < (size_t)(nq * k); i++) {
            I[i] = ids[i];
            D[i] = dists[i];
        }
        return true;
    } catch (const std::exception& e) {
        *err = std::string("GGNN query: ") + e.what();
        return false;
    }
}

}  // namespace bench
