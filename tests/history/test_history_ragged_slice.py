"""``h[:, a:b:s]`` on a batch of conversations of different lengths: the same slice of every
conversation's messages, as Python slices each list (it was an IndexError; torchrl's lazy stack
slices each conversation). The result is a new History (as ``h[[0, 2]]`` is): writes into it do
not reach ``h``, and ``h`` never changes it."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import History, RaggedTensorDict, TensorDict

CHATS = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}],
         [{"role": "user", "content": "x"}],
         [],
         [{"role": "system", "content": "s"}, {"role": "user", "content": "u", "name": "bob"},
          {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f"}}],
           "is_complete": False}]]

BOUND = st.one_of(st.none(), st.integers(-6, 6))


@settings(max_examples=60, deadline=None)
@given(a=BOUND, b=BOUND, step=st.sampled_from([None, 1, 2, 3, 7]))
def test_a_slice_of_every_conversation_is_python_s_slice_of_each(a, b, step):
    h = History.from_chats(CHATS)
    got = h[:, a:b:step]
    assert got.batch_size == torch.Size([len(CHATS), -1])
    assert got.to_chats() == [c[a:b:step] for c in CHATS]
    assert h.to_chats() == CHATS  # the source is untouched


@pytest.mark.parametrize("rows", [slice(1, None), [3, 0], torch.tensor([True, False, False, True]), Ellipsis],
                         ids=["slice", "list", "mask", "ellipsis"])
def test_rows_then_a_message_slice(rows):
    h = History.from_chats(CHATS)
    picked = [CHATS[i] for i in torch.arange(len(CHATS))[rows].tolist()] if rows is not Ellipsis else CHATS
    assert h[rows, -2:].to_chats() == [c[-2:] for c in picked]


def test_empty_results_are_conversations_without_messages():
    h = History.from_chats(CHATS)
    for sl in (slice(5, 9), slice(2, 1), slice(-1, -2), slice(0, 0)):
        out = h[:, sl]
        assert out.to_chats() == [[] for _ in CHATS]
        assert out.conversation_offsets().tolist() == [0] * (len(CHATS) + 1)
        assert out.message_column("role").tolist() == []
    none = History.from_chats([])
    assert none[:, 1:].batch_size == torch.Size([0, -1]) and none[:, 1:].to_chats() == []


def test_the_result_renders_and_saves_like_any_batch(tmp_path):
    chats = [c for c in CHATS if len(c) > 1]
    kw = dict(chat_template_name="chatml_format", add_generation_prompt=False)
    assert History.from_chats(chats)[:, :2].apply_chat_template(**kw) == \
        History.from_chats([c[:2] for c in chats]).apply_chat_template(**kw)
    tail = History.from_chats(CHATS)[:, 1:]
    tail.memmap(tmp_path / "tail")
    assert History.load_memmap(tmp_path / "tail").to_chats() == [c[1:] for c in CHATS]


def test_a_slice_of_a_loaded_batch_never_writes_into_its_folder(tmp_path):
    History.from_chats(CHATS).memmap(tmp_path / "h")
    loaded = History.load_memmap(tmp_path / "h")
    tail = loaded[:, 1:]
    tail[0][0] = {"role": "system", "content": "Z"}
    assert tail.to_chats()[0] == [{"role": "system", "content": "Z"}, CHATS[0][2]]
    assert loaded.to_chats() == CHATS
    assert History.load_memmap(tmp_path / "h").to_chats() == CHATS


def test_writes_into_the_result_stay_in_it():
    # torchrl's lazy stack writes through to the source; a slice of a ragged batch is a copy of
    # its messages' index here, as h[[0, 2]] is (docs/compat.md)
    h = History.from_chats(CHATS)
    head = h[:, :2]
    head[0][1] = {"role": "system", "content": "Z"}
    head.content = [["1", "2"], ["3"], [], ["4", "5"]]
    assert head.content == [["1", "2"], ["3"], [], ["4", "5"]]
    assert h.to_chats() == CHATS
    h.role = [["assistant"] * len(c) for c in CHATS]
    assert head.role == [["user", "system"], ["user"], [], ["system", "user"]]
    with pytest.raises(TypeError, match="cannot assign messages by index"):
        head[0, 0] = {"role": "user", "content": "q"}


@pytest.mark.parametrize("step", [0, -1, -2])
def test_a_step_that_is_not_positive_is_a_value_error(step):
    with pytest.raises(ValueError, match=f"positive step .*got {step}"):
        History.from_chats(CHATS)[:, ::step]


@pytest.mark.parametrize("sl", [slice(0.5, 2), slice("a", None), slice(None, True), slice(None, None, 1.0)], ids=repr)
def test_a_slice_bound_that_is_not_an_int_is_an_index_error(sl):
    with pytest.raises(IndexError, match="int bounds"):
        History.from_chats(CHATS)[:, sl]


def test_huge_bounds_clip_as_python_s():
    h = History.from_chats(CHATS)
    assert h[:, -2**80:2**80].to_chats() == CHATS
    assert h[:, 2**80:].to_chats() == [[] for _ in CHATS]


def test_a_ragged_stack_slices_its_items_then_the_inner_dims():
    values = TensorDict({"x": torch.arange(12).reshape(6, 2)}, [6, 2])
    r = RaggedTensorDict(values, torch.tensor([0, 3, 3, 6]))
    out = r[:, 1::2, 0]
    assert out.offsets.tolist() == [0, 1, 1, 2]
    assert out.values["x"].tolist() == [2, 8]
