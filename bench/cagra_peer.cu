// cuVS's CAGRA behind cagra_peer.h (C++20, compiled by nvcc against cuVS's headers and libcuvs).
#include "cagra_peer.h"

#include <cuvs/neighbors/cagra.hpp>
#include <cuvs/neighbors/nn_descent.hpp>
#include <raft/core/device_mdarray.hpp>
#include <raft/core/device_resources.hpp>
#include <raft/core/host_mdspan.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>

#include <cuda_runtime.h>

#include <exception>
#include <optional>

namespace bench {

namespace cagra = cuvs::neighbors::cagra;

struct CagraPeer {
    int64_t d = 0;
    bool ip = false;
    raft::device_resources res;
    std::optional<cagra::index<float, uint32_t>> index;
    // Buffers of the last search's size, kept as a user's loop would keep them.
    std::optional<raft::device_matrix<float, int64_t>> q, dist;
    std::optional<raft::device_matrix<uint32_t, int64_t>> ids;
    std::vector<uint32_t> ids_host;
};

namespace {

// One RMM pool for the process, as cuVS's benchmarks set it (cuvs_ann_bench_utils.h): CAGRA's
// search allocates its workspace on every call, and cudaMalloc there would be timed.
void use_pool_once() {
    static bool done = false;
    if (done) return;
    rmm::mr::set_current_device_resource(
        rmm::mr::pool_memory_resource{rmm::mr::get_current_device_resource_ref(), size_t(1) << 30});
    done = true;
}

cuvs::distance::DistanceType metric(const CagraPeer* p) {
    return p->ip ? cuvs::distance::DistanceType::InnerProduct : cuvs::distance::DistanceType::L2Expanded;
}

template <typename F>
bool guarded(const char* what, std::string* err, F&& f) {
    try {
        f();
        return true;
    } catch (const std::exception& e) {
        *err = std::string("CAGRA ") + what + ": " + e.what();
        return false;
    }
}

}  // namespace

CagraPeer* cagra_peer_new(int64_t d, bool ip) {
    use_pool_once();
    CagraPeer* p = new CagraPeer{};
    p->d = d;
    p->ip = ip;
    return p;
}

void cagra_peer_free(CagraPeer* p) { delete p; }

bool cagra_peer_build(CagraPeer* p, int64_t n, const float* x, int graph_degree, std::string* algo_used,
                      std::string* err) {
    return guarded("build", err, [&] {
        cagra::index_params params;
        params.metric = metric(p);
        if (graph_degree > 0) {
            params.graph_degree = (size_t)graph_degree;
            params.intermediate_graph_degree = 2 * (size_t)graph_degree;
        }
        // The rule cagra::build applies to its default (graph_build_params left empty).
        *algo_used = cuvs::neighbors::nn_descent::has_enough_device_memory(p->res, raft::matrix_extent<int64_t>(n, p->d),
                                                                           sizeof(uint32_t))
                         ? "nn_descent"
                         : "ivf_pq";
        auto view = raft::make_host_matrix_view<const float, int64_t>(x, n, p->d);
        p->index.emplace(cagra::build(p->res, params, view));
        p->res.sync_stream();
    });
}

bool cagra_peer_set_graph(CagraPeer* p, int64_t n, const float* x, const uint32_t* graph, int degree,
                          std::string* err) {
    return guarded("index from a graph", err, [&] {
        auto data = raft::make_host_matrix_view<const float, int64_t>(x, n, p->d);
        auto rows = raft::make_host_matrix_view<const uint32_t, int64_t>(graph, n, degree);
        p->index.emplace(p->res, metric(p), data, rows);  // both copied to the GPU
        p->res.sync_stream();
    });
}

bool cagra_peer_graph(const CagraPeer* p, std::vector<uint32_t>* graph, int* degree, std::string* err) {
    return guarded("graph", err, [&] {
        if (!p->index) throw std::runtime_error("no index built");
        auto g = p->index->graph();
        *degree = (int)g.extent(1);
        graph->resize((size_t)g.extent(0) * g.extent(1));
        cudaStream_t s = p->res.get_stream();
        RAFT_CUDA_TRY(cudaMemcpyAsync(graph->data(), g.data_handle(), graph->size() * sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost, s));
        RAFT_CUDA_TRY(cudaStreamSynchronize(s));
    });
}

bool cagra_peer_search(CagraPeer* p, int64_t nq, const float* xq, int k, int itopk, int search_width,
                       CagraAlgo algo, float* D, int64_t* I, std::string* err) {
    return guarded("search", err, [&] {
        if (!p->index) throw std::runtime_error("no index built");
        cagra::search_params sp;
        sp.itopk_size = (size_t)itopk;
        sp.search_width = (size_t)search_width;
        sp.algo = algo == CagraAlgo::single_cta  ? cagra::search_algo::SINGLE_CTA
                  : algo == CagraAlgo::multi_cta ? cagra::search_algo::MULTI_CTA
                                                 : cagra::search_algo::AUTO;
        if (!p->q || p->q->extent(0) != nq || p->ids->extent(1) != k) {
            p->q.emplace(raft::make_device_matrix<float, int64_t>(p->res, nq, p->d));
            p->dist.emplace(raft::make_device_matrix<float, int64_t>(p->res, nq, k));
            p->ids.emplace(raft::make_device_matrix<uint32_t, int64_t>(p->res, nq, k));
        }
        cudaStream_t s = p->res.get_stream();
        RAFT_CUDA_TRY(cudaMemcpyAsync(p->q->data_handle(), xq, (size_t)(nq * p->d) * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
        cagra::search(p->res, sp, *p->index, raft::make_const_mdspan(p->q->view()), p->ids->view(), p->dist->view());
        p->ids_host.resize((size_t)(nq * k));
        RAFT_CUDA_TRY(cudaMemcpyAsync(p->ids_host.data(), p->ids->data_handle(), p->ids_host.size() * sizeof(uint32_t),
                                      cudaMemcpyDeviceToHost, s));
        RAFT_CUDA_TRY(cudaMemcpyAsync(D, p->dist->data_handle(), (size_t)(nq * k) * sizeof(float),
                                      cudaMemcpyDeviceToHost, s));
        RAFT_CUDA_TRY(cudaStreamSynchronize(s));
        // CAGRA marks a slot it could not fill with the largest id.
        for (size_t i = 0; i < p->ids_host.size(); i++)
            I[i] = p->ids_host[i] == UINT32_MAX ? -1 : (int64_t)p->ids_host[i];
    });
}

}  // namespace bench
