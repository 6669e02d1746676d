"""Per-message values written into a column held as one constant for every message (``is_complete``,
``tool_calls``, ``extra`` when no message differs), in memory and on a loaded History.

Before: on a loaded conversation ``h.set("is_complete", [False, True])`` raised "cannot save entry
'is_complete' ...: a NonTensorStack is not JSON-serialisable" (the locked storage tried to write the
new column into the folder's constant); ``h[i][j] = message`` on a batch of conversations dropped the
message's ``is_complete=False`` (the view copied the constant, the batch kept it); and writing a
message into a loaded History changed the ``_flags`` file of its folder while its text stayed in
memory, leaving a folder whose flags no longer matched its messages. Now the column becomes a
per-message column in memory (copy-on-write) and the folder is never changed."""
import hashlib

import pytest
import torch

from chatdata import History

CONV = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
BATCH = [CONV, [{"role": "user", "content": "c"}]]
CALLS = [{"type": "function", "function": {"name": "f", "arguments": {}}}]


def _files(path):
    return {p.relative_to(path): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(params=["memory", "loaded"])
def make(request, tmp_path):
    """make(chats) -> History (built, or saved then loaded); afterwards the folder must be unchanged."""
    folders = []

    def build(chats):
        h = History.from_chats(chats)
        if request.param == "memory":
            return h
        path = tmp_path / f"h{len(folders)}"
        h.memmap(path)
        folders.append((path, _files(path), chats))
        return History.load_memmap(path)

    yield build
    for path, before, chats in folders:
        assert _files(path) == before, "a write into a loaded History changed its folder"
        assert History.load_memmap(path).to_chats() == chats


SETS = {
    "set": lambda h, v: h.set("is_complete", v),
    "set inplace": lambda h, v: h.set("is_complete", v, inplace=True),
    "attribute": lambda h, v: setattr(h, "is_complete", v),
    "update": lambda h, v: h.update({"is_complete": v}),
    "update_": lambda h, v: h.update_({"is_complete": v}),
}


@pytest.mark.parametrize("write", SETS.values(), ids=SETS.keys())
def test_per_message_values_into_a_constant_column_of_a_conversation(make, write):
    h = make(CONV)
    write(h, [False, True])
    assert h.is_complete == [False, True]
    assert h.to_chats() == [{**CONV[0], "is_complete": False}, CONV[1]]


@pytest.mark.parametrize("write", SETS.values(), ids=SETS.keys())
def test_per_message_values_into_a_constant_column_of_a_batch(make, write):
    h = make(BATCH)
    write(h, [[False, True], [True]])
    assert h.is_complete == [[False, True], [True]]


def test_other_constant_columns_take_per_message_values(make):
    h = make(CONV)
    h.set("tool_calls", [None, CALLS])
    h.extra = [{"name": "bob"}, None]
    assert h.to_chats() == [{**CONV[0], "name": "bob"}, {**CONV[1], "tool_calls": CALLS}]


def test_a_message_written_into_a_conversation(make):
    h = make(CONV)
    h[1] = {"role": "assistant", "content": "B", "is_complete": False, "name": "x"}
    assert h.to_chats() == [CONV[0], {"role": "assistant", "content": "B", "is_complete": False, "name": "x"}]


def test_a_message_written_through_a_conversation_of_a_batch_reaches_the_batch(make):
    h = make(BATCH)
    conv = h[0]
    conv[1] = {"role": "assistant", "content": "B", "is_complete": False, "tool_calls": CALLS}
    want = [CONV[0], {"role": "assistant", "content": "B", "is_complete": False, "tool_calls": CALLS}]
    assert conv.to_chats() == want
    assert h.to_chats() == [want, BATCH[1]]
    conv[0] = History(role="system", content="s")  # a second write goes on into the batch
    assert h.to_chats()[0][0] == {"role": "system", "content": "s"}


def test_a_message_written_into_a_conversation_of_a_dense_batch():
    h = torch.stack([History.from_chats(CONV), History.from_chats(CONV)])
    h[1][0] = {"role": "user", "content": "z", "is_complete": False}
    assert h.to_chats() == [CONV, [{"role": "user", "content": "z", "is_complete": False}, CONV[1]]]


def test_a_single_message_history_loaded_keeps_its_folder(make):
    h = make([{"role": "user", "content": "a"}])
    h[0] = {"role": "user", "content": "b", "is_complete": False}
    assert h.to_chats() == [{"role": "user", "content": "b", "is_complete": False}]


def test_a_refused_value_leaves_the_loaded_history_and_its_folder_unchanged(make):
    h = make(CONV)
    with pytest.raises(ValueError, match="message 1: 'is_complete' must be a bool"):
        h.set("is_complete", [True, "no"])
    assert h.to_chats() == CONV
