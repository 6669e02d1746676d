"""open_dataset(path) of a sharded folder is one lazy History (or token set): every index, slice
and method gives what the same on the unsharded History gives, and opening maps nothing."""
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import chatdata
from chatdata import FormatError, History, load_memmap, open_dataset
from chatdata.data import load_sample_chats, load_sample_tokenizer
from chatdata.io import verify_dataset
from chatdata.train import ConcatTokenDataset

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)


@st.composite
def messages(draw):
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    msg = {"role": role, "content": draw(TEXT)}
    if role == "assistant" and draw(st.integers(0, 3)) == 0:
        msg["tool_calls"] = [{"type": "function", "function": {"name": draw(TEXT), "arguments": {"x": draw(st.integers())}}}]
        if draw(st.booleans()):
            msg["content"] = None
    if draw(st.integers(0, 4)) == 0:
        msg["name"] = draw(TEXT)
    if draw(st.integers(0, 5)) == 0:
        msg["is_complete"] = False
    return msg


CHATS = st.lists(st.lists(messages(), max_size=4), max_size=9)


def write_sharded(path, chats, cuts, dense_single=False):
    """``chats`` appended as shards split at ``cuts`` (empty shards included); with
    ``dense_single`` a one-conversation shard is appended as a conversation (a dense shard)."""
    ds = open_dataset(path, mode="a")
    bounds = [0, *sorted(cuts), len(chats)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        part = chats[a:b]
        if not part:
            ds.append(History.from_chats([[]])[0:0])
        elif len(part) == 1 and dense_single and part[0]:
            ds.append(History.from_chats(part[0]))
        else:
            ds.append(History.from_chats(part))
    return ds


def _same(sharded, plain, index):
    """Both give equal conversations, or both raise the same kind of error."""
    try:
        want = plain[index]
    except (IndexError, ValueError, RuntimeError) as err:
        with pytest.raises(type(err)):
            sharded[index]
        return
    got = sharded[index]
    assert got.to_chats() == want.to_chats(), index
    assert got.batch_size == want.batch_size, index


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chats=CHATS, data=st.data())
def test_every_index_equals_the_unsharded_history(chats, data):
    n = len(chats)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=4), label="cuts")
    with tempfile.TemporaryDirectory() as tmp:
        write_sharded(Path(tmp) / "c", chats, cuts, dense_single=data.draw(st.booleans()))
        ds = open_dataset(Path(tmp) / "c")
        h = History.from_chats(chats) if chats else History.from_chats([[]])[0:0]  # batch (0, -1)
        assert len(ds) == n and ds.batch_size == torch.Size([n, -1]) == h.batch_size
        assert ds.to_chats() == chats and [c.to_chats() for c in ds] == chats
        assert ds[:].to_chats() == chats and ds[...].to_chats() == chats
        ints = st.lists(st.integers(-n, n - 1), max_size=4) if n else st.just([])
        for i in data.draw(ints, label="ints"):
            assert ds[i].to_chats() == h[i].to_chats()
            assert ds[torch.tensor(i)].to_chats() == chats[i]
            m = len(chats[i])
            for j in data.draw(st.lists(st.integers(-m - 1, m), max_size=3), label="message"):
                _same(ds, h, (i, j))
        bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
        for _ in range(3):
            sl = slice(data.draw(bound), data.draw(bound), data.draw(st.sampled_from([None, 1, 2, 3])))
            _same(ds, h, sl)
            assert ds[sl].to_chats() == chats[sl]
        ids = data.draw(ints, label="ids")
        _same(ds, h, ids)
        _same(ds, h, torch.tensor(ids, dtype=torch.int64))
        mask = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="mask")
        _same(ds, h, torch.tensor(mask, dtype=torch.bool))
        if n:
            j = data.draw(st.integers(-1, 1), label="j")
            _same(ds, h, (slice(None), j))
            _same(ds, h, (ids or [0], j))
            msgs = slice(data.draw(st.integers(-3, 3)), data.draw(bound), data.draw(st.sampled_from([None, 2])))
            assert ds[:, msgs].to_chats() == h[:, msgs].to_chats() == [c[msgs] for c in chats]


@pytest.mark.parametrize("dense_run", [0, 10**9])  # always gathered, always the covering range
def test_random_ids_gathered_or_read_as_ranges(tmp_path, monkeypatch, dense_run):
    from chatdata.io import lazy_history

    monkeypatch.setattr(lazy_history, "DENSE_RUN", dense_run)
    chats = load_sample_chats()[:60:2]
    write_sharded(tmp_path / "c", chats, [10, 10, 21])
    ds, h = open_dataset(tmp_path / "c"), History.from_chats(chats)
    gen = torch.Generator().manual_seed(dense_run % 97)
    for size in (1, 3, 40):
        ids = torch.randint(-30, 30, (size,), generator=gen)
        assert ds[ids].to_chats() == h[ids].to_chats()
    assert ds[[29, 0, 11, 10, 29]].to_chats() == [chats[i] for i in (29, 0, 11, 10, 29)]
    assert ds[5:25].to_chats() == chats[5:25]  # gathering left the shards' columns as views


def test_errors_name_what_to_fix(tmp_path):
    write_sharded(tmp_path / "c", [[{"role": "user", "content": "a"}]] * 3, [1])
    ds = open_dataset(tmp_path / "c")
    for bad, err, text in ((3, IndexError, "out of range"), (-4, IndexError, "out of range"),
                           ([0, 7], IndexError, "index 7"), (torch.tensor([True]), IndexError, "one value per item"),
                           (1.5, IndexError, "ints, slices"), (slice(None, None, -1), ValueError, "step"),
                           ([[0, 1]], IndexError, "1-D")):
        with pytest.raises(err, match=text):
            ds[bad]


def test_opening_maps_nothing_and_an_item_reads_one_shard(tmp_path):
    chats = load_sample_chats()[:30]
    write_sharded(tmp_path / "c", chats, [10, 20])
    ds = open_dataset(tmp_path / "c")
    for shard in ds.shard_paths()[1:]:  # damage every shard but the first, after the open
        (shard / "_storage" / "_values" / "content.bytes.memmap").unlink()
    assert ds.batch_size[0] == 30 and ds[3].to_chats() == chats[3] and ds[2:9].to_chats() == chats[2:9]
    with pytest.raises(FormatError):
        ds[15]
    with pytest.raises(FormatError):
        ds[5:15]


def test_methods_equal_the_unsharded_history(tmp_path):
    chats = load_sample_chats()[:24]
    write_sharded(tmp_path / "c", chats, [0, 7, 7, 15])
    ds, h = open_dataset(tmp_path / "c"), History.from_chats(chats)
    kw = dict(tokenizer=load_sample_tokenizer(), add_generation_prompt=False)
    assert ds.apply_chat_template(**kw) == h.apply_chat_template(**kw)
    masks = dict(tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kw)
    got, want = ds.apply_chat_template(**masks), h.apply_chat_template(**masks)
    assert got.batch_size == want.batch_size and torch.equal(got.offsets, want.offsets)
    for key in ("input_ids", "attention_mask", "assistant_masks"):
        assert torch.equal(got.values[key], want.values[key]), key
    padded = ds.apply_chat_template(padding=True, **masks)
    assert torch.equal(padded["input_ids"], h.apply_chat_template(padding=True, **masks)["input_ids"])
    assert ds.role == h.role and ds.content == h.content and ds.is_complete == h.is_complete
    assert ds.tool_calls == h.tool_calls and ds.extra == h.extra
    assert History.from_arrow(ds.to_arrow()).to_chats() == chats
    plain = ds.memmap(tmp_path / "plain")
    assert isinstance(plain, History) and plain.to_chats() == chats and plain.batch_size == h.batch_size
    assert verify_dataset(tmp_path / "plain").ok
    assert History.load_memmap(tmp_path / "plain").to_chats() == chats
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="notes.txt"):
        ds.memmap(tmp_path / "mine")
    with pytest.raises(ValueError, match="inside the sharded dataset"):
        ds.memmap(tmp_path / "c" / "copy")
    empty = open_dataset(tmp_path / "e", mode="a")
    assert empty.memmap(tmp_path / "e0").batch_size == torch.Size([0, -1]) == empty.batch_size
    assert empty[:].to_chats() == [] and empty.to_chats() == []


def test_append_mode_is_the_same_lazy_history(tmp_path):
    w = open_dataset(tmp_path / "c", mode="a")
    assert w.batch_size == torch.Size([0, -1]) and len(w[:]) == 0
    w.append(History.from_chats([[{"role": "user", "content": "a"}]]))
    w.append(History.from_chats([[{"role": "user", "content": "b"}], [{"role": "user", "content": "c"}]]))
    assert w.batch_size == torch.Size([3, -1]) and w[1:].content == [["b"], ["c"]] and w[-1, 0].content == "c"


def test_sharded_token_set_indexes_as_the_unsharded_one(tmp_path):
    chats = load_sample_chats()[:25]
    tokens = History.from_chats(chats).apply_chat_template(
        tokenizer=load_sample_tokenizer(), add_generation_prompt=False, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True)
    w = open_dataset(tmp_path / "t", mode="a")
    for a, b in ((0, 9), (9, 9), (9, 25)):
        w.append(tokens[a:b])
    ds = open_dataset(tmp_path / "t")
    assert ds.kind == "tokens" and ds.batch_size == torch.Size([25, -1]) == tokens.batch_size
    for index in (3, -1, slice(5, 20), slice(0, 25, 4), [24, 0, 9, 9], torch.tensor([8, 9])):
        got, want = ds[index], tokens[index]
        if isinstance(index, int):
            assert torch.equal(got["input_ids"], want["input_ids"])
        else:
            assert torch.equal(got.offsets, want.offsets) and torch.equal(got.values["input_ids"], want.values["input_ids"])
    assert [torch.equal(r["assistant_masks"], tokens[i]["assistant_masks"]) for i, r in enumerate(ds)] == [True] * 25
    plain = ds.memmap(tmp_path / "plain")
    assert torch.equal(plain.values["input_ids"], tokens.values["input_ids"])
    assert len(ConcatTokenDataset(open_dataset(tmp_path / "t"))) == 25
    with pytest.raises(TypeError, match="sharded set of tokens"):
        ds.to_chats()
    assert chatdata.open_dataset(tmp_path / "t")[0:0].batch_size[0] == 0
