"""Dropping fields: ``exclude``, ``select``, ``pop``, ``del h.<field>``. ``h.exclude("role")`` gave a
History whose messages read ``{"role": None, ...}``, whose ``apply_chat_template`` rendered no
message at all and whose ``memmap`` wrote a folder that did not load; on a batch of conversations
of different lengths they raised ``AttributeError: 'RaggedTensorDict' object has no attribute
'exclude'``. Now ``role`` and ``content`` cannot be dropped (a ValueError saying what to do), and
dropping an optional field gives every message its default."""
import pytest

from chatdata import History

CHAT = [{"role": "user", "content": "hi", "name": "bob"},
        {"role": "assistant", "content": "yo", "is_complete": False, "tool_calls": None}]
BATCH = [CHAT, [{"role": "user", "content": "x"}]]


def _histories():
    return {"conversation": History.from_chats(CHAT), "batch": History.from_chats(BATCH)}


DROPS = {
    "exclude role": lambda h: h.exclude("role"),
    "exclude content": lambda h: h.exclude("content"),
    "exclude role inplace": lambda h: h.exclude("role", "extra", inplace=True),
    "select content": lambda h: h.select("content"),
    "select role": lambda h: h.select("role", "is_complete"),
    "select role inplace": lambda h: h.select("role", inplace=True),
    "select strict=False": lambda h: h.select("role", "nokey", strict=False),
    "pop role": lambda h: h.pop("role"),
    "del content": lambda h: h.__delattr__("content"),
}


@pytest.mark.parametrize("shape", ["conversation", "batch"])
@pytest.mark.parametrize("drop", DROPS.values(), ids=DROPS.keys())
def test_dropping_role_or_content_is_refused_at_once_and_changes_nothing(shape, drop):
    h = _histories()[shape]
    before = h.to_chats()
    with pytest.raises(ValueError, match=r"every message needs 'role' and 'content'.*as_tensordict=True"):
        drop(h)
    assert h.to_chats() == before


@pytest.mark.parametrize("shape", ["conversation", "batch"])
def test_excluding_optional_fields_gives_their_defaults(shape):
    h = _histories()[shape]
    before = h.to_chats()
    out = h.exclude("is_complete", "tool_calls", "extra")
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert out.to_chats() == (plain if shape == "conversation" else [plain, BATCH[1]])
    assert h.to_chats() == before  # not in place: h keeps its fields
    assert (out.is_complete if shape == "conversation" else out.is_complete[0]) == [True, True]


@pytest.mark.parametrize("shape", ["conversation", "batch"])
def test_select_keeps_the_fields_named_and_resets_the_others(shape):
    h = _histories()[shape]
    out = h.select("role", "content", "is_complete")
    first = out.to_chats() if shape == "conversation" else out.to_chats()[0]
    assert first == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "is_complete": False}]


def test_exclude_and_select_in_place_change_self():
    h = History.from_chats(CHAT)
    assert h.exclude("extra", inplace=True) is h
    assert h.to_chats()[0] == {"role": "user", "content": "hi"}
    assert h.select("role", "content", inplace=True) is h
    assert h.to_chats()[1] == {"role": "assistant", "content": "yo"}


def test_pop_and_del_of_an_optional_field():
    h = History.from_chats(CHAT)
    popped = h.pop("extra")
    assert popped.tolist() == [{"name": "bob"}, None]
    del h.is_complete
    assert h.to_chats() == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "tool_calls": None}]
    assert h.pop("nokey", "dflt") == "dflt"
    with pytest.raises(KeyError, match="no field 'nokey'"):
        h.pop("nokey")


def test_a_message_that_would_break_the_content_rule_is_named_and_nothing_changes():
    calls = [{"type": "function", "function": {"name": "f", "arguments": {}}}]
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": calls}])
    before = h.to_chats()
    with pytest.raises(ValueError, match=r"History.exclude\('tool_calls'\): .*message 1"):
        h.exclude("tool_calls", inplace=True)
    assert h.to_chats() == before


def test_select_of_an_unknown_key_and_exclude_of_one():
    h = History.from_chats(CHAT)
    with pytest.raises(KeyError, match="not History fields"):
        h.select("role", "content", "nokey")
    assert h.select("role", "content", "nokey", strict=False).to_chats()[0] == {"role": "user", "content": "hi"}
    assert h.exclude("nokey").to_chats() == CHAT  # as tensordict: a missing key is ignored


def test_as_tensordict_gives_the_raw_columns_also_for_a_ragged_batch():
    h = History.from_chats(BATCH)
    td = h.exclude("role", as_tensordict=True)
    assert "role" not in td.keys() and td[0]["content"] == ["hi", "yo"]
    assert h.select("role", as_tensordict=True)[1]["role"] == ["user"]
    with pytest.raises(ValueError, match="_flags"):
        h.exclude("_flags")


def test_a_history_left_without_role_by_empty_names_it_in_to_chats():
    with pytest.raises(ValueError, match=r"no 'role' column"):
        History.from_chats(CHAT).empty().to_chats()


def test_an_excluded_history_saves_and_loads(tmp_path):
    h = History.from_chats(BATCH).exclude("extra")
    h.memmap(tmp_path / "h")
    assert History.load_memmap(tmp_path / "h").to_chats() == [[{"role": "user", "content": "hi"}, CHAT[1]], BATCH[1]]


def test_a_history_built_with_content_none_saves_a_folder_that_loads(tmp_path):
    # the constructor left no content column, and the saved folder failed to load ("['content'] missing")
    h = History(role="assistant", content=None, tool_calls=[{"id": "1"}])
    h.memmap(tmp_path / "h")
    assert History.load_memmap(tmp_path / "h").to_chats() == {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}
