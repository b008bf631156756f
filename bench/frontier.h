// graft-bench's fair summary: each index's recall-QPS Pareto frontier over its own sweep, the QPS
// at a recall bar read off that frontier, and the knob values a sweep should measure next so that
// the bar falls between two close points. Plain C++17, no dependencies (tests/bench/test_frontier).
//
// Why: a summary that takes "the best measured point at recall >= bar" lets a coarse sweep decide
// the comparison (a point at 0.987 standing for 0.95). ann-benchmarks and big-ann-benchmarks read
// each system off its Pareto frontier; so does graft-bench, for graft and the peers alike.
#ifndef GRAFT_BENCH_FRONTIER_H
#define GRAFT_BENCH_FRONTIER_H

#include <string>
#include <vector>

namespace bench {

// One measured configuration: its recall and QPS, the knob value and a label to name it by.
struct SweepPoint {
    double recall = 0, qps = 0;
    double knob = 0;    // the swept value (NaN where nothing is swept)
    std::string label;  // e.g. "L=64"
};

// The points no other point beats on both recall and QPS, by recall ascending (so QPS
// descending). Of two equal points the first is kept. Points with qps <= 0 are left out.
std::vector<SweepPoint> pareto_frontier(const std::vector<SweepPoint>& pts);

// The QPS of a frontier at recall `bar`.
struct BarFigure {
    bool reached = false;       // some frontier point has recall >= bar
    bool interpolated = false;  // between lo and hi, log QPS linear in recall
    double qps = 0;
    SweepPoint lo, hi;  // interpolated: the frontier points around the bar (lo.recall < bar <= hi.recall);
                        // otherwise hi is the measured point the figure is (the frontier's first at >= bar)
};

// Reads `frontier` (pareto_frontier's output) at `bar`. Interpolated when a frontier point lies
// below the bar and one at or above it; a point exactly at the bar is taken as measured. With no
// point below, the figure is the measured point with the lowest recall (it may lie far above the
// bar: the caller shows its recall).
BarFigure qps_at_recall(const std::vector<SweepPoint>& frontier, double bar);

// The knob's range and kind, for next_knob_value.
struct KnobRange {
    double lo, hi;        // the values a search accepts and that change its result
    bool integer = true;  // L, efSearch, nprobe: integers; GGNN's tau: real
};

// The next value of the knob to measure so that every bar is bracketed by two measured points whose
// recalls are at most `gap` apart (NaN: none; the sweep is done). `pts` holds what was measured (any
// order). In turn, for each bar:
//   - the bar lies between two measured neighbours (by knob) more than `gap` apart in recall:
//     their geometric mean (recall grows about with log L / log nprobe), or the arithmetic one
//     for a knob that starts at 0;
//   - every point lies above the bar + gap: the lowest knob halved (down to range.lo);
//   - every point lies below the bar: the highest knob doubled (up to range.hi), while the last
//     doubling still raised recall by at least gap / 10 (a saturated sweep is not pushed on).
// Values already measured, or none left between two integers, end that bar's refinement.
double next_knob_value(const std::vector<SweepPoint>& pts, const std::vector<double>& bars, double gap,
                       const KnobRange& range);

}  // namespace bench

#endif
