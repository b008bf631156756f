#!/usr/bin/env python3
"""The folders of plugin/ (core, data, io, exact, graph, storage) depend on each other without a
cycle, by their includes and by their calls (issue 35: core/ once called up into graph/ for the
build dispatch, which called back into core/).

  check_plugin_layers.py PLUGIN_DIR OBJECT...

Includes: "folder/x.h" lines of every .c/.h under PLUGIN_DIR/<folder>. Calls: for each object of
graft_core (its path holds /<folder>/), the symbols it uses (nm: U) that another folder's object
defines; and inside each folder, the same between its files (issue 50: graph_index.c and
gindex_living.c, build.c and pieces.c once called each other). Prints the graphs; exits 1 on a
cycle in either graph of folders or on a circle of files inside a folder."""
import collections, os, re, subprocess, sys

plugin, objects = sys.argv[1], sys.argv[2:]
folders = sorted(d for d in os.listdir(plugin) if os.path.isdir(os.path.join(plugin, d)) and d != "include")


def folder_of(path):
    parts = path.replace("\\", "/").split("/")
    hits = [p for p in parts[:-1] if p in folders]
    return hits[-1] if hits else None


def cycles(graph):
    """Every elementary cycle's folders, once (smallest folder first)."""
    found = []

    def walk(start, node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.append(path + [start])
            elif nxt not in path and nxt > start:
                walk(start, nxt, path + [nxt])

    for f in sorted(graph):
        walk(f, f, [f])
    return found


def show(title, edges):
    print(title)
    for a in sorted(edges):
        for b in sorted(edges[a]):
            why = sorted(edges[a][b])
            print(f"  {a} -> {b}: {', '.join(why[:5])}{' ...' if len(why) > 5 else ''}")
    found = cycles({a: set(bs) for a, bs in edges.items()})
    for c in found:
        print("  CYCLE: " + " -> ".join(c))
    if not found:
        print("  no cycle")
    return not found


# ---- includes -------------------------------------------------------------------------------------
inc = collections.defaultdict(lambda: collections.defaultdict(set))
pat = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"')
for f in folders:
    for root, _, files in os.walk(os.path.join(plugin, f)):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            for line in open(os.path.join(root, name), errors="replace"):
                m = pat.match(line)
                if m and m.group(1) in folders and m.group(1) != f:
                    inc[f][m.group(1)].add(f"{name} includes {m.group(1)}/{m.group(2)}")

# ---- calls ----------------------------------------------------------------------------------------
def source_of(path):
    """folder/file.c of an object (CMake names it file.c.o)."""
    name = os.path.basename(path)
    for ext in (".o", ".obj"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return f"{folder_of(path)}/{name}"


defined, used = {}, collections.defaultdict(set)  # by source file
for o in objects:
    if folder_of(o) is None:
        continue
    src = source_of(o)
    out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined[parts[2]] = src
        elif len(parts) == 2 and parts[0] == "U":
            used[src].add(parts[1])
calls = collections.defaultdict(lambda: collections.defaultdict(set))
file_calls = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(set)))
for src, syms in used.items():
    f = src.split("/")[0]
    for s in syms:
        dst = defined.get(s)
        if not dst or dst == src:
            continue
        g = dst.split("/")[0]
        if g != f:
            calls[f][g].add(s)
        else:
            file_calls[f][src.split("/")[1]][dst.split("/")[1]].add(s)


def file_circles(folder, edges):
    """Inside one folder, files whose calls go round (Tarjan's strongly connected components of
    more than one file): each one's edges inside it, so that the symbols to move are named."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        print(f"  CIRCLE in {folder}/: {', '.join(comp)}")
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    why = sorted(edges[a][b])
                    print(f"    {a} -> {b}: {', '.join(why[:5])}{' ...' if len(why) > 5 else ''}")
    return not comps


ok = show("includes between plugin/ folders:", inc)
ok = show("calls between plugin/ folders (graft_core's objects):", calls) and ok
print("calls between the files of each plugin/ folder:")
for f in folders:
    edges = file_calls.get(f, {})
    n = sum(len(bs) for bs in edges.values())
    if file_circles(f, edges):
        print(f"  {f}/: {n} calling pairs of files, no circle")
    else:
        ok = False
if not calls:
    print("no objects read: nothing checked")
    ok = False
sys.exit(0 if ok else 1)
