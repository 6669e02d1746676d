"""In-place sets of a column that holds one value for every message (a constant: ``is_complete``,
``tool_calls``, ... when no message differs). They changed the constant object in place:
``h.copy().set("is_complete", False, inplace=True)`` (or ``update_``) changed ``h`` too, and a
per-message list (``[False, True]``) was refused with a confusing error and left in the History,
which ``to_chats`` then called corrupt."""
import pytest

from chatdata import History

CHAT = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]

WRITES = {
    "set inplace": lambda h: h.set("is_complete", False, inplace=True),
    "update_": lambda h: h.update_({"is_complete": False}),
    "update inplace": lambda h: h.update({"extra": {"name": "bob"}}, inplace=True),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_an_in_place_set_of_a_copy_never_changes_the_original(write):
    h = History.from_chats(CHAT)
    c = h.copy()
    write(c)
    assert c.to_chats() != CHAT
    assert h.to_chats() == CHAT


def test_per_message_values_set_in_place_into_a_constant_column():
    h = History.from_chats(CHAT)
    h.set("is_complete", [False, True], inplace=True)
    assert h.is_complete == [False, True]
    assert h.to_chats() == [{**CHAT[0], "is_complete": False}, CHAT[1]]


@pytest.mark.parametrize("value, err", [([1, True], "message 0: 'is_complete' must be a bool, got int"),
                                        (3, "'is_complete' must be a bool, got int")])
def test_a_refused_in_place_set_leaves_the_history_unchanged(value, err):
    h = History.from_chats(CHAT)
    with pytest.raises(ValueError, match=err):
        h.set("is_complete", value, inplace=True)
    assert h.to_chats() == CHAT and h.is_complete == [True, True]


def test_a_loaded_constant_still_takes_one_value_in_place_and_writes_it_through(tmp_path):
    History.from_chats(CHAT).memmap(tmp_path / "h")
    loaded = History.load_memmap(tmp_path / "h")
    loaded.set("is_complete", False, inplace=True)
    assert History.load_memmap(tmp_path / "h").is_complete == [False, False]
    copy = History.load_memmap(tmp_path / "h").copy()
    copy.set("is_complete", True, inplace=True)  # a copy's constant is its own: the folder keeps its value
    assert History.load_memmap(tmp_path / "h").is_complete == [False, False]
