"""export_parquet given what is not conversations: a TypeError saying what it takes, and no file.

Before: a token set (plain or sharded) was an AttributeError ('RaggedTensorDict' object has no
attribute 'to_arrow'), a TensorDict a TypeError about ``_td_to_arrow()`` arguments, a list of chats
or None an AttributeError about ``batch_size``."""
import pytest
import torch

import chatdata
from chatdata import TensorDict
from chatdata.io.tables import export_parquet
from chatdata.td import RaggedTensorDict


def _tokens():
    return RaggedTensorDict(TensorDict({"input_ids": torch.arange(3)}, [3]), torch.tensor([0, 1, 3]))


@pytest.mark.parametrize("make, match", [
    (lambda p: _tokens(), r"got a token set \(it has no messages"),
    (lambda p: (_tokens().memmap(p / "toks"), p / "toks")[1], r"got a token set"),
    (lambda p: (chatdata.open_dataset(p / "st", mode="a").append(_tokens()), p / "st")[1], r"got a token set"),
    (lambda p: TensorDict({"a": torch.arange(3)}, [3]), r"got TensorDict$"),
    (lambda p: [[{"role": "user", "content": "a"}]], r"got list \(History.from_chats\(chats\) makes one"),
    (lambda p: None, r"got NoneType$"),
], ids=["tokens", "saved tokens", "sharded tokens", "TensorDict", "list of chats", "None"])
def test_what_is_not_conversations_is_a_type_error_and_writes_no_file(tmp_path, make, match):
    ds = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(TypeError, match=r"export_parquet takes conversations \(a History, or the path of a plain or "
                                        r"sharded History dataset\), " + match):
        export_parquet(ds, tmp_path / "out.parquet")
    assert sorted(tmp_path.rglob("*")) == before
