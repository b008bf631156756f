#include "GraftIndexShards.h"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <typeinfo>

#include <faiss/impl/IDSelector.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"

namespace graft {


namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The OpenMP threads of a worker whose host work runs beside `parts` others': its share of the
// caller's, so that the shards' adds (copies, checks, encodes), builds and CPU searches at once
// use the cores once rather than `parts` times over. Called on the worker thread (the setting is
// that thread's own).
void share_cores(int threads, int parts) { omp_set_num_threads(std::max(1, threads / std::max(1, parts))); }

// A graph shard of any storage (nullptr for other indexes: nothing to build).
const GraftIndexGraph* graph_of(const faiss::Index* index) {
    return dynamic_cast<const GraftIndexGraph*>(index);
}

// Adds left its graph to be built (graft/graph_index.h: the first search, or graft_gindex_build).
bool build_pending(const GraftIndexGraph* g) {
    return g && graft_gindex_build_pending(g->gindex);
}

// Whether b holds a's vectors, so that a's graph is b's too: the same count, dimension, storage
// and degree, and the same rows at 4097 places spread over them (replicas made by graft always
// match; the sample catches hand-assembled ones that do not, at no cost next to a build).
bool same_vectors(const GraftIndexGraph* a, const GraftIndexGraph* b) {
    const int64_t n = graft_gindex_ntotal(a->gindex), d = graft_gindex_d(a->gindex);
    if (graft_gindex_ntotal(b->gindex) != n || graft_gindex_d(b->gindex) != d ||
        graft_gindex_storage(a->gindex)->kind != graft_gindex_storage(b->gindex)->kind ||
        graft_gindex_get_params(a->gindex).build.base.R != graft_gindex_get_params(b->gindex).build.base.R)
        return false;
    const graft_gindex_params pa = graft_gindex_get_params(a->gindex);
    if (pa.keep_fp32 != graft_gindex_get_params(b->gindex).keep_fp32) return false;
    // keep_fp32 = 0: the codes are the vectors (the same codec: replicas train once and share it).
    const bool codes = !pa.keep_fp32;
    const size_t row_bytes = codes ? graft_storage_code_size(pa.storage, d) : (size_t)d * sizeof(float);
    const uint8_t* xa = codes ? graft_gindex_codes(a->gindex)
                              : reinterpret_cast<const uint8_t*>(graft_gindex_vectors(a->gindex));
    const uint8_t* xb = codes ? graft_gindex_codes(b->gindex)
                              : reinterpret_cast<const uint8_t*>(graft_gindex_vectors(b->gindex));
    if (!xa || !xb) return false;
    for (int64_t j = 0; j <= 4096; j++) {
        const int64_t row = j * (n - 1) / 4096;
        if (memcmp(xa + row * row_bytes, xb + row * row_bytes, row_bytes)) return false;
    }
    return true;
}


// Shard s's results, local ids made the sharded index's (one add, the common case: an offset).
void globalize(const std::vector<IdRun>& runs, idx_t* I, size_t m) {
    if (runs.size() == 1 && runs[0].local == 0) {
        const idx_t off = runs[0].global;
        for (size_t j = 0; j < m; j++)
            if (I[j] >= 0) I[j] += off;
        return;
    }
    for (size_t j = 0; j < m; j++) I[j] = run_global(runs, I[j]);
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

idx_t run_global(const std::vector<IdRun>& runs, idx_t local) {
    if (local < 0 || runs.empty()) return -1;
    // Runs are few (one per add); the last one holds the local ids of the latest add.
    auto it = std::upper_bound(runs.begin(), runs.end(), local,
                               [](idx_t v, const IdRun& r) { return v < r.local; });
    if (it == runs.begin()) return -1;
    --it;
    return it->global + (local - it->local);
}

bool RunSelector::is_member(idx_t local) const {
    const idx_t g = run_global(*runs, local);
    return g >= 0 && global->is_member(g);
}

std::unique_ptr<faiss::SearchParameters> clone_search_params(const faiss::SearchParameters* p, const char* who) {
    if (auto* q = dynamic_cast<const SearchParametersGraftGraph*>(p))
        return std::make_unique<SearchParametersGraftGraph>(*q);
    if (auto* q = dynamic_cast<const SearchParametersGraftGraphPQ*>(p))
        return std::make_unique<SearchParametersGraftGraphPQ>(*q);
    if (auto* q = dynamic_cast<const SearchParametersGraftFlat*>(p))
        return std::make_unique<SearchParametersGraftFlat>(*q);
    GRAFT_REQUIRE(typeid(*p) == typeid(faiss::SearchParameters),
                  "%s: search parameters of type %s are not passed on (graft's SearchParameters and a "
                  "plain faiss::SearchParameters are)",
                  who, typeid(*p).name());
    return std::make_unique<faiss::SearchParameters>(*p);
}


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
    const int threads = omp_get_max_threads();
    try {
        runOnIndex([&](int s, faiss::Index* index) {
            idx_t i0 = part(s), i1 = part(s + 1);
            share_cores(threads, ns); /* the shards copy their parts at once */
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

void GraftIndexShards::build() const {
    std::lock_guard<std::mutex> lock(build_mu_);
    std::vector<char> todo(count());
    int parts = 0;
    for (int s = 0; s < count(); s++) parts += todo[s] = build_pending(graph_of(at(s)));
    if (parts == 0) return;
    const int threads = omp_get_max_threads();
    runOnIndex([&](int s, const faiss::Index* index) {
        if (!todo[s]) return;
        share_cores(threads, parts);
        throw_if_error(graft_gindex_build(graph_of(index)->gindex), "GraftIndexShards::build");
    });
}

void GraftIndexShards::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                              const faiss::SearchParameters* params) const {
    const char* fn = "GraftIndexShards::search";
    GRAFT_REQUIRE(k > 0, "%s: k = %lld (k >= 1)", fn, (long long)k);
    GRAFT_REQUIRE(n >= 0, "%s: n = %lld", fn, (long long)n);
    GRAFT_REQUIRE(count() > 0, "%s: the sharded index has no shards", fn);
    if (n == 0) return;
    build();
    const int ns = count();
    const size_t stride = (size_t)n * k;
    // Every shard's k best of every query, then merged; not zeroed (each shard writes its own).
    std::unique_ptr<float[]> all_d(new float[stride * ns]);
    std::unique_ptr<idx_t[]> all_i(new idx_t[stride * ns]);
    // Per shard: its own copy of params whose selector sees global ids.
    std::vector<std::unique_ptr<faiss::SearchParameters>> shard_params(ns);
    std::vector<RunSelector> sels(ns);
    if (params)
        for (int s = 0; s < ns; s++) {
            shard_params[s] = clone_search_params(params, "GraftIndexShards::search");
            if (params->sel) {
                sels[s].global = params->sel;
                sels[s].runs = &shard_runs(s);
                shard_params[s]->sel = &sels[s];
            }
        }
    std::vector<const std::vector<IdRun>*> runs(ns);
    for (int s = 0; s < ns; s++) runs[s] = &shard_runs(s);
    const int threads = omp_get_max_threads();
    // Each shard's worker searches, then makes its ids global, at once with the others.
    runOnIndex([&](int s, const faiss::Index* index) {
        share_cores(threads, ns);
        index->search(n, x, k, all_d.get() + s * stride, all_i.get() + s * stride, shard_params[s].get());
        globalize(*runs[s], all_i.get() + s * stride, stride);
    });
    // k-way merge of the shards' sorted lists: the best distance first, ties to the smaller id
    // (a single graft index's order), missing slots as a single index fills them. About
    // n k ns comparisons (0.4M for 10k queries, k = 10, 4 shards, ~1 ms on one core): the query
    // rows split over a thread per 100k comparisons, at most the caller's. Not all of them: a
    // fork-join of every core for a fraction of a millisecond waits for its slowest thread to be
    // scheduled, which on a host with busy cores can take a scheduler slice (milliseconds).
    const bool l2 = metric_type == faiss::METRIC_L2;
    constexpr int kStackShards = 64;
    const int merge_threads =
            (int)std::min<int64_t>(omp_get_max_threads(), 1 + (int64_t)stride * ns / 100000);
#pragma omp parallel for schedule(static) num_threads(merge_threads) if (merge_threads > 1)
    for (idx_t q = 0; q < n; q++) {
        idx_t pos_stack[kStackShards];
        std::vector<idx_t> pos_heap(ns > kStackShards ? ns : 0);
        idx_t* pos = ns > kStackShards ? pos_heap.data() : pos_stack;
        std::fill(pos, pos + ns, 0);
        for (idx_t j = 0; j < k; j++) {
            int best = -1;
            float bd = 0;
            idx_t bi = -1;
            for (int s = 0; s < ns; s++) {
                if (pos[s] >= k) continue;
                const size_t o = s * stride + (size_t)q * k + pos[s];
                const idx_t id = all_i[o];
                if (id < 0) continue;
                const float dist = all_d[o];
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

void GraftIndexReplicas::build() const {
    std::lock_guard<std::mutex> lock(build_mu_);
    const int nr = count();
    std::vector<char> todo(nr);
    int source = -1, parts = 0;
    for (int i = 0; i < nr; i++) {
        const GraftIndexGraph* g = graph_of(at(i));
        parts += todo[i] = build_pending(g);
        if (source < 0 && g && !todo[i] && graft_gindex_ntotal(g->gindex) > 0) source = i;
    }
    if (parts == 0) return;
    const char* fn = "GraftIndexReplicas::build";
    if (source < 0) {  // none built yet: the first builds, with all the host's threads
        source = (int)(std::find(todo.begin(), todo.end(), 1) - todo.begin());
        throw_if_error(graft_gindex_build(graph_of(at(source))->gindex), fn);
        todo[source] = 0;
        if (--parts == 0) return;
    }
    const GraftIndexGraph* src = graph_of(at(source));
    const int threads = omp_get_max_threads();
    runOnIndex([&](int i, const faiss::Index* index) {
        if (!todo[i]) return;
        share_cores(threads, parts);
        const GraftIndexGraph* g = graph_of(index);
        if (same_vectors(src, g))  // the source's graph over the same vectors, uploaded to g's device
            throw_if_error(graft_gindex_set_graph(g->gindex, graft_gindex_graph(src->gindex)), fn);
        else
            throw_if_error(graft_gindex_build(g->gindex), fn);
    });
}

std::vector<double> GraftIndexReplicas::weights() const {
    std::lock_guard<std::mutex> lock(split_mu_);
    std::vector<double> w = split_.weight;
    w.resize(count(), 1.0);
    return w;
}

std::vector<idx_t> GraftIndexReplicas::part_sizes(idx_t n, std::vector<double> w, int parts, int first) {
    // Each weight within 4x of the mean, so that one slow measurement (a host stall) cannot
    // starve a replica of the work that would show it is fast again.
    const int nr = (int)w.size();
    double mean = 0;
    for (double v : w) mean += v / nr;
    for (double& v : w) v = std::min(4 * mean, std::max(mean / 4, v));
    double total = 0;
    for (int j = 0; j < parts; j++) total += w[(first + j) % nr];
    std::vector<idx_t> size(nr, 0);
    double cum = 0;
    idx_t at = 0;
    for (int j = 0; j < parts; j++) {
        const int i = (first + j) % nr;
        cum += w[i];
        const idx_t end = j + 1 == parts ? n : std::min<idx_t>(n, std::llround(n * (cum / total)));
        size[i] = end - at;
        at = end;
    }
    return size;
}

void GraftIndexReplicas::move_weights(SplitState& st, const std::vector<idx_t>& part,
                                      const std::vector<double>& secs) {
    // Towards equal times: a replica slower than the mean of the replicas that searched gets a
    // smaller part. Not a rate (queries / second): a GPU given fewer queries than it runs at once
    // takes about the same time whatever its part (its slowest walk sets it), so a rate measured
    // there follows the part it was given, not the GPU's speed, and parts sized by it drifted
    // until one passed a wave and took twice as long. Each replica's ratio of the mean time to
    // its own is smoothed over searches (weight kRatioWeight for the newest), so that noise
    // averages out, and only a smoothed ratio outside kTimeBand moves the weights: equal parts on
    // equal GPUs stay equal.
    const int nr = (int)part.size();
    st.weight.resize(nr, 1.0);
    st.ratio.resize(nr, 1.0);
    double tsum = 0;
    int timed = 0;
    for (int i = 0; i < nr; i++)
        if (part[i] >= kMinPart && secs[i] > 0) tsum += secs[i], timed++;
    if (timed < 2) return;
    const double tmean = tsum / timed;
    bool moved = false;
    for (int i = 0; i < nr; i++) {
        if (part[i] < kMinPart || secs[i] <= 0) continue;
        double& r = st.ratio[i];
        r = (1 - kRatioWeight) * r + kRatioWeight * tmean / secs[i];
        if (r * kTimeBand < 1 || r > kTimeBand) {
            st.weight[i] *= 1 + 0.5 * (r - 1);  // half way to equal times
            moved = true;
        }
    }
    if (!moved) return;
    // A new split: its times are measured afresh. The weights' mean is 1 (only ratios count).
    double wsum = 0;
    for (double v : st.weight) wsum += v;
    for (int i = 0; i < nr; i++) {
        st.weight[i] *= nr / wsum;
        st.ratio[i] = 1.0;
    }
}

void GraftIndexReplicas::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                                const faiss::SearchParameters* params) const {
    const char* fn = "GraftIndexReplicas::search";
    GRAFT_REQUIRE(k > 0 && n >= 0, "%s: n = %lld, k = %lld", fn, (long long)n, (long long)k);
    GRAFT_REQUIRE(count() > 0, "%s: the replicated index has no replicas", fn);
    if (n == 0) return;
    build();
    const int nr = count();
    // The replicas that take a part: all of them, or for a small batch as many as get kMinPart
    // queries each, in turn from call to call (concurrent small searches spread over devices).
    const int parts = (int)std::min<idx_t>(nr, std::max<idx_t>(1, n / kMinPart));
    const int first = parts < nr ? (int)(turn_.fetch_add(1, std::memory_order_relaxed) % (unsigned)nr) : 0;
    // Consecutive blocks in the order first, first + 1, ..., sized by the replicas' weights.
    const std::vector<idx_t> size = part_sizes(n, weights(), parts, first);
    std::vector<idx_t> lo(nr, 0);
    for (idx_t j = 0, at = 0; j < parts; j++) {
        const int i = (int)((first + j) % nr);
        lo[i] = at;
        at += size[i];
    }
    std::vector<double> secs(nr, 0.0);
    auto part = [&](int i, const faiss::Index* index) {
        if (size[i] == 0) return;
        const double t0 = now_s();
        // Every replica holds every id: params (a selector too) apply as they are.
        index->search(size[i], x + lo[i] * d, k, distances + lo[i] * k, labels + lo[i] * k, params);
        secs[i] = now_s() - t0;
    };
    if (parts == 1) {
        part(first, at(first));  // one device: no hand-over to its worker
    } else {
        const int threads = omp_get_max_threads();
        runOnIndex([&](int i, const faiss::Index* index) {
            share_cores(threads, parts);
            part(i, index);
        });
    }
    std::lock_guard<std::mutex> lock(split_mu_);
    move_weights(split_, size, secs);
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
    std::lock_guard<std::mutex> lock(split_mu_);
    split_ = SplitState();
}

}  // namespace graft
