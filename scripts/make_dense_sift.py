#!/usr/bin/env python3
"""Makes graft's 1M-scale benchmark set: dense SIFT of the Debian `mate-backgrounds` wallpapers.

Recipe (every parameter is a constant below; nothing is random):
  1. Images: the JPEG photographs/paintings of /usr/share/backgrounds/mate/ (Debian package
     mate-backgrounds 1.26.0), read with cv2.imread(path, cv2.IMREAD_GRAYSCALE). Base: BASE_IMAGES;
     queries: QUERY_IMAGES (held out: no image gives both). Elephants_3840x2160.jpg and
     Elephants_5640x3172.jpg are left out: they are the same painting as Elephants.jpg, larger. The
     PNGs are left out: digital art, and several are transparent (gray = 0 everywhere).
  2. Grid: keypoints at x = MARGIN, MARGIN + STEP, ... <= width - 1 - MARGIN (same for y), row by
     row; for each size in SIZES a cv2.KeyPoint(x, y, size, ANGLE) (upright). Note that OpenCV's
     SIFT spatial bin is 3 * size / 2 px wide, so size 16 covers about 4 x 24 = 96 px.
  3. Descriptors: cv2.SIFT_create() (OpenCV defaults).compute(image, keypoints), per image and
     per size in that order; rows with L2 norm <= MIN_NORM are dropped; values are rounded and
     clipped to 0..255 and stored as uint8.
  4. Subsample: of the M rows left (base: all base images; queries: all query images) in the order
     above, the rows at positions floor(i * M / N'), i = 0..N'-1, with N' = N + extra(N) and
     extra(N) = max(10, N // 1000): spread evenly over images and sizes.
  5. Exact duplicates are removed, keeping the first occurrence: within the base selection; within
     the query selection, and every query row that occurs anywhere in the base images (all M rows,
     not only the selected ones). Then the first N_BASE (N_QUERY) rows are kept. (Subsampling before
     deduplicating keeps the selection stable when another OpenCV build rounds a value differently:
     OpenCV 5.0 gives +-1 in one value of ~0.03% of rows compared with 4.6.)
  6. Exact top-K ground truth (L2) with FAISS IndexFlatL2 via bench/graft_groundtruth.
Outputs in OUTDIR: base.u8bin, query.u8bin (int32 n, int32 d, then uint8 rows), groundtruth.ibin
(int32 n, int32 k, then int32 ids, nearest first), recipe.json (parameters, image lists, counts, sha256).
--small: same recipe with STEP_SMALL, N_BASE_SMALL and N_QUERY_SMALL, for testing the pipeline.
--smooth: the duplicate-heavy set "smooth-sift1m" (the exact benchmark's, bench/bench_exact.cpp):
  the same recipe on the smooth digital art among the PNGs, SMOOTH_BASE_IMAGES and
  SMOOTH_QUERY_IMAGES (the PNGs whose gray image is 0 everywhere give no descriptor and are left
  out), at grid step STEP_SMOOTH, and without item 5: no duplicate is removed, so the identical
  descriptors of flat colour gradients stay, and queries may equal base rows. Its query image is a
  recolouring of three base images (Ubuntu-Mate-*), so a query's neighbourhood holds many near
  duplicates: data like issue 36's, on which the fused FP16 path's certificate as it was failed
  for 28% of the queries (CPU simulation, bench/RESULTS.md, "Exact k-NN on data with equal and
  near-duplicate vectors").
  scripts/fetch_deps.sh carries these PNGs to the GPU machine as grayscale PNGs: the same pixels
  for cv2.IMREAD_GRAYSCALE, so the same descriptors (recipe.json's sha256 are of the files read).

Usage: python3 scripts/make_dense_sift.py [OUTDIR] [--images DIR] [--gt-tool PATH] [--small | --smooth]
       [--threads N] [--no-gt]        (on Debian use /usr/bin/python3, which has python3-opencv)
"""
import argparse, json, os, subprocess, sys, time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from u8rows import sha256  # noqa: E402  (one file hash for every data-set maker)

IMAGES_DIR = "/usr/share/backgrounds/mate"
BASE_IMAGES = (
    "abstract/Elephants.jpg", "desktop/GreenTraditional.jpg", "nature/Aqua.jpg", "nature/Blinds.jpg",
    "nature/Dune.jpg", "nature/FreshFlower.jpg", "nature/Garden.jpg", "nature/LadyBird.jpg",
    "nature/RainDrops.jpg", "nature/Storm.jpg", "nature/TwoWings.jpg", "nature/Wood.jpg",
    "nature/YellowFlower.jpg",
)
QUERY_IMAGES = ("nature/GreenMeadow.jpg",)
STEP = 8             # grid step, px
SIZES = (8, 16)      # cv2.KeyPoint sizes (diameters), each at every grid point
ANGLE = 0.0          # upright descriptors (KeyPoint's default -1 would rotate them by 1 degree)
MARGIN = 16          # px from the image border to the first/last grid point
MIN_NORM = 100.0     # drop descriptors with L2 norm <= MIN_NORM (flat patches)
N_BASE, N_QUERY, GT_K = 1_000_000, 10_000, 100
STEP_SMALL, N_BASE_SMALL, N_QUERY_SMALL = 32, 20_000, 200
SMOOTH_BASE_IMAGES = (
    "abstract/Arc-Colors-Transparent-Wallpaper.png", "abstract/Flow.png", "abstract/Gulp.png",
    "desktop/Float-into-MATE.png", "desktop/Stripes.png", "desktop/Ubuntu-Mate-Cold-no-logo.png",
    "desktop/Ubuntu-Mate-Dark-no-logo.png", "desktop/Ubuntu-Mate-Radioactive-no-logo.png",
)
SMOOTH_QUERY_IMAGES = ("desktop/Ubuntu-Mate-Warm-no-logo.png",)
STEP_SMOOTH = 5      # about 1.08M base rows (8 images) at this step
DIM = 128


def log(msg, t0=[time.time()]):
    print(f"[{time.time() - t0[0]:7.1f}s] {msg}", flush=True)


def dense_sift(path, step):
    """uint8 descriptors of one image, sizes in SIZES order, grid row by row; and (raw, kept) counts."""
    img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if img is None:
        sys.exit(f"make_dense_sift: cannot read image {path}")
    h, w = img.shape
    ys, xs = range(MARGIN, h - MARGIN, step), range(MARGIN, w - MARGIN, step)
    sift, out, raw = cv2.SIFT_create(), [], 0
    for size in SIZES:
        kps = [cv2.KeyPoint(float(x), float(y), float(size), ANGLE) for y in ys for x in xs]
        kept, desc = sift.compute(img, kps)
        if desc is None or len(kept) != len(kps):
            sys.exit(f"make_dense_sift: SIFT dropped keypoints of {path} (size {size})")
        raw += len(desc)
        desc = desc[np.linalg.norm(desc.astype(np.float64), axis=1) > MIN_NORM]
        out.append(np.clip(np.rint(desc), 0, 255).astype(np.uint8))
    d = np.concatenate(out)
    return d, {"image": os.path.basename(path), "shape": [h, w], "raw": raw, "norm_kept": len(d)}


def first_unique(rows):
    """Indices (ascending) of the first occurrence of each distinct row."""
    _, first = np.unique(rows, axis=0, return_index=True)
    return np.sort(first)


def spread(m, n):
    """n positions spread evenly over range(m): floor(i * m / n)."""
    if m < n:
        sys.exit(f"make_dense_sift: only {m} descriptors, need {n}")
    return (np.arange(n, dtype=np.int64) * m) // n


def extra(n):
    return max(10, n // 1000)


def write_u8bin(path, a):
    with open(path, "wb") as f:
        f.write(np.array(a.shape, dtype="<i4").tobytes())
        f.write(np.ascontiguousarray(a, dtype=np.uint8).tobytes())


def extract(names, images_dir, step, what):
    parts, stats = [], []
    for name in names:
        d, s = dense_sift(os.path.join(images_dir, name), step)
        s["image"] = name
        parts.append(d); stats.append(s)
        log(f"{what} {name}: {s['shape'][1]}x{s['shape'][0]}, {s['raw']} descriptors, "
            f"{s['norm_kept']} with norm > {MIN_NORM:g}")
    return np.concatenate(parts), stats


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=None)
    ap.add_argument("--images", default=IMAGES_DIR)
    ap.add_argument("--gt-tool", default=os.path.join(repo, "build", "bench", "graft_groundtruth"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--small", action="store_true")
    mode.add_argument("--smooth", action="store_true", help="the duplicate-heavy set smooth-sift1m")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-gt", action="store_true", help="skip the ground truth")
    a = ap.parse_args()
    step, n_base, n_query = (STEP_SMALL, N_BASE_SMALL, N_QUERY_SMALL) if a.small else (STEP, N_BASE, N_QUERY)
    base_images, query_images = BASE_IMAGES, QUERY_IMAGES
    if a.smooth:
        step, base_images, query_images = STEP_SMOOTH, SMOOTH_BASE_IMAGES, SMOOTH_QUERY_IMAGES
    name = "dense-sift-small" if a.small else "smooth-sift1m" if a.smooth else "dense-sift1m"
    outdir = a.outdir or os.path.join(repo, ".data", name)
    os.makedirs(outdir, exist_ok=True)
    cv2.setNumThreads(a.threads)
    log(f"OpenCV {cv2.__version__}, numpy {np.__version__}, images {a.images}, out {outdir}, "
        f"step {step}, sizes {SIZES}")

    base_all, base_stats = extract(base_images, a.images, step, "base")
    query_all, query_stats = extract(query_images, a.images, step, "query")
    if a.smooth:  # duplicates kept (no item 5): spread straight to N
        base_sel = base_all[spread(len(base_all), n_base)]
        query = query_all[spread(len(query_all), n_query)]
        n_unique = len(np.unique(base_sel, axis=0))
        log(f"base: {len(base_all)} after the norm filter; kept {len(base_sel)}, {n_unique} distinct")
        log(f"query: {len(query_all)} after the norm filter; kept {len(query)}")
        counts = {"base_norm_kept": len(base_all), "base": len(base_sel), "base_distinct": n_unique,
                  "query_norm_kept": len(query_all), "query": len(query)}
        return write_set(a, outdir, name, step, base_sel, query, base_stats, query_stats,
                         base_images + query_images, counts,
                         "rows floor(i * M / N) of the M norm-kept rows in image/size/grid order; "
                         "duplicates kept")
    pool = base_all[first_unique(base_all)]
    base_sel = base_all[spread(len(base_all), n_base + extra(n_base))]
    base_u = base_sel[first_unique(base_sel)]
    if len(base_u) < n_base:
        sys.exit(f"make_dense_sift: only {len(base_u)} unique base rows selected, need {n_base}")
    base = base_u[:n_base]
    log(f"base: {len(base_all)} after the norm filter ({len(pool)} unique); selected {len(base_sel)}, "
        f"{len(base_u)} unique, kept {len(base)}")
    q_sel = query_all[spread(len(query_all), n_query + extra(n_query))]
    q_uniq = q_sel[first_unique(q_sel)]
    # A query row is new iff its first occurrence in [pool; q_uniq] lies in the q_uniq part.
    _, first = np.unique(np.concatenate([pool, q_uniq]), axis=0, return_index=True)
    q_new = q_uniq[np.sort(first[first >= len(pool)]) - len(pool)]
    if len(q_new) < n_query:
        sys.exit(f"make_dense_sift: only {len(q_new)} usable query rows selected, need {n_query}")
    query = q_new[:n_query]
    log(f"query: {len(query_all)} after the norm filter; selected {len(q_sel)}, {len(q_uniq)} unique, "
        f"{len(q_new)} not in the base images, kept {len(query)}")

    counts = {"base_norm_kept": len(base_all), "base_pool_unique": len(pool),
              "base_selected": len(base_sel), "base_selected_unique": len(base_u), "base": len(base),
              "query_norm_kept": len(query_all), "query_selected": len(q_sel),
              "query_selected_unique": len(q_uniq), "query_not_in_base": len(q_new),
              "query": len(query)}
    write_set(a, outdir, name, step, base, query, base_stats, query_stats, base_images + query_images,
              counts, "rows floor(i * M / N') of the M norm-kept rows in image/size/grid order, "
                      "N' = N + max(10, N // 1000); then first occurrences; then the first N")


def write_set(a, outdir, name, step, base, query, base_stats, query_stats, images, counts, subsample):
    """Writes base, queries, ground truth (unless --no-gt) and recipe.json into outdir."""
    paths = {k: os.path.join(outdir, k) for k in ("base.u8bin", "query.u8bin", "groundtruth.ibin")}
    write_u8bin(paths["base.u8bin"], base)
    write_u8bin(paths["query.u8bin"], query)
    log(f"wrote base {base.shape}, query {query.shape}")
    recipe = {
        "name": name,
        "source": "Debian mate-backgrounds 1.26.0, /usr/share/backgrounds/mate",
        "opencv": cv2.__version__, "numpy": np.__version__,
        "step": step, "sizes": list(SIZES), "angle": ANGLE, "margin": MARGIN, "min_norm": MIN_NORM,
        "sift": "cv2.SIFT_create() defaults, compute() on the grid", "dim": DIM,
        "base_images": base_stats, "query_images": query_stats,
        "image_sha256": {n: sha256(os.path.join(a.images, n)) for n in images},
        "counts": counts,
        "subsample": subsample,
        "metric": "l2", "gt_k": GT_K,
    }
    if not a.no_gt:
        if not os.access(a.gt_tool, os.X_OK):
            sys.exit(f"make_dense_sift: ground-truth tool {a.gt_tool} not found (build graft_groundtruth)")
        t = time.time()
        subprocess.run([a.gt_tool, paths["base.u8bin"], paths["query.u8bin"], str(GT_K),
                        paths["groundtruth.ibin"], "--metric", "l2", "--threads", str(a.threads)],
                       check=True)
        log(f"ground truth top-{GT_K} in {time.time() - t:.1f} s")
    recipe["sha256"] = {k: sha256(p) for k, p in paths.items() if os.path.exists(p)}
    with open(os.path.join(outdir, "recipe.json"), "w") as f:
        json.dump(recipe, f, indent=1)
    log(f"done: {outdir}")


if __name__ == "__main__":
    main()
