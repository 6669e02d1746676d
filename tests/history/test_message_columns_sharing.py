"""``History.from_message_columns`` takes the caller's column objects (another History's, a loaded
folder's): a write into the new History must never reach them, nor a later change of them reach
the History. It shared them: ``h[i][j] = message`` changed the source History's strings and flags,
and, with the columns of a loaded History, wrote the flags into the folder's file."""
import pytest
import torch

from chatdata import History
from chatdata.hygiene import decode_arguments

CHATS = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
         [{"role": "user", "content": "c", "name": "bob"}]]
NAMES = ["role", "content", "is_complete", "tool_calls", "tool_responses", "extra", "_flags"]


def columns_of(h):
    return {k: h.message_column(k) for k in NAMES}


WRITES = {
    "message": lambda h: h[0].__setitem__(1, {"role": "system", "content": "Z", "is_complete": False}),
    "set inplace": lambda h: h.set("content", [["x", "y"], ["z"]], inplace=True),
    "update_": lambda h: h.update_({"content": [["x", "y"], ["z"]], "is_complete": [[False, True], [True]]}),
    "field": lambda h: setattr(h, "role", [["system", "assistant"], ["user"]]),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
@pytest.mark.parametrize("loaded", [False, True], ids=["built", "loaded"])
def test_a_write_into_the_history_never_reaches_the_source(tmp_path, write, loaded):
    src = History.from_chats(CHATS)
    if loaded:
        src.memmap(tmp_path / "src")
        src = History.load_memmap(tmp_path / "src")
    h = History.from_message_columns(columns_of(src), src.conversation_offsets())
    write(h)
    assert h.to_chats() != CHATS
    assert src.to_chats() == CHATS
    if loaded:
        assert History.load_memmap(tmp_path / "src").to_chats() == CHATS


def test_a_later_change_of_the_caller_s_columns_never_reaches_the_history():
    src = History.from_chats(CHATS)
    cols = columns_of(src)
    flags = torch.zeros(3, dtype=torch.int8)
    done = torch.tensor([True, False, True])
    h = History.from_message_columns({**cols, "_flags": flags, "is_complete": done}, src.conversation_offsets())
    cols["content"][0] = "changed"
    flags[0] = 1  # "no content key" on a message that has one: a corrupt History if it leaked
    done[1] = True
    assert h.content == [["a", "b"], ["c"]]
    assert h.is_complete == [[True, False], [True]]
    assert h.to_chats()[0][0] == {"role": "user", "content": "a"}


def test_a_write_never_changes_the_caller_s_tensors():
    done = torch.tensor([True, True, True])
    h = History.from_message_columns({"role": ["user", "assistant", "user"], "content": ["a", "b", "c"],
                                      "is_complete": done}, [0, 2, 3])
    h[0][0] = {"role": "user", "content": "q", "is_complete": False}
    assert h.is_complete == [[False, True], [True]]
    assert done.tolist() == [True, True, True]


def test_decode_arguments_gives_a_history_of_its_own():
    # decode_arguments builds its result from the input's columns
    chats = [[{"role": "user", "content": "a"},
              {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                                    "function": {"name": "f", "arguments": '{"x": 1}'}}]}]]
    src = History.from_chats(chats)
    out = decode_arguments(src)
    out[0][0] = {"role": "system", "content": "Z"}
    assert src.to_chats() == chats
