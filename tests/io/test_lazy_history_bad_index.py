"""open_dataset(path) indexed with what is not an index: an IndexError saying what selects items
(it was a TypeError / ValueError from numpy or torch), and bools along the message dim as a History
refuses them. Shard boundaries and empty shards: tests/io/test_lazy_history.py."""
import pytest

from chatdata import History, open_dataset

CHATS = [[{"role": "user", "content": str(i)}] * (1 + i % 3) for i in range(7)]


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("sharded") / "c"
    w = open_dataset(path, mode="a")
    w.append(History.from_chats(CHATS[:3]))
    w.append(History.from_chats([[]])[0:0])
    w.append(History.from_chats(CHATS[3:]))
    return open_dataset(path)


BAD = {"set": lambda: {1, 2}, "str": lambda: ["a"], "int and str": lambda: [1, "a"], "ragged list": lambda: [[0, 1], [2]],
       "None in list": lambda: [None], "dict": lambda: {"a": 1}, "object": object, "past int64": lambda: [2**70],
       "generator": lambda: (i for i in [1]), "set then int": lambda: ({1}, 0)}


@pytest.mark.parametrize("make", BAD.values(), ids=BAD.keys())
def test_what_is_not_an_index_is_an_index_error(ds, make):
    index = make()
    with pytest.raises(IndexError, match="ints, slices, or a 1-D list/tensor of ints or bools"):
        ds[index]


@pytest.mark.parametrize("j", [True, False])
def test_a_bool_along_the_message_dim_is_refused_as_by_a_history(ds, j):
    with pytest.raises(IndexError, match="ragged dim"):
        ds[:, j]
    with pytest.raises(IndexError, match="ragged dim"):
        History.from_chats(CHATS)[:, j]


def test_a_list_mixing_ints_and_bools_selects_ints_as_the_history_does(ds):
    assert ds[[True, 0, 6]].to_chats() == History.from_chats(CHATS)[[True, 0, 6]].to_chats() == [CHATS[1], CHATS[0], CHATS[6]]
