"""History through a TensorDict and through state dicts (the tensorclass API torchrl's History has).

``History.from_tensordict(h.to_tensordict())`` raised KeyError: the ``_flags`` column that
``to_tensordict`` holds was "no field"; ``g.load_state_dict(h.state_dict())`` raised the same, a
ragged batch's ``state_dict()`` was an AttributeError, ``from_tensordict`` took any value (ints as
roles, users without content), and a refused ``load_state_dict`` left the History half loaded."""
import pytest
import torch

from chatdata import History, TensorDict

CHAT = [{"role": "system", "content": "s"},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]},
        {"role": "tool", "content": "4", "is_complete": True, "tool_call_id": "1"},
        {"role": "assistant", "content": "It is", "is_complete": False}]
CHATS = [CHAT[:2], CHAT, [], CHAT[2:]]


@pytest.mark.parametrize("make", [lambda: History.from_chats(CHAT), lambda: History.from_chats(CHATS),
                                  lambda: History.from_chats([CHAT, CHAT]), lambda: History.from_chats(CHAT)[1]],
                         ids=["conversation", "ragged", "dense", "message"])
def test_to_tensordict_and_back_gives_the_history(make):
    h = make()
    back = History.from_tensordict(h.to_tensordict())
    assert back.batch_size == h.batch_size
    assert back.to_chats() == h.to_chats()


def test_a_state_dict_loads_back_exactly():
    h = History.from_chats(CHAT)
    g = History.from_chats([{"role": "user", "content": str(i)} for i in range(4)])
    assert g.load_state_dict(h.state_dict()) is g
    assert g.to_chats() == CHAT
    sd = h.state_dict()
    assert list(sd) == ["_flags"] and sd._metadata[""]["_non_tensor"]["role"] == [m["role"] for m in CHAT]


def test_a_state_dict_that_only_the_whole_load_makes_valid_loads():
    # set field by field, the assistant-without-content's role would meet the user's content rule midway
    user = History.from_chats([{"role": "user", "content": "hi"}])
    call = History.from_chats([CHAT[1]])
    user.load_state_dict(call.state_dict())
    assert user.to_chats() == [CHAT[1]]
    call.load_state_dict(History.from_chats([{"role": "user", "content": "hi"}]).state_dict())
    assert call.to_chats() == [{"role": "user", "content": "hi"}]


BAD_STATES = {
    "user without content": ({"role": ["user"], "content": [None]}, "needs 'content'"),
    "int role": ({"role": [3], "content": ["a"]}, "'role' must be a str"),
    "flags say no content": ({"role": ["user"], "content": ["a"], "_flags": torch.tensor([1], dtype=torch.int8)},
                             "without content"),
}


@pytest.mark.parametrize("entries, err", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_a_refused_state_dict_leaves_the_history_unchanged(entries, err):
    src = TensorDict({k: v for k, v in entries.items()}, [1])
    sd = {"_flags": entries.get("_flags", torch.zeros(1, dtype=torch.int8))}
    sd = type(History.from_chats([{"role": "user", "content": "x"}]).state_dict())(sd)
    sd._metadata = {"": {"batch_size": [1], "_non_tensor": {k: v for k, v in entries.items() if k != "_flags"}}}
    h = History.from_chats([{"role": "user", "content": "keep"}])
    with pytest.raises(ValueError, match=err):
        h.load_state_dict(sd)
    assert h.to_chats() == [{"role": "user", "content": "keep"}]
    with pytest.raises(ValueError, match=err):
        History.from_tensordict(src)


def test_a_state_dict_of_another_batch_size_is_refused_and_changes_nothing():
    h = History.from_chats([{"role": "user", "content": "keep"}])
    with pytest.raises(ValueError, match="batch"):
        h.load_state_dict(History.from_chats(CHAT).state_dict())
    assert h.to_chats() == [{"role": "user", "content": "keep"}]


def test_from_tensordict_says_what_is_missing_or_wrong():
    with pytest.raises(ValueError, match="no 'role'"):
        History.from_tensordict(TensorDict({"content": ["a"]}, [1]))
    with pytest.raises(ValueError, match="flags are 0..15"):
        History.from_tensordict(TensorDict({"role": ["user"], "content": ["a"], "_flags": torch.tensor([99])}, [1]))
    with pytest.raises(KeyError, match="no fields \\['rol'\\]"):
        History.from_tensordict(TensorDict({"role": ["user"], "content": ["a"], "rol": ["x"]}, [1]))


def test_a_ragged_batch_has_no_state_dict_and_says_how_to_save_it():
    h = History.from_chats(CHATS)
    with pytest.raises(TypeError, match="memmap"):
        h.state_dict()
    with pytest.raises(TypeError, match="memmap"):
        h.load_state_dict(History.from_chats(CHAT).state_dict())
    assert h.to_chats() == CHATS
