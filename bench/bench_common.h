// Small helpers shared by the benchmark programs (header-only, C++17).
#ifndef GRAFT_BENCH_COMMON_H
#define GRAFT_BENCH_COMMON_H

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace bench {

// Monotonic wall clock, seconds.
inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ" (the records' date field).
inline std::string utc_date() {
    char s[32];
    time_t t = time(nullptr);
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    return s;
}

// Median of a non-empty sample.
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median wall time of f() over `reps` runs after one untimed warm-up run. f returns false on
// failure, which ends the measurement: the result is then -1.
template <class F>
double median_time(int reps, F&& f) {
    if (!f()) return -1;
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        if (!f()) return -1;
        t.push_back(now_s() - t0);
    }
    return median(t);
}

// recall@k: |found ∩ true top-k| / k averaged over nq queries; got and truth are nq x k row-major.
inline double recall_at_k(const int64_t* got, const int64_t* truth, int64_t nq, int64_t k) {
    int64_t hit = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++)
                if (got[q * k + i] == truth[q * k + j]) {
                    hit++;
                    break;
                }
    return nq > 0 ? (double)hit / (double)(nq * k) : 0.0;
}

// "1,2.5,3" into out (appended): false unless every item is a finite number >= 0 (the benchmarks'
// comma lists: --batch, --sweep values, --insert-L).
inline bool split_numbers(const std::string& s, std::vector<double>* out) {
    size_t i = 0;
    while (i <= s.size()) {
        size_t j = s.find(',', i);
        if (j == std::string::npos) j = s.size();
        const std::string t = s.substr(i, j - i);
        char* end = nullptr;
        const double v = strtod(t.c_str(), &end);
        if (t.empty() || *end || !std::isfinite(v) || v < 0) return false;
        out->push_back(v);
        i = j + 1;
    }
    return !out->empty();
}

}  // namespace bench

#endif
