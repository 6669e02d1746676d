"""Behaviours torchrl's History users rely on: ``is_complete`` per message, ``copy``, 0-d tensor
indices (what a DataLoader hands out), ``key in`` a tokenized batch, and torchrl-style parsers
that return a History."""
from __future__ import annotations

import uuid

import numpy as np
import pytest
import torch

from chatdata import History, add_chat_template
from chatdata.templates import registry

CHATS = [
    [{"role": "user", "content": "a"}],
    [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "d"}, {"role": "assistant", "content": "e"}],
]


# -- is_complete: one value per message ---------------------------------------------------
def test_is_complete_has_one_value_per_message_when_all_complete():
    conv = History(role=["user", "assistant", "user"], content=["x", "y", "z"], batch_size=3)
    assert conv.is_complete == [True, True, True]
    assert len(conv.is_complete) == len(conv.role) == len(conv.content)
    assert conv[0].is_complete is True  # one message: a bool
    assert conv.unsqueeze(0).is_complete == [[True, True, True]]
    assert History.from_chats(CHATS).is_complete == [[True], [True, True], [True, True, True]]


def test_is_complete_marks_only_the_unterminated_message():
    h = History.from_text("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo", chat_template_name="qwen")
    assert h.is_complete == [True, False]
    assert all(h.is_complete[:-1]) and not h.is_complete[-1]


def test_is_complete_can_be_set_per_message():
    conv = History(role=["user", "assistant"], content=["x", "y"], batch_size=2)
    conv.is_complete = [True, False]
    assert conv.is_complete == [True, False]
    assert conv.to_chats()[1]["is_complete"] is False


# -- copy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("chats", [CHATS[2], CHATS], ids=["conversation", "ragged_batch"])
def test_copy_is_independent_of_append_and_extend(chats):
    h = History.from_chats(chats)
    before = h.to_chats()
    c = h.copy()
    assert isinstance(c, History) and c is not h
    assert (c == h).all()
    if h.ndim == 1:
        h.append(History(role="assistant", content="more"))
        assert (h[:-1] == c).all()
    else:
        h.extend(History.from_chats([[{"role": "user", "content": "new"}]]))
    assert c.to_chats() == before
    assert h.to_chats() != before


def test_writing_messages_into_a_copy_leaves_the_original():
    # c[i] = message wrote into the column both shared: the original changed too (torchrl's copy
    # keeps them apart); its is_complete and flags as well
    conv = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"id": "1"}]}])
    before = conv.to_chats()
    c = conv.copy()
    c[1] = History(role="assistant", content="z", is_complete=False)
    assert conv.to_chats() == before
    assert c.to_chats()[1] == {"role": "assistant", "content": "z", "is_complete": False}
    batch = History.from_chats(CHATS)
    before = batch.to_chats()
    c = batch.copy()
    row = c[1]
    row[0] = History(role="system", content="s")
    assert batch.to_chats() == before
    assert c.to_chats()[1][0] == {"role": "system", "content": "s"}


def test_copy_of_a_single_message():
    m = History(role="user", content="x")
    c = m.copy()
    c.content = "changed"
    assert m.content == "x" and c.content == "changed"


# -- 0-d tensor and numpy indices ----------------------------------------------------------
@pytest.mark.parametrize("make_index", [torch.tensor, np.int64, int], ids=["tensor", "numpy", "int"])
def test_scalar_indices_select_like_ints(make_index):
    batch = History.from_chats(CHATS)
    assert batch[make_index(1)].to_chats() == CHATS[1]
    assert batch[make_index(2), make_index(0)].to_chats() == CHATS[2][0]
    conv = History.from_chats(CHATS[2])
    assert conv[make_index(1)].to_chats() == CHATS[2][1]
    dense = History(role=["u", "a"], content=["x", "y"], batch_size=2)
    assert dense[make_index(-1)].role == "a"


def test_index_tensors_that_are_not_scalars_still_select_rows():
    batch = History.from_chats(CHATS)
    assert batch[torch.tensor([2, 0])].to_chats() == [CHATS[2], CHATS[0]]
    with pytest.raises(IndexError):
        batch[torch.tensor(7)]


# -- tokenized batches answer "key in" ------------------------------------------------------
def test_key_in_a_tokenized_batch(qwen_tok):
    out = History.from_chats(CHATS).apply_chat_template(
        tokenizer=qwen_tok, add_generation_prompt=False, return_dict=True, return_assistant_tokens_mask=True)
    assert "assistant_masks" in out and "input_ids" in out
    assert "labels" not in out and 0 not in out
    assert out["assistant_masks"].shape[0] == len(CHATS)


# -- parsers that return a History (torchrl's inverse_parser) --------------------------------
def test_from_text_accepts_a_parser_returning_a_history():
    name = f"pipes_{uuid.uuid4().hex}"
    calls = []

    def inverse(text: str) -> History:
        calls.append(text)
        pairs = [turn.split("|", 1) for turn in text.split(";") if turn]
        return History(role=[r for r, _ in pairs], content=[c for _, c in pairs], batch_size=len(pairs))

    add_chat_template(template_name=name, template="{% for m in messages %}{{ m.role }}|{{ m.content }};{% endfor %}",
                      inverse_parser=inverse)
    try:
        conv = History.from_chats(CHATS[1])
        text = conv.apply_chat_template(chat_template_name=name, add_generation_prompt=False)
        assert text == "user|b;assistant|c;"
        assert History.from_text(text, chat_template_name=name).to_chats() == CHATS[1]
        batch = History.from_text([text, "user|z;"], chat_template_name=name)
        assert batch.role == [["user", "assistant"], ["user"]]
        assert len(calls) == 3
    finally:
        registry._CHAT_TEMPLATES.pop(name, None)
        registry._CUSTOM_INVERSE_PARSERS.pop(name, None)


def test_storage_lives_under_tensordicts_attribute_name():
    # torchrl code reads the storage as history.__dict__["_tensordict"] / history._tensordict
    h = History(role="user", content="a").unsqueeze(0)
    h.extend(History(role=["assistant", "user"], content=["b", "c"], batch_size=2))
    assert h.__dict__["_tensordict"].shape == (3,)
    assert h._tensordict is h.__dict__["_tensordict"]
    batch = History.from_chats(CHATS)
    assert batch[1].__dict__["_tensordict"].batch_size == (2,)


def test_lazy_stack_of_histories_as_torchrl_builds_them():
    from chatdata.td import lazy_stack

    conv = lazy_stack([History(role="user", content="a"), History(role="assistant", content="b")])
    assert conv.batch_size == (2,) and conv.to_chats() == [{"role": "user", "content": "a"},
                                                           {"role": "assistant", "content": "b"}]
    batch = lazy_stack([History.from_chats(c) for c in CHATS])  # different lengths: a ragged batch
    assert batch.batch_size == (3, -1) and batch.to_chats() == CHATS
    with pytest.raises(Exception, match="batch"):
        lazy_stack([History.from_chats(CHATS[1]), History(role="user", content="a")])  # 1-D with 0-D


def test_tensordict_methods_a_history_forwards_run_on_its_columns(tmp_path):
    # History keeps its storage under tensordict's name, and the methods a tensorclass forwards to
    # its TensorDict (is_memmap, is_empty, detach, ...) raised AttributeError on it
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    assert h.is_memmap() is False and h.is_empty() is False
    d = h.detach()
    assert type(d) is History and d.to_chats() == h.to_chats()  # the _flags column does not make it a TensorDict
    h.memmap_(tmp_path / "h")
    assert h.is_memmap() is True
    with pytest.raises(AttributeError, match="History has no attribute 'nonexistent'"):
        h.nonexistent


def test_responses_after_each_prompt_padded_and_stacked():
    # what a policy does with generated text: parse it, cut each prompt off, pad the replies to one
    # length with placeholder messages, stack them into a dense batch
    prompts = History.from_chats([[{"role": "user", "content": "p0"}], [{"role": "user", "content": "p1"}]])
    texts = ["<|im_start|>user\np0<|im_end|>\n<|im_start|>assistant\nr0<|im_end|>",
             "<|im_start|>user\np1<|im_end|>\n<|im_start|>assistant\nr1<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
             "<|im_start|>assistant\nr2<|im_end|>"]
    full = History.from_text(texts, chat_template_name="qwen")
    replies = [f[p.shape[0]:] for p, f in zip(prompts.unbind(0), full.unbind(0))]
    n = max(r.shape[0] for r in replies)
    padded = [r.extend(History(role="<none>", content="", batch_size=(n - r.shape[0],)), inplace=False)
              if r.shape[0] < n else r for r in replies]
    out = torch.stack(padded)
    assert out.batch_size == torch.Size([2, 3])
    assert out.role == [["assistant", "<none>", "<none>"], ["assistant", "user", "assistant"]]
    assert out.content == [["r0", "", ""], ["r1", "q", "r2"]]
    assert full[:, 1:].content == [["r0"], ["r1", "q", "r2"]]  # one prompt length: the ragged slice


def test_writes_through_a_selection_of_a_batch_as_compat_md_says():
    def batch():
        return History.from_chats([[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
                                   [{"role": "user", "content": "x"}]])
    h = batch()
    h[0].content = ["Q", "R"]  # the selection's own column (tensordict's td[i]["a"] = x)
    assert h.content == [["a", "b"], ["x"]]
    h[0][1] = {"role": "system", "content": "Z"}
    assert h.content == [["a", "Z"], ["x"]]
    h = batch()
    h[0].set("content", ["Q", "R"], inplace=True)
    assert h.content == [["Q", "R"], ["x"]]
    view = h[0]
    view.set("is_complete", [False, True], inplace=True)  # a one-value column: replaced in the selection
    assert view.is_complete == [False, True] and h.is_complete == [[True, True], [True]]
