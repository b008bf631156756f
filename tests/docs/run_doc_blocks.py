#!/usr/bin/env python3
"""Runs the code blocks of README.md and docs/*.md that are marked runnable, as written.

A fenced block right after a line `<!-- runnable -->` runs: ```sh / ```bash blocks with
`bash -euo pipefail`, ```python blocks with /usr/bin/python3 and PYTHONPATH=build/python. A
block right after `<!-- ci -->` is one that .ci/run runs itself (setup, the test command): each of
its commands must be a line of .ci/run. Every other block is shown, not run (GPU commands,
fragments of programs).

The commands run in a folder that looks like the repository root of the README's reader: every
top-level entry of the source tree linked in, `build` linked to the build tree, and
`../shared/data` linked to the test data, so `./build/...` and `../shared/data/...` resolve as
written; what the commands write (results/, $HOME/...) stays in that folder, inside the build tree.

  run_doc_blocks.py SOURCE_DIR BUILD_DIR DATA_DIR [--no-python] [--list]
(GRAFT_DATA_DIR in the environment wins over DATA_DIR.)"""
import os, re, shutil, subprocess, sys, time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
src, build, data = (os.path.abspath(a) for a in args[:3])
data = os.path.abspath(os.environ.get("GRAFT_DATA_DIR") or data)
no_python, list_only = "--no-python" in sys.argv, "--list" in sys.argv
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def blocks(path):
    """(marker, language, first line number, code) of every marked fenced block in path."""
    lines = open(path).read().split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*<!--\s*(runnable|ci)\s*-->\s*", line)
        if not m:
            continue
        fence = re.fullmatch(r"```(\w*)\s*", lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            check(False, f"{os.path.relpath(path, src)}:{i + 1}: <!-- {m.group(1)} --> is not followed by a fenced block")
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            check(False, f"{os.path.relpath(path, src)}:{i + 2}: unterminated block")
            continue
        out.append((m.group(1), fence.group(1), i + 2, "\n".join(lines[i + 2:end]) + "\n"))
    return out


docs = [os.path.join(src, "README.md")] + sorted(
    os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
found = [(p, b) for p in docs for b in blocks(p)]
check(sum(1 for _, b in found if b[0] == "runnable") >= 5, f"{sum(1 for _, b in found if b[0] == 'runnable')} runnable blocks found")
if list_only:
    for p, (kind, lang, line, code) in found:
        print(f"{os.path.relpath(p, src)}:{line}: {kind} {lang}\n{code}")
    sys.exit(0)

# ---- the reader's repository root ----------------------------------------------------------------
top = os.path.join(build, "docs-run")
shutil.rmtree(top, ignore_errors=True)  # links are removed, never followed
root = os.path.join(top, "repo")
os.makedirs(root)
for e in os.listdir(src):
    if e in ("build", ".git") or e.startswith("build-"):
        continue
    os.symlink(os.path.join(src, e), os.path.join(root, e))
os.symlink(build, os.path.join(root, "build"))
os.makedirs(os.path.join(top, "shared"))
os.symlink(data, os.path.join(top, "shared", "data"))

ci_lines = {l.strip() for l in open(os.path.join(src, ".ci", "run"))}
# HOME too: `cmake --install build --prefix "$HOME/graft"` installs into the folder, not the user's.
os.makedirs(os.path.join(top, "home"))
env = dict(os.environ, PYTHONPATH=os.path.join(root, "build", "python"), HOME=os.path.join(top, "home"))
env.pop("GRAFT_DATA_DIR", None)  # the commands find ../shared/data as a reader's clone does

for path, (kind, lang, line, code) in found:
    where = f"{os.path.relpath(path, src)}:{line}"
    if kind == "ci":
        for cmd in code.split("\n"):
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()
            if cmd and not cmd.startswith("#"):
                check(cmd in ci_lines, f"{where}: .ci/run runs `{cmd}`")
        continue
    if lang in ("sh", "bash"):
        argv = ["bash", "-euo", "pipefail", "-c", code]
    elif lang == "python":
        if no_python:
            print(f"skip  {where}: python block (graft's Python module is not built here)")
            continue
        argv = ["/usr/bin/python3", "-c", code]
    else:
        check(False, f"{where}: runnable block of language '{lang}' (sh, bash or python)")
        continue
    t0 = time.time()
    try:
        r = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        out = (r.stdout + r.stderr).strip().split("\n")
        print("\n".join("      | " + l for l in out[-12:]))
        check(r.returncode == 0, f"{where}: {lang} block runs as written ({time.time() - t0:.1f} s, exit {r.returncode})")
    except subprocess.TimeoutExpired:
        check(False, f"{where}: {lang} block ran past 600 s")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
