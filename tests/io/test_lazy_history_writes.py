"""The lazy History over shards against the eager History of the same conversations: what a
user writes, reads by field name, and the shards with no conversations.

Found by a side-by-side audit: ``ds[0] = ...`` and ``ds.role = ...`` raised AttributeErrors about
``__setitem__`` and property setters; ``ds["role"]`` was an IndexError (a History reads the field);
``ds[i][j] = message`` wrote the shard's ``_flags`` file on disk and (like a write into ``ds[a:b]``
within one shard) changed what ``ds`` read afterwards, while a selection across shards did not;
``apply_chat_template`` over shards that all hold no conversation returned ``[]`` without checking
its options; ``conversation_offsets`` / ``message_column`` were missing."""
import hashlib

import pytest
import torch

from chatdata import History, open_dataset
from chatdata.io import verify_dataset

CHATS = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}][: 1 + i % 2] for i in range(7)]
CHATS[2] = CHATS[2] + [{"role": "user", "content": "more", "name": "bob", "is_complete": False}]
PARTS = [CHATS[:2], [], CHATS[2:5], [], CHATS[5:]]


def _files(path):
    return {p.relative_to(path): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(params=["as written", "after verify"])
def ds(request, tmp_path):
    w = open_dataset(tmp_path / "c", mode="a")
    for part in PARTS:
        w.append(History.from_chats(part) if part else History.from_chats([[]])[0:0])
    if request.param == "after verify":
        assert verify_dataset(tmp_path / "c").ok
    before = _files(tmp_path / "c")
    yield open_dataset(tmp_path / "c")
    assert _files(tmp_path / "c") == before, "a write changed the dataset's folder"


def test_fields_by_name_as_the_history_reads_them(ds):
    h = History.from_chats(CHATS)
    for name in History._field_names:
        assert ds[name] == getattr(h, name)
    with pytest.raises(KeyError, match="no field 'roles'"):
        ds["roles"]


def test_offsets_and_message_columns_equal_the_history(ds):
    h = History.from_chats(CHATS)
    assert torch.equal(ds.conversation_offsets(), h.conversation_offsets())
    assert ds.message_column("content").tolist() == h.message_column("content").tolist()


WRITES = {
    "ds[0] = message": lambda ds: ds.__setitem__(0, {"role": "user", "content": "x"}),
    "ds.role = ...": lambda ds: setattr(ds, "role", "user"),
    "ds.set": lambda ds: ds.set("content", "x"),
    "ds.update": lambda ds: ds.update({"content": "x"}),
    "ds.extend": lambda ds: ds.extend(History.from_chats([[{"role": "user", "content": "x"}]])),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_writes_into_the_lazy_history_say_what_to_do(ds, write):
    with pytest.raises(TypeError, match=r"cannot be changed in place.*ds\[:\]"):
        write(ds)
    assert ds.to_chats() == CHATS


SELECTIONS = {"ds[i]": lambda ds: ds[3], "ds[a:b] in one shard": lambda ds: ds[2:5][1],
              "ds[a:b] across shards": lambda ds: ds[1:4][2], "ds[ids] in one shard": lambda ds: ds[[2, 3]][1],
              "iteration": lambda ds: list(ds)[3]}


@pytest.mark.parametrize("select", SELECTIONS.values(), ids=SELECTIONS.keys())
def test_a_write_into_what_it_gave_never_reaches_the_dataset(ds, select):
    conv = select(ds)
    conv[0] = {"role": "user", "content": "changed", "is_complete": False}
    assert conv.to_chats()[0] == {"role": "user", "content": "changed", "is_complete": False}
    assert ds.to_chats() == CHATS and ds[3].to_chats() == CHATS[3]


def test_shards_without_conversations_check_the_options_as_the_history_does(tmp_path):
    w = open_dataset(tmp_path / "e", mode="a")
    w.append(History.from_chats([[]])[0:0])
    w.append(History.from_chats([[]])[0:0])
    ds, h = open_dataset(tmp_path / "e"), History.from_chats([])
    with pytest.raises(ValueError, match="needs a tokenizer"):
        h.apply_chat_template(chat_template_name="chatml_format", tokenize=True)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        ds.apply_chat_template(chat_template_name="chatml_format", tokenize=True)
    assert ds.apply_chat_template(chat_template_name="chatml_format") == [] == h.apply_chat_template(
        chat_template_name="chatml_format")
    assert ds.conversation_offsets().tolist() == [0] and len(ds) == 0 and list(ds) == []
