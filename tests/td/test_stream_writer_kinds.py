"""StreamWriter keeps the kind of a column (str or JSON) also when it holds no value: a JSON column
of a chunk with no rows was saved as a str column, so a History streamed with only empty
conversations (``tool_calls``, ``extra`` must be JSON) could not be read back."""
from __future__ import annotations

import json

import pytest
import torch

from chatdata import History
from chatdata.td import NonTensorStack, RaggedTensorDict, TensorDict, load_memmap
from chatdata.td.storage import StreamWriter

CALLS = [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]


def _chunk(rows: list, *, packed: bool, offsets=None) -> RaggedTensorDict:
    """A ragged chunk of ``rows`` (``(text, json value, int)`` per row), one item per row by default."""
    def column(values):
        s = NonTensorStack.from_list(values)
        return NonTensorStack.from_packed(*s.packed_column()) if packed and values else s

    vals = TensorDict({"s": column([r[0] for r in rows]), "j": column([r[1] for r in rows]),
                       "x": torch.tensor([r[2] for r in rows], dtype=torch.int64)}, [len(rows)])
    if offsets is None:
        offsets = list(range(len(rows) + 1))
    return RaggedTensorDict(vals, torch.tensor(offsets))


def _kinds(path) -> dict:
    entries = json.loads((path / "_values" / "meta.json").read_text())["entries"]
    return {k: e.get("encoding", e["kind"]) for k, e in entries.items()}


ROWS = [("a", {"k": 1}, 1), ("é", [1, None], 2), ("", None, 3)]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("pattern", ["empty", "empty,empty", "empty,full", "full,empty", "empty,full,empty"])
def test_the_kinds_written_are_those_of_the_columns_whatever_the_chunks(tmp_path, packed, pattern):
    full = _chunk(ROWS, packed=packed)
    empty = full[0:0] if not packed else _chunk(ROWS, packed=True)[0:0]
    chunks = [full if p == "full" else empty for p in pattern.split(",")]
    with StreamWriter(tmp_path / "d") as w:
        for c in chunks:
            w.append(c)
    assert _kinds(tmp_path / "d") == {"s": "str", "j": "json", "x": "tensor"}
    r = load_memmap(tmp_path / "d")
    assert [r.values.get(k).packed_column()[2] for k in ("s", "j")] == ["str", "json"]
    n = len(ROWS) * pattern.split(",").count("full")
    assert r.values.get("j").tolist() == [v for _, v, _ in ROWS] * (n // len(ROWS))
    assert r.values.get("s").tolist() == [s for s, _, _ in ROWS] * (n // len(ROWS))


def test_values_decide_the_kind_an_empty_chunk_only_hinted(tmp_path):
    # an empty JSON chunk first, strings after: a str column (as memmap() of the whole writes it);
    # strings first, an empty JSON chunk after: the strings are not rewritten as JSON text
    json_empty = _chunk([("a", {"k": 1}, 1)], packed=True)[0:0]
    strings = TensorDict({"s": ["p", "q"], "j": ["u", "v"], "x": torch.tensor([1, 2])}, [2])
    for order in ((json_empty, RaggedTensorDict(strings, torch.tensor([0, 2]))),
                  (RaggedTensorDict(strings, torch.tensor([0, 2])), json_empty)):
        path = tmp_path / str(len(list(tmp_path.iterdir())))
        with StreamWriter(path) as w:
            for c in order:
                w.append(c)
        assert _kinds(path)["j"] == "str"
        assert load_memmap(path).values.get("j").tolist() == ["u", "v"]


def test_strings_then_json_values_still_turn_the_column_json(tmp_path):
    with StreamWriter(tmp_path / "d") as w:
        w.append(_chunk([("a", "text", 1)], packed=False))
        w.append(_chunk([("b", {"k": [1]}, 2)], packed=True)[0:0])
        w.append(_chunk([("b", {"k": [1]}, 2)], packed=True))
    assert _kinds(tmp_path / "d")["j"] == "json"
    assert load_memmap(tmp_path / "d").values.get("j").tolist() == ["text", {"k": [1]}]


WITH_COLUMNS = [[], [{"role": "user", "content": "p", "meta": "s"}],
                [{"role": "assistant", "content": None, "is_complete": False, "tool_calls": CALLS}], []]


@pytest.mark.parametrize("source", ["in memory", "loaded"])
def test_a_history_streamed_with_only_empty_conversations_loads(tmp_path, source):
    h = History.from_chats(WITH_COLUMNS)
    if source == "loaded":
        h.memmap(tmp_path / "src")
        h = History.load_memmap(tmp_path / "src")
    with StreamWriter(tmp_path / "d", tensorclass=History) as w:
        w.append(h[0:1])
        w.append(h[3:4])
    back = History.load_memmap(tmp_path / "d")
    assert back.to_chats() == [[], []]
    assert back.extend(History.from_chats(WITH_COLUMNS[1:3]), inplace=False).to_chats() == [[], [], *WITH_COLUMNS[1:3]]
    with StreamWriter(tmp_path / "e", tensorclass=History) as w:  # empty pieces around full ones
        for piece in (h[0:1], h[1:3], h[3:4]):
            w.append(piece)
    assert History.load_memmap(tmp_path / "e").to_chats() == WITH_COLUMNS
