#include "mpi_deadline.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <faiss/impl/FaissAssert.h>

#include "graft_faiss_common.h"

namespace graft {
namespace mpi {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void throw_mpi(int rc, const std::string& what) {
    char text[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
    FAISS_THROW_FMT("%s%s%s", what.c_str(), rc != MPI_SUCCESS ? ": MPI error: " : "", text);
}

namespace {

// Collectives that timed out: MPI may still write into their buffers, so they are never freed.
std::mutex orphans_mu;
std::vector<std::unique_ptr<Pending>>& orphans() {
    static auto* list = new std::vector<std::unique_ptr<Pending>>();  // never destroyed either
    return *list;
}

}  // namespace

void abandon(std::unique_ptr<Pending>& p) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(orphans_mu);
    orphans().push_back(std::move(p));
}

bool test(std::unique_ptr<Pending>& p, double started_s, double timeout_s, const char* what,
          std::string* broken) {
    int done = 0;
    const int rc = MPI_Test(&p->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        *broken = std::string(what) + " failed in MPI";
        abandon(p);
        throw_mpi(rc, *broken);
    }
    if (done) return true;
    if (now_s() - started_s > timeout_s) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%s: no answer from every rank within the timeout of %g s (a rank died, "
                 "stopped or is still busy; the index is unusable now: end the job)",
                 what, timeout_s);
        *broken = msg;
        abandon(p);
        FAISS_THROW_MSG(msg);
    }
    return false;
}

void wait(std::unique_ptr<Pending>& p, double timeout_s, const char* what, std::string* broken) {
    const double t0 = now_s();
    while (!test(p, t0, timeout_s, what, broken)) {
        // MPI_Test also drives the collective's progress, so the first millisecond polls
        // without a pause (a small collective on a quiet network takes microseconds); after
        // that 50 us sleeps keep a long wait (a slower rank's build) off the core.
        if (now_s() - t0 > 1e-3) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

std::vector<Vote> agree(MPI_Comm comm, const Vote& mine, double timeout_s, const char* what,
                        std::string* broken) {
    int size = 1;
    MPI_Comm_size(comm, &size);
    auto p = std::make_unique<Pending>();
    p->send.resize(sizeof(Vote));
    p->recv.resize(sizeof(Vote) * size);
    memcpy(p->send.data(), &mine, sizeof(Vote));
    const int rc = MPI_Iallgather(p->send.data(), sizeof(Vote), MPI_BYTE, p->recv.data(),
                                  sizeof(Vote), MPI_BYTE, comm, &p->request);
    if (rc != MPI_SUCCESS) throw_mpi(rc, std::string(what) + ": MPI_Iallgather");
    wait(p, timeout_s, what, broken);
    std::vector<Vote> votes(size);
    memcpy(votes.data(), p->recv.data(), sizeof(Vote) * size);
    return votes;
}

void require_all_ok(const std::vector<Vote>& votes, const char* what) {
    for (size_t r = 0; r < votes.size(); r++)
        if (votes[r].failed) {
            std::string why(votes[r].why, strnlen(votes[r].why, sizeof votes[r].why));
            FAISS_THROW_FMT("%s: rank %zu: %s", what, r, why.c_str());
        }
}

// The votes' v[0..count) must be the same on every rank; throws naming the first that differs.
void require_same(const std::vector<mpi::Vote>& votes, int count, const char* what,
                  const char* names) {
    for (size_t r = 1; r < votes.size(); r++)
        for (int i = 0; i < count; i++)
            GRAFT_REQUIRE(votes[r].v[i] == votes[0].v[i],
                          "%s: the ranks disagree on %s: rank 0 has %lld, rank %zu %lld (field "
                          "%d; every rank must make the same call with the same arguments)",
                          what, names, (long long)votes[0].v[i], r, (long long)votes[r].v[i], i);
}

Vote vote_of(const char* why) {
    Vote v;
    if (why) {
        v.failed = 1;
        snprintf(v.why, sizeof v.why, "%s", why);
        if (!v.why[0]) snprintf(v.why, sizeof v.why, "failed");
    }
    return v;
}

uint64_t fnv1a(const void* data, size_t len, uint64_t h) {
    if (h == 0) h = 1469598103934665603ull;
    const unsigned char* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t fingerprint(int64_t n, int64_t d, const float* x) {
    int64_t shape[2] = {n, d};
    uint64_t h = fnv1a(shape, sizeof shape);
    if (!x || n <= 0) return h;
    const int64_t rows = n < 64 ? n : 64;
    for (int64_t j = 0; j < rows; j++) {
        const int64_t row = rows == 1 ? 0 : j * (n - 1) / (rows - 1);
        h = fnv1a(x + row * d, (size_t)d * sizeof(float), h);
    }
    return h;
}

}  // namespace mpi
}  // namespace graft
