"""Rows of uint8 vectors on disk, for scripts/make_photo_sets.py: the parts' raw files (n x d
uint8, no header) with a 64-bit hash a row, exact de-duplication through the hashes, even
subsampling, and u8bin output (uint32 n, uint32 d, then n x d uint8), all without holding the rows
twice in memory."""
import glob, hashlib, json, os, sys

import numpy as np


def row_hash(rows):
    """64-bit FNV-style hash of each row (rows: n x d uint8, d a multiple of 8)."""
    words = np.ascontiguousarray(rows).view(np.uint64)
    h = np.full(len(rows), 0xCBF29CE484222325, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            h = (h ^ words[:, j]) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
    return h


def load(outdir, what, d):
    """All parts of base or query: a list of memmaps, the concatenated hashes, per-image stats."""
    parts = sorted(glob.glob(os.path.join(outdir, "parts", f"{what}-*.u8")),
                   key=lambda p: int(p.rsplit("-", 1)[1][:-3]))
    maps = [np.memmap(p, np.uint8, "r").reshape(-1, d) for p in parts if os.path.getsize(p)]
    h = np.concatenate([np.load(p + ".hash.npy") for p in parts] or [np.zeros(0, np.uint64)])
    stats = [json.load(open(p + ".json")) for p in parts]
    return maps, h, stats


def gather(maps, idx, d):
    """Rows idx (ascending global row numbers over the parts) into one array."""
    out, start = np.empty((len(idx), d), np.uint8), 0
    for m in maps:
        lo, hi = np.searchsorted(idx, [start, start + len(m)])
        out[lo:hi] = m[idx[lo:hi] - start]
        start += len(m)
    return out


def as_items(rows):
    return np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1])))[:, 0]


def first_rows(h, maps, d):
    """Sorted row numbers of the first occurrence of each distinct row (exact: equal hashes compared)."""
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = np.zeros(len(h), bool)
    same[1:] = hs[1:] == hs[:-1]
    same[:-1] |= same[1:]
    cand = np.sort(order[same])
    keep = np.ones(len(h), bool)
    keep[cand] = False
    if len(cand):
        _, first = np.unique(as_items(gather(maps, cand, d)), return_index=True)
        keep[cand[first]] = True
    return np.flatnonzero(keep)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def spread(m, n):
    if n and m < n:
        sys.exit(f"u8rows: {m} distinct rows, fewer than the {n} asked for")
    return np.arange(m) if not n else (np.arange(n, dtype=np.int64) * m) // n


def write_u8bin(path, maps, idx, d, chunk=1 << 20):
    with open(path + ".tmp", "wb") as f:
        np.array([len(idx), d], "<u4").tofile(f)
        for s in range(0, len(idx), chunk):
            gather(maps, idx[s:s + chunk], d).tofile(f)
    os.rename(path + ".tmp", path)


