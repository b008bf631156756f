#!/usr/bin/env python3
"""scripts/u8rows.py and scripts/make_photo_sets.py on small data.

u8rows (numpy only): exact de-duplication even when every row's hash collides, rows gathered
across parts, even subsampling, the u8bin layout. make_photo_sets (only where cv2 imports: Debian's
python3-opencv): two parts of synthetic images for both kinds, then the output's header, that
the base is the first occurrences in order, that no query row is among the base rows, and that
banded SIFT equals SIFT on the whole image.
Usage: test_photo_sets.py SCRATCH_DIR
"""
import os, shutil, subprocess, sys

try:
    import numpy as np
except ImportError:  # an interpreter other than Debian's /usr/bin/python3 (GRAFT_PYTHON=OFF)
    print("test_photo_sets: skipped (this python3 has no numpy: python3-numpy)")
    sys.exit(0)

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "scripts"))
import u8rows  # noqa: E402

scratch = sys.argv[1]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
passed = failed = 0


def check(what, ok):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed += bool(ok)
    failed += not ok


def items(rows):
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1])))[:, 0]


def first_occurrences(rows):
    _, first = np.unique(items(rows), return_index=True)
    return np.sort(first)


def read_u8bin(path):
    n, d = np.fromfile(path, "<u4", 2)
    rows = np.fromfile(path, np.uint8, offset=8)
    return rows.reshape(int(n), int(d)) if rows.size == n * d else None


# u8rows: two parts with repeats inside and across them.
rng = np.random.default_rng(7)
pool = rng.integers(0, 256, (50, 16), dtype=np.uint8)
parts = [pool[rng.integers(0, 50, 300)], pool[rng.integers(0, 50, 200)]]
maps = []
for k, rows in enumerate(parts):
    path = os.path.join(scratch, f"part-{k}.u8")
    rows.tofile(path)
    maps.append(np.memmap(path, np.uint8, "r").reshape(-1, 16))
allrows = np.concatenate(parts)
want = first_occurrences(allrows)
h = u8rows.row_hash(allrows)
check("row_hash: equal rows, equal hashes; 50 distinct rows, 50 hashes",
      len(np.unique(h)) == 50 and all(len(set(h[(allrows == r).all(1)])) == 1 for r in pool))
check("first_rows with real hashes", np.array_equal(u8rows.first_rows(h, maps, 16), want))
check("first_rows with every hash equal", np.array_equal(
    u8rows.first_rows(np.zeros(len(h), np.uint64), maps, 16), want))
check("first_rows with 3 hash values", np.array_equal(
    u8rows.first_rows(h % np.uint64(3), maps, 16), want))
idx = np.array([0, 5, 299, 300, 301, 499])
check("gather across parts", np.array_equal(u8rows.gather(maps, idx, 16), allrows[idx]))
check("spread", list(u8rows.spread(10, 4)) == [0, 2, 5, 7] and list(u8rows.spread(3, 0)) == [0, 1, 2])
out = os.path.join(scratch, "t.u8bin")
u8rows.write_u8bin(out, maps, want, 16, chunk=7)
got = read_u8bin(out)
check("write_u8bin: header and rows", got is not None and np.array_equal(got, allrows[want]))

try:
    import cv2
except ImportError:
    cv2 = None
if cv2 is None:
    print("make_photo_sets: skipped (no cv2: python3-opencv)")
else:
    # Two parts: textured images, a base image repeated, a query image equal to a base image,
    # and a smooth gradient (repeated descriptors) in every folder.
    grad = np.tile((np.arange(300) // 2).astype(np.uint8), (200, 1))
    def noise(seed, h=180, w=260):
        im = np.random.default_rng(seed).integers(0, 256, (h // 4, w // 4, 3), dtype=np.uint8)
        return cv2.GaussianBlur(cv2.resize(im, (w, h), interpolation=cv2.INTER_CUBIC), (3, 3), 0)
    layout = {"p1/base/a/x.png": noise(1), "p1/base/a/y.png": grad, "p1/base/b/x2.png": noise(1),
              "p1/query/a/q.png": noise(2), "p1/query/a/same.png": noise(1),
              "p2/base/c/z.png": noise(3, 300, 200), "p2/base/c/g.png": grad,
              "p2/query/c/q2.png": noise(4), "p2/query/c/g.png": grad}
    for rel, im in layout.items():
        os.makedirs(os.path.dirname(os.path.join(scratch, rel)), exist_ok=True)
        cv2.imwrite(os.path.join(scratch, rel), im)
    script = os.path.join(root, "scripts", "make_photo_sets.py")
    run = lambda *a: subprocess.run([sys.executable, script, *a], capture_output=True, text=True)
    for kind, d in (("sift", 128), ("patches", 192)):
        out = os.path.join(scratch, kind)
        r1 = run(out, "--kind", kind, "--images", os.path.join(scratch, "p1"), "--workers", "2",
                 "--n-base", "0", "--n-query", "0")
        r2 = run(out, "--kind", kind, "--images", os.path.join(scratch, "p2"), "--workers", "2",
                 "--part", "2", "--n-base", "0", "--n-query", "0")
        check(f"{kind}: two parts made", r1.returncode == 0 and r2.returncode == 0)
        if r1.returncode or r2.returncode:
            print(r1.stdout, r1.stderr, r2.stdout, r2.stderr)
            continue
        base, query = read_u8bin(f"{out}/base.u8bin"), read_u8bin(f"{out}/query.u8bin")
        raw = np.concatenate([np.fromfile(f"{out}/parts/base-{k}.u8", np.uint8).reshape(-1, d)
                              for k in (1, 2)])
        check(f"{kind}: u8bin headers, d = {d}", base is not None and query is not None
              and base.shape[1] == d and query.shape[1] == d and len(query) > 0)
        check(f"{kind}: base = first occurrences of the parts' rows, in order",
              np.array_equal(base, raw[first_occurrences(raw)]))
        check(f"{kind}: queries distinct, none among the base rows",
              len(first_occurrences(query)) == len(query) and not np.isin(items(query), items(raw)).any())
        r = run(out, "--kind", kind, "--finish", "--n-base", "100", "--n-query", "10")
        sub = read_u8bin(f"{out}/base.u8bin")
        check(f"{kind}: --finish spreads 100 rows", r.returncode == 0 and sub is not None and
              np.array_equal(sub, base[u8rows.spread(len(base), 100)]))
    r = run(os.path.join(scratch, "sift"), "--kind", "patches", "--finish")
    check("a set's parts of another kind refused", r.returncode != 0 and "not one patches" in r.stderr)
    r = run(scratch, "--kind", "sift", "--check-bands", os.path.join(scratch, "p2/base/c/z.png"))
    check("banded SIFT equals SIFT on the whole image", r.returncode == 0 and "False" not in r.stdout)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
