"""Shared fixtures: the real sift5k set (GRAFT_DATA_DIR, as the C tests read it)."""
import os

import numpy as np
import pytest


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=dtype)
    d = raw[:1].view(np.int32)[0]
    return np.ascontiguousarray(raw.reshape(-1, d + 1)[:, 1:])


class Sift5k:
    def __init__(self, folder):
        self.xb = read_vecs(os.path.join(folder, "sift5k_base.fvecs"), np.float32)
        self.xq = read_vecs(os.path.join(folder, "sift5k_query.fvecs"), np.float32)
        self.gt = read_vecs(os.path.join(folder, "sift5k_groundtruth.ivecs"), np.int32)
        self.d = self.xb.shape[1]

    def recall(self, I, k=10):
        """recall@k = |found & true top-k| / k, averaged over the queries."""
        hits = sum(len(set(I[q, :k]) & set(self.gt[q, :k])) for q in range(len(I)))
        return hits / (k * len(I))


@pytest.fixture(scope="session")
def sift():
    # GRAFT_DATA_DIR wins, as for the C tests; CTest passes the configured folder as the default.
    root = os.environ.get("GRAFT_DATA_DIR") or os.environ.get("GRAFT_DATA_DIR_DEFAULT", "")
    folder = os.path.join(root, "sift5k")
    if not os.path.exists(os.path.join(folder, "sift5k_base.fvecs")):
        pytest.fail(f"real test data missing in {folder} (set GRAFT_DATA_DIR to the folder holding sift5k/)")
    return Sift5k(folder)
