// How GraftIndexReplicas splits a batch (issue 33): its two pure functions, part_sizes and
// move_weights, against a model of a GPU whose search time is a step in the part's size: each
// wave of W queries (the walks it runs at once) takes T, a part of at most W queries takes T
// whatever its size. Checked:
//  - the split: consecutive blocks that sum to the batch, the replicas without a part get none,
//    weights held within 4x of their mean;
//  - equal GPUs under a wave, with +-10% noise on every time: the parts stay equal for 1,000
//    searches (the rule before, weights = queries / second, let a part pass a wave in 17% of
//    them in the same model: a rate there follows the part given, not the GPU's speed);
//  - a part past a wave (twice the others' time) comes back under it within ten searches;
//  - a GPU twice as fast gets about twice the part: the searches' time ends within 15% of the
//    best split's (the rule stops once the times lie within 10% of their mean, and a part moves
//    a wave at a time);
//  - fewer than two timed parts, or parts under kMinPart, move nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "GraftIndexShards.h"

extern "C" {
#include "testutil.h"
}

using graft::GraftIndexReplicas;
using idx_t = graft::idx_t;

namespace {

constexpr idx_t kWave = 2640;  // an H100's resident walks at dense SIFT's L = 192

// Seconds for `m` queries on a GPU `speed` times as fast as the reference (1 ms a wave).
double model_time(idx_t m, double speed) {
    return m == 0 ? 0 : 1e-3 * (double)((m + kWave - 1) / kWave) / speed;
}

idx_t sum(const std::vector<idx_t>& v) { return std::accumulate(v.begin(), v.end(), (idx_t)0); }

void test_split() {
    std::vector<idx_t> s = GraftIndexReplicas::part_sizes(10000, {1, 1, 1, 1}, 4, 0);
    CHECK(s == std::vector<idx_t>({2500, 2500, 2500, 2500}), "equal weights: %lld %lld %lld %lld",
          (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]);
    // Two parts from replica 2: replicas 2 and 3 take the batch, 0 and 1 nothing.
    s = GraftIndexReplicas::part_sizes(1000, {1, 1, 1, 3}, 2, 2);
    CHECK(s[0] == 0 && s[1] == 0 && sum(s) == 1000 && s[2] == 250, "two parts: %lld %lld %lld %lld",
          (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]);
    // A weight of 0 counts as a quarter of the mean (1.25 here): it keeps a part.
    s = GraftIndexReplicas::part_sizes(10000, {0, 2, 1, 2}, 4, 0);
    CHECK(sum(s) == 10000 && s[0] > 0 && s[0] < s[2], "held weights: %lld %lld %lld %lld",
          (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]);
    s = GraftIndexReplicas::part_sizes(7, {1, 1, 1}, 3, 1);
    CHECK(sum(s) == 7, "a batch that does not divide: %lld", (long long)sum(s));
}

// `calls` searches of n queries on GPUs of the given speeds, each time noisy by up to +-noise;
// returns the largest part of the last search and fills worst with the largest part of any
// search after the first `settle`.
struct Run {
    GraftIndexReplicas::SplitState st;
    idx_t worst_after_settle = 0;
    double last_time = 0;
};
Run simulate(idx_t n, const std::vector<double>& speed, int calls, int settle, double noise,
             std::vector<double> w0 = {}) {
    const int nr = (int)speed.size();
    Run r;
    r.st.weight = w0.empty() ? std::vector<double>(nr, 1.0) : w0;
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
    for (int c = 0; c < calls; c++) {
        const std::vector<idx_t> part = GraftIndexReplicas::part_sizes(n, r.st.weight, nr, 0);
        std::vector<double> secs(nr);
        double t = 0;
        for (int i = 0; i < nr; i++) {
            secs[i] = model_time(part[i], speed[i]) * jitter(rng);
            t = std::max(t, model_time(part[i], speed[i]));
        }
        GraftIndexReplicas::move_weights(r.st, part, secs);
        r.last_time = t;
        if (c >= settle) r.worst_after_settle = std::max(r.worst_after_settle, *std::max_element(part.begin(), part.end()));
    }
    return r;
}

void test_equal_gpus_under_a_wave() {
    const Run r = simulate(10000, {1, 1, 1, 1}, 1000, 0, 0.10);
    CHECK(r.worst_after_settle == 2500, "4 equal GPUs, batch 10,000: a part of %lld queries (2,500 each)",
          (long long)r.worst_after_settle);
    for (double v : r.st.weight) CHECK(v == 1.0, "equal GPUs' weight moved to %g", v);
}

void test_a_part_past_a_wave_comes_back() {
    // Replica 0's part starts at ~3,100 queries: two waves, twice the others' time.
    const Run r = simulate(10000, {1, 1, 1, 1}, 50, 10, 0.0, {1.25, 0.917, 0.917, 0.917});
    CHECK(r.worst_after_settle <= kWave, "a part of %lld queries after 10 searches (a wave is %lld)",
          (long long)r.worst_after_settle, (long long)kWave);
}

void test_a_faster_gpu_gets_more() {
    // Many waves a GPU, one GPU twice as fast: the best split's time is ceil(2n/3 / W) waves at
    // double speed against ceil(n/3 / W) at single speed; brute force over the splits.
    const idx_t n = 60000;
    double best = 1e30;
    for (idx_t a = 0; a <= n; a += 10) best = std::min(best, std::max(model_time(a, 2), model_time(n - a, 1)));
    const Run r = simulate(n, {2, 1}, 60, 0, 0.05);
    const std::vector<double>& w = r.st.weight;
    CHECK(r.last_time <= 1.15 * best, "2:1 GPUs: %.2f ms a search, the best split %.2f ms (weights %g, %g)",
          1e3 * r.last_time, 1e3 * best, w[0], w[1]);
    CHECK(w[0] > 1.5 * w[1], "the faster GPU's weight %g, the other's %g", w[0], w[1]);
}

void test_nothing_moves_without_two_timed_parts() {
    GraftIndexReplicas::SplitState st;
    st.weight = {1, 1, 1};
    GraftIndexReplicas::move_weights(st, {3000, 0, 0}, {0.002, 0, 0});  // one part
    CHECK(st.weight == std::vector<double>({1, 1, 1}), "one timed part moved the weights");
    GraftIndexReplicas::move_weights(st, {3000, 100, 100}, {0.002, 0.009, 0.009});  // under kMinPart
    CHECK(st.weight == std::vector<double>({1, 1, 1}), "parts under kMinPart moved the weights");
    // Twice as slow once: smoothed ratios 0.92 and 1.08, inside the band: nothing moves.
    GraftIndexReplicas::move_weights(st, {3000, 3000, 3000}, {0.002, 0.004, 0.002});
    CHECK(st.weight == std::vector<double>({1, 1, 1}), "one search twice as slow moved the weights");
    st.ratio = {1, 1, 1};
    // Three times as slow: ratios 0.89 and 1.17, out of the band: replica 1 gets less.
    GraftIndexReplicas::move_weights(st, {3000, 3000, 3000}, {0.002, 0.006, 0.002});
    const std::vector<double>& w = st.weight;
    CHECK(w[1] < 1 && w[0] > 1 && w[0] == w[2] && std::fabs(w[0] + w[1] + w[2] - 3) < 1e-9,
          "a slow replica's weight %g (others %g, %g; mean 1)", w[1], w[0], w[2]);
    CHECK(st.ratio == std::vector<double>({1, 1, 1}), "the ratios did not start again after a move");
}

}  // namespace

int main() {
    test_split();
    test_equal_gpus_under_a_wave();
    test_a_part_past_a_wave_comes_back();
    test_a_faster_gpu_gets_more();
    test_nothing_moves_without_two_timed_parts();
    return graft_test_finish("test_replica_split");
}
