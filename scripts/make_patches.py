#!/usr/bin/env python3
"""Makes graft's third benchmark set: 8 x 8 colour patches (d = 192, uint8) of photographs.

Why: dense-SIFT (d = 128) and Fashion-MNIST (d = 784) are what graft was tuned on. This set has
another dimension, other images, and what the held-out checks found hard: smooth regions (sky,
water, blur) give many near-duplicate vectors.

Recipe (every parameter is a constant below; nothing is random):
  1. Images: the photographs of Debian's plasma-workspace-wallpapers 4:5.27.5-2 (KDE Plasma 5.27),
     /usr/share/wallpapers/<NAME>/contents/images/2560x1600.jpg, read with cv2.imread (BGR).
     Base: BASE_IMAGES; queries: QUERY_IMAGES (held out: no image gives both).
  2. Patches: every PATCH x PATCH window whose top-left corner is at (x, y) = multiples of STEP,
     row by row; a row is the window's pixels in (y, x, channel) order: 192 values 0..255.
  3. Exact duplicates removed, keeping the first occurrence: within the base windows (all base
     images, in list order); within the query windows, and every query window that occurs among
     the base windows. Near duplicates stay: they are the point.
  4. Subsample: of the M rows left, the rows at positions floor(i * M / N), i = 0..N-1
     (N = N_BASE, N_QUERY): spread evenly over the images.
Outputs in OUTDIR: base.u8bin, query.u8bin (int32 n, int32 d, then uint8 rows), recipe.json.
Ground truth: graft-bench computes and caches it (exact, on the GPU or with FAISS).

Usage: python3 scripts/make_patches.py OUTDIR [--images DIR] [--small]
       DIR: the wallpapers folder (default /usr/share/wallpapers), or a copy holding the same
       NAME/contents/images/2560x1600.jpg files (scripts/fetch_deps.sh copies them into .deps).
"""
import argparse, hashlib, json, os, sys, time

import cv2
import numpy as np

IMAGES_DIR = "/usr/share/wallpapers"
BASE_IMAGES = ("Autumn", "ColdRipple", "ColorfulCups", "EveningGlow", "FallenLeaf", "OneStandsOut")
QUERY_IMAGES = ("Path",)
IMAGE_FILE = "contents/images/2560x1600.jpg"
PATCH, STEP = 8, 3
N_BASE, N_QUERY = 1_000_000, 10_000
N_BASE_SMALL, N_QUERY_SMALL = 20_000, 200
DIM = PATCH * PATCH * 3


def log(msg, t0=[time.time()]):
    print(f"[{time.time() - t0[0]:7.1f}s] {msg}", flush=True)


def patches(path):
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"make_patches: cannot read {path}")
    win = np.lib.stride_tricks.sliding_window_view(img, (PATCH, PATCH, 3))[::STEP, ::STEP, 0]
    return np.ascontiguousarray(win).reshape(-1, DIM)


def select(rows, n):
    m = len(rows)
    if m < n:
        sys.exit(f"make_patches: {m} distinct windows, fewer than the {n} needed")
    return rows[(np.arange(n, dtype=np.int64) * m) // n]


def rows_as_items(rows):
    return np.ascontiguousarray(rows).view(np.dtype((np.void, DIM)))[:, 0]


def first_unique(rows):
    """rows without repeats, first occurrences in their order."""
    _, first = np.unique(rows_as_items(rows), return_index=True)
    return rows[np.sort(first)]


def write_u8bin(path, rows):
    with open(path, "wb") as f:
        np.array(rows.shape, dtype=np.int32).tofile(f)
        rows.astype(np.uint8).tofile(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--images", default=IMAGES_DIR)
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    n_base, n_query = (N_BASE_SMALL, N_QUERY_SMALL) if a.small else (N_BASE, N_QUERY)
    os.makedirs(a.outdir, exist_ok=True)
    paths = {name: os.path.join(a.images, name, IMAGE_FILE) for name in BASE_IMAGES + QUERY_IMAGES}
    base = np.concatenate([patches(paths[name]) for name in BASE_IMAGES])
    query = np.concatenate([patches(paths[name]) for name in QUERY_IMAGES])
    log(f"{len(base)} base windows, {len(query)} query windows")
    base = first_unique(base)
    query = first_unique(query)
    query = query[~np.isin(rows_as_items(query), rows_as_items(base))]
    log(f"distinct: {len(base)} base, {len(query)} query windows not among the base's")
    b, q = select(base, n_base), select(query, n_query)
    write_u8bin(os.path.join(a.outdir, "base.u8bin"), b)
    write_u8bin(os.path.join(a.outdir, "query.u8bin"), q)
    recipe = {"images": {k: os.path.relpath(v, a.images) for k, v in paths.items()},
              "base_images": BASE_IMAGES, "query_images": QUERY_IMAGES, "patch": PATCH,
              "step": STEP, "d": DIM, "n_base": len(b), "n_query": len(q),
              "sha256": {f: hashlib.sha256(open(os.path.join(a.outdir, f), "rb").read()).hexdigest()
                         for f in ("base.u8bin", "query.u8bin")}}
    with open(os.path.join(a.outdir, "recipe.json"), "w") as f:
        json.dump(recipe, f, indent=1)
    log(f"wrote base {b.shape}, query {q.shape} into {a.outdir}")


if __name__ == "__main__":
    main()
