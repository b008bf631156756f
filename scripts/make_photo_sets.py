#!/usr/bin/env python3
"""Makes graft's 10M-scale real sets from Debian-packaged photographs: photo-sift (dense SIFT,
d = 128) and photo-patches (8 x 8 colour patches, d = 192). Streams to disk, one process an image band.

Images (Debian main; scripts/fetch_deps.sh fetches the .debs, picks these files with pick() and
copies them unchanged into .deps/data/photo-images/part1/{base,query}/<source>/):
  lomiri-wallpapers-16.04 20.04.0-2: the 14 photographs of usr/share/backgrounds/ (not
    umang_by_Abhishek_Mudgal.jpg, digital art); query: friends_by_Aitzol_Berasategi.jpg. CC-BY-4.0 /
    CC-BY-SA-3.0 / CC-BY-SA-4.0.
  lomiri-wallpapers-20.04 20.04.0-2: Kleiber_by_Lukas_Baubkus.jpg (the one photograph). CC-BY-SA-3.0.
  endless-sky-data 0.9.8-1.2: the 273 photographs usr/share/games/endless-sky/images/land/*.jpg
    (720 x 360); query: every 10th in name order (positions 9, 19, ...). Public domain / CC-BY-SA.
A later part (--part 2, another folder of the same layout) appends its rows after part 1's.

Recipe (every parameter is a constant below; nothing is random):
  1. Each image read with cv2.imread (sift: IMREAD_GRAYSCALE; patches: IMREAD_COLOR, BGR), images
     in name order (base/ then query/, sources and files sorted).
  2. sift: at each level in LEVELS (1: the image; 0.5: cv2.resize to (w // 2, h // 2), INTER_AREA),
     keypoints cv2.KeyPoint(x, y, SIZE, ANGLE) at x = MARGIN, MARGIN + STEP, ... < w - MARGIN (same
     for y), row by row; cv2.SIFT_create() (defaults).compute(); rows with L2 norm <= MIN_NORM
     dropped; values rounded, clipped to 0..255, uint8. (Computed on bands of grid rows, each
     cropped with BAND_PAD px around it: the same values as on the whole image, --check-bands.)
     patches: every PATCH x PATCH window with its top-left corner at multiples of PSTEP, row by
     row, values in (y, x, channel) order.
  3. Exact duplicates removed, keeping the first occurrence: among all base rows (all parts, in
     order); among the query rows, and every query row that occurs among the base rows.
  4. Subsample: of the M rows left, the rows at floor(i * M / N), i = 0..N-1 (N = --n-base, 0: all;
     --n-query): spread evenly over images and levels.
Outputs in OUTDIR: base.u8bin, query.u8bin (uint32 n, uint32 d, then n x d uint8), recipe.json;
parts/ keeps each part's raw rows (uint8, no header) and per-image counts. No ground truth:
graft-bench computes it on the GPUs.
Usage: python3 scripts/make_photo_sets.py OUTDIR --kind sift|patches --images PARTDIR [--part K]
       [--n-base N] [--n-query N] [--workers N] [--step S]   (--finish: only steps 3-4 from parts/)
       --step 2: the denser photo-sift50m variant (4x the rows of the same images; every part of a
       set at one step).
"""
import argparse, fnmatch, glob, json, os, sys, time
from multiprocessing import Pool

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from u8rows import as_items, first_rows, gather, load, row_hash, sha256, spread, write_u8bin  # noqa: E402

SOURCES = (  # (source folder, package, folder in the package, files, files left out, query rule)
    ("lomiri16", "lomiri-wallpapers-16.04", "usr/share/backgrounds", "*.jpg",
     ("umang_by_Abhishek_Mudgal.jpg",), ("friends_by_Aitzol_Berasategi.jpg",)),
    ("lomiri20", "lomiri-wallpapers-20.04", "usr/share/backgrounds", "Kleiber_*.jpg", (), ()),
    ("endless-sky-land", "endless-sky-data", "usr/share/games/endless-sky/images/land", "*.jpg", (), 10))
LEVELS = (1.0, 0.5)  # sift: the image and its half (cv2.resize INTER_AREA)
STEP, SIZE, ANGLE, MARGIN, MIN_NORM = 4, 8.0, 0.0, 16, 100.0
BAND_ROWS, BAND_PAD = 64, 64  # grid rows a task; px of image kept around a band (>= window + blur)
PATCH, PSTEP = 8, 3
N_BASE, N_QUERY = 10_000_000, 10_000
DIMS = {"sift": 128, "patches": PATCH * PATCH * 3}


def log(msg, t0=[time.time()]):
    print(f"[{time.time() - t0[0]:7.1f}s] {msg}", flush=True)


def pick(roots):
    """{package: unpacked root} -> [(source file, 'base'|'query', source folder, name)]."""
    out = []
    for src, pkg, folder, pattern, left_out, query in SOURCES:
        d = os.path.join(roots[pkg], folder)
        names = sorted(n for n in os.listdir(d) if fnmatch.fnmatch(n, pattern) and n not in left_out)
        for i, n in enumerate(names):
            q = (i % query == query - 1) if isinstance(query, int) else n in query
            out.append((os.path.join(d, n), "query" if q else "base", src, n))
    return out


def images(partdir, what):
    return sorted(glob.glob(os.path.join(partdir, what, "*", "*")))


def read(path, kind):
    img = cv2.imread(path, cv2.IMREAD_GRAYSCALE if kind == "sift" else cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"make_photo_sets: cannot read {path}")
    return img


def level_image(img, level):
    h, w = img.shape[:2]
    return img if level == 1.0 else cv2.resize(img, (int(w * level), int(h * level)),
                                                   interpolation=cv2.INTER_AREA)


def grid(h, w):
    return np.arange(MARGIN, h - MARGIN, STEP), np.arange(MARGIN, w - MARGIN, STEP)


def sift_rows(img, ys, xs, y_off=0):
    kps = [cv2.KeyPoint(float(x), float(y - y_off), SIZE, ANGLE) for y in ys for x in xs]
    if not kps:
        return np.zeros((0, 128), np.uint8)
    kept, desc = cv2.SIFT_create().compute(img, kps)
    if desc is None or len(kept) != len(kps):
        sys.exit("make_photo_sets: SIFT dropped keypoints")
    desc = desc[np.linalg.norm(desc.astype(np.float64), axis=1) > MIN_NORM]
    return np.clip(np.rint(desc), 0, 255).astype(np.uint8)


def shape(t):
    path, kind = t
    return read(path, kind).shape[:2]


def tasks(path, kind, hw):
    """An image's tasks: (path, kind, level, first grid row, end grid row)."""
    if kind == "patches":
        n = len(range(0, hw[0] - PATCH + 1, PSTEP))
        return [(path, kind, 1.0, r, min(r + 4 * BAND_ROWS, n)) for r in range(0, n, 4 * BAND_ROWS)]
    out = []
    for level in LEVELS:
        n = len(grid(int(hw[0] * level), int(hw[1] * level))[0])
        out += [(path, kind, level, r, min(r + BAND_ROWS, n)) for r in range(0, n, BAND_ROWS)]
    return out


def run_task(t):
    path, kind, level, r0, r1 = t
    img = read(path, kind)
    if kind == "patches":
        band = img[r0 * PSTEP:(r1 - 1) * PSTEP + PATCH]
        win = np.lib.stride_tricks.sliding_window_view(band, (PATCH, PATCH, 3))[::PSTEP, ::PSTEP, 0]
        return np.ascontiguousarray(win).reshape(-1, DIMS[kind])
    img = level_image(img, level)
    ys, xs = grid(*img.shape)
    ys = ys[r0:r1]
    y0 = max(0, int(ys[0]) - BAND_PAD)
    return sift_rows(img[y0:int(ys[-1]) + BAND_PAD + 1], ys, xs, y0)


def extract(a, what, pool):
    """Streams the rows of every image of a.images/what/ into parts/what-K.u8; -> per-image counts."""
    raw = os.path.join(a.outdir, "parts", f"{what}-{a.part}.u8")
    paths, t = images(a.images, what), time.time()
    shapes = pool.map(shape, [(p, a.kind) for p in paths])
    todo = [(i, tk) for i, p in enumerate(paths) for tk in tasks(p, a.kind, shapes[i])]
    counts, hashes, done = [0] * len(paths), [], 0
    with open(raw + ".tmp", "wb") as f:
        for (i, _), rows in zip(todo, pool.imap(run_task, [tk for _, tk in todo])):
            f.write(rows.tobytes()); hashes.append(row_hash(rows)); counts[i] += len(rows)
            done += len(rows)
            if (len(hashes) % 200 == 0) or len(hashes) == len(todo):
                log(f"{what} part {a.part}: task {len(hashes)}/{len(todo)} (image {i + 1}/"
                    f"{len(paths)}), {done} rows, {done / (time.time() - t):.0f} rows/s")
    os.rename(raw + ".tmp", raw)
    np.save(raw + ".hash.npy", np.concatenate(hashes) if hashes else np.zeros(0, np.uint64))
    stats = [{"image": os.path.relpath(p, a.images), "shape": list(map(int, hw)), "rows": c,
              "sha256": sha256(p)} for p, hw, c in zip(paths, shapes, counts)]
    with open(raw + ".json", "w") as f:
        json.dump({"kind": a.kind, "step": STEP if a.kind == "sift" else PSTEP, "images": stats, "seconds": time.time() - t}, f, indent=1)


def check_parts(a, got):
    """Every part in OUTDIR/parts (and got) of a.kind and one step."""
    for p in glob.glob(os.path.join(a.outdir, "parts", "*.u8.json")):
        got.add(tuple(json.load(open(p))[k] for k in ("kind", "step")))
    if len(got) != 1 or next(iter(got))[0] != a.kind:
        sys.exit(f"make_photo_sets: {a.outdir}/parts: (kind, step) {sorted(got)}, not one {a.kind}")


def finish(a):
    d = DIMS[a.kind]
    check_parts(a, set())
    bmaps, bh, bstats = load(a.outdir, "base", d)
    qmaps, qh, qstats = load(a.outdir, "query", d)
    log(f"{len(bh)} base rows, {len(qh)} query rows in {len(bstats)} part(s)")
    bkeep = first_rows(bh, bmaps, d)
    qkeep = first_rows(qh, qmaps, d)
    # A query row whose hash is a base row's is compared with those base rows exactly.
    hit = np.isin(qh[qkeep], bh)
    if hit.any():
        qc = gather(qmaps, qkeep[hit], d)
        bc = gather(bmaps, np.flatnonzero(np.isin(bh, qh[qkeep[hit]])), d)
        clash = np.isin(as_items(qc), as_items(bc))
        hit[np.flatnonzero(hit)[~clash]] = False
    qnew = qkeep[~hit]
    log(f"distinct: {len(bkeep)} base rows, {len(qkeep)} query rows, {len(qnew)} not among the base's")
    base, query = bkeep[spread(len(bkeep), a.n_base)], qnew[spread(len(qnew), a.n_query)]
    paths = {w: os.path.join(a.outdir, f"{w}.u8bin") for w in ("base", "query")}
    write_u8bin(paths["base"], bmaps, base, d)
    write_u8bin(paths["query"], qmaps, query, d)
    recipe = {"kind": a.kind, "d": d, "opencv": cv2.__version__, "numpy": np.__version__,
              "sources": [s[:5] for s in SOURCES], "levels": LEVELS, "size": SIZE,
              "step": bstats[0]["step"], "angle": ANGLE, "margin": MARGIN, "min_norm": MIN_NORM,
              "patch": PATCH, "pstep": PSTEP,
              "parts": {"base": bstats, "query": qstats},
              "counts": {"base_rows": len(bh), "base_distinct": len(bkeep), "base": len(base),
                         "query_rows": len(qh), "query_distinct": len(qkeep),
                         "query_not_in_base": len(qnew), "query": len(query)},
              "subsample": "rows floor(i * M / N) of the M distinct rows (all when N = 0)"}
    recipe["sha256"] = {w + ".u8bin": sha256(p) for w, p in paths.items()}
    with open(os.path.join(a.outdir, "recipe.json"), "w") as f:
        json.dump(recipe, f, indent=1)
    log(f"wrote base ({len(base)}, {d}), query ({len(query)}, {d}) into {a.outdir}")


def check_bands(path):
    """The banded SIFT rows of an image equal those computed on the whole image, at every level."""
    img = read(path, "sift")
    for level in LEVELS:
        whole = sift_rows(level_image(img, level), *grid(*level_image(img, level).shape))
        bands = [run_task(t) for t in tasks(path, "sift", img.shape) if t[2] == level]
        log(f"{path} level {level}: {len(whole)} rows, {len(bands)} bands, banded rows equal: "
            f"{np.array_equal(whole, np.concatenate(bands)) or sys.exit(1)}")


def init(step):
    global STEP
    STEP = step
    cv2.setNumThreads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--kind", choices=DIMS, required=True)
    ap.add_argument("--images", help="a part folder: base/<source>/<file>, query/<source>/<file>")
    ap.add_argument("--part", type=int, default=1)
    ap.add_argument("--step", type=int, default=STEP, help="sift grid step (recorded in recipe.json)")
    ap.add_argument("--finish", action="store_true", help="only steps 3-4, from OUTDIR/parts")
    ap.add_argument("--n-base", type=int, default=N_BASE, help="0: every distinct row")
    ap.add_argument("--n-query", type=int, default=N_QUERY)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--check-bands", metavar="IMAGE", help="only check banded SIFT on IMAGE")
    a = ap.parse_args()
    if a.check_bands:
        return check_bands(a.check_bands)
    os.makedirs(os.path.join(a.outdir, "parts"), exist_ok=True)
    log(f"OpenCV {cv2.__version__}, numpy {np.__version__}, kind {a.kind}, {a.workers} workers")
    if not a.finish:
        if not a.images:
            sys.exit("make_photo_sets: --images PARTDIR needed (or --finish)")
        init(a.step)
        check_parts(a, {(a.kind, STEP if a.kind == "sift" else PSTEP)})
        with Pool(a.workers, initializer=init, initargs=(a.step,)) as pool:
            for what in ("base", "query"):
                extract(a, what, pool)
    finish(a)


if __name__ == "__main__":
    main()
