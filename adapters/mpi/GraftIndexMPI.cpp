#include "GraftIndexMPI.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
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
    const double t0 = mpi::now_s();
    std::unique_ptr<mpi::Pending> p = std::make_unique<mpi::Pending>();
    mpi::Vote mine;
    try {
        GRAFT_REQUIRE(k > 0, "k = %lld (k >= 1)", (long long)k);
        GRAFT_REQUIRE(n >= 0 && n <= INT_MAX && (n == 0 || (x && distances && labels)),
                      "n = %lld (0 <= n < 2^31), x, distances and labels given", (long long)n);
        // A selector sees global ids: each rank's copy of params asks it through its id runs.
        std::unique_ptr<faiss::SearchParameters> own;
        RunSelector sel;
        if (params && params->sel) {
            own = clone_search_params(params, fn);
            sel.global = params->sel;
            sel.runs = &runs_;
            own->sel = &sel;
            params = own.get();
        }
        mine.v[0] = n;
        mine.v[1] = k;
        mine.v[2] = (int64_t)mpi::fingerprint(n, d, x);
        if (n > 0) {
            // The local results go straight into the caller's arrays, then into records.
            local->search(n, x, k, distances, labels, params);
            p->send.resize(rb * n);
            p->recv.resize(rb * n);
            for (idx_t q = 0; q < n; q++) {
                char* r = p->send.data() + q * rb;
                int64_t* ids = reinterpret_cast<int64_t*>(r);
                for (idx_t j = 0; j < k; j++) ids[j] = run_global(runs_, labels[q * k + j]);
                memcpy(r + k * sizeof(int64_t), distances + q * k, k * sizeof(float));
            }
        }
    } catch (const std::exception& e) {
        mine = mpi::vote_of(e.what());
    }
    const double t1 = mpi::now_s();
    std::vector<mpi::Vote> votes = agree(mine, fn);
    mpi::require_all_ok(votes, fn);
    mpi::require_same(votes, 3, fn, "the search (n, k, the queries' fingerprint)");
    const double t2 = mpi::now_s();
    last_local_s_ = t1 - t0;
    last_wait_s_ = t2 - t1;
    last_merge_s_ = 0;
    if (n == 0) return;
    MPI_Datatype record;
    MPI_Type_contiguous((int)rb, MPI_BYTE, &record);
    MPI_Type_commit(&record);
    const int rc = MPI_Iallreduce(p->send.data(), p->recv.data(), (int)n, record, merge_op_,
                                  comm_, &p->request);
    MPI_Type_free(&record);  // MPI keeps it alive until the reduction completes
    if (rc != MPI_SUCCESS) {
        broken_ = "MPI_Iallreduce failed";
        mpi::throw_mpi(rc, std::string(fn) + ": MPI_Iallreduce");
    }
    mpi::wait(p, timeout, fn, &broken_);
    for (idx_t q = 0; q < n; q++) {
        const char* r = p->recv.data() + q * rb;
        memcpy(labels + q * k, r, k * sizeof(int64_t));
        memcpy(distances + q * k, r + k * sizeof(int64_t), k * sizeof(float));
    }
    last_merge_s_ = mpi::now_s() - t2;
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
