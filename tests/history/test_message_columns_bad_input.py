"""``History.from_message_columns`` checks the columns it is given as values, as ``from_chats`` does.

Before, it took any values without a look: ``extra=[{"role": "x"}, ...]`` silently turned message
0 into an ``x`` turn; an ``is_complete`` bool tensor with fewer values than messages silently
dropped the other messages from ``to_chats``; a role of 3, NaN in ``extra`` or a ``user`` message
without content were kept (to fail later in a render or a save, or never); ``_flags`` given as a
list failed with ``AttributeError: 'NonTensorStack' object has no attribute 'any'``, and flags
that did not fit the content called the History "corrupt" (a FormatError) on the first read."""
import math

import pytest
import torch

from chatdata import History
from chatdata.td import NonTensorStack

ROLES, CONTENTS = ["user", "assistant"], ["a", "b"]


def _make(**cols):
    return History.from_message_columns({"role": ROLES, "content": CONTENTS, **cols}, [0, 2])


@pytest.mark.parametrize("cols, err, match", [
    (dict(role=[3, "user"]), ValueError, r"message 0: 'role' must be a str, got int"),
    (dict(extra=[{"role": "x"}, None]), ValueError, r"message 0: 'extra' holds the key 'role', a History field"),
    (dict(extra=[None, {"w": math.nan}]), ValueError, r"message 1: 'extra'\['w'\] is nan"),
    (dict(tool_calls=[None, [{"args": (1, 2)}]]), ValueError, r"message 1: 'tool_calls'\[0\]\['args'\] is a tuple"),
    (dict(role=["user", "user"], content=["a", None]), ValueError, r"message 1: a 'user' message needs 'content'"),
    (dict(is_complete=torch.tensor([False])), ValueError, r"'is_complete' holds 1 values; the offsets say 2 messages"),
    (dict(is_complete=torch.tensor([0, 1])), TypeError, r"'is_complete' is a torch.int64 tensor"),
    (dict(role=torch.tensor([1, 2])), TypeError, r"'role' is a torch.int64 tensor"),
    (dict(role="user"), TypeError, r"'role' must be a list of values \(one per message\).*got str"),
    (dict(_flags=torch.zeros(1, dtype=torch.int8)), ValueError, r"'_flags' has shape \(1,\), expected \(2,\)"),
    (dict(_flags=[0, 99]), ValueError, r"'_flags': message 1 has flags 99; flags are 0\.\.15"),
    (dict(_flags=[0.5, 0]), TypeError, r"'_flags' must hold ints"),
    (dict(_flags=[1, 0]), ValueError, r"message 0: its '_flags' mark it without content \(bit 1\), but its content is 'a'"),
], ids=["role int", "extra overrides role", "nan", "tuple", "content rule", "short is_complete", "int is_complete",
        "tensor role", "str role", "short flags", "flag value", "float flags", "flags vs content"])
def test_bad_columns_are_refused_naming_column_and_message(cols, err, match):
    with pytest.raises(err, match=match):
        _make(**cols)


def test_columns_must_be_a_mapping():
    with pytest.raises(TypeError, match="takes a dict of columns"):
        History.from_message_columns([("role", ROLES), ("content", CONTENTS)], [0, 2])
    with pytest.raises(TypeError, match="offsets must be a 1-D sequence of ints, got str"):
        History.from_message_columns({"role": ROLES, "content": CONTENTS}, "02")


def test_good_columns_as_lists_tuples_tensors_and_a_historys_own_columns():
    h = _make(is_complete=torch.tensor([True, False]), _flags=[0, 0], extra=(None, {"name": "n"}))
    assert h.to_chats() == [[{"role": "user", "content": "a"},
                             {"role": "assistant", "content": "b", "is_complete": False, "name": "n"}]]
    chats = [[{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": "1"}]}], [{"role": "user", "content": "r"}]]
    src = History.from_chats(chats)
    cols = {k: src.message_column(k) for k in ("role", "content", "is_complete", "tool_calls", "tool_responses", "extra", "_flags")}
    assert isinstance(cols["role"], NonTensorStack)
    assert History.from_message_columns(cols, src.conversation_offsets()).to_chats() == chats


_CALL = [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]


@pytest.mark.parametrize("msg", [
    {"role": "assistant", "content": None, "tool_calls": _CALL},
    {"role": "assistant", "content": None, "reasoning_content": "r"},
    {"role": "assistant", "content": "", "tool_calls": _CALL},
    {"role": "assistant", "content": None, "name": "bob"},
    {"role": "assistant", "content": None},
    {"role": "user", "content": None},
    {"role": "tool", "content": None, "tool_call_id": "1"},
], ids=["None+calls", "None+reasoning", "empty+calls", "None+extra only", "None alone", "user None", "tool None"])
def test_content_rule_agrees_with_from_chats(msg):
    """A message's content, given as a column, follows from_chats's rule: the same messages are
    accepted (and read back the same) or refused with the same reason."""
    cols = {"role": [msg["role"]], "content": [msg["content"]]}
    if "tool_calls" in msg:
        cols["tool_calls"] = [msg["tool_calls"]]
    extra = {k: v for k, v in msg.items() if k not in ("role", "content", "tool_calls")}
    if extra:
        cols["extra"] = [extra]
    try:
        want = History.from_chats([[msg]]).to_chats()
    except ValueError as err:
        reason = str(err).split(": ", 1)[1]
        with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            History.from_message_columns(cols, [0, 1])
    else:
        assert History.from_message_columns(cols, [0, 1]).to_chats() == want


def test_without_a_content_column_no_message_has_content_as_from_chats_gives():
    """Tool-call-only data has no content column: it was refused ("takes role, content ..."),
    while from_chats takes the same messages (no content key). Now both give the same History."""
    chats = [[{"role": "assistant", "tool_calls": _CALL}, {"role": "assistant", "reasoning_content": "r"}],
             [{"role": "assistant", "is_complete": False, "tool_calls": _CALL}]]
    h = History.from_message_columns({"role": ["assistant"] * 3, "tool_calls": [_CALL, None, _CALL],
                                      "extra": [None, {"reasoning_content": "r"}, None],
                                      "is_complete": [True, True, False], "_flags": [0, 0, 2]}, [0, 2, 3])
    assert h.to_chats() == History.from_chats(chats).to_chats() == chats
    flags = torch.tensor([4], dtype=torch.int8)
    one = History.from_message_columns({"role": ["assistant"], "tool_calls": [_CALL], "_flags": flags}, [0, 1])
    assert one.to_chats() == [[{"role": "assistant", "tool_calls": _CALL}]] and flags.tolist() == [4]  # caller's kept
    with pytest.raises(ValueError, match="message 0: a 'user' message needs 'content'"):
        History.from_message_columns({"role": ["user"]}, [0, 1])
    with pytest.raises(ValueError, match="message 1: an 'assistant' message without 'content' must have 'tool_calls'"):
        History.from_message_columns({"role": ["assistant"] * 2, "tool_calls": [_CALL, None]}, [0, 2])
    with pytest.raises(ValueError, match=r"takes role and optionally \['content', "):
        History.from_message_columns({"content": ["a"]}, [0, 1])
