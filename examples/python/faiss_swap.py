#!/usr/bin/python3
"""faiss_swap.py: graft as a drop-in for FAISS in a Python pipeline. The pipeline below is plain
FAISS Python (numpy in, numpy out); the only graft-specific line is the factory call,
graft.index_factory instead of faiss.index_factory, which takes graft's strings ("GraftFlat",
"GraftGraph", "GraftGraph,PQ32", "PCA64,GraftGraph", ...) as well as FAISS's own ("Flat",
"HNSW32", "IVF64,Flat", ...).

    usage: faiss_swap.py [DESCRIPTION...]     e.g.  faiss_swap.py HNSW32 GraftGraph

Runs on sift5k (GRAFT_DATA_DIR/sift5k, else ../shared/data beside the clone) and prints, per
description, the build time (train + add), search time for all queries, QPS and recall@10.
"""
import os
import sys
import time

import faiss
import numpy as np

import graft


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=dtype)
    d = raw[:1].view(np.int32)[0]
    return np.ascontiguousarray(raw.reshape(-1, d + 1)[:, 1:])


def main():
    descs = sys.argv[1:] or ["Flat", "GraftFlat", "HNSW32", "GraftGraph", "GraftGraph,PQ32"]
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.join(os.environ.get("GRAFT_DATA_DIR") or os.path.join(here, "..", "..", "..", "shared", "data"), "sift5k")
    xb = read_vecs(os.path.join(data, "sift5k_base.fvecs"), np.float32)
    xq = read_vecs(os.path.join(data, "sift5k_query.fvecs"), np.float32)
    gt = read_vecs(os.path.join(data, "sift5k_groundtruth.ivecs"), np.int32)
    d, k = xb.shape[1], 10
    print(f"sift5k: {len(xb)} base, {len(xq)} queries, d = {d}, k = {k}")
    print(f"{'index':<20} {'build s':>8} {'search s':>9} {'QPS':>10} {'recall@10':>9}")
    for desc in descs:
        t0 = time.perf_counter()
        index = graft.index_factory(d, desc, faiss.METRIC_L2)  # was: faiss.index_factory(d, desc, faiss.METRIC_L2)
        if not index.is_trained:
            index.train(xb)
        index.add(xb)
        index.search(xq[:1], k)  # graph + PQ indexes build their graph at the first search
        t1 = time.perf_counter()
        D, I = index.search(xq, k)
        t2 = time.perf_counter()
        recall = np.mean([len(set(I[q]) & set(gt[q, :k])) / k for q in range(len(xq))])
        print(f"{desc:<20} {t1 - t0:>8.3f} {t2 - t1:>9.4f} {len(xq) / (t2 - t1):>10.0f} {recall:>9.4f}")


if __name__ == "__main__":
    main()
