#include "GraftIndexShards.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <set>
#include <typeinfo>

#include <faiss/impl/IDSelector.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"

namespace graft {

using idx_t = faiss::Index::idx_t;

namespace {

idx_t run_global(const std::vector<IdRun>& runs, idx_t local) {
    if (local < 0 || runs.empty()) return -1;
    // Runs are few (one per add); the last one holds the local ids of the latest add.
    auto it = std::upper_bound(runs.begin(), runs.end(), local,
                               [](idx_t v, const IdRun& r) { return v < r.local; });
    if (it == runs.begin()) return -1;
    --it;
    return it->global + (local - it->local);
}

// A shard's view of a selector over the sharded index's ids.
struct ShardSelector : faiss::IDSelector {
    const faiss::IDSelector* global;
    const std::vector<IdRun>* runs;
    bool is_member(idx_t local) const override {
        idx_t g = run_global(*runs, local);
        return g >= 0 && global->is_member(g);
    }
};

// A copy of p (graft's parameter types or a plain SearchParameters) to change its selector.
std::unique_ptr<faiss::SearchParameters> clone_params(const faiss::SearchParameters* p) {
    if (auto* q = dynamic_cast<const SearchParametersGraftGraph*>(p))
        return std::make_unique<SearchParametersGraftGraph>(*q);
    if (auto* q = dynamic_cast<const SearchParametersGraftGraphPQ*>(p))
        return std::make_unique<SearchParametersGraftGraphPQ>(*q);
    if (auto* q = dynamic_cast<const SearchParametersGraftFlat*>(p))
        return std::make_unique<SearchParametersGraftFlat>(*q);
    GRAFT_REQUIRE(typeid(*p) == typeid(faiss::SearchParameters),
                  "GraftIndexShards::search: search parameters of type %s are not passed to the "
                  "shards (graft's SearchParameters and a plain faiss::SearchParameters are)",
                  typeid(*p).name());
    return std::make_unique<faiss::SearchParameters>(*p);
}

// Vector by vector, so that the message names the row, and in parallel: the check reads the
// whole batch once more before any shard starts (6 GB at 50M x 128).
void require_finite(idx_t n, idx_t d, const float* x, const char* fn) {
    idx_t bad = n;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (idx_t i = 0; i < n; i++) {
        const float* r = x + i * d;
        for (idx_t j = 0; j < d; j++)
            if (!std::isfinite(r[j])) {
                if (i < bad) bad = i;
                break;
            }
    }
    GRAFT_REQUIRE(bad == n,
                  "%s: vector %lld holds NaN or Inf; nothing was added (graft indexes take finite "
                  "vectors)",
                  fn, (long long)bad);
}

}  // namespace

// ---- training shared by shards and replicas --------------------------------------------------

void train_shared(faiss::ThreadedIndex<faiss::Index>& t, idx_t n, const float* x) {
    FAISS_THROW_IF_NOT_MSG(t.count() > 0, "train: the sharded / replicated index has no shards");
    bool all_pq = true;
    for (int i = 0; i < t.count(); i++) {
        auto* g = dynamic_cast<GraftIndexGraphPQ*>(t.at(i));
        if (!g) all_pq = false;
        GRAFT_REQUIRE(!g || g->ntotal == 0,
                      "train: shard %d holds %lld vectors encoded with the current codebooks; "
                      "reset the index before training again",
                      i, (long long)g->ntotal);
    }
    if (!all_pq) {  // FAISS's way: each trains on its own thread
        t.runOnIndex([n, x](int, faiss::Index* index) { index->train(n, x); });
        return;
    }
    // One k-means, the same codebooks everywhere: a shard's codes mean what the others' mean.
    auto* first = static_cast<GraftIndexGraphPQ*>(t.at(0));
    first->train(n, x);
    for (int i = 1; i < t.count(); i++) {
        auto* g = static_cast<GraftIndexGraphPQ*>(t.at(i));
        throw_if_error(graft_gindex_set_pq(g->gindex, graft_gindex_pq(first->gindex)), "train");
        g->is_trained = true;
    }
}

std::vector<int> shard_devices(const faiss::ThreadedIndex<faiss::Index>& t) {
    std::set<int> devs;
    for (int i = 0; i < t.count(); i++)
        if (auto* g = dynamic_cast<const NamedParameters*>(t.at(i))) {
            int dev = (int)g->get_param("device");
            if (dev >= 0) devs.insert(dev);
        }
    return std::vector<int>(devs.begin(), devs.end());
}

// ---- shards ---------------------------------------------------------------------------------

GraftIndexShards::GraftIndexShards(idx_t d, faiss::MetricType metric)
        : faiss::IndexShards(d, /*threaded=*/true, /*successive_ids=*/true) {
    metric_type = metric;
    is_trained = true;  // until a shard says otherwise (syncWithSubIndexes)
}

void GraftIndexShards::onAfterAddIndex(faiss::Index* index) {
    // A shard that arrives holding vectors (add_shard, I/O) gets the next ids.
    std::vector<IdRun>& r = runs_[index];
    r.clear();
    if (index->ntotal > 0) {
        r.push_back({0, next_id});
        next_id += index->ntotal;
    }
    faiss::IndexShards::onAfterAddIndex(index);
}

void GraftIndexShards::onAfterRemoveIndex(faiss::Index* index) {
    runs_.erase(index);  // the other shards keep their ids
    faiss::IndexShards::onAfterRemoveIndex(index);
}

const std::vector<IdRun>& GraftIndexShards::shard_runs(int s) const {
    static const std::vector<IdRun> none;
    auto it = runs_.find(at(s));
    return it == runs_.end() ? none : it->second;
}

void GraftIndexShards::set_runs(int s, std::vector<IdRun> runs) {
    for (const IdRun& r : runs) next_id = std::max(next_id, r.global + 1);
    runs_[at(s)] = std::move(runs);
}

idx_t GraftIndexShards::global_id(int s, idx_t local) const {
    return run_global(shard_runs(s), local);
}

void GraftIndexShards::train(idx_t n, const float* x) {
    train_shared(*this, n, x);
    syncWithSubIndexes();
}

void GraftIndexShards::add_with_ids(idx_t n, const float* x, const idx_t* xids) {
    const char* fn = "GraftIndexShards::add";
    GRAFT_REQUIRE(!xids,
                  "%s: a sharded graft index numbers its vectors in add order, as a single index "
                  "does; for ids of your own wrap it in an IndexIDMap (\"IDMap,GraftGraph,gpus=0,1\")",
                  fn);
    GRAFT_REQUIRE(count() > 0, "%s: the sharded index has no shards", fn);
    GRAFT_REQUIRE(n >= 0 && (n == 0 || x), "%s: n = %lld, x %s", fn, (long long)n,
                  x ? "given" : "NULL");
    if (n == 0) return;
    require_finite(n, d, x, fn);
    const int ns = count();
    std::vector<idx_t> before(ns);
    for (int s = 0; s < ns; s++) before[s] = at(s)->ntotal;
    const idx_t dim = d;
    auto part = [n, ns](int s) { return (idx_t)s * n / ns; };
    std::string failed;
    try {
        runOnIndex([&](int s, faiss::Index* index) {
            idx_t i0 = part(s), i1 = part(s + 1);
            if (i1 > i0) index->add(i1 - i0, x + i0 * dim);
        });
    } catch (const std::exception& e) {
        failed = e.what();
    }
    // Each shard that took its part gets its run; a failed one (its add left it as it was) none.
    for (int s = 0; s < ns; s++) {
        idx_t i0 = part(s), i1 = part(s + 1);
        if (i1 > i0 && at(s)->ntotal == before[s] + (i1 - i0))
            runs_[at(s)].push_back({before[s], next_id + i0});
    }
    next_id += n;
    syncWithSubIndexes();
    GRAFT_REQUIRE(failed.empty(),
                  "%s: %s (the shards that succeeded keep their part of the %lld vectors under "
                  "their ids; the failed shards' part is not in the index)",
                  fn, failed.c_str(), (long long)n);
}

void GraftIndexShards::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                              const faiss::SearchParameters* params) const {
    const char* fn = "GraftIndexShards::search";
    GRAFT_REQUIRE(k > 0, "%s: k = %lld (k >= 1)", fn, (long long)k);
    GRAFT_REQUIRE(n >= 0, "%s: n = %lld", fn, (long long)n);
    GRAFT_REQUIRE(count() > 0, "%s: the sharded index has no shards", fn);
    if (n == 0) return;
    const int ns = count();
    const size_t stride = (size_t)n * k;
    std::vector<float> all_d(stride * ns);
    std::vector<idx_t> all_i(stride * ns);
    // Per shard: its own copy of params whose selector sees global ids.
    std::vector<std::unique_ptr<faiss::SearchParameters>> shard_params(ns);
    std::vector<ShardSelector> sels(ns);
    if (params)
        for (int s = 0; s < ns; s++) {
            shard_params[s] = clone_params(params);
            if (params->sel) {
                sels[s].global = params->sel;
                sels[s].runs = &shard_runs(s);
                shard_params[s]->sel = &sels[s];
            }
        }
    runOnIndex([&](int s, const faiss::Index* index) {
        index->search(n, x, k, all_d.data() + s * stride, all_i.data() + s * stride,
                      shard_params[s].get());
    });
    for (int s = 0; s < ns; s++) {
        const std::vector<IdRun>& runs = shard_runs(s);
        idx_t* I = all_i.data() + s * stride;
        for (size_t j = 0; j < stride; j++) I[j] = run_global(runs, I[j]);
    }
    // k-way merge of the shards' sorted lists: the best distance first, ties to the smaller id
    // (a single graft index's order), missing slots as a single index fills them.
    const bool l2 = metric_type == faiss::METRIC_L2;
#pragma omp parallel for if (n > 64)
    for (idx_t q = 0; q < n; q++) {
        std::vector<idx_t> pos(ns, 0);
        for (idx_t j = 0; j < k; j++) {
            int best = -1;
            float bd = 0;
            idx_t bi = -1;
            for (int s = 0; s < ns; s++) {
                if (pos[s] >= k) continue;
                size_t o = s * stride + (size_t)q * k + pos[s];
                idx_t id = all_i[o];
                if (id < 0) continue;
                float dist = all_d[o];
                if (best < 0 || (l2 ? dist < bd : dist > bd) || (dist == bd && id < bi)) {
                    best = s;
                    bd = dist;
                    bi = id;
                }
            }
            if (best < 0) {
                distances[q * k + j] = l2 ? FLT_MAX : -FLT_MAX;
                labels[q * k + j] = -1;
            } else {
                distances[q * k + j] = bd;
                labels[q * k + j] = bi;
                pos[best]++;
            }
        }
    }
}

void GraftIndexShards::reset() {
    runOnIndex([](int, faiss::Index* index) { index->reset(); });
    for (auto& r : runs_) r.second.clear();
    next_id = 0;
    syncWithSubIndexes();
}

void GraftIndexShards::reconstruct(idx_t key, float* recons) const {
    for (int s = 0; s < count(); s++) {
        const std::vector<IdRun>& runs = shard_runs(s);
        for (size_t r = 0; r < runs.size(); r++) {
            idx_t end = r + 1 < runs.size() ? runs[r + 1].local : at(s)->ntotal;
            if (key >= runs[r].global && key < runs[r].global + (end - runs[r].local)) {
                at(s)->reconstruct(runs[r].local + (key - runs[r].global), recons);
                return;
            }
        }
    }
    FAISS_THROW_FMT("GraftIndexShards::reconstruct: no vector has id %lld (ids 0..%lld)",
                    (long long)key, (long long)next_id - 1);
}

size_t GraftIndexShards::remove_ids(const faiss::IDSelector& sel) {
    const char* fn = "GraftIndexShards::remove_ids";
    const int ns = count();
    // Each shard's members as its local ids, ascending (runs are in local order).
    std::vector<std::vector<idx_t>> local(ns), global(ns);
    for (int s = 0; s < ns; s++) {
        const std::vector<IdRun>& runs = shard_runs(s);
        for (size_t r = 0; r < runs.size(); r++) {
            const idx_t end = r + 1 < runs.size() ? runs[r + 1].local : at(s)->ntotal;
            for (idx_t l = runs[r].local; l < end; l++) {
                const idx_t g = runs[r].global + (l - runs[r].local);
                if (sel.is_member(g)) local[s].push_back(l), global[s].push_back(g);
            }
        }
    }
    std::vector<size_t> removed(ns, 0);
    std::string failed;
    try {
        runOnIndex([&](int s, faiss::Index* index) {
            if (local[s].empty()) return;
            faiss::IDSelectorArray members(local[s].size(), local[s].data());
            removed[s] = index->remove_ids(members);
        });
    } catch (const std::exception& e) {
        failed = e.what();
    }
    // A shard whose removal failed removed nothing (graft's removals are all or nothing).
    std::vector<idx_t> gone;  // the global ids removed, ascending
    for (int s = 0; s < ns; s++)
        if (removed[s] == local[s].size()) gone.insert(gone.end(), global[s].begin(), global[s].end());
        else local[s].clear();
    std::sort(gone.begin(), gone.end());
    auto before = [](const std::vector<idx_t>& sorted, idx_t v) {
        return (idx_t)(std::lower_bound(sorted.begin(), sorted.end(), v) - sorted.begin());
    };
    // The remaining ids, renumbered as a single index's: a run's remaining vectors stay contiguous
    // in local and in global ids (every global id of a run is its shard's), so it becomes the run
    // of its first remaining vector, both ids lowered by the removed ids below them.
    for (int s = 0; s < ns; s++) {
        const std::vector<IdRun>& runs = shard_runs(s);
        const idx_t held = at(s)->ntotal + (idx_t)local[s].size();
        std::vector<IdRun> kept;
        for (size_t r = 0; r < runs.size(); r++) {
            const idx_t end = r + 1 < runs.size() ? runs[r + 1].local : held;
            idx_t l = runs[r].local;
            while (l < end && std::binary_search(local[s].begin(), local[s].end(), l)) l++;
            if (l == end) continue;  // emptied
            const idx_t g = runs[r].global + (l - runs[r].local);
            kept.push_back({l - before(local[s], l), g - before(gone, g)});
        }
        runs_[at(s)] = std::move(kept);
    }
    next_id -= (idx_t)gone.size();
    syncWithSubIndexes();
    GRAFT_REQUIRE(failed.empty(), "%s: %s (the shards that succeeded removed their part)", fn,
                  failed.c_str());
    return gone.size();
}

// ---- replicas --------------------------------------------------------------------------------

GraftIndexReplicas::GraftIndexReplicas(idx_t d, faiss::MetricType metric)
        : faiss::IndexReplicas(d, /*threaded=*/true) {
    metric_type = metric;
    is_trained = true;
}

void GraftIndexReplicas::train(idx_t n, const float* x) {
    train_shared(*this, n, x);
    syncWithSubIndexes();
}

void GraftIndexReplicas::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                                const faiss::SearchParameters* params) const {
    if (!params) return faiss::IndexReplicas::search(n, x, k, distances, labels);
    GRAFT_REQUIRE(k > 0 && n >= 0, "GraftIndexReplicas::search: n = %lld, k = %lld", (long long)n,
                  (long long)k);
    GRAFT_REQUIRE(count() > 0, "GraftIndexReplicas::search: %s", "no replicas");
    const idx_t per = (n + count() - 1) / count(), dim = d;
    // Every replica holds every id: the selector applies as it is, read by all at once (const).
    runOnIndex([&](int i, const faiss::Index* index) {
        const idx_t base = (idx_t)i * per;
        if (base < n)
            index->search(std::min(per, n - base), x + base * dim, k, distances + base * k, labels + base * k,
                          params);
    });
}

size_t GraftIndexReplicas::remove_ids(const faiss::IDSelector& sel) {
    std::vector<size_t> removed(count(), 0);
    runOnIndex([&](int i, faiss::Index* index) { removed[i] = index->remove_ids(sel); });
    syncWithSubIndexes();
    for (size_t r : removed)
        GRAFT_REQUIRE(r == removed[0], "GraftIndexReplicas::remove_ids: the replicas removed %zu and "
                      "%zu vectors (they held different ids)", removed[0], r);
    return removed.empty() ? 0 : removed[0];
}

void GraftIndexReplicas::reset() {
    runOnIndex([](int, faiss::Index* index) { index->reset(); });
    syncWithSubIndexes();  // FAISS's reset marks the replicas untrained; graft's keep their codebooks
}

}  // namespace graft
