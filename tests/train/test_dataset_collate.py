"""TokenDataset over folders and ragged outputs; the collators' exact output; bad input."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DataCollatorWithFlattening

from chatdata.train import TokenDataset, collate_padded, collate_padding_free, collate_prefix_tree


def test_dataset_from_folder_matches_ragged_output(sample_tokens, token_folder):
    a, b = TokenDataset(sample_tokens), TokenDataset(token_folder)
    assert len(a) == len(b) == 40
    flat_ids = sample_tokens.values.get("input_ids")
    off = sample_tokens.offsets
    assert torch.equal(a.lengths, off[1:] - off[:-1]) and torch.equal(b.lengths, a.lengths)
    assert a.lengths.dtype == torch.int64
    for i in (0, 7, torch.tensor(39), -1):
        ra, rb = a[i], b[i]
        j = int(i) % 40
        assert torch.equal(ra["input_ids"], flat_ids[off[j]:off[j + 1]])
        assert ra["input_ids"].dtype == torch.int64 and ra["assistant_masks"].dtype == torch.bool
        assert torch.equal(ra["labels"], torch.where(ra["assistant_masks"], ra["input_ids"], -100))
        assert 0 < int(ra["assistant_masks"].sum()) < ra["input_ids"].numel()
        for k in ra:
            assert torch.equal(ra[k], rb[k])


def test_dataset_from_cli_tokenize_folder(cli_token_folder):
    ds = TokenDataset(cli_token_folder)
    assert len(ds) == 60 and ds.num_tokens == int(ds.lengths.sum())
    rows = ds.__getitems__([3, 0, 59])
    for j, i in enumerate([3, 0, 59]):
        for k, v in ds[i].items():
            assert torch.equal(rows[j][k], v)


def test_max_length_truncates(sample_tokens):
    ds = TokenDataset(sample_tokens, max_length=100)
    assert int(ds.lengths.max()) == 100 and ds[0]["input_ids"].numel() == min(100, int(TokenDataset(sample_tokens).lengths[0]))


def test_trained_lengths(sample_tokens, token_folder):
    for ds in (TokenDataset(sample_tokens), TokenDataset(token_folder), TokenDataset(token_folder, max_length=50)):
        expect = torch.tensor([int(ds[i]["assistant_masks"].sum()) for i in range(len(ds))])
        assert torch.equal(ds.trained_lengths(), expect)


def test_padding_free_matches_transformers_flattening(sample_tokens):
    """Key for key and dtype for dtype what transformers gives with the boundary kwargs and ``seq_idx``
    (the set TRL's ``DataCollatorForLanguageModeling(padding_free=True)`` returns too)."""
    ds = TokenDataset(sample_tokens)
    rows = [ds[i] for i in (4, 1, 9)]
    ours = collate_padding_free(rows)
    theirs = DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)(
        [{"input_ids": r["input_ids"].tolist(), "labels": r["labels"].tolist()} for r in rows], return_tensors="pt")
    assert set(ours) == set(theirs)
    for k, v in theirs.items():
        if isinstance(v, torch.Tensor):
            assert ours[k].dtype == v.dtype and ours[k].shape == v.shape and torch.equal(ours[k], v), k
        else:
            assert ours[k] == v and type(ours[k]) is type(v), k
    # the fast path over flat rows (what a DataLoader hands over) gives the same batch
    fast = collate_padding_free(ds.__getitems__([4, 1, 9]))
    assert all(torch.equal(fast[k], ours[k]) if isinstance(ours[k], torch.Tensor) else fast[k] == ours[k] for k in ours)


def test_padding_free_details():
    b = collate_padding_free([{"input_ids": torch.tensor([7]), "assistant_masks": torch.tensor([True])},
                              {"input_ids": [1, 2, 3], "assistant_masks": [False, True, True]},
                              {"input_ids": []}])
    assert b["input_ids"].tolist() == [[7, 1, 2, 3]]
    assert b["labels"].tolist() == [[-100, -100, 2, 3]]
    assert b["position_ids"].tolist() == [[0, 0, 1, 2]]
    assert b["cu_seq_lens_q"].dtype == torch.int32 and b["cu_seq_lens_k"].tolist() == [0, 1, 4]
    assert b["max_length_q"] == 3
    assert b["seq_idx"].dtype == torch.int32 and b["seq_idx"].tolist() == [[0, 1, 1, 1]]  # the empty row has no index


def test_padded_right_and_left():
    rows = [{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}, {"input_ids": [4], "labels": [4]}]
    r = collate_padded(rows, pad_token_id=0, pad_to_multiple_of=4)
    assert r["input_ids"].tolist() == [[1, 2, 3, 0], [4, 0, 0, 0]]
    assert r["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert r["labels"].tolist() == [[-100, 2, 3, -100], [4, -100, -100, -100]]
    left = collate_padded(rows, pad_token_id=9, padding_side="left")
    assert left["input_ids"].tolist() == [[1, 2, 3], [9, 9, 4]]
    assert left["labels"].tolist() == [[-100, 2, 3], [-100, -100, 4]]


@pytest.mark.parametrize("fn, args, err, match", [
    (collate_padding_free, ([],), ValueError, "empty"),
    (collate_padding_free, ([{"ids": [1]}],), ValueError, "'input_ids'"),
    (collate_padding_free, ([{"input_ids": [1, 2], "labels": [1]}],), ValueError, "labels has 1"),
    (collate_padding_free, ([{"input_ids": [[1, 2]]}],), ValueError, "1-D"),
    (collate_padding_free, ([{"input_ids": [1.5]}],), TypeError, "integer"),
    (collate_padding_free, ({"input_ids": [1]},), TypeError, "list of dicts"),
    (collate_padding_free, ([{"input_ids": []}],), ValueError, "all empty"),
    (collate_padded, ([{"input_ids": [1]}], None), ValueError, "pad_token_id"),
    (collate_padded, ([{"input_ids": [1]}], 0, 0), ValueError, "pad_to_multiple_of"),
    (collate_padded, ([{"input_ids": [1]}], 0, None, "top"), ValueError, "padding_side"),
    (collate_padded, ([], 0), ValueError, "empty"),
    (collate_padded, ([{"input_ids": []}, {"input_ids": []}], 0), ValueError, "all empty"),  # was a (2, 0) batch
    (collate_padded, ([{"input_ids": []}], 0, 8), ValueError, "all empty"),  # was a row of padding alone
])
def test_collate_bad_input(fn, args, err, match):
    with pytest.raises(err, match=match):
        fn(*args)


def test_dataset_bad_input(tmp_path, sample_tokenizer):
    from chatdata import History, TensorDict

    with pytest.raises(FileNotFoundError, match="no such token set"):
        TokenDataset(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not a token set"):
        TokenDataset(tmp_path / "plain")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable token set"):
        TokenDataset(tmp_path / "bad")
    TensorDict({"x": torch.zeros(3)}, [3]).memmap(tmp_path / "td")
    with pytest.raises(TypeError, match="not a token set"):
        TokenDataset(tmp_path / "td")
    History.from_chats([[{"role": "user", "content": "hi"}]]).memmap(tmp_path / "hist")
    with pytest.raises(TypeError, match="History"):
        TokenDataset(tmp_path / "hist")
    no_mask = History.from_chats([[{"role": "user", "content": "hi"}]]).apply_chat_template(
        tokenizer=sample_tokenizer, tokenize=True, return_dict=True)
    with pytest.raises(ValueError, match="return_assistant_tokens_mask=True"):
        TokenDataset(no_mask)
    with pytest.raises(TypeError, match="not a token set"):
        TokenDataset([1, 2, 3])



def _token_set(columns: dict, lengths=(2, 3)):
    from chatdata import RaggedTensorDict, TensorDict

    n = sum(lengths)
    return RaggedTensorDict(TensorDict(columns, [n]), torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()]))


@pytest.mark.parametrize("column, dtype, match", [
    ("input_ids", torch.complex64, "input_ids must be integer token ids, got dtype torch.complex64"),
    ("assistant_masks", torch.float32, "assistant_masks must be bool .* got dtype torch.float32"),
    ("loss_weights", torch.float8_e4m3fn, "loss_weights must be one flat float16/bfloat16/float32/float64 column"),
])
def test_dataset_refuses_columns_of_a_dtype_it_cannot_train_on(column, dtype, match):
    """complex ids passed the check and failed in __getitems__; float8 weights in collate."""
    cols = {"input_ids": torch.arange(5), "assistant_masks": torch.ones(5, dtype=torch.bool),
            "loss_weights": torch.ones(5)}
    cols[column] = cols[column].to(dtype)
    with pytest.raises(ValueError, match=match):
        TokenDataset(_token_set(cols))


def test_bfloat16_loss_weights_and_uint64_ids_train():
    ds = TokenDataset(_token_set({"input_ids": torch.arange(5).to(torch.uint64), "loss_weights":
                                  torch.tensor([1, 0, 1, 1, 0.5], dtype=torch.bfloat16),
                                  "assistant_masks": torch.ones(5, dtype=torch.bool)}))
    rows = ds.__getitems__([0, 1])
    batch = collate_padding_free(rows)
    assert batch["input_ids"].tolist() == [[0, 1, 2, 3, 4]]
    assert (batch["labels"][0] != -100).tolist() == [False, False, False, True, True]  # a row's first token, weight 0


@pytest.mark.parametrize("dtypes", ['{not json', '{"loss_weights": "Tensor"}', '["x"]', "5"])
def test_dataset_refuses_a_column_dtypes_entry_that_names_no_dtype(dtypes):
    from chatdata import NonTensorData

    cols = {"input_ids": torch.arange(5), "assistant_masks": torch.ones(5, dtype=torch.bool),
            "loss_weights": torch.ones(5, dtype=torch.float16), "column_dtypes": NonTensorData(dtypes, batch_size=[5])}
    with pytest.raises(ValueError, match="column_dtypes must be a JSON object of column name -> torch dtype name"):
        TokenDataset(_token_set(cols))

def test_empty_token_set_and_bad_index(tmp_path, sample_tokens):
    empty = sample_tokens[:0]
    with pytest.raises(ValueError, match="holds no sequences"):
        TokenDataset(empty)
    empty.memmap(tmp_path / "empty")
    with pytest.raises(ValueError, match="holds no sequences"):
        TokenDataset(tmp_path / "empty")
    ds = TokenDataset(sample_tokens)
    with pytest.raises(IndexError, match="out of range"):
        ds[40]
    with pytest.raises(TypeError, match="0-d integer tensor"):
        ds[torch.tensor([1, 2])]
    with pytest.raises(TypeError, match="int"):
        ds[1.0]
    with pytest.raises(ValueError, match="max_length"):
        TokenDataset(sample_tokens, max_length=0)


def _padded_reference(t, L, fill, left):
    pad = torch.full((L - t.shape[0], *t.shape[1:]), fill, dtype=t.dtype)
    return torch.cat([pad, t] if left else [t, pad])


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.one_of(st.integers(0, 6), st.integers(120, 300)), min_size=1, max_size=6),
       left=st.booleans(), seed=st.integers(0, 2**16))
def test_padded_layout_equals_row_by_row_reference(lengths, left, seed):
    # long rows are laid out by slice copies, short ones by a scatter: both must give the reference
    if not any(lengths):
        lengths = [1, *lengths]
    g = torch.Generator().manual_seed(seed)
    rows = [{"input_ids": torch.randint(1, 100, (n,), generator=g), "logprobs": -torch.rand(n, generator=g),
             "routed_experts": torch.randint(0, 64, (n, 2, 3), generator=g, dtype=torch.int16)} for n in lengths]
    L = max(lengths)
    b = collate_padded(rows, pad_token_id=0, padding_side="left" if left else "right")
    for key in ("input_ids", "logprobs", "routed_experts"):
        assert torch.equal(b[key], torch.stack([_padded_reference(r[key], L, 0, left) for r in rows])), key
    ones = [torch.ones(n, dtype=torch.int64) for n in lengths]
    assert torch.equal(b["attention_mask"], torch.stack([_padded_reference(o, L, 0, left) for o in ones]))
    assert torch.equal(b["labels"], torch.stack([_padded_reference(r["input_ids"], L, -100, left) for r in rows]))
    kept = [r for r in rows if r["input_ids"].numel()]  # a tree row needs a token
    tree = collate_prefix_tree(kept)
    want = torch.stack([_padded_reference(r["routed_experts"], L, 0, False) for r in kept])
    assert torch.equal(tree["routed_experts"], want)
