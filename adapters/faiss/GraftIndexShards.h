// graft indexes spread over several devices (issue 25): FAISS's IndexShards / IndexReplicas with
// what graft's indexes need on top. Made by the factory's ",gpus=LIST" / ",shards=N" options
// (",replicas" for GraftIndexReplicas) and read back from a GRFTSHRD record (graft_io.cpp);
// FAISS's own IndexShards over graft indexes works too, without the extras below.
//
// Both run every shard's add, train, build and search on its own thread at once (FAISS's threaded
// ThreadedIndex: one persistent WorkerThread per shard, so one host thread per device), so each
// shard's graph is built on its own GPU while the others build theirs. graft's per-index GPU
// context sets its device on every call (gpu/context.cu), so indexes on different devices share
// no GPU state. Each worker's OpenMP regions get its share of the cores (all shards' host work at
// once would otherwise start count() x cores threads). docs/multi-gpu.md has the contract.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/impl/IDSelector.h>

#include "graft_faiss_common.h"

namespace graft {

// Local ids [local, the next run's local or the shard's ntotal) of a shard are the sharded
// index's ids [global, ...).
struct IdRun {
    idx_t local, global;
};

// The global id of local id `local` under `runs` (sorted by local); -1 for -1 and ids before them.
idx_t run_global(const std::vector<IdRun>& runs, idx_t local);

// A part's view (a shard's, an MPI rank's) of a selector over the whole index's ids: local ids go
// through the part's runs.
struct RunSelector : faiss::IDSelector {
    const faiss::IDSelector* global = nullptr;
    const std::vector<IdRun>* runs = nullptr;
    bool is_member(idx_t local) const override;
};

// A copy of p (graft's SearchParameters types or a plain faiss::SearchParameters), so that a part
// can be given its own selector; any other type throws, naming `who`.
std::unique_ptr<faiss::SearchParameters> clone_search_params(const faiss::SearchParameters* p, const char* who);

// A sharded index whose ids are those a single index would give: every add numbers its vectors
// after the ones before (0, 1, 2, ... in add order) and splits them evenly over the shards, so
// adds in several calls work (FAISS's successive_ids allows one add only). Searches run on every
// shard at once and merge as FAISS does, ties going to the smaller id as in a single index.
struct GraftIndexShards : faiss::IndexShards {
    // Threaded, empty; add shards with add_shard (owned when own_fields is set).
    explicit GraftIndexShards(idx_t d, faiss::MetricType metric = faiss::METRIC_L2);

    // Graph + PQ shards: trains the first and installs its codebooks in the others (all code
    // alike, one k-means); other shards train each on their own thread.
    void train(idx_t n, const float* x) override;
    // Vector i of the call goes to shard s = i * nshard / n's range, as in FAISS. xids are
    // refused (wrap the index in IndexIDMap for ids of your own). The input is checked for
    // NaN/Inf first, so that a bad row fails before any shard has taken its part.
    void add_with_ids(idx_t n, const float* x, const idx_t* xids) override;
    // params: any of graft's SearchParameters (or a plain faiss::SearchParameters); its `sel`
    // sees the sharded index's ids.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    // Empties every shard; trained shards stay trained.
    void reset() override;
    void reconstruct(idx_t key, float* recons) const override;
    // FAISS's remove_ids over the sharded index's ids: each shard removes its members (they are
    // renumbered in it), and the remaining ids are renumbered in order as a single index's are
    // (a shard's runs stay runs, shifted down). Returns the number removed.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    // Builds every graph shard's pending graph (a graph index builds at the first search after
    // its adds, graft/graph_index.h), all shards at once, and puts its device data in place.
    // search() calls it first, so the first search after the adds returns with every device's
    // graph built, and a single timed call covers all of them. Nothing to do when none is pending.
    void build() const;

    // The sharded index's id of shard s's local id (-1 stays -1).
    idx_t global_id(int s, idx_t local) const;
    // Shard s's runs (empty for an empty shard).
    const std::vector<IdRun>& shard_runs(int s) const;
    // Replaces shard s's runs and the next id an add hands out (I/O).
    void set_runs(int s, std::vector<IdRun> runs);
    idx_t next_id = 0;  // ids handed out so far (ntotal unless a shard was removed)

   protected:
    void onAfterAddIndex(faiss::Index* index) override;
    void onAfterRemoveIndex(faiss::Index* index) override;

   private:
    std::map<const faiss::Index*, std::vector<IdRun>> runs_;
    mutable std::mutex build_mu_;  // one build at a time (two first searches at once)
};

// Replicas: every replica holds all vectors; a search's queries are split over them. Training as
// GraftIndexShards's.
//
// The graph is built once: replicas hold the same vectors, so the first replica builds it (GRNND
// on its GPU) and the others take a copy at once (graft_gindex_set_graph: their copies and
// uploads run in parallel). Every replica then searches the same graph, and a replicated search returns exactly
// what one replica (a single-GPU index) returns for the same queries, however they were split. A
// replica whose vectors differ from the first's (hand-assembled replicas) builds its own.
struct GraftIndexReplicas : faiss::IndexReplicas {
    explicit GraftIndexReplicas(idx_t d, faiss::MetricType metric = faiss::METRIC_L2);
    void train(idx_t n, const float* x) override;
    // The batch in consecutive blocks, one per replica, sized in proportion to each replica's
    // weight (below: equal at first, then moved towards equal search times), searched at once by
    // the replicas' worker threads, each writing its rows of distances / labels in place. A
    // batch too small to feed every replica (under kMinPart queries a replica) goes to fewer, in
    // turn, the smallest (one part) on the calling thread. params (graft's SearchParameters, a
    // selector) reach every replica as they are.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    void reset() override;
    // Every replica removes the same ids (ids are the same in all); returns the number removed.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    // Builds the pending graph once and copies it to every replica (see above), all at once;
    // search() calls it first.
    void build() const;

    // Queries a replica must get for a search to be split onto it: below this a GPU's share
    // is latency-bound and another replica serves the batch as fast.
    static constexpr idx_t kMinPart = 256;
    // Each replica's relative share of a batch (1 at first), moved by move_weights after every
    // search.
    std::vector<double> weights() const;
    // The split (pure, for search() and its unit test): the queries of each of the w.size()
    // replicas for a batch of n cut into `parts` consecutive blocks, replica `first` first, in
    // proportion to the weights w (each held within 4x of their mean); 0 for the others.
    static std::vector<idx_t> part_sizes(idx_t n, std::vector<double> w, int parts, int first);
    // The weights and, per replica, its ratio of the replicas' mean search time to its own,
    // smoothed over searches (1 at first and after every move).
    struct SplitState {
        std::vector<double> weight, ratio;
    };
    static constexpr double kTimeBand = 1.1;
    static constexpr double kRatioWeight = 0.25;
    // After a search in which two or more replicas searched kMinPart queries or more (part[i]
    // queries in secs[i] seconds): each of those replicas' ratio takes in mean time / its time
    // (weight kRatioWeight); a replica whose smoothed ratio r lies outside kTimeBand gets its
    // weight multiplied by 1 + (r - 1) / 2, and then the weights are brought to mean 1 and every
    // ratio starts again at 1.
    static void move_weights(SplitState& st, const std::vector<idx_t>& part, const std::vector<double>& secs);

   private:
    mutable std::mutex build_mu_;
    mutable std::mutex split_mu_;
    mutable SplitState split_;
    mutable std::atomic<unsigned> turn_{0};  // the replica that takes the next small batch
};

// Shards / replicas: trains as GraftIndexShards::train says.
void train_shared(faiss::ThreadedIndex<faiss::Index>& t, idx_t n, const float* x);

// Distinct devices (>= 0) the shards or replicas of t live on; empty when all are on the CPU.
std::vector<int> shard_devices(const faiss::ThreadedIndex<faiss::Index>& t);

}  // namespace graft
