"""Values set on a History directly (``History(role=..., content=...)``, ``h.role = ...``,
``h.set(...)``) follow the rules ``from_chats`` applies at the door.

Before, the constructor took anything: ``role=None`` gave a History whose every use (append,
render, save) was a bare ``KeyError: 'role'``; ``content=3`` / ``{"a": 1}`` saved without a word
and the saved folder then failed to load as "corrupt"; ``is_complete="no"`` made ``to_chats`` say
the History column was corrupt; a lone surrogate reached the tokenizer as a UnicodeEncodeError."""
import enum

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import ContentBase, History, load_memmap


class _Role(str, enum.Enum):
    user = "user"


@pytest.mark.parametrize("kwargs, match", [
    (dict(role=None, content="a"), r"'role' must be a str.*got None"),
    (dict(role=3, content="a"), r"'role' must be a str, got int"),
    (dict(role=b"user", content="a"), r"'role' must be a str, got bytes"),
    (dict(role="user", content=3), r"'content' must be a str, None or a list of content parts, got int"),
    (dict(role="user", content=b"hi"), r"got bytes"),
    (dict(role="user", content={"type": "text", "text": "hi"}), r"got dict"),
    (dict(role="user", content=[{"type": "smell"}]), r"unknown type 'smell'"),
    (dict(role="user", content=[{"type": "image", "data": b"x"}]), r"'content'\[0\]\['data'\] is a bytes"),
    (dict(role="user", content="bad \ud800"), r"lone surrogate"),
    (dict(role="u\udfff", content="a"), r"'role' holds a lone surrogate"),
    (dict(role="user", content="a", is_complete="no"), r"'is_complete' must be a bool, got str"),
    (dict(role="user", content="a", is_complete=torch.tensor(1)), r"'is_complete' must be a bool, got a torch.int64 tensor"),
    (dict(role="assistant", content="", tool_calls="f()"), r"'tool_calls' must be a list or None, got str"),
    (dict(role="assistant", content="", tool_calls=[{"args": (1, 2)}]), r"tool_calls'\[0\]\['args'\] is a tuple"),
    (dict(role="tool", content="", tool_responses="ok"), r"'tool_responses' must be a list or None"),
    (dict(role="user", content="a", extra=["name"]), r"'extra' must be a dict or None, got list"),
    (dict(role="user", content="a", extra={1: "x"}), r"has the key 1 \(int\)"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_a_bad_message_value_is_refused_naming_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        History(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(role=["user", None], content=["a", "b"]), r"message 1: 'role' must be a str, got NoneType"),
    (dict(role=["user", "user"], content=["a", 7]), r"message 1: 'content' must be"),
    (dict(role=["user", "user"], content=[["a"], ["b"]]), r"message 0: content part 0 must be a dict, got str"),
    (dict(role="user", content=["a", "b\ud800"]), r"message 1: 'content' holds a lone surrogate"),
    (dict(role="user", content="a", is_complete=[True, "x"]), r"message 1: 'is_complete' must be a bool"),
])
def test_a_bad_value_in_a_conversation_names_the_message(kwargs, match):
    with pytest.raises(ValueError, match=match):
        History(**kwargs, batch_size=(2,))


def test_a_bad_value_in_a_dense_batch_names_the_message_position():
    with pytest.raises(ValueError, match=r"message \(1, 0\): 'role' must be a str, got int"):
        History(role=[["user", "assistant"], [3, "assistant"]], content="x", batch_size=(2, 2))


def test_good_values_are_kept_as_given():
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "http://x/c.png"}}]
    h = History(role=["system", "user", "assistant"], content=["s", parts, None], batch_size=(3,),
                is_complete=[True, True, False], tool_calls=[None, None, [{"id": "1", "function": {"name": "f"}}]],
                extra=[None, {"name": "bob"}, None])
    assert h.content == ["s", parts, None]
    assert h.is_complete == [True, True, False]
    m = History(role="", content="NUL \x00 and é", is_complete=torch.tensor(False))
    assert m.to_chats() == {"role": "", "content": "NUL \x00 and é", "is_complete": False}
    assert History(role="user", content=ContentBase(type="text", text="hi")).content == [{"type": "text", "text": "hi"}]


def test_torchrl_unbatched_lists_are_still_accepted():
    # torchrl writes one conversation as a History of batch () holding lists
    h = History(role=["user", "assistant"], content=["a", [{"type": "text", "text": "b"}]])
    assert h.batch_size == () and h.role == ["user", "assistant"]
    with pytest.raises(ValueError, match=r"nor is it a list of values.*'role' must be a str, got int"):
        History(role=["user", 3], content=["a", "b"])


@pytest.mark.parametrize("make", [
    lambda: History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]),
    lambda: History.from_chats([[{"role": "user", "content": "a"}], [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]]),
    lambda: History(role="user", content="a"),
], ids=["conversation", "ragged batch", "one message"])
@pytest.mark.parametrize("field, value", [("role", None), ("role", 3), ("content", b"x"), ("is_complete", "no"),
                                          ("extra", ("a",)), ("tool_calls", {"f": 1})])
def test_setting_a_bad_value_raises_and_leaves_the_history_unchanged(make, field, value):
    h = make()
    before = h.to_chats()
    with pytest.raises(ValueError, match=repr(field)):
        h.set(field, value)
    with pytest.raises(ValueError, match=repr(field)):
        setattr(h, field, value)
    assert h.to_chats() == before


def test_setting_good_values_on_a_ragged_batch():
    h = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]])
    h.is_complete = [[True], [True, False]]
    h.set("extra", [[None], [{"name": "x"}, None]])
    assert h[1].to_chats()[1] == {"role": "assistant", "content": "c", "is_complete": False}
    with pytest.raises(ValueError, match=r"message 2: 'is_complete' must be a bool, got int"):
        h.is_complete = [[True], [True, 0]]
    assert h.is_complete == [[True], [True, False]]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


@settings(max_examples=40, deadline=None)
@given(roles=st.lists(st.sampled_from(["system", "user", "assistant", "tool"]) | _text, min_size=1, max_size=5),
       data=st.data())
def test_what_the_constructor_accepts_saves_and_loads_back(tmp_path_factory, roles, data):
    n = len(roles)
    contents = data.draw(st.lists(_text | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
                                                                max_size=2), min_size=n, max_size=n))
    h = History(role=roles, content=contents, batch_size=(n,))
    path = tmp_path_factory.mktemp("h")
    h.memmap(path)
    assert load_memmap(path).to_chats() == h.to_chats()


@pytest.mark.parametrize("offsets, match", [
    ([0, 2, 1, 2], r"offsets must not decrease: offset 2 is 1, after 2"),  # was: message 'b' twice (RaggedTensorDict)
    ([0.0, 1.5, 2.0], r"offsets must be ints, got torch.float"),  # was: truncated to [0, 1, 2]
    ([True, True], r"offsets must be ints"),
    ([1, 2], r"starting at 0"),
])
def test_from_message_columns_refuses_offsets_that_would_mix_up_messages(offsets, match):
    with pytest.raises(ValueError, match=match):
        History.from_message_columns({"role": ["user", "assistant"], "content": ["a", "b"]}, offsets)


_BATCH = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}],
          [{"role": "user", "content": "c"}]]


def test_append_of_too_few_messages_to_a_batch_says_what_append_does():
    h = History.from_chats(_BATCH)
    with pytest.raises(ValueError, match=r"adds one message to each conversation: 3 conversations, got 2 messages \(use dim=0"):
        h.append(History.from_chats(_BATCH[1]))
    assert h.to_chats() == _BATCH  # unchanged
    with pytest.raises(RuntimeError, match="one less dimension"):
        History.from_chats(_BATCH[1]).append(h)  # a batch onto one conversation


def test_extend_with_an_empty_history_changes_nothing():
    h = History.from_chats(_BATCH)
    assert h.extend(History.from_chats([[]])[0:0]).to_chats() == _BATCH
    conv = History.from_chats(_BATCH[1])
    assert conv.extend(History.from_chats([[]])[0]).to_chats() == _BATCH[1]  # a conversation without messages
    with pytest.raises(ValueError, match="cannot extend 3 conversations with 0 rows"):
        h.extend(History.from_chats([[]])[0:0], dim=-1)


def test_item_assignment_checks_messages_as_from_chats_does():
    conv = History.from_chats([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(ValueError, match=r"'role' must be a str, got int"):
        conv[0] = {"role": 3, "content": "q"}  # was stored as role=tensor(3)
    with pytest.raises(TypeError, match="takes a History"):
        conv[0] = 5
    conv[1] = {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}], "name": "x"}
    conv[0] = History(role="system", content="s")
    assert conv.to_chats() == [{"role": "system", "content": "s"},
                               {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}], "name": "x"}]


def test_item_assignment_into_a_ragged_batch_says_what_to_do_instead():
    h = History.from_chats(_BATCH)
    with pytest.raises(TypeError, match="cannot assign messages by index into a batch of conversations of different lengths"):
        h[0] = History.from_chats(_BATCH[0])  # was: 'RaggedTensorDict' object does not support item assignment
    h["role"] = [["x"], ["y", "z"], ["w"]]
    assert h.role == [["x"], ["y", "z"], ["w"]]


@pytest.mark.parametrize("msg, match", [
    ({"role": np.str_("user"), "content": "a"}, r"message 0: 'role' must be a str, got numpy.str_ \(a numpy scalar: use .item\(\)\)"),
    ({"role": _Role.user, "content": "a"}, r"'role' must be a str, got .*_Role \(a str subclass: pass a plain str\)"),
    ({"role": "user", "content": np.str_("a")}, r"content must be a str, None or a list of parts, got numpy.str_"),
    ({"role": "user", "content": "a", "is_complete": np.bool_(False)}, r"'is_complete' is a numpy.bool \(a numpy scalar"),
    ({"role": "user", "content": "a", "weight": np.float32(0.5)}, r"'weight' is a numpy.float32 \(a numpy scalar: use .item\(\)\)"),
], ids=["numpy str role", "str enum role", "numpy str content", "numpy bool", "numpy float"])
def test_numpy_scalars_and_str_subclasses_are_named_with_what_to_do(msg, match):
    # a numpy str role gave 'ValueError: invalid chats'; numpy's bool was called "a bool"
    with pytest.raises(ValueError, match=match):
        History.from_chats([msg])
    with pytest.raises(ValueError, match=match.replace("message 0: ", "")):
        History.from_chats([[{"role": "user", "content": "x"}], [msg]])


@pytest.mark.parametrize("content, match", [
    (ContentBase(type="smell"), r"^History: content part 0 has unknown type 'smell' \(known: [a-z_, ]+\)$"),
    (ContentBase(type="text", text=3), r"^History: content part 0 of type 'text' needs a str 'text'$"),
    ([{"type": "text", "text": "a"}, {"type": "smell"}], r"^History: content part 1 has unknown type 'smell'"),
])
def test_bad_content_parts_are_named_as_parts(content, match):
    with pytest.raises(ValueError, match=match):
        History(role="user", content=content)


@pytest.mark.parametrize("key", ["role", "content", "is_complete", "tool_calls", "tool_responses"])
def test_extra_may_not_hold_a_field_of_its_own(key):
    # History(role="user", content="a", extra={"role": "system"}) rendered and read back as a system turn
    with pytest.raises(ValueError, match=rf"'extra' holds the key {key!r}, a History field of its own.*set {key}= instead"):
        History(role="user", content="a", extra={"name": "n", key: "system"})
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(ValueError, match=rf"message 1: 'extra' holds the key {key!r}"):
        h.extra = [None, {key: "x"}]
    assert h.to_chats() == [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]


@pytest.mark.parametrize("kwargs, match", [
    (dict(role="user", content=None), r"^History: a 'user' message needs 'content' \(got None\)$"),
    (dict(role=["system", "tool"], content=["s", None], batch_size=(2,)), r"message 1: a 'tool' message needs 'content'"),
    (dict(role="assistant", content=None), r"an 'assistant' message without 'content' must have 'tool_calls' or 'reasoning_content'"),
], ids=["user", "tool in a conversation", "bare assistant"])
def test_the_constructor_applies_the_content_rule_of_from_chats(kwargs, match):
    # History(role="user", content=None) rendered as "'dict object' has no attribute 'content'"
    with pytest.raises(ValueError, match=match):
        History(**kwargs)


def test_content_none_where_the_rule_allows_it():
    assert History(role="assistant", content=None, tool_calls=[{"id": "1"}]).to_chats()["tool_calls"] == [{"id": "1"}]
    assert History(role="assistant", content=None, extra={"reasoning_content": "r"}).content is None
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    with pytest.raises(ValueError, match=r"message 0: a 'user' message needs 'content'"):
        h.content = None
    assert h.content == ["a", "b"]


def test_unbatched_lists_say_how_to_render_them():
    h = History(role=["user", "assistant"], content=["a", "b"])
    with pytest.raises(ValueError, match=r"no batch dims but holds lists.*batch_size=\(n_messages,\)"):
        h.apply_chat_template(chat_template_name="chatml_format")
    with pytest.raises(ValueError, match=r"'is_complete' must be a bool, got list"):
        History(role=["user", "assistant"], content=["a", "b"], is_complete=[True, False])  # to_chats called it corrupt


def test_a_numpy_scalar_among_messages_is_named():
    # was IndexError: invalid index to scalar variable
    with pytest.raises(ValueError, match=r"message 1: a message must be a dict, got numpy.int64"):
        History.from_chats([{"role": "user", "content": "a"}, np.int64(1)])


@pytest.mark.parametrize("field, value", [("tool_calls", None), ("tool_calls", [[], None]), ("extra", None),
                                          ("role", ["user", "assistant"])],
                         ids=["calls None", "calls empty", "extra None", "role"])
def test_setting_another_field_may_not_break_the_content_rule(field, value):
    # h.tool_calls = None left an assistant turn with neither content nor calls; rendering it then
    # failed inside the template ("'dict object' has no attribute 'content'"), far from the cause
    chats = [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}], "reasoning_content": None},
             {"role": "assistant", "content": None, "reasoning_content": "r"}]
    if field == "tool_calls":
        chats[1] = {"role": "user", "content": "q"}
    if field == "role":
        chats[1] = {"role": "assistant", "content": "a"}
    h = History.from_chats(chats)
    with pytest.raises(ValueError, match=r"message [01]: (an 'assistant' message without 'content' must have|"
                                         r"a 'user' message needs 'content')"):
        h.set(field, value)
    assert h.to_chats() == chats


def test_item_assignment_of_a_ragged_batch_says_what_to_write():
    # was: ValueError: Attempting to broadcast a dimension with negative length!
    conv = History.from_chats(_BATCH[1])
    with pytest.raises(TypeError, match=r"cannot write a batch of conversations of different lengths \(batch size \(1, -1\)\)"):
        conv[0] = History.from_chats([_BATCH[0]])
    assert conv.to_chats() == _BATCH[1]


# dim="0" failed with "'<=' not supported between instances of 'int' and 'str'", dim=1.0 was "out of range";
# inplace="no" is truthy: the History grew in place while the caller asked for a new one
@pytest.mark.parametrize("option, value, match", [
    *[("dim", v, r"dim must be an int, got") for v in ("0", 1.0, True, None)],
    *[("inplace", v, r"inplace must be True or False") for v in ("no", 0, None, np.bool_(False))],
], ids=repr)
def test_append_and_extend_take_an_int_dim_and_a_bool_inplace(option, value, match):
    conv = History.from_chats(_BATCH[1])
    with pytest.raises(TypeError, match=match):
        conv.append({"role": "user", "content": "x"}, **{option: value})
    with pytest.raises(TypeError, match=match):
        conv.extend([{"role": "user", "content": "x"}], **{option: value})
    assert conv.to_chats() == _BATCH[1]
    assert conv.extend([{"role": "user", "content": "x"}], dim=np.int64(0), inplace=False).to_chats()[-1]["content"] == "x"


def test_dataset_rows_given_as_chats_are_named_with_what_to_pass():
    # before: "message 0: message has no 'role' (keys: ['messages'])", no word of what was passed
    rows = [{"messages": [{"role": "user", "content": "hi"}], "id": 1}]
    with pytest.raises(ValueError, match=r"looks like a dataset row holding a chat under 'messages': "
                                         r"pass \[row\['messages'\] for row in rows\]"):
        History.from_chats(rows)
    assert History.from_chats([r["messages"] for r in rows]).to_chats() == [rows[0]["messages"]]


@pytest.mark.parametrize("write", [
    lambda h, v: h.set(("role",), v),
    lambda h, v: h.__setitem__(("role",), v),
    lambda h, v: h.update({("role",): v}),
], ids=["set", "setitem", "update"])
def test_a_one_element_tuple_key_is_checked_as_the_field(write):
    # h.set(("role",), [3, 4]) skipped the checks: the roles became ints, to_chats gave them back
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    with pytest.raises(ValueError, match="'role' must be a str, got int"):
        write(h, [3, 4])
    assert h.role == ["user", "assistant"]
    write(h, ["system", "user"])
    assert h.role == ["system", "user"]
    ragged = History.from_chats([[{"role": "user", "content": "a"}], []])
    ragged.set(("role",), [["system"], []])  # was a BatchSizeError about negative dims
    assert ragged.role == [["system"], []]


def test_a_one_element_tuple_key_that_is_no_field_is_a_key_error():
    h = History.from_chats([{"role": "user", "content": "a"}])
    assert h[("role",)] == ["user"]
    with pytest.raises(KeyError, match="no field 'roles'"):
        h[("roles",)]  # gave None


def test_a_flat_list_of_str_never_sets_characters_of_a_ragged_batch():
    # conversation lengths 4 and 9 equal len("user") and len("assistant"): the roles became the characters
    h = History.from_chats([[{"role": "user", "content": "a"}] * 4, [{"role": "user", "content": "b"}] * 9])
    before = h.to_chats()
    with pytest.raises(ValueError, match="one list of values per conversation"):
        h.role = ["user", "assistant"]
    with pytest.raises(ValueError, match="one list of values per conversation"):
        h.set("content", ["abcd", "x" * 9])
    for value in (("user",) * 13, torch.ones(13, dtype=torch.bool)):
        with pytest.raises(ValueError, match="one list of values per conversation"):
            h.is_complete = value
    assert h.to_chats() == before
    h.role = [["user"] * 4, ["assistant"] * 9]
    assert h.role[1] == ["assistant"] * 9
