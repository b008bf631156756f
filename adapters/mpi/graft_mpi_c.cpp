// The C entry points of graft_mpi_c.h and the "MPI," factory prefix.
#include "graft_mpi_c.h"

#include <faiss/c_api/error_c.h>
#include <faiss/c_api/macros_impl.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "GraftIndexMPI.h"

namespace {

// "MPI[,timeout=S],<local>" on comm: every rank makes its local index, the ranks agree that all
// of them could (a bad string on one rank fails on all), then the index across them.
faiss::Index* make_mpi(int d, const char* description, faiss::MetricType metric, MPI_Comm comm) {
    const char* fn = "faiss_graft_index_factory";
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    GRAFT_REQUIRE(init && !fin, "%s: \"%s\": MPI is not initialized (call MPI_Init first; Python: "
                  "from mpi4py import MPI)", fn, description);
    std::string rest = description;
    double timeout = graft::GraftIndexMPI::kDefaultTimeout;
    graft::mpi::Vote mine;
    try {
        GRAFT_REQUIRE(rest.compare(0, 4, "MPI,") == 0, "\"%s\" does not start with \"MPI,\"",
                      description);
        rest = rest.substr(4);
        if (rest.compare(0, 8, "timeout=") == 0) {
            const size_t comma = rest.find(',');
            const std::string value = rest.substr(8, comma == std::string::npos ? comma : comma - 8);
            char* end = nullptr;
            timeout = strtod(value.c_str(), &end);
            GRAFT_REQUIRE(!value.empty() && *end == 0 && timeout > 0 && timeout < 1e7,
                          "\"%s\": bad timeout '%s' (seconds > 0: \"MPI,timeout=30,GraftGraph\")",
                          description, value.c_str());
            rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
        }
        GRAFT_REQUIRE(rest.compare(0, 4, "MPI,") != 0, "\"%s\": MPI inside MPI", description);
        GRAFT_REQUIRE(!rest.empty(), "\"%s\": no local index after \"MPI,\" (\"MPI,GraftGraph,cpu\")",
                      description);
        mine.v[0] = (int64_t)graft::mpi::fnv1a(description, strlen(description));
        mine.v[1] = d;
        mine.v[2] = metric;
    } catch (const std::exception& e) {
        mine = graft::mpi::vote_of(e.what());
        timeout = graft::GraftIndexMPI::kDefaultTimeout;
    }
    // The same string, d and metric on every rank before any rank acts on them (gpu=local is
    // collective, and a rank that did not call it would leave the others waiting).
    std::string broken;
    std::vector<graft::mpi::Vote> votes = graft::mpi::agree(comm, mine, timeout, fn, &broken);
    graft::mpi::require_all_ok(votes, fn);
    graft::mpi::require_same(votes, 3, fn, "the description (its hash), d and metric");
    const size_t at = rest.find("gpu=local");
    if (at != std::string::npos) {
        const int dev = graft::local_gpu(comm, timeout);
        rest.replace(at, 9, dev >= 0 ? "gpu=" + std::to_string(dev) : std::string("cpu"));
    }
    std::unique_ptr<faiss::Index> local;
    mine = graft::mpi::Vote();
    FaissIndex* out = nullptr;
    if (faiss_graft_index_factory(&out, d, rest.c_str(), static_cast<FaissMetricType>(metric)))
        mine = graft::mpi::vote_of(faiss_get_last_error());
    local.reset(reinterpret_cast<faiss::Index*>(out));
    const std::string what = std::string(fn) + ": \"" + description + "\"";
    graft::mpi::require_all_ok(graft::mpi::agree(comm, mine, timeout, what.c_str(), &broken),
                               what.c_str());
    return new graft::GraftIndexMPI(local.release(), comm, timeout);
}

faiss::Index* make_mpi_world(int d, const char* description, faiss::MetricType metric) {
    return make_mpi(d, description, metric, MPI_COMM_WORLD);
}

// faiss_graft_index_factory learns "MPI," when this library loads.
const bool registered = (graft::register_factory_prefix("MPI", make_mpi_world), true);

graft::GraftIndexMPI* as_mpi(const FaissIndex* index, const char* fn) {
    auto* m = dynamic_cast<graft::GraftIndexMPI*>(
            const_cast<faiss::Index*>(reinterpret_cast<const faiss::Index*>(index)));
    GRAFT_REQUIRE(m, "%s: not an index across MPI ranks (\"MPI,...\")", fn);
    return m;
}

}  // namespace

extern "C" {

const int faiss_graft_mpi_linked = registered;

int faiss_graft_mpi_index_factory(FaissIndex** p_index, int d, const char* description,
                                  FaissMetricType metric, MPI_Comm comm) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index && description, "faiss_graft_mpi_index_factory: NULL argument");
        *p_index = reinterpret_cast<FaissIndex*>(
                make_mpi(d, description, static_cast<faiss::MetricType>(metric), comm));
        return 0;
    }
    CATCH_AND_HANDLE
}

FaissIndex* faiss_GraftIndexMPI_cast(FaissIndex* index) {
    (void)registered;
    return reinterpret_cast<FaissIndex*>(
            dynamic_cast<graft::GraftIndexMPI*>(reinterpret_cast<faiss::Index*>(index)));
}

int faiss_graft_mpi_add_local(FaissIndex* index, idx_t n, const float* x) {
    try {
        as_mpi(index, "faiss_graft_mpi_add_local")->add_local(n, x);
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_mpi_write_index_fname(const FaissIndex* index, const char* fname) {
    try {
        as_mpi(index, "faiss_graft_mpi_write_index_fname")->write(fname);
        return 0;
    }
    CATCH_AND_HANDLE
}

int faiss_graft_mpi_read_index_fname(const char* fname, const char* placement, MPI_Comm comm,
                                     double timeout, FaissIndex** p_out) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_out, "faiss_graft_mpi_read_index_fname: p_out is NULL");
        *p_out = reinterpret_cast<FaissIndex*>(graft::GraftIndexMPI::read(
                fname, comm, placement, timeout > 0 ? timeout : graft::GraftIndexMPI::kDefaultTimeout));
        return 0;
    }
    CATCH_AND_HANDLE
}

}  // extern "C"
