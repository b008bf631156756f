#include "recall_qps_chart.h"

#include "frontier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bench {

namespace {

// Tableau 10: distinguishable, and readable by most colour-blind readers.
const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else if (c == '"') o += "&quot;";
        else o += c;
    }
    return o;
}

std::string qps_label(double v) {
    char s[32];
    if (v >= 1e6) snprintf(s, sizeof s, "%gM", v / 1e6);
    else if (v >= 1e3) snprintf(s, sizeof s, "%gk", v / 1e3);
    else snprintf(s, sizeof s, "%g", v);
    return s;
}

}  // namespace

bool write_recall_qps_svg(const std::string& path, const std::string& title, const std::string& x_label,
                          const std::vector<Curve>& curves, const std::vector<double>& bars, std::string* err) {
    // Axis ranges: recall from just below the lowest point (to a tenth) up to 1; QPS over the
    // decades that hold every point.
    double rmin = 1, qmin = 1e30, qmax = 0;
    for (const Curve& c : curves)
        for (auto [r, q] : c.pts)
            if (q > 0) {
                rmin = std::min(rmin, r);
                qmin = std::min(qmin, q);
                qmax = std::max(qmax, q);
            }
    if (qmax <= 0) qmin = 1, qmax = 10;
    double x0 = std::max(0.0, std::floor(rmin * 10 - 1e-9) / 10);
    if (x0 > 0.9) x0 = 0.9;
    const double x1 = 1.0;
    const double y0 = std::floor(std::log10(qmin)), y1 = std::max(y0 + 1, std::ceil(std::log10(qmax)));

    const int W = 860, H = 540, left = 80, right = 250, top = 50, bottom = 60;
    const int pw = W - left - right, ph = H - top - bottom;
    auto X = [&](double r) { return left + (r - x0) / (x1 - x0) * pw; };
    auto Y = [&](double q) { return top + ph - (std::log10(q) - y0) / (y1 - y0) * ph; };

    FILE* f = fopen(path.c_str(), "w");
    if (!f) {
        *err = path + ": cannot write";
        return false;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"13\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", left,
            xml_escape(title).c_str());
    // Grid and ticks: recall every 0.1 (0.01 when the range is at most 0.1), QPS every decade.
    const double step = x1 - x0 <= 0.1 + 1e-9 ? 0.01 : 0.1;
    for (double r = x0; r <= x1 + 1e-9; r += step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.2f</text>\n",
                X(r), top, X(r), top + ph, X(r), top + ph + 18, r);
    for (double e = y0; e <= y1 + 1e-9; e += 1) {
        const double q = std::pow(10.0, e);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                left, Y(q), left + pw, Y(q), left - 6, Y(q) + 4, qps_label(q).c_str());
    }
    // The summary's recall bars, where they fall on the axis.
    for (double bar : bars)
        if (bar > x0 && bar < x1)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n",
                    X(bar), top, X(bar), top + ph);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", left, top,
            pw, ph);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", left + pw / 2, H - 18,
            xml_escape(x_label).c_str());
    fprintf(f, "<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\">"
               "queries per second (log scale)</text>\n", top + ph / 2);

    for (size_t i = 0; i < curves.size(); i++) {
        const Curve& c = curves[i];
        const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
        // The line is the index's Pareto frontier (what the summary reads); every measured point
        // gets a circle, filled on the frontier, hollow where another point beats it.
        std::vector<SweepPoint> pts;
        for (auto [r, q] : c.pts) pts.push_back({r, q, 0, ""});
        const std::vector<SweepPoint> front = pareto_frontier(pts);
        std::string d;
        char s[64];
        for (size_t j = 0; j < front.size(); j++) {
            snprintf(s, sizeof s, "%s%.1f %.1f", j ? " L" : "M", X(front[j].recall), Y(front[j].qps));
            d += s;
        }
        if (d.empty()) d = "M 0 0";  // an index without points keeps its (empty) path: one per index
        fprintf(f, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"><title>%s</title></path>\n",
                d.c_str(), color, xml_escape(c.name).c_str());
        for (auto [r, q] : c.pts) {
            if (q <= 0) continue;
            const bool on = std::any_of(front.begin(), front.end(),
                                        [&](const SweepPoint& p) { return p.recall == r && p.qps == q; });
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"%s\"/>\n", X(r), Y(q),
                    on ? color : "white", color);
        }
        const int ly = top + 10 + 22 * (int)i;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                   "<text x=\"%d\" y=\"%d\">%s</text>\n",
                left + pw + 14, ly, left + pw + 40, ly, color, left + pw + 46, ly + 4, xml_escape(c.name).c_str());
    }
    fprintf(f, "</svg>\n");
    const bool ok = fclose(f) == 0;
    if (!ok) *err = path + ": write failed";
    return ok;
}

bool svg_to_png(const std::string& svg, const std::string& png) {
    if (system("command -v rsvg-convert >/dev/null 2>&1") != 0) return false;
    const std::string cmd = "rsvg-convert -o '" + png + "' '" + svg + "'";
    return system(cmd.c_str()) == 0;
}

}  // namespace bench
