#include "frontier.h"

#include <algorithm>
#include <cmath>

namespace bench {

std::vector<SweepPoint> pareto_frontier(const std::vector<SweepPoint>& pts) {
    std::vector<SweepPoint> s;
    for (const SweepPoint& p : pts)
        if (p.qps > 0 && std::isfinite(p.qps) && std::isfinite(p.recall)) s.push_back(p);
    // By recall descending, then QPS descending: a point is on the frontier when it is faster than
    // every point of at least its recall.
    std::stable_sort(s.begin(), s.end(), [](const SweepPoint& a, const SweepPoint& b) {
        return a.recall != b.recall ? a.recall > b.recall : a.qps > b.qps;
    });
    std::vector<SweepPoint> f;
    double best = 0;
    for (const SweepPoint& p : s)
        if (p.qps > best) {
            f.push_back(p);
            best = p.qps;
        }
    std::reverse(f.begin(), f.end());
    return f;
}

BarFigure qps_at_recall(const std::vector<SweepPoint>& frontier, double bar) {
    BarFigure b;
    const auto it = std::find_if(frontier.begin(), frontier.end(), [&](const SweepPoint& p) { return p.recall >= bar; });
    if (it == frontier.end()) return b;
    b.reached = true;
    b.hi = *it;
    b.qps = it->qps;
    if (it == frontier.begin() || it->recall == bar) return b;
    b.lo = *(it - 1);
    b.interpolated = true;
    const double t = (bar - b.lo.recall) / (b.hi.recall - b.lo.recall);
    b.qps = std::exp(std::log(b.lo.qps) + t * (std::log(b.hi.qps) - std::log(b.lo.qps)));
    return b;
}

namespace {

// A value strictly between a and b (a < b), or NaN when the knob has none.
double between(double a, double b, const KnobRange& r) {
    double m = a > 0 ? std::sqrt(a * b) : (a + b) / 2;
    if (r.integer) {
        m = std::round(m);
        if (m <= a) m = a + 1;
        if (m >= b) return NAN;
    } else if (b - a < 1e-3 * std::max(1.0, std::fabs(b))) {
        return NAN;
    }
    return m;
}

}  // namespace

double next_knob_value(const std::vector<SweepPoint>& pts, const std::vector<double>& bars, double gap,
                       const KnobRange& range) {
    std::vector<SweepPoint> s;
    for (const SweepPoint& p : pts)
        if (std::isfinite(p.knob) && std::isfinite(p.recall)) s.push_back(p);
    if (s.empty()) return NAN;
    std::stable_sort(s.begin(), s.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.knob < b.knob; });
    auto measured = [&](double v) {
        return std::any_of(s.begin(), s.end(), [&](const SweepPoint& p) { return p.knob == v; });
    };
    for (double bar : bars) {
        double v = NAN;
        const auto hi = std::find_if(s.begin(), s.end(), [&](const SweepPoint& p) { return p.recall >= bar; });
        if (hi == s.end()) {
            // Below the bar everywhere: further up, unless the last step gained (almost) nothing.
            const SweepPoint& top = s.back();
            const bool saturated = s.size() >= 2 && top.recall - s[s.size() - 2].recall < gap / 10;
            if (!saturated && top.knob < range.hi)
                v = std::min(range.hi, top.knob > 0 ? 2 * top.knob : range.hi);
        } else if (hi == s.begin()) {
            // Above the bar everywhere: further down while the lowest point is more than gap above it.
            if (hi->recall - bar > gap && hi->knob > range.lo) {
                v = std::max(range.lo, hi->knob / 2);
                if (range.integer) v = std::floor(v);
                if (v >= hi->knob) v = NAN;
            }
        } else if (hi->recall - (hi - 1)->recall > gap) {
            v = between((hi - 1)->knob, hi->knob, range);
        }
        if (std::isfinite(v) && !measured(v)) return v;
    }
    return NAN;
}

}  // namespace bench
