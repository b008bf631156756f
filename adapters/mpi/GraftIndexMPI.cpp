#include "GraftIndexMPI.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <typeinfo>

#include <faiss/c_api/error_c.h>
#include <faiss/impl/IDSelector.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"

#include "graft_faiss_c.h"

namespace graft {

namespace {

// One query's k results as they travel in the merge: k ids, then k distances, padded to 8 bytes
// so that the next query's ids stay aligned.
size_t record_bytes(idx_t k) {
    return (size_t)k * sizeof(int64_t) + (size_t)(k + (k & 1)) * sizeof(float);
}

// The merge of two ranks' sorted lists of every query, as MPI's reduction operator (so that an
// allreduce merges along a tree: log2(R) steps, not R lists at one rank). It is GraftIndexShards's
// k-way merge taken two lists at a time: the better head first (best distance, ties to the
// smaller id), a list ending at its first -1. Ids differ across ranks, so the head of a merge is
// always the best of its inputs' heads, and any tree of these merges gives the k-way merge's
// output: the operator is commutative and associative, and every rank gets the same bytes.
template <bool L2>
void merge_records(void* in, void* inout, int* len, MPI_Datatype* type) {
    int bytes = 0;
    MPI_Type_size(*type, &bytes);
    const idx_t k = (idx_t)bytes / 12;  // record_bytes(k) is 12 k, or 12 k + 4 for odd k
    std::vector<int64_t> id(k);
    std::vector<float> dist(k);
    for (int q = 0; q < *len; q++) {
        char* a = static_cast<char*>(inout) + (size_t)q * bytes;
        const char* b = static_cast<const char*>(in) + (size_t)q * bytes;
        const int64_t* ia = reinterpret_cast<const int64_t*>(a);
        const int64_t* ib = reinterpret_cast<const int64_t*>(b);
        const float* da = reinterpret_cast<const float*>(a + k * sizeof(int64_t));
        const float* db = reinterpret_cast<const float*>(b + k * sizeof(int64_t));
        idx_t pa = 0, pb = 0;
        for (idx_t j = 0; j < k; j++) {
            const bool ha = pa < k && ia[pa] >= 0, hb = pb < k && ib[pb] >= 0;
            bool take_a = ha;
            if (ha && hb)
                take_a = (L2 ? da[pa] < db[pb] : da[pa] > db[pb]) ||
                         (da[pa] == db[pb] && ia[pa] < ib[pb]);
            if (take_a) {
                id[j] = ia[pa], dist[j] = da[pa++];
            } else if (hb) {
                id[j] = ib[pb], dist[j] = db[pb++];
            } else {
                id[j] = -1, dist[j] = L2 ? FLT_MAX : -FLT_MAX;
            }
        }
        memcpy(a, id.data(), k * sizeof(int64_t));
        memcpy(a + k * sizeof(int64_t), dist.data(), k * sizeof(float));
    }
}


// The first row of x holding NaN or Inf, or n.
idx_t first_nonfinite(idx_t n, idx_t d, const float* x) {
    for (idx_t i = 0; i < n; i++)
        for (idx_t j = 0; j < d; j++)
            if (!std::isfinite(x[i * d + j])) return i;
    return n;
}

}  // namespace

// Searches a pipelined call's chunks one after the other on a thread of its own, so that the
// calling thread (the one MPI lets call) keeps testing the merge in flight: Open MPI moves a
// nonblocking collective along only inside MPI calls, so a merge left alone while the caller's
// own thread searched would wait for the search to end, hiding nothing. The thread lives as long
// as the index: a thread a call would cost its creation and, on the CPU, a new OpenMP team.
class ChunkWorker {
   public:
    ~ChunkWorker() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // Searches chunks 0 .. chunks - 1 with search_chunk, stopping at the first that throws.
    void start(int chunks, std::function<void(int)> search_chunk) {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = std::move(search_chunk);
        chunks_ = chunks;
        finished_ = 0;
        errors_.assign(chunks, std::string());
        stop_ = false;
        busy_ = true;
        if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        cv_.notify_all();
    }
    bool done(int c) {
        std::lock_guard<std::mutex> lock(mu_);
        return finished_ > c || !busy_;
    }
    void wait(int c) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return finished_ > c || !busy_; });
    }
    // Chunk c's failure ("" when it went well; "not searched" after an earlier one failed).
    std::string error(int c) {
        std::lock_guard<std::mutex> lock(mu_);
        return finished_ > c ? errors_[c] : "not searched (an earlier chunk failed)";
    }
    // Stops after the chunk being searched and waits for it: the job's references end here.
    void finish() {
        std::unique_lock<std::mutex> lock(mu_);
        stop_ = true;
        cv_.wait(lock, [&] { return !busy_; });
        job_ = nullptr;
    }

   private:
    void run() {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            cv_.wait(lock, [&] { return quit_ || busy_; });
            if (quit_) return;
            for (int c = 0; c < chunks_ && !stop_; c++) {
                lock.unlock();
                std::string why;
                try {
                    job_(c);
                } catch (const std::exception& e) {
                    why = e.what()[0] ? e.what() : "failed";
                } catch (...) {
                    why = "failed (not a std::exception)";
                }
                lock.lock();
                errors_[c] = why;
                finished_ = c + 1;
                cv_.notify_all();
                if (!why.empty()) break;
            }
            busy_ = false;
            cv_.notify_all();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::function<void(int)> job_;
    int chunks_ = 0, finished_ = 0;
    std::vector<std::string> errors_;
    bool busy_ = false, stop_ = false, quit_ = false;
    std::thread thread_;
};

int GraftIndexMPI::chunks_for(idx_t n, int ranks) {
    if (ranks < 2 || n < 1) return 1;
    // The model's inputs (docs/mpi.md): a local call's fixed cost, its last wave's walk (0.7 ms
    // at L = 32 to 1.1 ms at L = 192 on an H100, bench/RESULTS.md), and the merge's time a query
    // a step (95 ns measured on the H200 with 2 ranks on one GPU, 20-25 ns between two quiet
    // processes). A chunk smaller than two waves (2 x 2,640 queries on an H100/H200) would also
    // leave the local call's own two-stream pipeline idle, and under half a wave change the walk.
    constexpr double kLocalCallFixedS = 0.8e-3, kMergeStepS = 50e-9;
    constexpr double kTwoWaves = 5280;
    const double steps = std::ceil(std::log2((double)ranks));
    const double breakeven = std::max(kTwoWaves, kLocalCallFixedS / (kMergeStepS * steps));
    // Each chunk past the first gains (m c - t) for chunks of m queries, merge time c a query and
    // fixed cost t: (C - 1)(n c / C - t), largest at C = sqrt(n c / t) = sqrt(n / breakeven).
    const double best = std::floor(std::sqrt((double)n / breakeven));
    return (int)std::min<double>(std::max(best, 1.0), kMaxAutoChunks);
}

GraftIndexMPI::GraftIndexMPI(faiss::Index* local_index, MPI_Comm comm, double timeout_s)
        : faiss::Index(local_index ? local_index->d : 0,
                       local_index ? local_index->metric_type : faiss::METRIC_L2),
          local(local_index),
          timeout(timeout_s) {
    std::unique_ptr<faiss::Index> guard(local_index);  // deleted if the constructor throws
    const char* fn = "GraftIndexMPI";
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    GRAFT_REQUIRE(init && !fin,
                  "%s: MPI is not initialized (call MPI_Init first; Python: from mpi4py import MPI)",
                  fn);
    GRAFT_REQUIRE(timeout_s > 0, "%s: timeout %g s (> 0)", fn, timeout_s);
    auto dup = std::make_unique<mpi::Pending>();
    int rc = MPI_Comm_idup(comm, &comm_, &dup->request);
    if (rc != MPI_SUCCESS) mpi::throw_mpi(rc, std::string(fn) + ": MPI_Comm_idup");
    mpi::wait(dup, timeout, fn, &broken_);
    // A constructor that throws from here on frees the duplicate (unless a collective on it never
    // completed: that one is left to MPI, as in the destructor).
    struct FreeComm {
        GraftIndexMPI* self;
        ~FreeComm() {
            if (self && self->broken_.empty()) MPI_Comm_free(&self->comm_);
        }
    } free_comm{this};
    // Errors on this index's communicator come back as codes (a FaissException), not an abort.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm_size(comm_, &ranks);
    mpi::Vote mine = mpi::vote_of(local_index ? nullptr : "no local index");
    if (local_index) {
        mine.v[0] = local_index->d;
        mine.v[1] = local_index->metric_type;
        mine.v[2] = local_index->ntotal;
    }
    std::vector<mpi::Vote> votes = agree(mine, fn);
    mpi::require_all_ok(votes, fn);
    mpi::require_same(votes, 2, fn, "the local indexes' (d, metric)");
    // Vectors the local indexes hold already (wrapped after the fact): ids in rank order.
    for (int r = 0; r < ranks; r++) {
        if (r == rank && votes[r].v[2] > 0) runs_.push_back({0, next_id_});
        next_id_ += votes[r].v[2];
    }
    ntotal = next_id_;
    is_trained = local_index->is_trained;
    rc = MPI_Op_create(metric_type == faiss::METRIC_L2 ? merge_records<true> : merge_records<false>,
                       /*commute=*/1, &merge_op_);
    if (rc != MPI_SUCCESS) mpi::throw_mpi(rc, std::string(fn) + ": MPI_Op_create");
    guard.release();
    free_comm.self = nullptr;
}

GraftIndexMPI::~GraftIndexMPI() {
    worker_.reset();  // idle between calls: its thread ends at once
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {  // after MPI_Finalize (Python's exit) MPI may not be called; the OS frees it all
        if (merge_op_ != MPI_OP_NULL) MPI_Op_free(&merge_op_);
        // A communicator with a collective that never completed (broken_) is left to MPI.
        if (comm_ != MPI_COMM_NULL && broken_.empty()) MPI_Comm_free(&comm_);
    }
    delete local;
}

void GraftIndexMPI::require_usable() const {
    GRAFT_REQUIRE(broken_.empty(), "GraftIndexMPI: unusable since an earlier call failed: %s",
                  broken_.c_str());
}

std::vector<mpi::Vote> GraftIndexMPI::agree(const mpi::Vote& mine, const char* what) const {
    return mpi::agree(comm_, mine, timeout, what, &broken_);
}

std::vector<mpi::Vote> GraftIndexMPI::vote(const char* fn, const std::function<void(mpi::Vote&)>& step) const {
    mpi::Vote mine;
    try {
        step(mine);
    } catch (const std::exception& e) {
        mine = mpi::vote_of(e.what());
    }
    return agree(mine, fn);
}

void GraftIndexMPI::train(idx_t n, const float* x) {
    const char* fn = "GraftIndexMPI::train";
    require_usable();
    std::vector<mpi::Vote> votes = vote(fn, [&](mpi::Vote& mine) {
        GRAFT_REQUIRE(n > 0 && x, "n = %lld, x %s", (long long)n, x ? "given" : "NULL");
        mine.v[0] = n;
        mine.v[1] = (int64_t)mpi::fingerprint(n, d, x);
    });
    mpi::require_all_ok(votes, fn);
    mpi::require_same(votes, 2, fn, "the training set (n, fingerprint)");
    votes = vote(fn, [&](mpi::Vote&) { local->train(n, x); });
    is_trained = true;
    for (const mpi::Vote& v : votes) is_trained = is_trained && !v.failed;
    mpi::require_all_ok(votes, fn);
}

// The local add, then the ranks' word on it: a failure after every rank's checks passed leaves
// the ranks' parts unequal, so the index is unusable from then on.
void GraftIndexMPI::add_agreed(const char* fn, idx_t n, const float* x) {
    const std::vector<mpi::Vote> votes = vote(fn, [&](mpi::Vote&) {
        if (n > 0) local->add(n, x);
    });
    for (const mpi::Vote& v : votes)
        if (v.failed) broken_ = "an add failed on some ranks after it passed every rank's checks";
    mpi::require_all_ok(votes, fn);
}

void GraftIndexMPI::add_with_ids(idx_t n, const float* x, const idx_t* xids) {
    const char* fn = "GraftIndexMPI::add";
    require_usable();
    const idx_t i0 = (idx_t)rank * n / ranks, i1 = (idx_t)(rank + 1) * n / ranks;
    const std::vector<mpi::Vote> votes = vote(fn, [&](mpi::Vote& mine) {
        GRAFT_REQUIRE(!xids, "%s", "ids of your own: wrap the index in IndexIDMap (ids are numbered in "
                             "add order across the ranks)");
        GRAFT_REQUIRE(n >= 0 && (n == 0 || x), "n = %lld, x %s", (long long)n, x ? "given" : "NULL");
        GRAFT_REQUIRE(local->is_trained, "%s", "the local index is not trained (train first)");
        const idx_t bad = first_nonfinite(i1 - i0, d, x + i0 * d);
        GRAFT_REQUIRE(bad == i1 - i0, "vector %lld holds NaN or Inf; nothing was added on any rank",
                      (long long)(i0 + bad));
        mine.v[0] = n;
        mine.v[1] = (int64_t)mpi::fingerprint(n, d, x);
    });
    mpi::require_all_ok(votes, fn);
    mpi::require_same(votes, 2, fn, "the batch to add (n, fingerprint)");
    const idx_t before = local->ntotal;
    add_agreed(fn, i1 - i0, x + i0 * d);
    if (i1 > i0) runs_.push_back({before, next_id_ + i0});
    next_id_ += n;
    ntotal = next_id_;
}

void GraftIndexMPI::add_local(idx_t n_local, const float* x_local) {
    const char* fn = "GraftIndexMPI::add_local";
    require_usable();
    const std::vector<mpi::Vote> votes = vote(fn, [&](mpi::Vote& mine) {
        GRAFT_REQUIRE(n_local >= 0 && (n_local == 0 || x_local), "n = %lld, x %s",
                      (long long)n_local, x_local ? "given" : "NULL");
        GRAFT_REQUIRE(local->is_trained, "%s", "the local index is not trained (train first)");
        const idx_t bad = first_nonfinite(n_local, d, x_local);
        GRAFT_REQUIRE(bad == n_local,
                      "this rank's vector %lld holds NaN or Inf; nothing was added on any rank",
                      (long long)bad);
        mine.v[0] = n_local;
    });
    mpi::require_all_ok(votes, fn);
    const idx_t before = local->ntotal;
    add_agreed(fn, n_local, x_local);
    idx_t offset = next_id_;
    for (int r = 0; r < rank; r++) offset += votes[r].v[0];
    if (n_local > 0) runs_.push_back({before, offset});
    for (const mpi::Vote& v : votes) next_id_ += v.v[0];
    ntotal = next_id_;
}

void GraftIndexMPI::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                           const faiss::SearchParameters* params) const {
    const char* fn = "GraftIndexMPI::search";
    require_usable();
    const size_t rb = record_bytes(k > 0 ? k : 1);
    const double t_call = mpi::now_s();
    last_local_s_ = last_wait_s_ = last_merge_s_ = last_total_s_ = 0;
    last_chunks_ = 0;
    // This rank's word on the whole call; every chunk's agreement repeats it, so that ranks
    // disagreeing on the call stop at the first one, before any merge.
    mpi::Vote call;
    int chunks = 1;
    std::unique_ptr<faiss::SearchParameters> own;
    RunSelector sel;
    try {
        GRAFT_REQUIRE(k > 0, "k = %lld (k >= 1)", (long long)k);
        GRAFT_REQUIRE(n >= 0 && n <= INT_MAX && (n == 0 || (x && distances && labels)),
                      "n = %lld (0 <= n < 2^31), x, distances and labels given", (long long)n);
        // A selector sees global ids: each rank's copy of params asks it through its id runs.
        if (params && params->sel) {
            own = clone_search_params(params, fn);
            sel.global = params->sel;
            sel.runs = &runs_;
            own->sel = &sel;
            params = own.get();
        }
        chunks = merge_chunks > 0 ? (int)std::min<idx_t>(merge_chunks, std::max<idx_t>(n, 1))
                                  : chunks_for(n, ranks);
        call.v[0] = n;
        call.v[1] = k;
        call.v[2] = (int64_t)mpi::fingerprint(n, d, x);
        call.v[3] = chunks;
    } catch (const std::exception& e) {
        call = mpi::vote_of(e.what());
        chunks = 1;
    }
    last_chunks_ = chunks;
    auto chunk_begin = [&](int c) { return (idx_t)c * n / chunks; };

    // One merge a chunk, each its own buffers. A merge started and not completed when the call
    // throws is handed to MPI's keeping (abandon): its buffers must outlive it.
    std::vector<std::unique_ptr<mpi::Pending>> merges(chunks);
    for (auto& m : merges) m = std::make_unique<mpi::Pending>();
    int started = 0, unpacked = 0;  // merges [unpacked, started) are in flight
    std::vector<double> started_at(chunks, 0), local_s(chunks, 0);
    struct AbandonInFlight {
        std::vector<std::unique_ptr<mpi::Pending>>& merges;
        const int& unpacked;
        const int& started;
        ~AbandonInFlight() {
            for (int c = unpacked; c < started; c++) mpi::abandon(merges[c]);
        }
    } abandon_in_flight{merges, unpacked, started};

    // Chunk c's local search, its ids made global, in records for the merge. The local results
    // go through the caller's arrays, which the merge's results then overwrite.
    auto search_chunk = [&](int c) {
        const double t0 = mpi::now_s();
        const idx_t q0 = chunk_begin(c), m = chunk_begin(c + 1) - q0;
        float* D = distances + q0 * k;
        idx_t* I = labels + q0 * k;
        local->search(m, x + q0 * d, k, D, I, params);
        mpi::Pending& p = *merges[c];
        p.send.resize(rb * m);
        p.recv.resize(rb * m);
        for (idx_t q = 0; q < m; q++) {
            char* r = p.send.data() + q * rb;
            int64_t* ids = reinterpret_cast<int64_t*>(r);
            for (idx_t j = 0; j < k; j++) ids[j] = run_global(runs_, I[q * k + j]);
            memcpy(r + k * sizeof(int64_t), D + q * k, k * sizeof(float));
        }
        local_s[c] = mpi::now_s() - t0;
    };
    auto unpack = [&](int c) {
        const idx_t q0 = chunk_begin(c), m = chunk_begin(c + 1) - q0;
        const char* recv = merges[c]->recv.data();
        for (idx_t q = 0; q < m; q++) {
            const char* r = recv + q * rb;
            memcpy(labels + (q0 + q) * k, r, k * sizeof(int64_t));
            memcpy(distances + (q0 + q) * k, r + k * sizeof(int64_t), k * sizeof(float));
        }
    };
    // The oldest merge in flight, waited for (the time the call could not hide), and unpacked.
    auto finish_oldest = [&] {
        const double t0 = mpi::now_s();
        mpi::wait(merges[unpacked], timeout, fn, &broken_);
        unpack(unpacked++);
        last_merge_s_ += mpi::now_s() - t0;
    };

    MPI_Datatype record = MPI_DATATYPE_NULL;
    struct FreeType {
        MPI_Datatype& t;
        ~FreeType() {  // MPI keeps it alive until the merges that use it complete
            if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
        }
    } free_type{record};
    // One chunk: searched on this thread, as before pipelining. Several: on the worker, which
    // runs ahead of the agreements and merges below (declared last: it stops first on a throw,
    // before the buffers its chunks write into go).
    struct FinishWorker {
        ChunkWorker* w = nullptr;
        ~FinishWorker() {
            if (w) w->finish();
        }
    } finish_worker;
    if (!call.failed && n > 0) {
        if (chunks == 1) {
            try {
                search_chunk(0);
            } catch (const std::exception& e) {
                call = mpi::vote_of(e.what());
            }
        } else {
            if (!worker_) worker_ = std::make_unique<ChunkWorker>();
            worker_->start(chunks, search_chunk);
            finish_worker.w = worker_.get();
        }
    }

    for (int c = 0; c < chunks; c++) {
        mpi::Vote mine = call;
        if (finish_worker.w) {
            // While chunk c is searched, the merge in flight moves on (MPI_Test) and is unpacked
            // when it completes; once none is in flight, a plain wait for the worker.
            const double t0 = mpi::now_s();
            while (!finish_worker.w->done(c)) {
                if (unpacked == started) {
                    finish_worker.w->wait(c);
                    break;
                }
                if (mpi::test(merges[unpacked], started_at[unpacked], timeout, fn, &broken_)) {
                    unpack(unpacked++);
                    continue;
                }
                // The first millisecond polls without a pause; then 50 us sleeps leave the
                // core to a CPU search.
                if (mpi::now_s() - t0 > 1e-3)
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
            const std::string why = finish_worker.w->error(c);
            if (!why.empty()) mine = mpi::vote_of(why.c_str());
        }
        mine.v[4] = c;
        const double t0 = mpi::now_s();
        std::vector<mpi::Vote> votes = agree(mine, fn);
        last_wait_s_ += mpi::now_s() - t0;
        bool all_ok = true;
        for (int r = 0; r < ranks; r++)
            for (int i = 0; i < 5; i++)
                all_ok = all_ok && !votes[r].failed && votes[r].v[i] == votes[0].v[i];
        if (!all_ok) {
            // Every rank stops here: the merges every rank started complete first, so that no
            // rank is left in one and the index stays usable.
            while (unpacked < started) finish_oldest();
            mpi::require_all_ok(votes, fn);
            mpi::require_same(votes, 5, fn,
                              "the search (n, k, the queries' fingerprint, chunks, chunk)");
        }
        if (n == 0) break;
        if (record == MPI_DATATYPE_NULL) {
            MPI_Type_contiguous((int)rb, MPI_BYTE, &record);
            MPI_Type_commit(&record);
        }
        const idx_t m = chunk_begin(c + 1) - chunk_begin(c);
        mpi::Pending& p = *merges[c];
        const int rc = MPI_Iallreduce(p.send.data(), p.recv.data(), (int)m, record, merge_op_, comm_,
                                      &p.request);
        if (rc != MPI_SUCCESS) {
            broken_ = "MPI_Iallreduce failed";
            mpi::throw_mpi(rc, std::string(fn) + ": MPI_Iallreduce");
        }
        started_at[c] = mpi::now_s();
        started = c + 1;
        // At most two merges in flight: the older one is done before the next chunk's turn.
        while (started - unpacked > 1) finish_oldest();
    }
    while (unpacked < started) finish_oldest();
    for (double s : local_s) last_local_s_ += s;
    last_total_s_ = mpi::now_s() - t_call;
}

void GraftIndexMPI::reset() {
    const char* fn = "GraftIndexMPI::reset";
    require_usable();
    const std::vector<mpi::Vote> votes = vote(fn, [&](mpi::Vote&) { local->reset(); });
    runs_.clear();
    next_id_ = 0;
    ntotal = 0;
    for (const mpi::Vote& v : votes)
        if (v.failed) broken_ = "a reset failed on some ranks";
    mpi::require_all_ok(votes, fn);
}

void GraftIndexMPI::set_param(const char* name, double value) {
    GRAFT_REQUIRE(name, "%s", "GraftIndexMPI::set_param: name is NULL");
    const std::string n = name;
    if (n == "timeout") {
        GRAFT_REQUIRE(value > 0 && std::isfinite(value), "GraftIndexMPI: timeout %g s (> 0)", value);
        timeout = value;
        return;
    }
    GRAFT_REQUIRE(n != "rank" && n != "ranks" && n != "local_ntotal" && n.compare(0, 5, "last_") != 0,
                  "GraftIndexMPI: \"%s\" is read-only", name);
    // Collective, so that the local indexes keep equal parameters: a value one rank refuses is
    // refused on every rank, and the ranks that took it go back to what they had.
    const char* fn = "GraftIndexMPI::set_param";
    require_usable();
    if (n == "merge_chunks") {
        mpi::Vote mine;
        try {
            GRAFT_REQUIRE(value >= 0 && value <= kMaxChunks && value == std::floor(value),
                          "merge_chunks %g (0 = automatic, 1 = no pipelining, up to %d)", value,
                          kMaxChunks);
        } catch (const std::exception& e) {
            mine = mpi::vote_of(e.what());
        }
        mine.v[0] = (int64_t)mpi::fnv1a(name, n.size());
        memcpy(&mine.v[1], &value, sizeof value);
        std::vector<mpi::Vote> votes = agree(mine, fn);
        mpi::require_all_ok(votes, fn);
        mpi::require_same(votes, 2, fn, "the parameter (its name's hash, its value's bits)");
        merge_chunks = (int)value;
        return;
    }
    FaissIndex* li = reinterpret_cast<FaissIndex*>(local);
    double before = 0;
    const bool restorable = faiss_graft_get_param(li, name, &before) == 0;
    mpi::Vote mine;
    if (faiss_graft_set_param(li, name, value)) mine = mpi::vote_of(faiss_get_last_error());
    const bool applied = !mine.failed;
    mine.v[0] = (int64_t)mpi::fnv1a(name, n.size());
    memcpy(&mine.v[1], &value, sizeof value);
    std::vector<mpi::Vote> votes = agree(mine, fn);
    try {
        mpi::require_all_ok(votes, fn);
        mpi::require_same(votes, 2, fn, "the parameter (its name's hash, its value's bits)");
    } catch (...) {
        if (applied && restorable) faiss_graft_set_param(li, name, before);
        throw;
    }
}

double GraftIndexMPI::get_param(const char* name) const {
    GRAFT_REQUIRE(name, "%s", "GraftIndexMPI::get_param: name is NULL");
    const std::string n = name;
    if (n == "timeout") return timeout;
    if (n == "rank") return rank;
    if (n == "ranks") return ranks;
    if (n == "local_ntotal") return (double)local->ntotal;
    if (n == "last_local_s") return last_local_s_;
    if (n == "last_wait_s") return last_wait_s_;
    if (n == "last_merge_s") return last_merge_s_;
    if (n == "last_total_s") return last_total_s_;
    if (n == "last_chunks") return last_chunks_;
    if (n == "merge_chunks") return merge_chunks;
    double v = 0;
    if (faiss_graft_get_param(reinterpret_cast<FaissIndex*>(local), name, &v))
        FAISS_THROW_FMT("GraftIndexMPI (rank %d's local index): %s", rank, faiss_get_last_error());
    return v;
}

int local_gpu(MPI_Comm comm, double timeout_s) {
    const char* fn = "GraftIndexMPI: gpu=local";
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0, rank = 0;
    MPI_Get_processor_name(host, &len);
    MPI_Comm_rank(comm, &rank);
    mpi::Vote mine;
    mine.v[0] = (int64_t)mpi::fnv1a(host, (size_t)len);
    std::string broken;
    std::vector<mpi::Vote> votes = mpi::agree(comm, mine, timeout_s, fn, &broken);
    int local_rank = 0;
    for (int r = 0; r < rank; r++) local_rank += votes[r].v[0] == mine.v[0];
    const int gpus = graft_gpu_count();
    return gpus > 0 ? local_rank % gpus : -1;
}

}  // namespace graft
