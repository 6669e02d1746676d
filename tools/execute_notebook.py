#!/usr/bin/env python
"""Execute a notebook's code cells in order, in one namespace, and store what each printed as
its outputs, so a reader on a code host sees the results. No Jupyter needed: the notebooks here
print what they show. Run from the repository root after editing a notebook:

    python tools/execute_notebook.py notebooks/quickstart.ipynb

``tests/test_notebook.py`` re-executes the notebook with :func:`execute` and compares the shape
of the fresh outputs with the stored ones.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path


def cell_source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def execute(path) -> list[str]:
    """Run the code cells of the notebook at ``path``; returns what each printed, in order."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    namespace = {"__name__": "__main__"}
    printed = []
    for k, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(cell_source(cell), f"{Path(path).name}[code cell {k}]", "exec"), namespace)
        printed.append(buf.getvalue())
    return printed


def store_outputs(path) -> None:
    """Execute the notebook and write each code cell's printed text back as its output."""
    path = Path(path)
    printed = iter(execute(path))
    nb = json.loads(path.read_text(encoding="utf-8"))
    for count, cell in enumerate((c for c in nb["cells"] if c["cell_type"] == "code"), 1):
        text = next(printed)
        cell["execution_count"] = count
        cell["outputs"] = [{"name": "stdout", "output_type": "stream",
                            "text": text.splitlines(keepends=True)}] if text else []
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    for p in sys.argv[1:] or ["notebooks/quickstart.ipynb"]:
        store_outputs(p)
        print(f"stored the outputs of {p}")
