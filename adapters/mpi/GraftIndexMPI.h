// One index across MPI ranks (issue 49): a faiss::Index over one local index a rank (any graft
// or FAISS index, on the rank's GPUs or CPU), composed as GraftIndexShards composes per-GPU
// indexes: each rank is a shard, ids are global, a search's top k are merged across ranks.
//
// SPMD: every rank calls the same operations, in the same order, with the same arguments (the
// same batch to add, the same queries); each operation is collective over the communicator, and
// every rank gets the whole result. One call at a time on an index (collectives must come in the
// same order everywhere), made from a thread MPI allows to call (MPI_THREAD_SERIALIZED or above
// when it is not the main thread). docs/mpi.md has the contract, the fault model and the scaling
// model; the factory string is "MPI,<local description>" (graft_mpi_c.h).
//
// Bounded time: every collective is nonblocking with a deadline (`timeout` seconds, settable):
// a rank that died or stopped answering makes the others throw within it, and the index is then
// unusable (every later call throws at once). Agreement: every operation first gathers every
// rank's word on its input (sizes, a fingerprint of the data, local checks), so that bad input
// on one rank is the same FaissException on every rank, and nothing was changed anywhere.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <faiss/Index.h>

#include "GraftIndexShards.h"  // IdRun
#include "mpi_deadline.h"
#include "graft_faiss_common.h"

namespace graft {

class ChunkWorker;  // GraftIndexMPI.cpp

struct GraftIndexMPI : faiss::Index, NamedParameters {
    // Collective: every rank of comm calls it with its own local index (taken over, deleted with
    // this index), of the same dimension and metric everywhere (checked). comm is duplicated, so
    // that graft's messages never mix with the caller's. MPI must be initialized (Python: import
    // mpi4py's MPI first).
    GraftIndexMPI(faiss::Index* local, MPI_Comm comm, double timeout_s = kDefaultTimeout);
    ~GraftIndexMPI() override;

    // Every rank trains its local index on the same x (a graph + PQ index: its codebooks).
    void train(idx_t n, const float* x) override;
    // Every rank passes the same batch (checked by its size and a fingerprint); rank r keeps rows
    // [r n / R, (r + 1) n / R), FAISS IndexShards' rule, and vector i gets id ntotal + i. xids are
    // refused (wrap the index in IndexIDMap for ids of your own). The parts are checked (NaN/Inf)
    // on every rank before any rank adds: a bad row anywhere adds nothing anywhere.
    void add_with_ids(idx_t n, const float* x, const idx_t* xids) override;
    void add(idx_t n, const float* x) override { add_with_ids(n, x, nullptr); }
    // Each rank adds its own n_r rows (they may differ, 0 too): the data already spread over the
    // machines. Ids follow in rank order: rank r's row i gets ntotal + n_0 + ... + n_{r-1} + i,
    // the ids one index adding the ranks' parts one after the other would give.
    void add_local(idx_t n_local, const float* x_local);
    // Every rank passes the same queries; each searches its part, and the k best of every query
    // are merged across ranks (best distance first, ties to the smaller id: GraftIndexShards's
    // order, so the results equal one process's shards over the same parts) and returned on every
    // rank. params go to each local index (graft's SearchParameters or a plain one); their
    // selector sees the index's global ids. A large batch is pipelined: split into chunks
    // (merge_chunks, chunks_for), chunk c + 1 is searched while chunk c's merge is in flight;
    // the results are the same bytes as one chunk's (the merge is per query).
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    void reset() override;

    // "timeout" (seconds a collective may wait, > 0), "merge_chunks" (the search's chunks: 0 =
    // chunks_for's rule, 1 = no pipelining, N = N chunks, at most one a query), "rank", "ranks",
    // "local_ntotal" (read-only) and the last search on this rank (read-only; seconds summed over
    // its chunks): "last_chunks" (the chunks it used), "last_local_s" (the local searches),
    // "last_wait_s" (the agreements: the wait for the slowest rank, plus one small allgather a
    // chunk), "last_merge_s" (the merges the call waited for: network and merge operator, less
    // what the next chunk's local search hid), "last_total_s" (the whole call; with several
    // chunks it is less than the three phases' sum, which overlap) are this index's; any other
    // name goes to the local index (faiss_graft_set_param on it). set_param of those is
    // collective (every rank, the same name and value; one rank's refusal is every rank's, the
    // others going back to their value); "timeout" and get_param are this rank's.
    void set_param(const char* name, double value) override;
    double get_param(const char* name) const override;

    // Collective: rank r writes its part to "<fname>.rank<r>" (a GRFTMPIR header: the rank count,
    // this rank, the ids; then the local index's own record, faiss_graft_write_index). Fails on
    // every rank when one rank's write fails.
    void write(const char* fname) const;
    // Collective: reads what write() wrote, on as many ranks as wrote it (checked). placement as
    // faiss_graft_read_index_placed's ("" as written, "cpu", "gpu=N"), after "gpu=local" is made
    // this rank's GPU.
    static GraftIndexMPI* read(const char* fname, MPI_Comm comm, const char* placement,
                               double timeout_s = kDefaultTimeout);

    // The search's chunks by the automatic rule for a batch of n queries over `ranks` ranks:
    // sqrt(n / m0) (at most kMaxAutoChunks), m0 the break-even chunk, at which a chunk's merge
    // (hidden behind the next chunk's search) takes as long as the extra local call costs (its
    // last wave's walk): 0.8 ms / (50 ns x log2 R steps), at least two waves of the GPU. 1 below
    // 4 m0 (64k queries on 2 ranks). docs/mpi.md, "The pipelined merge", has the model.
    static int chunks_for(idx_t n, int ranks);
    static constexpr int kMaxAutoChunks = 8;
    static constexpr int kMaxChunks = 4096;  // merge_chunks's largest

    faiss::Index* local = nullptr;  // this rank's part (owned)
    int rank = 0, ranks = 1;
    double timeout = kDefaultTimeout;
    // Long enough for the slowest rank's graph build, which the first search after adds waits for.
    static constexpr double kDefaultTimeout = 600;
    // 0: chunks_for's rule; N >= 1: N chunks (1: no pipelining). Set it with set_param (collective):
    // ranks with different values fail their next search (checked before any merge).
    int merge_chunks = 0;

   private:
    void require_usable() const;
    std::vector<mpi::Vote> agree(const mpi::Vote& mine, const char* what) const;
    // One collective step: `step` fills this rank's vote (a throw is this rank's failure, its
    // message carried to every rank), then every rank's votes (agree).
    std::vector<mpi::Vote> vote(const char* fn, const std::function<void(mpi::Vote&)>& step) const;
    void add_agreed(const char* fn, idx_t n, const float* x);

    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Op merge_op_ = MPI_OP_NULL;
    std::vector<IdRun> runs_;  // this rank's local ids -> global ids (one run per add)
    idx_t next_id_ = 0;
    mutable double last_local_s_ = 0, last_wait_s_ = 0, last_merge_s_ = 0, last_total_s_ = 0;
    mutable int last_chunks_ = 0;
    mutable std::string broken_;  // why the communicator is unusable ("" while it is fine)
    // The thread that searches a pipelined call's chunks, kept from one search to the next.
    mutable std::unique_ptr<ChunkWorker> worker_;
};

// This rank's GPU among the visible ones, by its place among the ranks of its host: local rank
// mod device count (-1 when none is visible). Collective over comm.
int local_gpu(MPI_Comm comm, double timeout_s);

}  // namespace graft
