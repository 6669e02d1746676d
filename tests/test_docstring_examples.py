"""Every docstring example in the package runs and prints what it shows (doctest)."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import chatdata

# every module file of the package, read from the file tree and not from pkgutil.walk_packages:
# that walk skips, without a word, the submodules of a package whose import fails, so a broken
# package's doctests vanished from the run instead of failing it
_ROOT = Path(chatdata.__file__).parent
MODULES = sorted(".".join(("chatdata",) + p.relative_to(_ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for p in _ROOT.rglob("*.py") if p.name != "__main__.py")


def _globs(module):
    import numpy as np
    import torch

    from chatdata import History, NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict, tensorclass

    g = {"torch": torch, "np": np, "chatdata": chatdata, "TensorDict": TensorDict, "History": History,
         "NonTensorData": NonTensorData, "NonTensorStack": NonTensorStack, "RaggedTensorDict": RaggedTensorDict,
         "tensorclass": tensorclass}
    g.update(vars(module))
    return g


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures = []
    for test in finder.find(module, name, globs=_globs(module)):
        if test.lineno is None and not test.examples:
            continue
        out = []
        result = runner.run(test, out=out.append)
        if result.failed:
            failures.append("".join(out))
    assert not failures, "\n".join(failures)
