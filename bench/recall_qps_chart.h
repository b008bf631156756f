// graft-bench's chart: recall (x) against queries per second (y, log scale), one curve per index
// (its Pareto frontier, bench/frontier.h), as SVG written by hand (no plotting dependency), and as
// PNG through librsvg's rsvg-convert when it is on PATH.
#ifndef GRAFT_BENCH_RECALL_QPS_CHART_H
#define GRAFT_BENCH_RECALL_QPS_CHART_H

#include <string>
#include <utility>
#include <vector>

namespace bench {

struct Curve {
    std::string name;                          // the legend entry (the index string)
    std::vector<std::pair<double, double>> pts;  // (recall, qps), in sweep order
};

// Writes the chart; each curve is one <path> (its Pareto frontier, by recall) plus a circle per
// point (hollow: off the frontier), and a dashed line at each recall bar. False with *err set when
// the file cannot be written.
bool write_recall_qps_svg(const std::string& path, const std::string& title, const std::string& x_label,
                          const std::vector<Curve>& curves, const std::vector<double>& bars, std::string* err);

// Renders svg into png with rsvg-convert; false (quietly) when it is not on PATH or fails.
bool svg_to_png(const std::string& svg, const std::string& png);

}  // namespace bench

#endif
