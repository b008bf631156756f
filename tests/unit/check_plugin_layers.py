#!/usr/bin/env python3
"""The folders of plugin/ (core, data, io, exact, graph, storage) depend on each other without a
cycle, by their includes and by their calls (issue 35: core/ once called up into graph/ for the
build dispatch, which called back into core/).

  check_plugin_layers.py PLUGIN_DIR OBJECT...

Includes: "folder/x.h" lines of every .c/.h under PLUGIN_DIR/<folder>. Calls: for each object of
graft_core (its path holds /<folder>/), the symbols it uses (nm: U) that another folder's object
defines. Prints both graphs; exits 1 on a cycle in either."""
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
defined, used = {}, collections.defaultdict(set)
for o in objects:
    f = folder_of(o)
    if f is None:
        continue
    out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined[parts[2]] = f
        elif len(parts) == 2 and parts[0] == "U":
            used[f].add(parts[1])
calls = collections.defaultdict(lambda: collections.defaultdict(set))
for f, syms in used.items():
    for s in syms:
        g = defined.get(s)
        if g and g != f:
            calls[f][g].add(s)

ok = show("includes between plugin/ folders:", inc)
ok = show("calls between plugin/ folders (graft_core's objects):", calls) and ok
if not calls:
    print("no objects read: nothing checked")
    ok = False
sys.exit(0 if ok else 1)
