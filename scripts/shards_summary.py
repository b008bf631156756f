#!/usr/bin/env python3
"""The multi-GPU summary of a shards job's call (issue 33; scripts/device/jobs/shards.sh), from graft-bench's records.

Reads the JSON lines graft-bench wrote (one run id: the last one in the file unless --run-id, which
may name several, comma-separated, e.g. two calls back to back on one machine) and prints, per data
set:
  - every index, batch by batch: its GPUs, build seconds and the ratio to the one-GPU index of the
    same system (graft or FAISS), QPS at recall@10 0.90 and 0.95 read off its frontier at that batch
    (graft-bench's summary records: interpolated between the two frontier points around the bar;
    records of graft-bench up to a65fc54 hold them for the largest batch only: "-" at the others)
    and the ratio to one GPU, and its peak memory on each device;
  - replicas and shards against one GPU at the same beam L (batch by batch): the QPS ratio at every
    L of the coarse sweep, and at the smallest L where the one-GPU index reaches recall 0.95 (the
    issue's measure), against the targets (1.8x on 2 GPUs, 3.4x on 4);
  - an index spread over several GPUs against the one-GPU out-of-core index (",ooc") of the same
    data: QPS at 0.90 and 0.95.
and writes one recall-QPS chart per data set (SVG, no dependencies) beside --charts.
"""
import argparse
import itertools
import json
import math
import os
import sys

TARGET = {2: 1.8, 4: 3.4}  # the ratio for replicas' search and shards' build


def role(r):
    """(system, kind, gpus) of a record: kind 'one', 'shards', 'replicas' or 'ooc'."""
    p = r.get("params", {})
    system = "FAISS" if r["system"].startswith("faiss") else "graft"
    if "replicas" in p:
        return system, "replicas", p.get("gpus", p["replicas"])
    if "shards" in p:
        return system, "shards", p.get("gpus", p["shards"])
    if ",ooc" in r["index"]:
        return system, "ooc", 1
    return system, "one", 1


def knob_of(p):
    """(name, value) of a record's search knob, or (None, None)."""
    return next(((k, p[k]) for k in ("L", "nprobe", "efSearch", "tau") if k in p), (None, None))


def measured(rs, index, batch):
    """graft-bench's measured records (not its summary records) of one index at one batch."""
    return [r for r in rs if r["index"] == index and r["params"].get("batch") == batch and not r.get("summary")]


def fmt_qps(q):
    return "-" if q is None else f"{q:,.0f}"


def fmt_ratio(a, b):
    return "" if a is None or not b else f"{a / b:.2f}x"


def load(path, run_id):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    if not recs:
        sys.exit(f"{path}: no records")
    rid = run_id or recs[-1]["run_id"]
    rids = set(rid.split(","))
    return rid, [r for r in recs if r["run_id"] in rids]


def chart(path, title, curves):
    """curves: [(label, [(recall, qps), ...])]: an SVG, recall on x, log QPS on y."""
    pts = [p for _, c in curves for p in c if p[1] > 0]
    if not pts:
        return False
    x0 = max(0.5, math.floor(min(p[0] for p in pts) * 20) / 20)
    x1 = 1.0
    y0 = 10 ** math.floor(math.log10(min(p[1] for p in pts)))
    y1 = 10 ** math.ceil(math.log10(max(p[1] for p in pts)))
    W, H, L, R, T, B = 900, 560, 80, 260, 40, 50
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    sy = lambda y: T + (math.log10(y1) - math.log10(y)) / (math.log10(y1) - math.log10(y0)) * (H - T - B)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for i in range(int(round((x1 - x0) / 0.05)) + 1):
        x = x0 + i * 0.05
        out.append(f'<line x1="{sx(x):.1f}" y1="{T}" x2="{sx(x):.1f}" y2="{H - B}" stroke="#ddd"/>')
        out.append(f'<text x="{sx(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x:.2f}</text>')
    e = int(math.log10(y0))
    while 10 ** e <= y1:
        out.append(f'<line x1="{L}" y1="{sy(10 ** e):.1f}" x2="{W - R}" y2="{sy(10 ** e):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{sy(10 ** e) + 4:.1f}" text-anchor="end">1e{e}</text>')
        e += 1
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">recall@10</text>')
    out.append(f'<text x="18" y="{(T + H - B) / 2}" transform="rotate(-90 18 {(T + H - B) / 2})" '
               f'text-anchor="middle">QPS (log)</text>')
    for i, (label, c) in enumerate(curves):
        col = colors[i % len(colors)]
        c = sorted(p for p in c if p[1] > 0 and p[0] >= x0)
        if not c:
            continue
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in c)
        out.append(f'<polyline points="{line}" fill="none" stroke="{col}" stroke-width="2"/>')
        for x, y in c:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{col}"/>')
        ly = T + 16 + 18 * i
        out.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 32}" y2="{ly - 4}" stroke="{col}" stroke-width="2"/>')
        out.append(f'<text x="{W - R + 38}" y="{ly}">{label}</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records")
    ap.add_argument("--run-id")
    ap.add_argument("--charts", help="folder for recall-qps-multi-gpu-<dataset>.svg")
    ap.add_argument("--gpu-mib", type=float, default=0, help="one device's memory, for the 'fits one GPU' check")
    a = ap.parse_args()
    rid, recs = load(a.records, a.run_id)
    device = recs[0].get("device", "?")
    commits = ",".join(dict.fromkeys(r.get("commit", "?") for r in recs))
    print(f"== multi-GPU summary: run {rid}, commit {commits}, {device}")
    checked, met = 0, 0
    for ds in dict.fromkeys(r["dataset"] for r in recs):
        rs = [r for r in recs if r["dataset"] == ds]
        n = rs[0]["n"]
        print(f"\n{ds}: {n:,} x {rs[0]['d']}, {rs[0]['nq']:,} queries, recall@{rs[0]['k']}"
              f"{' (ties at the k-th distance count)' if rs[0]['params'].get('recall_ties') else ''}")
        indexes = list(dict.fromkeys(r["index"] for r in rs))
        summ = {}  # (index, bar, batch) -> graft-bench's summary record
        for r in rs:
            if r.get("summary") and "recall_bar" in r["params"]:
                summ[(r["index"], round(r["params"]["recall_bar"], 2), r["params"].get("batch"))] = r
        runs = [r for r in rs if not r.get("summary") and "recall" in r and "qps" in r]
        all_batches = sorted({r["params"].get("batch", 0) for r in runs} - {1})  # batch 1: latency runs
        info = {}
        for ix in indexes:
            mine = [r for r in rs if r["index"] == ix]
            per_dev = [max(col) for col in itertools.zip_longest(*(r.get("gpu_bytes_per_device", []) for r in mine),
                                                                  fillvalue=0)]
            shard_bytes = next((r["gpu_bytes_per_shard"] for r in mine if "gpu_bytes_per_shard" in r), None)
            q = {(bar, b): summ.get((ix, bar, b), {}).get("qps") for b in all_batches for bar in (0.9, 0.95)}
            info[ix] = dict(role=role(mine[0]), build=mine[0].get("build_s"), per_dev=per_dev, shard_bytes=shard_bytes,
                            q=q, reused=mine[0]["params"].get("train_reused", False))
        one = {sys_: ix for ix, v in info.items() for sys_ in [v["role"][0]] if v["role"][1] == "one"}
        for tb in all_batches:
            print(f"  batch {tb}:")
            print(f"  {'index':<40} {'GPUs':>4} {'build s':>8} {'vs 1':>6} {'QPS@0.90':>11} {'QPS@0.95':>11} {'vs 1':>6}  GPU MiB per device")
            for ix, v in info.items():
                system, kind, gpus = v["role"]
                q90, q95 = v["q"][(0.9, tb)], v["q"][(0.95, tb)]
                if q90 is None and q95 is None and not measured(runs, ix, tb):
                    continue  # not run at this batch
                base = info.get(one.get(system)) if kind != "one" else None
                build_ratio = f"{base['build'] / v['build']:.2f}x" if base and v["build"] and base["build"] else ""
                if v["reused"]:
                    build_ratio = "(k-means reused)"
                dev = "/".join(str(b >> 20) for b in v["per_dev"]) or "-"
                print(f"  {ix:<40} {gpus:>4} {v['build'] or 0:>8.2f} {build_ratio:>6} {fmt_qps(q90):>11} "
                      f"{fmt_qps(q95):>11} {fmt_ratio(q95, base['q'][(0.95, tb)] if base else None):>6}  {dev}")
                if v["shard_bytes"]:
                    total = sum(v["shard_bytes"])
                    fits = ""
                    if a.gpu_mib:
                        fits = "; fits one GPU" if total / 2**20 <= a.gpu_mib else f"; {total / 2**20 / a.gpu_mib:.2f}x one GPU's memory: does not fit one"
                    print(f"  {'':<40} resident per shard (MiB): {'/'.join(str(b >> 20) for b in v['shard_bytes'])}, "
                          f"total {total / 2**30:.1f} GiB{fits}")
        # Same beam, same batch: the spread index against the one-GPU index of its system.
        for ix, v in info.items():
            system, kind, gpus = v["role"]
            if kind not in ("shards", "replicas") or system not in one:
                continue
            base_ix = one[system]
            batches = sorted({r["params"]["batch"] for r in rs if r["index"] == ix and not r.get("summary")
                              and r["params"].get("batch", 1) > 1})
            for b in batches:
                # Each one's coarse sweep by knob value (graft-bench's refined points left out).
                mine, base = ({knob_of(r["params"])[1]: r for r in measured(rs, i, b)
                               if knob_of(r["params"])[0] and not r["params"].get("refined")} for i in (ix, base_ix))
                common = sorted(set(mine) & set(base))
                if not common:
                    continue
                k = knob_of(rs[[r["index"] for r in rs].index(ix)]["params"])[0] or "knob"
                cells = [f"{k}={kv}: {mine[kv]['qps'] / base[kv]['qps']:.2f}x (r {base[kv]['recall']:.3f}/{mine[kv]['recall']:.3f})"
                         for kv in common]
                print(f"  {ix} vs {base_ix}, batch {b}, same {k} (QPS ratio; recall one/spread):")
                for i in range(0, len(cells), 3):
                    print("      " + "; ".join(cells[i:i + 3]))
                at = next((kv for kv in common if base[kv]["recall"] >= 0.95), None)
                if at is not None:
                    ratio = mine[at]["qps"] / base[at]["qps"]
                    verdict = ""
                    if kind == "replicas" and system == "graft" and gpus in TARGET:
                        ok = ratio >= TARGET[gpus]
                        checked, met = checked + 1, met + ok
                        verdict = f"  target {TARGET[gpus]}x: {'MET' if ok else 'MISSED'}"
                    print(f"    at {k}={at} (one GPU's first >= 0.95: recall {base[at]['recall']:.4f}): "
                          f"{fmt_qps(base[at]['qps'])} -> {fmt_qps(mine[at]['qps'])} QPS, {ratio:.2f}x{verdict}")
            if kind == "shards" and system == "graft" and gpus in TARGET and v["build"] and info[base_ix]["build"]:
                ratio = info[base_ix]["build"] / v["build"]
                ok = ratio >= TARGET[gpus]
                checked, met = checked + 1, met + ok
                print(f"  {ix}: build {info[base_ix]['build']:.2f} s -> {v['build']:.2f} s, {ratio:.2f}x; "
                      f"target {TARGET[gpus]}x: {'MET' if ok else 'MISSED'}")
        # In memory over several GPUs against out-of-core on one.
        ooc = [ix for ix, v in info.items() if v["role"][1] == "ooc"]
        spread = [ix for ix, v in info.items() if v["role"][1] == "shards" and v["role"][0] == "graft"]
        for o in ooc:
            for sp in spread:
                for tb in all_batches:
                    a90, a95 = info[sp]["q"][(0.9, tb)], info[sp]["q"][(0.95, tb)]
                    b90, b95 = info[o]["q"][(0.9, tb)], info[o]["q"][(0.95, tb)]
                    if a90 is None and b90 is None:
                        continue
                    print(f"  {sp} (in memory, {info[sp]['role'][2]} GPUs) vs {o} (out-of-core, 1 GPU), batch {tb}: "
                          f"QPS@0.90 {fmt_qps(a90)} vs {fmt_qps(b90)} {fmt_ratio(a90, b90)}; "
                          f"QPS@0.95 {fmt_qps(a95)} vs {fmt_qps(b95)} {fmt_ratio(a95, b95)}")
        if a.charts:
            # The largest batch every index ran (FAISS's peers may have run fewer), else the largest.
            runs = [r for r in rs if not r.get("summary")]
            per_ix = [{r["params"].get("batch", 0) for r in runs if r["index"] == ix} for ix in indexes]
            common = set.intersection(*per_ix) if per_ix else set()
            top = max(common or {r["params"].get("batch", 0) for r in runs} or {0})
            curves = []
            for ix in indexes:
                c = [(r["recall"], r["qps"]) for r in measured(rs, ix, top) if "recall" in r and "qps" in r]
                if c:
                    curves.append((ix, c))
            path = os.path.join(a.charts, f"recall-qps-multi-gpu-{ds}.svg")
            if chart(path, f"{ds} ({n:,}), batch {top}, {device}", curves):
                print(f"  chart: {path}")
    print(f"\nissue 33 targets (graft replicas' search at the one-GPU L of recall 0.95, shards' build, "
          f"on 2 or 4 GPUs): {met} of {checked} met")


if __name__ == "__main__":
    main()
