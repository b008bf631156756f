#!/usr/bin/env python3
"""graft-bench records of one run as markdown tables: per data set, each index's build, memory,
graph quality and QPS at each recall bar and batch (graft-bench's own summary records), and the
batch-1 p50 latency at the first swept configuration that reaches each bar.

    python3 scripts/peers_table.py RECORDS.jsonl [--commit C] [--run-id R[,R...]]

The QPS figures are graft-bench's (read off each frontier, "~" interpolated); this script only
lays them out. Latency: graft-bench times batch 1 over --latency-queries queries at each coarse
configuration; the figure given is the lowest p50 among the configurations whose recall at batch
1 (over those queries: about 0.005 of noise at 200) reaches the bar, "-" where none does. Batch 1
has its own recall: an automatic mode (graft's multi walks, CAGRA's multi-CTA) searches a small
batch otherwise than a large one.
"""
import argparse
import json
from collections import defaultdict

BARS = (0.90, 0.95, 0.99)


def fmt_qps(q):
    return f"{q / 1e6:.2f}M" if q >= 1e6 else f"{q / 1e3:.0f}k"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records")
    ap.add_argument("--commit")
    ap.add_argument("--run-id")
    a = ap.parse_args()
    runs = set(a.run_id.split(",")) if a.run_id else None
    recs = [json.loads(line) for line in open(a.records) if line.strip()]
    recs = [r for r in recs if r.get("bench") == "graft-bench" and (not a.commit or r["commit"] == a.commit)
            and (not runs or r["run_id"] in runs)]
    by_set = defaultdict(list)
    for r in recs:
        by_set[r["dataset"]].append(r)
    for name, rs in by_set.items():
        batches = sorted({r["params"]["batch"] for r in rs if r.get("summary")}, reverse=True)
        order = list(dict.fromkeys(r["index"] for r in rs))
        print(f"\n### {name} ({rs[0]['n']} x {rs[0]['d']}, {rs[0]['metric']}, commit {rs[0]['commit']}, "
              f"{rs[0]['device']})\n")
        head = "| index | build s | GPU MiB | graph recall |"
        for b in batches:
            head += "".join(f" {bar:.2f} @{b} |" for bar in BARS)
        head += "".join(f" p50 ms @{bar:.2f} |" for bar in BARS[1:])
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for idx in order:
            mine = [r for r in rs if r["index"] == idx]
            plain = [r for r in mine if not r.get("summary")]
            any_r = plain[0] if plain else mine[0]
            gr = any_r.get("params", {}).get("graph_recall")
            row = (f"| `{idx}` | {any_r.get('build_s', 0):.2f} | {any_r.get('gpu_peak_bytes', 0) / 2**20:.0f} | "
                   f"{gr:.3f} |" if gr is not None else
                   f"| `{idx}` | {any_r.get('build_s', 0):.2f} | {any_r.get('gpu_peak_bytes', 0) / 2**20:.0f} | - |")
            for b in batches:
                for bar in BARS:
                    s = [r for r in mine if r.get("summary") and r["params"].get("batch") == b
                         and abs(r["params"].get("recall_bar", 0) - bar) < 1e-9]
                    row += (" " + ("~" if s[0].get("interpolated") else "") + fmt_qps(s[0]["qps"]) + " |") if s else " - |"
            p50 = [r for r in plain if r["params"].get("latency") == "p50"]
            for bar in BARS[1:]:
                ok = [r["latency_ms"] for r in p50 if r["recall"] >= bar]
                row += f" {min(ok):.3f} |" if ok else " - |"
            print(row)


if __name__ == "__main__":
    main()
