// graft-bench's summary logic (bench/frontier.h): the Pareto frontier, the QPS at a recall bar
// interpolated on it, and the adaptive sweep's next knob value. Numbers worked by hand.
#include <algorithm>
#include <cmath>
#include <vector>

#include "frontier.h"
extern "C" {
#include "testutil.h"  // a C header without C linkage blocks
}

using bench::KnobRange;
using bench::SweepPoint;

namespace {

SweepPoint P(double knob, double recall, double qps) { return SweepPoint{recall, qps, knob, "v=" + std::to_string((int)knob)}; }

bool near(double a, double b, double rel = 1e-9) { return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)); }

void test_frontier() {
    // A sweep with one dominated point (knob 48: slower than knob 64 at lower recall), a duplicate
    // and a point without QPS.
    std::vector<SweepPoint> pts = {P(16, 0.80, 1000), P(32, 0.90, 800), P(48, 0.92, 500), P(64, 0.95, 600),
                                   P(64, 0.95, 600), P(128, 0.99, 200), P(256, 0.99, 150), P(512, 1.0, 0)};
    const std::vector<SweepPoint> f = bench::pareto_frontier(pts);
    CHECK(f.size() == 4, "frontier of 4 points, got %zu", f.size());
    if (f.size() == 4) {
        CHECK(f[0].knob == 16 && f[1].knob == 32 && f[2].knob == 64 && f[3].knob == 128,
              "frontier knobs 16 32 64 128, got %g %g %g %g", f[0].knob, f[1].knob, f[2].knob, f[3].knob);
        for (size_t i = 1; i < f.size(); i++)
            CHECK(f[i].recall > f[i - 1].recall && f[i].qps < f[i - 1].qps, "recall up, QPS down along the frontier");
    }
    CHECK(bench::pareto_frontier({}).empty(), "no points, no frontier");
    // Equal recall: the faster one; the frontier of a single point is that point.
    const auto one = bench::pareto_frontier({P(1, 0.9, 100), P(2, 0.9, 300)});
    CHECK(one.size() == 1 && one[0].knob == 2, "of two equal recalls, the faster");
}

void test_at_recall() {
    const std::vector<SweepPoint> f = bench::pareto_frontier({P(16, 0.80, 1000), P(32, 0.90, 800), P(64, 0.96, 400),
                                                               P(128, 0.99, 200)});
    // 0.95 between 0.90 (800) and 0.96 (400): t = 5/6, log-linear: 800 * (400/800)^(5/6).
    bench::BarFigure b = bench::qps_at_recall(f, 0.95);
    CHECK(b.reached && b.interpolated, "0.95 interpolated");
    CHECK(near(b.qps, 800 * std::pow(0.5, 5.0 / 6.0)), "0.95: %.3f, expected %.3f", b.qps, 800 * std::pow(0.5, 5.0 / 6.0));
    CHECK(b.lo.knob == 32 && b.hi.knob == 64, "0.95 bracketed by 32 and 64 (%g, %g)", b.lo.knob, b.hi.knob);
    // A bar exactly at a point: that point, measured.
    b = bench::qps_at_recall(f, 0.90);
    CHECK(b.reached && !b.interpolated && b.qps == 800 && b.hi.knob == 32, "0.90 is the point at 0.90");
    // The bar below every point: the lowest point, measured, not extrapolated.
    b = bench::qps_at_recall(f, 0.5);
    CHECK(b.reached && !b.interpolated && b.qps == 1000, "0.5: the first point");
    // Never reached.
    b = bench::qps_at_recall(f, 0.995);
    CHECK(!b.reached, "0.995 not reached");
    // Interpolation stays between its two points and is monotone in the bar.
    double prev = 1e30;
    for (double bar = 0.81; bar <= 0.99; bar += 0.01) {
        b = bench::qps_at_recall(f, bar);
        CHECK(b.reached && b.qps <= b.lo.qps + 1e-9 && b.qps >= b.hi.qps - 1e-9 && b.qps <= prev + 1e-9,
              "bar %.2f: %.1f within [%g, %g]", bar, b.qps, b.hi.qps, b.lo.qps);
        prev = b.qps;
    }
    // The case: IVF's nprobe = 64 at 0.9865 stood for 0.95; with nprobe = 32 at 0.96
    // measured the figure comes from the bracket 16 .. 32 instead.
    const auto ivf = bench::pareto_frontier({P(16, 0.91, 1.2e6), P(32, 0.96, 6.3e5), P(64, 0.9865, 3.07e5)});
    b = bench::qps_at_recall(ivf, 0.95);
    CHECK(b.interpolated && b.lo.knob == 16 && b.hi.knob == 32 && b.qps > 6.3e5, "IVF at 0.95: %.0f from 16..32", b.qps);
}

// Runs the adaptive sweep against a recall curve; returns the knob values measured in order.
template <class Curve>
std::vector<double> sweep(std::vector<double> coarse, Curve recall, const KnobRange& r, double gap = 0.02) {
    std::vector<SweepPoint> pts;
    for (double v : coarse) pts.push_back(P(v, recall(v), 1e6 / (v + 1)));
    std::vector<double> order = coarse;
    for (int i = 0; i < 64; i++) {
        const double v = bench::next_knob_value(pts, {0.90, 0.95, 0.99}, gap, r);
        if (!std::isfinite(v)) break;
        pts.push_back(P(v, recall(v), 1e6 / (v + 1)));
        order.push_back(v);
    }
    return order;
}

// After the sweep, every bar the curve reaches lies between two measured points at most gap apart
// in recall (or at a knob bound).
template <class Curve>
void check_bracketed(const char* what, const std::vector<double>& vals, Curve recall, const KnobRange& r, double gap) {
    std::vector<SweepPoint> pts;
    for (double v : vals) pts.push_back(P(v, recall(v), 1e6 / (v + 1)));
    const auto f = bench::pareto_frontier(pts);
    for (double bar : {0.90, 0.95, 0.99}) {
        if (recall(r.hi) < bar) continue;
        const bench::BarFigure b = bench::qps_at_recall(f, bar);
        const bool ok = b.reached && (b.interpolated ? b.hi.recall - b.lo.recall <= gap + 1e-12
                                                     : b.hi.recall - bar <= gap || b.hi.knob == r.lo);
        CHECK(ok, "%s: bar %.2f figure from [%g: %.4f, %g: %.4f]", what, bar, b.lo.knob, b.lo.recall, b.hi.knob,
              b.hi.recall);
    }
}

void test_next_knob() {
    // IVF's recall climbs with log nprobe: the coarse sweep 1, 4, 16, 64, 256.
    auto ivf = [](double p) { return std::min(1.0, 0.55 + 0.083 * std::log2(p)); };
    const KnobRange nprobe{1, 4096, true};
    auto v = sweep({1, 4, 16, 64, 256}, ivf, nprobe);
    CHECK(v.size() > 5 && v.size() < 25, "nprobe: %zu points", v.size());
    check_bracketed("nprobe", v, ivf, nprobe, 0.02);
    for (double x : v) CHECK(x == std::floor(x) && x >= 1 && x <= 4096, "nprobe %g: an integer in range", x);
    // The first refinement sits between the points around 0.90 (16: 0.882, 64: 1.0): their geometric mean.
    CHECK(v[5] == 32, "first refined nprobe 32, got %g", v[5]);

    // Graph beams starting above every bar: the sweep goes down to reach 0.90, not below k.
    auto graph = [](double L) { return std::min(0.999, 0.70 + 0.12 * std::log2(L / 8)); };
    const KnobRange beam{10, 1024, true};
    v = sweep({64, 128}, graph, beam);
    CHECK(*std::min_element(v.begin(), v.end()) >= 10, "L never below k");
    check_bracketed("L from above", v, graph, beam, 0.02);

    // A sweep that stops short of 0.99 is extended up (doubling), but not past the knob's bound,
    // and a saturated curve is not pushed on.
    v = sweep({16, 32}, graph, beam);
    CHECK(*std::max_element(v.begin(), v.end()) <= 1024, "L never above 1024");
    check_bracketed("L from below", v, graph, beam, 0.02);
    auto flat = [](double) { return 0.85; };
    v = sweep({16, 32, 64}, flat, beam);
    CHECK(v.size() == 3, "a saturated curve below every bar: nothing added (%zu)", v.size());

    // A real-valued knob (GGNN's tau), from 0.
    auto tau = [](double t) { return std::min(1.0, 0.80 + 0.25 * t); };
    const KnobRange tr{0, 2, false};
    v = sweep({0, 0.5, 1.0}, tau, tr);
    check_bracketed("tau", v, tau, tr, 0.02);

    // Adjacent integers end the refinement even when the recall gap stays wide.
    auto step = [](double L) { return L >= 21 ? 0.99 : 0.80; };
    v = sweep({16, 32}, step, beam);
    CHECK(std::count(v.begin(), v.end(), 20.0) == 1 && std::count(v.begin(), v.end(), 21.0) == 1,
          "the step found between 20 and 21");
    // Nothing swept (NaN knobs): nothing to add.
    CHECK(std::isnan(bench::next_knob_value({SweepPoint{0.5, 10, NAN, ""}}, {0.9}, 0.02, beam)), "no knob, no value");
}

}  // namespace

int main() {
    test_frontier();
    test_at_recall();
    test_next_knob();
    return graft_test_finish("test_frontier");
}
