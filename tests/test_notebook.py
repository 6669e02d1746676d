"""notebooks/quickstart.ipynb: valid, shown with its outputs on a code host, and still running.

The code cells are executed in order, in one namespace (no Jupyter needed, see
tools/execute_notebook.py), and the fresh outputs are compared with the stored ones by shape:
the same lines per cell and the same tensor shapes. After editing the notebook, store its outputs
again with ``python tools/execute_notebook.py notebooks/quickstart.ipynb``."""
import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"
SHAPES = re.compile(r"torch\.Size\(\[[^\]]*\]\)")


def _tool():
    spec = importlib.util.spec_from_file_location("execute_notebook", ROOT / "tools" / "execute_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stored_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            out.append("".join("".join(o.get("text", [])) for o in cell["outputs"] if o["output_type"] == "stream"))
    return out


def test_notebook_is_valid_nbformat4_with_stored_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4 and isinstance(nb["cells"], list) and nb["cells"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("markdown", "code")
        assert isinstance(cell["source"], (list, str)) and isinstance(cell["metadata"], dict)
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert all(c["outputs"] for c in code), "every code cell shows what it printed"


def test_notebook_runs_and_matches_its_stored_outputs():
    fresh = _tool().execute(NOTEBOOK)
    stored = _stored_outputs()
    assert len(fresh) == len(stored)
    for k, (new, old) in enumerate(zip(fresh, stored)):
        assert len(new.splitlines()) == len(old.splitlines()), f"code cell {k} printed a different number of lines"
        assert SHAPES.findall(new) == SHAPES.findall(old), f"code cell {k} printed other shapes"
    text = "".join(fresh)
    assert "trained tokens" in text and "[[" in text and "Composite(" in text
