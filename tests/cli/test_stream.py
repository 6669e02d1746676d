"""chatdata.td.storage.stream.StreamWriter: the streamed folder is the one History.memmap writes."""
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from chatdata import History, TensorDict, load_memmap
from chatdata.data import load_sample_chats
from chatdata.td import RaggedTensorDict
from chatdata.td.storage.stream import StreamWriter


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _stream(path, chats, step):
    with StreamWriter(path, tensorclass=History) as w:
        for a in range(0, len(chats), step):
            w.append(History.from_chats(chats[a:a + step]))


@pytest.mark.parametrize("step", [1, 7, 300])
def test_same_bytes_as_memmap(tmp_path, step):
    chats = load_sample_chats()
    _stream(tmp_path / "s", chats, step)
    History.from_chats(chats).memmap(tmp_path / "ref")
    assert _files(tmp_path / "s") == _files(tmp_path / "ref")
    assert History.load_memmap(tmp_path / "s").to_chats() == chats


MESSAGES = [
    {"role": "user", "content": "plain"},
    {"role": "assistant", "content": "héllo 👋"},
    {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "c1"},
    {"role": "user", "content": [{"type": "text", "text": "parts"}]},
    {"role": "assistant", "content": "cut", "is_complete": False},
    {"role": "assistant", "reasoning_content": "no content key"},
    {"role": "system", "content": "", "name": "sys", "tool_responses": ["r"]},
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(range(len(MESSAGES))), max_size=5), min_size=1, max_size=12),
       st.integers(1, 5))
def test_columns_change_kind_between_chunks(tmp_path_factory, picks, step):
    """Constant -> per-row and str -> JSON transitions between chunks keep every value."""
    tmp = tmp_path_factory.mktemp("s")
    chats = [[dict(MESSAGES[i]) for i in conv] for conv in picks]
    _stream(tmp / "s", chats, step)
    assert History.load_memmap(tmp / "s").to_chats() == chats
    History.from_chats(chats).memmap(tmp / "ref")
    # the same entries (kinds may differ only where a chunk-wise constant had to be expanded)
    assert History.load_memmap(tmp / "ref").to_chats() == chats


def test_tensor_columns_and_bare_ragged(tmp_path):
    with StreamWriter(tmp_path / "t", columns=("ids", "mask")) as w:
        for k in range(3):
            n = k + 2
            vals = TensorDict({"ids": torch.arange(n, dtype=torch.int32) + 10 * k,
                               "mask": torch.arange(n) % 2 == 0}, [n])
            w.append(RaggedTensorDict(vals, torch.tensor([0, 1, n])))
    r = load_memmap(tmp_path / "t")
    assert isinstance(r, RaggedTensorDict) and r.batch_size[0] == 6
    assert r[3]["ids"].tolist() == [11, 12] and r[5]["ids"].tolist() == [21, 22, 23] and r[3]["ids"].dtype == torch.int32
    assert r.offsets.tolist() == [0, 1, 2, 3, 5, 6, 9]
    assert r.values["mask"].dtype == torch.bool


def test_abort_on_error_leaves_destination(tmp_path):
    chats = load_sample_chats()[:20]
    _stream(tmp_path / "ds", chats, 10)
    before = _files(tmp_path / "ds")
    with pytest.raises(KeyboardInterrupt):
        with StreamWriter(tmp_path / "ds", tensorclass=History) as w:
            w.append(History.from_chats(chats[:5]))
            raise KeyboardInterrupt
    assert _files(tmp_path / "ds") == before
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporary folder left


def test_mismatched_chunks_are_refused(tmp_path):
    w = StreamWriter(tmp_path / "x")
    w.append(RaggedTensorDict(TensorDict({"a": torch.zeros(2)}, [2]), torch.tensor([0, 2])))
    with pytest.raises(ValueError, match="columns"):
        w.append(RaggedTensorDict(TensorDict({"b": torch.zeros(2)}, [2]), torch.tensor([0, 2])))
    with pytest.raises(TypeError, match="after"):
        w.append(RaggedTensorDict(TensorDict({"a": torch.zeros(2, dtype=torch.int64)}, [2]), torch.tensor([0, 2])))
    w.abort()
    assert not os.listdir(tmp_path)


def test_import_interrupted_leaves_nothing(tmp_path, monkeypatch, sample_jsonl):
    """Ctrl-C during an import (here: in the second chunk) removes the temporary folder."""
    from chatdata.cli import import_ as imp

    calls = {"n": 0}
    real = History.from_chats.__func__

    def flaky(cls, chats):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(cls, chats)

    monkeypatch.setattr(History, "from_chats", classmethod(flaky))
    with pytest.raises(KeyboardInterrupt):
        imp.import_file(sample_jsonl, tmp_path / "ds", chunk_size=50, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_progress_line_on_a_terminal():
    import io

    from chatdata.cli.progress import Progress

    buf = io.StringIO()
    p = Progress("importing", total=1000, unit="B", enabled=True, stream=buf)
    p.update(500, items=7, force=True)
    p.close()
    out = buf.getvalue()
    assert "\r" in out and "50%" in out and "7 conversations" in out and "/s" in out and out.endswith("\n")
