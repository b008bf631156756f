// graft indexes spread over several devices (issue 25): FAISS's IndexShards / IndexReplicas with
// what graft's indexes need on top. Made by the factory's ",gpus=LIST" / ",shards=N" options
// (",replicas" for GraftIndexReplicas) and read back from a GRFTSHRD record (graft_io.cpp);
// FAISS's own IndexShards over graft indexes works too, without the extras below.
//
// Both run every shard's add, train and search on its own thread at once (FAISS's threaded
// ThreadedIndex: one WorkerThread per shard), so each shard's graph is built on its own GPU while
// the others build theirs. graft's per-index GPU context sets its device on every call
// (gpu/context.cu), so indexes on different devices share no GPU state.
#pragma once

#include <map>
#include <vector>

#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>

#include "graft_faiss_common.h"

namespace graft {

// Local ids [local, the next run's local or the shard's ntotal) of a shard are the sharded
// index's ids [global, ...).
struct IdRun {
    faiss::Index::idx_t local, global;
};

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
};

// Replicas: every replica holds all vectors; a search's queries are split over them. Training as
// GraftIndexShards's.
struct GraftIndexReplicas : faiss::IndexReplicas {
    explicit GraftIndexReplicas(idx_t d, faiss::MetricType metric = faiss::METRIC_L2);
    void train(idx_t n, const float* x) override;
    // FAISS's split of the queries (consecutive blocks, one per replica, all at once), with
    // params (graft's SearchParameters, a selector) passed to every replica.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;
    void reset() override;
    // Every replica removes the same ids (ids are the same in all); returns the number removed.
    size_t remove_ids(const faiss::IDSelector& sel) override;
};

// Shards / replicas: trains as GraftIndexShards::train says.
void train_shared(faiss::ThreadedIndex<faiss::Index>& t, faiss::Index::idx_t n, const float* x);

// Distinct devices (>= 0) the shards or replicas of t live on; empty when all are on the CPU.
std::vector<int> shard_devices(const faiss::ThreadedIndex<faiss::Index>& t);

}  // namespace graft
