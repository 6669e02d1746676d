"""History: from_chats / to_chats round trips, indexing, stack/cat/unbind, append/extend, errors."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import load_memmap
from chatdata.history import ContentBase, History

CHATS = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ],
    [{"role": "user", "content": "héllo 🌍"}],
    [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "21 °C", "reasoning_content": "read the tool output"},
    ],
]


# -- round trips ---------------------------------------------------------------------------
def test_batch_round_trip():
    h = History.from_chats(CHATS)
    assert h.batch_size == torch.Size([3, -1])
    assert h.to_chats() == CHATS
    assert h.tolist() == CHATS


def test_single_round_trip():
    h = History.from_chats(CHATS[2])
    assert h.batch_size == torch.Size([4])
    assert h.to_chats() == CHATS[2]


def test_key_presence_is_exact():
    chat = [
        {"role": "assistant", "tool_calls": None, "reasoning_content": "r"},  # no content key, explicit None
        {"role": "assistant", "content": "x", "is_complete": True},  # explicit default
        {"role": "assistant", "content": "y", "is_complete": False},
        {"role": "tool", "content": "r", "tool_responses": ["a", "b"]},
        {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image", "url": "http://x/i.png"}]},
    ]
    h = History.from_chats([chat, chat[:1]])
    back = h.to_chats()
    assert back == [chat, chat[:1]]
    for got, want in zip(back[0], chat):
        assert list(got) == list(want)  # same keys, same order
    assert h[0].is_complete == [True, True, False, True, True]


def test_empty():
    h = History.from_chats([])  # no chats: a batch of none, not one conversation without messages
    assert h.batch_size == torch.Size([0, -1]) and h.to_chats() == [] and h.to_arrow().num_rows == 0
    assert History.from_chats([[]])[0].batch_size == torch.Size([0])
    h = History.from_chats([[], [{"role": "user", "content": "a"}], []])
    assert h.to_chats() == [[], [{"role": "user", "content": "a"}], []]
    assert h[0].to_chats() == []


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6)
_tool_call = st.fixed_dictionaries({"id": _text, "type": st.just("function"),
                                    "function": st.fixed_dictionaries({"name": _text, "arguments": _text})})
_extra_key = st.sampled_from(["name", "tool_call_id", "reasoning_content", "weight", "meta"])


@st.composite
def _message(draw):
    m = {"role": draw(st.sampled_from(["system", "user", "assistant", "tool"]) | _text)}
    c = draw(st.sampled_from(["str", "str", "str", "none", "absent", "parts"]))
    if c == "str":
        m["content"] = draw(_text)
    elif c == "none":
        m["content"] = None
    elif c == "parts":
        m["content"] = draw(st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=3))
    if draw(st.booleans()):
        m["tool_calls"] = draw(st.none() | st.lists(_tool_call, max_size=2))
    if draw(st.integers(0, 4)) == 0:
        m["is_complete"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        m["tool_responses"] = draw(st.none() | st.lists(_text, max_size=2))
    for k in draw(st.lists(_extra_key, max_size=2, unique=True)):
        m[k] = draw(_json)
    if m.get("content") is None:  # the content rule: only an assistant turn with tool calls or reasoning may lack it
        if m["role"] in ("system", "user", "tool"):
            m["role"] = "assistant"
        if m["role"] == "assistant" and not (m.get("tool_calls") or m.get("reasoning_content")):
            m["reasoning_content"] = "r" + draw(_text)
    keys = list(m)
    order = draw(st.permutations(keys))
    return {k: m[k] for k in order}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_message(), max_size=5), max_size=5))
def test_round_trip_hypothesis(chats):
    h = History.from_chats(chats)
    assert h.to_chats() == chats
    for i, chat in enumerate(chats):
        assert h[i].to_chats() == chat
        for j, msg in enumerate(chat):
            assert h[i, j].to_chats() == msg
    if chats and chats[0]:
        assert History.from_chats(chats[0]).to_chats() == chats[0]


# -- indexing -----------------------------------------------------------------------------
def test_indexing():
    h = History.from_chats(CHATS)
    assert h.role == [[m["role"] for m in c] for c in CHATS]
    assert h.content[1] == ["héllo 🌍"]
    assert isinstance(h[0], History) and h[0].batch_size == torch.Size([3])
    assert h[0].role == ["system", "user", "assistant"]
    assert h[0, 2].content == "4" and h[0, 2].batch_size == torch.Size([])
    assert h[-1, -1].to_chats() == CHATS[2][-1]
    assert h[1:].to_chats() == CHATS[1:]
    assert h[[2, 0]].to_chats() == [CHATS[2], CHATS[0]]
    assert h[torch.tensor([True, False, True])].to_chats() == [CHATS[0], CHATS[2]]
    assert h[:, 0].role == ["system", "user", "user"]
    assert h[2].extra == [None, None, {"tool_call_id": "call_1", "name": "get_weather"},
                          {"reasoning_content": "read the tool output"}]
    assert len(h) == 3 and [c.to_chats() for c in h] == CHATS
    with pytest.raises(IndexError):
        h[1, 1]


def test_stack_cat_unbind():
    convs = [History.from_chats(c) for c in CHATS]
    h = torch.stack(convs)
    assert h.batch_size == torch.Size([3, -1]) and h.to_chats() == CHATS
    assert [c.to_chats() for c in h.unbind(0)] == CHATS
    both = torch.cat([History.from_chats(CHATS), History.from_chats(CHATS[:1])])
    assert both.to_chats() == CHATS + CHATS[:1]
    assert torch.cat([convs[0], convs[1]]).to_chats() == CHATS[0] + CHATS[1]
    dense = torch.stack([convs[0], convs[0]])
    assert dense.batch_size == torch.Size([2, 3]) and dense.to_chats() == [CHATS[0]] * 2
    msgs = torch.stack([History(role="user", content="a"), History(role="assistant", content="b", is_complete=False)])
    assert msgs.to_chats() == [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "is_complete": False}]


def test_constructor_and_fields():
    h = History(role=["system", "user"], content=["s", "u"], batch_size=(2,))
    assert h.is_complete == [True, True] and h.tool_calls is None  # one value per message, as torchrl
    assert h.to_chats() == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    m = History(role="assistant", content="x", tool_calls=[{"name": "f", "arguments": {}}], extra={"name": "bot"})
    assert m.to_chats() == {"role": "assistant", "content": "x", "tool_calls": [{"name": "f", "arguments": {}}], "name": "bot"}
    m.tool_calls = None
    assert m.to_chats() == {"role": "assistant", "content": "x", "name": "bot"}


def test_content_base():
    parts = [{"type": "text", "text": "look"}, {"type": "image", "url": "http://x/cat.png"}]
    c = ContentBase.from_parts(parts)
    assert c.type == ["text", "image"] and c.to_parts() == parts
    h = History(role="user", content=c)
    assert h.to_chats() == {"role": "user", "content": parts}
    assert History(role="user", content=ContentBase(type="text", text="hi")).content == [{"type": "text", "text": "hi"}]
    conv = History.from_chats([{"role": "user", "content": parts}])
    assert conv.content == [parts]
    with pytest.raises(ValueError, match="unknown type"):
        ContentBase.from_parts([{"type": "smell"}])


# -- append / extend ------------------------------------------------------------------------
def test_append_single():
    h = History.from_chats(CHATS[0][:2])
    out = h.append(History(role="assistant", content="4"))
    assert out is h and h.to_chats() == CHATS[0]
    h2 = h.append({"role": "user", "content": "thanks"}, inplace=False)
    assert h2 is not h and len(h2.to_chats()) == 4 and len(h.to_chats()) == 3
    with pytest.raises(RuntimeError):
        h.append(h)
    with pytest.raises(RuntimeError):
        History(role="user", content="a").append(History(role="user", content="b"))


def test_append_batch_message_dim():
    h = History.from_chats(CHATS)
    reply = History(role=["assistant"] * 3, content=["r0", "r1", "r2"], batch_size=(3,))
    out = h.append(reply)
    assert out is h
    want = [c + [{"role": "assistant", "content": f"r{i}"}] for i, c in enumerate(CHATS)]
    assert h.to_chats() == want
    assert h[:, -1].content == ["r0", "r1", "r2"]


def test_append_batch_conversation_dim():
    h = History.from_chats(CHATS[:2])
    new = h.append(History.from_chats(CHATS[2]), dim=0, inplace=False)
    assert new.to_chats() == CHATS and h.to_chats() == CHATS[:2]
    dense = torch.stack([History.from_chats(CHATS[0])] * 2)
    dense.append(History.from_chats(CHATS[0]), dim=0)
    assert dense.batch_size == torch.Size([3, 3])
    dense.append(History.from_chats(CHATS[1]), dim=0)
    assert dense.to_chats() == [CHATS[0]] * 3 + [CHATS[1]]
    dense2 = torch.stack([History.from_chats(CHATS[0])] * 2)
    dense2.append(History(role=["a", "b"], content=["x", "y"], batch_size=(2,)))
    assert dense2.batch_size == torch.Size([2, 4]) and dense2[:, -1].role == ["a", "b"]


def test_extend():
    h = History.from_chats(CHATS[0][:1])
    h.extend(History.from_chats(CHATS[0][1:]))
    assert h.to_chats() == CHATS[0]
    b = History.from_chats(CHATS)
    b2 = b.extend(History.from_chats(CHATS[:1]), inplace=False)
    assert b2.to_chats() == CHATS + CHATS[:1] and b.to_chats() == CHATS
    more = [[{"role": "user", "content": "x"}], [], [{"role": "user", "content": "y"}, {"role": "assistant", "content": "z"}]]
    b.extend(History.from_chats(more), dim=-1)
    assert b.to_chats() == [c + m for c, m in zip(CHATS, more)]
    with pytest.raises(RuntimeError):
        b.extend(History.from_chats(CHATS[0]))
    with pytest.raises(ValueError):
        b.extend(History.from_chats(more[:2]), dim=1)


def test_extend_large_vectorised():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 6, (200,), generator=g).tolist()
    chats = [[{"role": "user", "content": f"{i}-{j}"} for j in range(n)] for i, n in enumerate(lengths)]
    extra = [[{"role": "assistant", "content": f"e{i}-{j}"} for j in range(n % 3)] for i, n in enumerate(lengths)]
    h = History.from_chats(chats)
    h.extend(History.from_chats(extra), dim=1)
    assert h.to_chats() == [a + b for a, b in zip(chats, extra)]


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("chats, pattern", [
    ([[{"role": "user", "content": "a"}], [{"content": "b"}]], r"chat 1, message 0: .*no 'role'"),
    ([[{"role": "user", "content": "a"}, {"role": "user", "content": 3}]], r"chat 0, message 1: content must be"),
    ([[{"role": "user", "content": "a"}], "oops"], r"chat 1: a chat must be a list"),
    ([[], [{"role": "u", "content": [{"type": "smell"}]}]], r"chat 1, message 0: content part 0 has unknown type 'smell'"),
    ([[{"role": 1, "content": "a"}]], r"chat 0, message 0: 'role' must be a str"),
    ([[{"role": "u", "content": "a"}, ["not", "a", "dict"]]], r"chat 0, message 1: a message must be a dict"),
    ([[{"role": "u", "content": "a", "is_complete": "yes"}]], r"chat 0, message 0: 'is_complete' must be a bool"),
    ([[{"role": "u", "content": "a"}], [{"role": "u", "content": "a", "tool_calls": "f()"}]], r"chat 1, message 0: 'tool_calls'"),
    ([{"role": "u", "content": "a"}, {"role": "u"}, {"content": "x"}], r"^message 2: .*no 'role'"),
    ("text", r"from_chats takes"),
])
def test_bad_chats(chats, pattern):
    with pytest.raises(ValueError, match=pattern):
        History.from_chats(chats)


def test_default_spec():
    spec = History.default_spec()
    zero = spec.zero()
    assert isinstance(zero, History)
    assert zero.to_chats() == [{"role": "foo", "content": "foo"}]
    grown = zero.append(History(role="user", content="hi"), inplace=False)
    assert grown.role == ["foo", "user"]


def test_torchrl_doc_example():
    h0 = History(role="system", content="CONTENT\nThis is the setup")
    h1 = History(role="user", content="CONTENT\nThis is the first user prompt")
    h2 = History(role="assistant", content="CONTENT\nThis is the second prompt, the first for the assistant.")
    history = torch.stack([h0, h1, h2])
    assert history.role == ["system", "user", "assistant"]
    text = history.apply_chat_template(chat_template_name="chatml_format")
    assert text.endswith("<|im_start|>assistant\n") and text.count("<|im_start|>") == 4
    batch = torch.stack([history, history[:2]])
    assert batch.apply_chat_template(chat_template_name="chatml_format", add_generation_prompt=False)[1] == \
        "<|im_start|>system\nCONTENT\nThis is the setup<|im_end|>\n<|im_start|>user\nCONTENT\nThis is the first user prompt<|im_end|>\n"


def test_conversation_offsets_and_message_columns(tmp_path):
    chats = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "bé"}],
             [{"role": "user", "content": "c"}]]
    h = History.from_chats(chats)
    assert h.conversation_offsets().tolist() == [0, 2, 3]
    assert h.message_column("role").value_counts() == {"user": 2, "assistant": 1}
    assert h.message_column("content").value_nbytes().tolist() == [1, 3, 1]
    assert h[0].conversation_offsets().tolist() == [0, 2]
    h.memmap(tmp_path / "ds")
    g = History.load_memmap(tmp_path / "ds")
    assert g.message_column("content").value_nbytes().tolist() == [1, 3, 1]
    with pytest.raises(KeyError, match="no column"):
        h.message_column("nope")


@pytest.mark.parametrize("loaded", [False, True], ids=["in-memory", "loaded"])
def test_an_empty_slice_saves_and_loads_back(tmp_path, loaded):
    """An empty pick of a JSON column keeps its kind: it used to be saved as a str column, which
    the History schema check then refused on load."""
    chats = [[{"role": "user", "content": "a", "is_complete": False}],
             [{"role": "assistant", "content": "b", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}]]
    h = History.from_chats(chats)
    if loaded:
        h.memmap(tmp_path / "h")
        h = load_memmap(tmp_path / "h")
    for k, sl in enumerate((slice(1, 1), slice(0, 0), slice(2, 2))):
        h[sl].memmap(tmp_path / f"e{k}", copy_existing=True)
        assert load_memmap(tmp_path / f"e{k}").to_chats() == []


def test_repr_of_a_batch_of_conversations_describes_each_column(tmp_path):
    """repr() of a batch raised AttributeError on its constant columns (tool_calls=None, ...)."""
    chats = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]]
    for h in (History.from_chats(chats), History.from_chats(chats).memmap(tmp_path / "h")):
        text = repr(h)
        assert "role=NonTensorStack(batch_size=torch.Size([2, -1]), device=None)" in text
        assert "tool_calls=NonTensorStack(batch_size=torch.Size([2, -1])" in text and "_flags" not in text
        assert text.endswith("batch_size=torch.Size([2, -1]),\n    device=None,\n    is_shared=False)")
    assert "'b', 'c'" in repr(History.from_chats(chats)[1])  # one conversation lists its values
    assert "[[None], [None, None]]" in repr(History.from_chats(chats)._storage._get_raw("tool_calls"))


def test_numel_counts_the_messages_of_a_ragged_batch():
    # the product of the batch size (2, -1) gave -2
    a, b = [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}] * 3
    h = History.from_chats([a, b, []])
    assert h.numel() == 4 and h[1].numel() == 3 and h[1, 0].numel() == 1
    assert torch.stack([History.from_chats(b)] * 2).numel() == 6
