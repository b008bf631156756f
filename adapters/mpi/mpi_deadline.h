// MPI collectives that end in bounded time (issue 49). Every collective GraftIndexMPI makes is a
// nonblocking one, polled until it completes or its deadline passes: a rank that died or stopped
// answering then costs the others `timeout` seconds and a FaissException, never a hang. Blocking
// MPI calls (MPI_Allgather, MPI_Barrier) would wait forever for a rank that never comes.
//
// A collective that timed out cannot be cancelled (MPI has no cancel for collectives): its
// request and buffers stay with MPI, so they are handed over to a list that is never freed
// (a late message must not land in freed memory), and the communicator is unusable after it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace graft {
namespace mpi {

// Seconds on a monotonic clock.
double now_s();

// FAISS's exception with `what` and, for an MPI error code, MPI's own text.
[[noreturn]] void throw_mpi(int rc, const std::string& what);

// Buffers of one collective in flight; owned by MPI until its request completes.
struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<char> send, recv;
};

// Waits for p's collective to complete on this rank. Throws (naming `what` and the timeout) when
// `timeout_s` passes first or MPI fails; p then moves to a list kept alive forever (see above),
// and *broken says why, so that the caller's later calls fail at once.
void wait(std::unique_ptr<Pending>& p, double timeout_s, const char* what, std::string* broken);

// One look at p's collective (MPI_Test, which also moves it along): true when it completed on
// this rank. Throws as wait() does when MPI fails or `timeout_s` has passed since `started_s`
// (now_s()'s clock) without it completing. For a caller with other work between the looks.
bool test(std::unique_ptr<Pending>& p, double started_s, double timeout_s, const char* what,
          std::string* broken);

// Hands p, a collective in flight that nobody will wait for (its caller is throwing), to the
// list kept alive forever: MPI may still write into its buffers.
void abandon(std::unique_ptr<Pending>& p);

// One rank's word in an agreement: whether its part of an operation can go on (or went well),
// the numbers its input has (n, k, a fingerprint of the data, ...) and, on failure, why.
struct Vote {
    int64_t failed = 0;  // 0: fine
    int64_t v[6] = {0, 0, 0, 0, 0, 0};
    char why[208] = {0};
};

// Every rank's vote (an allgather with a deadline), the same on every rank. An operation asks
// for them before it changes anything and after its local part, so that bad input on one rank
// is an error on every rank (the same message everywhere, naming the rank) and no rank is left
// waiting in a collective the others never enter.
std::vector<Vote> agree(MPI_Comm comm, const Vote& mine, double timeout_s, const char* what,
                        std::string* broken);

// Throws on every rank when any vote failed: "<what>: rank r: <why>" for the lowest such rank.
void require_all_ok(const std::vector<Vote>& votes, const char* what);

// Throws on every rank unless every vote's v[0..count) is rank 0's, naming the first that
// differs and `names` (what the fields are).
void require_same(const std::vector<Vote>& votes, int count, const char* what, const char* names);

// A vote from an exception's message (failed) or none (ok).
Vote vote_of(const char* why);

// FNV-1a over bytes, continuing from h (0 starts afresh).
uint64_t fnv1a(const void* data, size_t len, uint64_t h = 0);

// A fingerprint of n rows of d floats: n, d and up to 64 rows spread over them, so that ranks
// handed different batches (where they must pass the same) are caught at the cost of 64 rows.
uint64_t fingerprint(int64_t n, int64_t d, const float* x);

}  // namespace mpi
}  // namespace graft
