#!/usr/bin/python3
"""What the Python face costs: one search of 10,000 queries from Python (graft's index through
FAISS's numpy wrappers) against the same search from C (faiss_Index_search in
build/bench/studies/search_timing), same index file, same queries, same process environment.

The 10k queries are sift5k's 500 real queries, each repeated 20 times with a small Gaussian
perturbation (sigma 1.0 on values 0..255), so no two rows are equal. The index is built in Python,
written with graft.write_index, and loaded by both sides from that file. After a warm-up, REPEATS
pairs of calls (C, then Python) are timed; the table gives median and minimum seconds per call,
the overhead (median over the pairs of Python / C - 1) and, in milliseconds, what FAISS's numpy
wrapper adds to the same C++ call made directly from Python (index.search_c).

    PYTHONPATH=build/python /usr/bin/python3 bench/studies/python_overhead.py [--index GraftFlat GraftGraph]
        [--repeats 7] [--build build] [--record bench/results/cpu.jsonl]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import faiss
import numpy as np

import graft

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")  # the repository (this file is bench/studies/python_overhead.py)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from conftest import Sift5k  # noqa: E402  (the tests' reader of the real data)


def write_fvecs(path, x):
    rows = np.empty((x.shape[0], x.shape[1] + 1), dtype=np.float32)
    rows[:, 0] = np.array([x.shape[1]], dtype=np.int32).view(np.float32)[0]
    rows[:, 1:] = x
    rows.tofile(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", nargs="*", default=["GraftGraph", "GraftGraph,PQ32", "GraftFlat"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.environ.get("GRAFT_DATA_DIR", os.path.join(ROOT, "..", "shared", "data")))
    ap.add_argument("--record", help="append one JSON record per index to this file")
    args = ap.parse_args()

    sift = Sift5k(os.path.join(args.data, "sift5k"))
    rng = np.random.default_rng(1234)
    xq = np.repeat(sift.xq, 20, axis=0) + rng.normal(0, 1.0, (20 * len(sift.xq), sift.d)).astype(np.float32)
    xq = np.ascontiguousarray(xq, dtype=np.float32)
    timing = os.path.join(args.build, "bench", "studies", "search_timing")
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-pyoverhead"
    print(f"{len(xq)} queries x {sift.d}, {len(sift.xb)} base vectors, k = {args.k}, "
          f"{args.repeats} timed pairs of calls (C, Python) after a warm-up; FAISS threads {faiss.omp_get_max_threads()}")
    print(f"{'index':<14} {'C median':>10} {'C min':>10} {'Py median':>10} {'Py min':>10} {'overhead':>9} {'wrapper ms':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        qpath = os.path.join(tmp, "queries.fvecs")
        write_fvecs(qpath, xq)
        for desc in args.index:
            built = graft.index_factory(sift.d, desc)
            if not built.is_trained:
                built.train(sift.xb)
            built.add(sift.xb)
            ipath = os.path.join(tmp, "index.graft")
            graft.write_index(built, ipath)
            del built
            index = graft.read_index(ipath)
            D = np.empty((len(xq), args.k), dtype=np.float32)
            I = np.empty((len(xq), args.k), dtype=np.int64)
            index.search(xq, args.k)  # warm-up (the C side warms up in each of its runs)
            c, py, raw = [], [], []
            # Paired calls, C then Python, so that both sides of a pair see the same load on a
            # shared machine; the overhead is the median of the pairs' ratios.
            for _ in range(args.repeats):
                out = subprocess.run([timing, ipath, qpath, str(args.k), "1"], check=True,
                                     capture_output=True, text=True).stdout
                c.append(float(out.split()[1]))
                t0 = time.perf_counter()
                index.search(xq, args.k)
                py.append(time.perf_counter() - t0)
                # The same C++ call without FAISS's numpy wrapper: the wrapper's own cost.
                t0 = time.perf_counter()
                index.search_c(len(xq), faiss.swig_ptr(xq), args.k, faiss.swig_ptr(D), faiss.swig_ptr(I), None)
                raw.append(time.perf_counter() - t0)
            cm, pm = statistics.median(c), statistics.median(py)
            over = statistics.median([p / q for p, q in zip(py, c)]) - 1
            wrap_ms = 1e3 * statistics.median([p - r for p, r in zip(py, raw)])
            print(f"{desc:<14} {cm:>10.4f} {min(c):>10.4f} {pm:>10.4f} {min(py):>10.4f} {100 * over:>+8.2f}% {wrap_ms:>+10.3f}")
            if args.record:
                with open(args.record, "a") as f:
                    for system, t in (("graft-c", c), ("graft-python", py)):
                        f.write(json.dumps({
                            "run_id": run_id, "date": datetime.date.today().isoformat(), "commit": commit,
                            "device": f"CPU ({platform.machine()}, {os.cpu_count()} cores)",
                            "bench": "python_overhead", "system": system, "index": desc,
                            "dataset": "sift5k (queries x20, perturbed)", "n": len(sift.xb), "d": sift.d,
                            "nq": len(xq), "k": args.k, "metric": "L2",
                            "params": {"repeats": args.repeats, "median_s": statistics.median(t),
                                       "min_s": min(t), "overhead": over, "wrapper_ms": wrap_ms},
                            "qps": len(xq) / statistics.median(t),
                            "threads": faiss.omp_get_max_threads()}) + "\n")

    # FAISS's numpy wrapper's own cost per call, where the search itself is almost free (a flat
    # index of one vector): what Python adds to a GPU search, whose 10k queries take milliseconds.
    # One thread: on a loaded machine, OpenMP's barriers would be all that is measured.
    faiss.omp_set_num_threads(1)
    tiny = graft.GraftIndexFlat(sift.d)
    tiny.add(sift.xb[:1])
    D = np.empty((len(xq), args.k), dtype=np.float32)
    I = np.empty((len(xq), args.k), dtype=np.int64)
    wrapped, direct = [], []
    for _ in range(200):
        t0 = time.perf_counter()
        tiny.search(xq, args.k)
        t1 = time.perf_counter()
        tiny.search_c(len(xq), faiss.swig_ptr(xq), args.k, faiss.swig_ptr(D), faiss.swig_ptr(I), None)
        t2 = time.perf_counter()
        wrapped.append(t1 - t0)
        direct.append(t2 - t1)
    print(f"wrapper cost per call ({len(xq)} queries, 1-vector index, 200 pairs): "
          f"index.search {1e6 * statistics.median(wrapped):.1f} us, index.search_c "
          f"{1e6 * statistics.median(direct):.1f} us, difference "
          f"{1e6 * (statistics.median(wrapped) - statistics.median(direct)):.1f} us")


if __name__ == "__main__":
    main()
