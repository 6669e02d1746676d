#!/usr/bin/env python
"""Two source trees of chatdata, side by side: the same benchmarks run alternately on each.

For a change that should not change speed (a refactor), compare the tree before it with the tree
after it. Each side runs a benchmark script with ``PYTHONPATH`` set to its tree, in the same venv.
By default both sides run the *after* tree's ``benchmarks/`` copy, so a change to a benchmark
never reads as a change of speed; ``--own-scripts`` runs each tree's own copy (needed when a
script imports modules the before tree lacks, as ``bench_persist`` does across the td/ split).
Rounds alternate the order (before, after, then after, before), and the table gives each row's
median over the rounds and the after/before ratio of every round. Ratios measured in one run
survive a busy machine better than absolute times; a row whose rounds disagree (0.8 and 1.3) is
noise, not a change.

Usage, from the repository root (one command; about 2 minutes per round with ``--quick``)::

    mkdir -p /tmp/before && git archive <commit> | tar -x -C /tmp/before
    python benchmarks/compare_trees.py --before /tmp/before [--rounds 3] [--quick] [--only td history persist import]

``import`` times ``import chatdata`` in a fresh process (CPU time, torch imported first) and lists
the modules the first ``memmap`` / ``load_memmap`` call imports (none: nothing is imported lazily).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

UNITS = {"s": 1e3, "ms": 1.0, "us": 1e-3}
SCRIPTS = {  # name: (arguments, arguments with --quick)
    "td": (["bench_td.py", "--repeats", "5"], ["bench_td.py", "--repeats", "3"]),
    "history": (["bench_history.py", "10000"], ["bench_history.py", "2000"]),
    "persist": (["bench_persist.py", "--n", "10000", "--scales", "1", "10", "--gib", "0.25"],
                ["bench_persist.py", "--quick"]),
}
IMPORT_PROBE = r'''
import json, resource, sys, tempfile
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
import torch
before = set(sys.modules); c0 = cpu()
import chatdata
c1 = cpu(); loaded = set(sys.modules)
from chatdata import TensorDict, load_memmap
path = tempfile.mkdtemp() + "/ds"
TensorDict({"a": torch.zeros(3), "s": ["x", "y", "z"]}, [3]).memmap(path)
load_memmap(path)["s"].tolist()
print(json.dumps({"import chatdata (CPU)": (c1 - c0) * 1e3, "modules": len(loaded - before),
                  "lazy": sorted(set(sys.modules) - loaded)}))
'''


def parse_rows(text: str) -> dict[str, float]:
    """Milliseconds by row label, from the tables of bench_td, bench_history and bench_persist."""
    rows = {}
    for line in text.splitlines():
        td = re.match(r"^(\S.*?\S)\s+([\d.]+)\s+([\d.]+)$", line)  # bench_td: label  best  median
        hist = re.match(r"^(\S.*?\S)\s+([\d.]+) (ms|us)\s+[\d.]+ (?:ms|us)", line)  # bench_history: min median
        pers = re.match(r"^\s+(\S.*?\S)\s+([\d.]+) (s|ms|us)\s", line)  # bench_persist: value unit
        if hist:
            rows[hist.group(1)] = float(hist.group(2)) * UNITS[hist.group(3)]
        elif pers:
            rows[pers.group(1)] = float(pers.group(2)) * UNITS[pers.group(3)]
        elif td and not line.startswith(("torch", "operation")):
            rows[td.group(1)] = float(td.group(2))
    return rows


def script_for(tree: Path, name: str, scripts_from: Path | None, scratch: Path) -> Path:
    """``benchmarks/<name>`` to run against ``tree``: its own, or ``scripts_from``'s copy.

    The scripts put their parent's parent first on ``sys.path``, so the borrowed ``benchmarks/``
    folder is copied into a scratch tree whose ``chatdata`` is a link to ``tree``'s package.
    """
    if scripts_from is None or scripts_from == tree:
        return tree / "benchmarks" / name
    side = scratch / tree.name
    if not side.exists():  # the whole benchmarks/ folder: the scripts import its helper modules
        shutil.copytree(scripts_from / "benchmarks", side / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (side / "chatdata").symlink_to(tree / "chatdata", target_is_directory=True)
    return side / "benchmarks" / name


def run_side(tree: Path, args: list[str], script: Path | None = None) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    if args == ["import"]:
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], env=env, cwd=tree, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{tree}: the import probe failed:\n{out.stderr[-2000:]}")
        probe = json.loads(out.stdout.strip().splitlines()[-1])
        if probe["lazy"]:
            print(f"  {tree}: the first memmap/load_memmap imported {probe['lazy']}")
        return {"import chatdata (CPU)": probe["import chatdata (CPU)"], "modules imported by chatdata": probe["modules"]}
    script = script or tree / "benchmarks" / args[0]
    out = subprocess.run([sys.executable, str(script), *args[1:]], env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{script} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return parse_rows(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="a tree holding chatdata/ and benchmarks/")
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (see SCRIPTS)")
    ap.add_argument("--only", nargs="*", default=[*SCRIPTS, "import"], choices=[*SCRIPTS, "import"])
    ap.add_argument("--own-scripts", action="store_true",
                    help="each tree runs its own benchmarks/ copy (default: both run the after tree's)")
    args = ap.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    scratch = Path(tempfile.mkdtemp(prefix="compare_trees_"))
    scripts_from = None if args.own_scripts else sides["after"]
    for name in args.only:
        runs: dict[str, list] = defaultdict(list)
        cmd = ["import"] if name == "import" else SCRIPTS[name][args.quick]
        for r in range(args.rounds):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                script = None if name == "import" else script_for(sides[side], cmd[0], scripts_from, scratch)
                runs[side].append(run_side(sides[side], cmd, script))
        print(f"\n{name}: {' '.join(cmd)}, {args.rounds} rounds alternated; ms (counts for 'modules')")
        print(f"  {'row':60s} {'before':>10s} {'after':>10s} {'ratio':>6s}  ratio per round")
        ratios = []
        for label in runs["before"][0]:
            pairs = [(b[label], a[label]) for b, a in zip(runs["before"], runs["after"]) if label in a and b[label] > 0]
            if not pairs:
                continue
            b = statistics.median(p[0] for p in pairs)
            a = statistics.median(p[1] for p in pairs)
            per_round = [p[1] / p[0] for p in pairs]
            if not label.startswith("modules"):  # a count, not a time
                ratios.append(a / b if b else 1.0)
            print(f"  {label[:60]:60s} {b:10.3f} {a:10.3f} {a / b if b else float('nan'):6.2f}  "
                  + " ".join(f"{x:.2f}" for x in per_round))
        if ratios:
            print(f"  geometric mean of the time ratios: {statistics.geometric_mean(ratios):.3f}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
