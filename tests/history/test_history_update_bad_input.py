"""``History.update`` / ``update_``: they work on a batch of conversations of different lengths
(an AttributeError before), check values as ``h.set`` does, and a refused update changes nothing.
Setting ``content`` on messages that had no content key keeps the History readable."""
from __future__ import annotations

import pytest

from chatdata import History
from chatdata.td import TensorDict

RAGGED = [[{"role": "assistant", "tool_calls": [{"id": "1"}]}],
          [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c", "name": "n"}]]
CONV = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "c"}]


def test_update_a_ragged_batch_with_a_dict_keywords_or_a_history():
    h = History.from_chats(RAGGED)
    assert h.update({"role": [["assistant"], ["user", "user"]]}) is h
    assert h.role == [["assistant"], ["user", "user"]]
    h.update({"role": [["system"], ["user", "assistant"]]}, content=[["s"], ["B", "C"]])
    assert h.to_chats() == [[{"role": "system", "content": "s", "tool_calls": [{"id": "1"}]}],
                            [{"role": "user", "content": "B"}, {"role": "assistant", "content": "C", "name": "n"}]]
    other = History.from_chats([[{"role": "user", "content": "q"}],
                                [{"role": "user", "content": "r"}, {"role": "assistant", "content": "t"}]])
    h.update(other)
    assert h.to_chats() == other.to_chats()


def test_update_with_a_history_takes_its_messages_without_a_content_key():
    h = History.from_chats([[{"role": "user", "content": "a"}],
                            [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]])
    h.update(History.from_chats(RAGGED))
    assert h.to_chats() == RAGGED


def test_update_keys_to_update_takes_only_those_fields():
    h = History.from_chats(RAGGED)
    other = History.from_chats([[{"role": "user", "content": "q"}],
                                [{"role": "user", "content": "r"}, {"role": "assistant", "content": "t"}]])
    h.update(other, keys_to_update=["content"])
    assert h.to_chats() == [[{"role": "assistant", "content": "q", "tool_calls": [{"id": "1"}]}],
                            [{"role": "user", "content": "r"}, {"role": "assistant", "content": "t", "name": "n"}]]


def test_update_leaves_a_copy_alone():
    h = History.from_chats(RAGGED)
    c = h.copy()
    h.update({"content": [["x"], ["y", "z"]]})
    assert c.to_chats() == RAGGED


@pytest.mark.parametrize("chats", [RAGGED, CONV], ids=["ragged", "conversation"])
@pytest.mark.parametrize("bad, err, match", [
    (lambda h: h.update({"role": [3] * h.batch_size[0]} if h.ndim == 1 else {"role": [[3], [3, 3]]}),
     ValueError, "'role' must be a str"),
    (lambda h: h.update({"contents": "x"}), KeyError, "not History fields"),
    (lambda h: h.update({"content": None}), ValueError, "needs 'content'"),
    (lambda h: h.update({"is_complete": False, "tool_calls": "call"}), ValueError, "'tool_calls' must be a list"),
    (lambda h: h.update(History.from_chats([{"role": "user", "content": "x"}])), ValueError, "same messages"),
    (lambda h: h.update(3), TypeError, "History or a dict"),
    (lambda h: h.update_({"role": None, "content": "x"}), ValueError, "'role' must be a str"),
], ids=["bad role", "unknown key", "user without content", "second key bad", "other shape", "not a dict",
        "update_ bad role"])
def test_a_refused_update_changes_nothing(chats, bad, err, match):
    h = History.from_chats(chats)
    with pytest.raises(err, match=match):
        bad(h)
    assert h.to_chats() == chats


def test_update_may_set_role_and_content_together():
    # the content rule is checked on the result: a tool-call message given content, then a new role
    h = History.from_chats([{"role": "assistant", "tool_calls": [{"id": "1"}]}])
    h.update({"role": ["user"], "content": ["now"]})
    assert h.to_chats() == [{"role": "user", "content": "now", "tool_calls": [{"id": "1"}]}]


def test_update_from_a_tensordict_and_update_in_place(tmp_path):
    h = History.from_chats(CONV)
    h.update(TensorDict({"role": ["system", "user"]}, batch_size=[2]))
    assert h.role == ["system", "user"]
    h.memmap(tmp_path / "h")
    loaded = History.load_memmap(tmp_path / "h")
    loaded.update_(is_complete=False)
    assert loaded.is_complete == [False, False]


@pytest.mark.parametrize("setter", [
    lambda h: setattr(h, "content", [["now"], ["B", "C"]]),
    lambda h: h.set("content", [["now"], ["B", "C"]]),
    lambda h: h.update(content=[["now"], ["B", "C"]]),
], ids=["attribute", "set", "update"])
def test_setting_content_on_messages_without_a_content_key(setter):
    # the "no content key" mark stayed: to_chats then refused the History as corrupt (FormatError)
    h = History.from_chats(RAGGED)
    setter(h)
    assert h.to_chats() == [[{"role": "assistant", "content": "now", "tool_calls": [{"id": "1"}]}],
                            [{"role": "user", "content": "B"}, {"role": "assistant", "content": "C", "name": "n"}]]
    one = History.from_chats(RAGGED[0])
    one.content = ["x"]
    assert one.to_chats() == [{"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}]


def test_writing_messages_after_update_from_a_history_leaves_that_history_alone():
    h = History.from_chats(CONV)
    other = History.from_chats([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
    h.update(other)
    h[0] = {"role": "system", "content": "s"}  # wrote into the column both shared
    assert other.to_chats() == [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    assert h.to_chats()[0] == {"role": "system", "content": "s"}
