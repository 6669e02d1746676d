"""Sharded datasets: open_dataset, concurrent appends, killed writers, bad manifests."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chatdata
from chatdata import FormatError, History, open_dataset

ROOT = Path(__file__).resolve().parents[2]


def _chats(tag, n):
    return [[{"role": "user", "content": f"{tag}-{i} ü"}, {"role": "assistant", "content": f"ok {i}"}] for i in range(n)]


def test_append_and_read_across_shards(tmp_path):
    path = tmp_path / "corpus"
    ds = open_dataset(path, mode="a")
    assert len(ds) == 0 and ds.num_shards == 0
    all_chats = []
    for k, n in enumerate((3, 1, 4)):
        chats = _chats(f"s{k}", n)
        ds.append(History.from_chats(chats))
        all_chats += chats
    r = chatdata.open_dataset(path)
    assert isinstance(r, chatdata.io.ShardedDataset) and r.num_shards == 3 and len(r) == 8
    assert r.to_chats() == all_chats
    assert [r[i].to_chats() for i in range(8)] == all_chats
    assert r[-1].to_chats() == all_chats[-1]
    assert r[2:6].to_chats() == all_chats[2:6]  # crosses two shard boundaries
    assert History.from_arrow(r.to_arrow()).to_chats() == all_chats
    with pytest.raises(IndexError):
        r[8]
    with pytest.raises(PermissionError, match='mode="a"'):
        r.append(History.from_chats(_chats("x", 1)))
    # a plain dataset opens as itself
    History.from_chats(all_chats).memmap(tmp_path / "plain")
    assert open_dataset(tmp_path / "plain").to_chats() == all_chats
    with pytest.raises(ValueError, match="plain"):
        open_dataset(tmp_path / "plain", mode="a")


_WRITER = """
import sys, chatdata
from chatdata import History
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ds = chatdata.open_dataset(path, mode="a")
for k in range(n):
    ds.append(History.from_chats([[{"role": "user", "content": f"{tag}-{k}-{j}"}] for j in range(k % 3 + 1)]))
    print(k, flush=True)
# appending needs no optional package: importing chatdata stays cheap
assert not any(m in sys.modules for m in ("pyarrow", "datasets", "ray")), "chatdata imported an optional package"
"""


def _writer(path, tag, n):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag, str(n)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_append_a_loaded_dataset(tmp_path):
    """The usual case: a dataset loaded from disk (memory-mapped) is appended as a new shard."""
    History.from_chats(_chats("d", 3)).memmap(tmp_path / "ds")
    loaded = History.load_memmap(tmp_path / "ds")
    ds = open_dataset(tmp_path / "corpus", mode="a")
    ds.append(loaded)
    ds.append(loaded[1:])
    assert open_dataset(tmp_path / "corpus").to_chats() == _chats("d", 3) + _chats("d", 3)[1:]
    assert History.load_memmap(tmp_path / "ds").to_chats() == _chats("d", 3)  # the source is untouched


def test_two_processes_append_at_once_lose_nothing(tmp_path):
    path = tmp_path / "corpus"
    n = 8
    procs = [_writer(path, tag, n) for tag in ("A", "B")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    ds = open_dataset(path)
    assert ds.num_shards == 2 * n
    expected = {f"{tag}-{k}-{j}" for tag in "AB" for k in range(n) for j in range(k % 3 + 1)}
    got = [c[0]["content"] for c in ds.to_chats()]
    assert sorted(got) == sorted(expected) and len(ds) == len(expected)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["items"] == len(expected)
    assert not list(path.glob(".manifest.json.tmp-*"))


def test_killed_writer_leaves_a_readable_manifest(tmp_path):
    path = tmp_path / "corpus"
    p = _writer(path, "K", 10_000)
    # wait until it has committed a few shards, then kill it mid-append
    for _ in range(3):
        assert p.stdout.readline(), p.stderr.read()
    time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    ds = open_dataset(path)
    assert ds.num_shards >= 3
    assert len(ds.to_chats()) == len(ds)  # every shard the manifest names is whole
    # and the folder stays writable (the lock died with the process)
    w = open_dataset(path, mode="a")
    w.append(History.from_chats(_chats("after", 2)))
    assert open_dataset(path).num_shards == ds.num_shards + 1


def test_bad_manifests_name_the_file_and_shard(tmp_path):
    path = tmp_path / "corpus"
    ds = open_dataset(path, mode="a")
    ds.append(History.from_chats(_chats("a", 2)))
    ds.append(History.from_chats(_chats("b", 2)))
    manifest = json.loads((path / "manifest.json").read_text())
    missing = manifest["shards"][1]["path"]
    import shutil

    shutil.rmtree(path / missing)
    with pytest.raises(FormatError, match=rf"manifest.json: shard 1 \({missing}\) is missing"):
        open_dataset(path)
    manifest["shards"][1]["path"] = "../../etc"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match="not a relative path inside the folder"):
        open_dataset(path)
    manifest["shards"] = manifest["shards"][:1]
    manifest["shards"][0]["items"] = 5
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match=r"shard 0 .* holds 2 items, the manifest says 5"):
        open_dataset(path)[0]
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(FormatError, match="manifest.json: not valid JSON"):
        open_dataset(path)
    with pytest.raises(FileNotFoundError, match="no such dataset"):
        open_dataset(tmp_path / "nothing")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    with pytest.raises(ValueError, match="not a chatdata dataset"):
        open_dataset(tmp_path / "junk", mode="a")


@pytest.mark.parametrize("edit, match", [
    (lambda m: m["shards"][0].update(items=2**63), r"shard 0 must be \{"),
    (lambda m: m["shards"][0].update(items=True), r"shard 0 must be \{"),
    (lambda m: m.update(kind=["History"]), "'kind' must be a string"),
])
def test_manifest_counts_and_kinds_are_checked_when_opened(tmp_path, edit, match):
    """items=2**63 made len() and ds[0] raise OverflowError."""
    path = tmp_path / "corpus"
    open_dataset(path, mode="a").append(History.from_chats(_chats("a", 2)))
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match=rf"manifest.json: {match}"):
        open_dataset(path)


def test_a_shard_of_another_kind_than_the_manifest_says_is_a_format_error(tmp_path):
    """A History shard read as the manifest's "tokens" (or a shard whose class was edited) gave
    AttributeError deep inside to_arrow, the lazy History and the import."""
    path = tmp_path / "corpus"
    open_dataset(path, mode="a").append(History.from_chats(_chats("a", 2)))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["kind"] = "tokens"
    (path / "manifest.json").write_text(json.dumps(manifest))
    for read in (lambda ds: ds.to_arrow(), lambda ds: ds[0]):
        with pytest.raises(FormatError, match=r"shard 0 \(.*\) holds a History, the manifest says its shards hold tokens"):
            read(open_dataset(path))


def test_a_manifest_nested_too_deeply_is_a_format_error(tmp_path):
    path = tmp_path / "corpus"
    open_dataset(path, mode="a").append(History.from_chats(_chats("a", 2)))
    (path / "manifest.json").write_text("[" * 100000)
    with pytest.raises(FormatError, match="manifest.json: not valid JSON \\(nested too deeply\\)"):
        open_dataset(path)
    assert not chatdata.io.verify_dataset(path).ok

def test_token_set_shards(tmp_path):
    import torch

    from chatdata import RaggedTensorDict, TensorDict

    path = tmp_path / "tokens"
    ds = open_dataset(path, mode="a")
    for k in range(2):
        vals = TensorDict({"input_ids": torch.arange(6, dtype=torch.int32) + k,
                           "assistant_masks": torch.tensor([0, 1, 1, 0, 1, 1], dtype=torch.bool)}, [6])
        ds.append(RaggedTensorDict(vals, torch.tensor([0, 2, 6])))
    r = open_dataset(path)
    assert r.kind == "tokens" and len(r) == 4
    assert r[2]["input_ids"].tolist() == [1, 2]
    both = r[1:3]  # crosses the shard boundary
    assert both[0]["input_ids"].tolist() == [2, 3, 4, 5] and both[1]["input_ids"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="cannot add History shards to a dataset of tokens shards"):
        ds.append(History.from_chats(_chats("x", 1)))


def test_a_sharded_token_set_feeds_chatdata_train(tmp_path):
    """Token shards (what `chatdata tokenize --ray` writes) train through TokenDataset per shard."""
    import torch
    from torch.utils.data import ConcatDataset, DataLoader

    from chatdata.data import load_sample_tokenizer
    from chatdata.train import PackedBatchSampler, TokenDataset, collate_padding_free

    tok = load_sample_tokenizer()
    chats = _chats("t", 7)
    kw = dict(tokenizer=tok, add_generation_prompt=False, tokenize=True, return_dict=True,
              return_assistant_tokens_mask=True)
    corpus = open_dataset(tmp_path / "tokens", mode="a")
    corpus.append(History.from_chats(chats[:4]).apply_chat_template(**kw))
    corpus.append(History.from_chats(chats[4:]).apply_chat_template(**kw))
    parts = [TokenDataset(p) for p in open_dataset(tmp_path / "tokens").shard_paths()]
    ds = ConcatDataset(parts)
    whole = TokenDataset(History.from_chats(chats).apply_chat_template(**kw))
    assert len(ds) == 7 and torch.equal(torch.cat([p.lengths for p in parts]), whole.lengths)
    for i in range(7):
        assert torch.equal(ds[i]["input_ids"], whole[i]["input_ids"])
        assert torch.equal(ds[i]["labels"], whole[i]["labels"])
    sampler = PackedBatchSampler(torch.cat([p.lengths for p in parts]), max_tokens=4096, shuffle=False)
    seen = sum(int(b["cu_seq_lens_q"].numel()) - 1 for b in DataLoader(ds, batch_sampler=sampler,
                                                                       collate_fn=collate_padding_free))
    assert seen == 7


def test_concat_token_dataset_reads_a_sharded_token_set_as_one(tmp_path):
    """ConcatTokenDataset(open_dataset(path)): the shards as one dataset, batches equal to the
    unsharded token set's, in the order the sampler asks (rows from different shards mixed)."""
    import torch
    from torch.utils.data import DataLoader

    from chatdata.data import load_sample_tokenizer
    from chatdata.train import ConcatTokenDataset, PackedBatchSampler, TokenDataset, collate_padding_free

    tok = load_sample_tokenizer()
    chats = _chats("t", 9)
    kw = dict(tokenizer=tok, add_generation_prompt=False, tokenize=True, return_dict=True,
              return_assistant_tokens_mask=True)
    corpus = open_dataset(tmp_path / "tokens", mode="a")
    for a, b in ((0, 4), (4, 5), (5, 9)):
        corpus.append(History.from_chats(chats[a:b]).apply_chat_template(**kw))
    with pytest.raises(ValueError, match="is a sharded token set: read it with ConcatTokenDataset"):
        TokenDataset(tmp_path / "tokens")
    ds = ConcatTokenDataset(open_dataset(tmp_path / "tokens"))
    whole = TokenDataset(History.from_chats(chats).apply_chat_template(**kw))
    assert len(ds) == 9 and torch.equal(ds.lengths, whole.lengths)
    assert torch.equal(ds.trained_lengths(), whole.trained_lengths()) and ds.num_tokens == whole.num_tokens
    for i in (0, 3, 4, 5, 8, -1, torch.tensor(6)):
        assert torch.equal(ds[i]["labels"], whole[i]["labels"])
    order = [8, 0, 4, 2, 7, 4]
    got, want = ds.__getitems__(order), whole.__getitems__(order)
    for name in ("input_ids", "assistant_masks", "offsets"):
        assert torch.equal(getattr(got, name), getattr(want, name))
    sampler = PackedBatchSampler(ds.lengths, max_tokens=4096, seed=3)
    a = [collate_padding_free(b) for b in DataLoader(ds, batch_sampler=sampler, collate_fn=lambda x: x)]
    b = [collate_padding_free(b) for b in DataLoader(whole, batch_sampler=sampler, collate_fn=lambda x: x)]
    assert len(a) == len(b) and all(torch.equal(x["input_ids"], y["input_ids"]) and
                                    torch.equal(x["labels"], y["labels"]) for x, y in zip(a, b))
    cut = ConcatTokenDataset(open_dataset(tmp_path / "tokens"), max_length=5)
    assert int(cut.lengths.max()) == 5 and cut[8]["input_ids"].tolist() == whole[8]["input_ids"][:5].tolist()
    with pytest.raises(IndexError, match="out of range for a ConcatTokenDataset of 9 sequences"):
        ds[9]
    with pytest.raises(IndexError, match="out of range"):
        ds.__getitems__([0, 9])
    with pytest.raises(TypeError, match="int or a 0-d integer tensor"):
        ds[1.5]
    with pytest.raises(ValueError, match="holds no sequences"):
        ConcatTokenDataset(open_dataset(tmp_path / "empty", mode="a"))
    # an empty shard (a sharded set may hold one) adds nothing
    mixed = open_dataset(tmp_path / "mixed", mode="a")
    mixed.append(History.from_chats(chats[:4]).apply_chat_template(**kw))
    mixed.append(History.from_chats(chats[:4]).apply_chat_template(**kw)[0:0])
    mixed.append(History.from_chats(chats[4:]).apply_chat_template(**kw))
    assert open_dataset(tmp_path / "mixed").num_shards == 3
    both = ConcatTokenDataset(open_dataset(tmp_path / "mixed"))
    assert len(both) == 9 and torch.equal(both.lengths, whole.lengths)
    with pytest.raises(TypeError, match="a list of token sets or a sharded dataset"):
        ConcatTokenDataset(str(tmp_path / "tokens"))


def test_appending_to_a_foreign_folder_is_refused_and_leaves_it_untouched(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="non-empty folder that is not a chatdata dataset"):
        open_dataset(folder, mode="a")
    assert sorted(x.name for x in folder.iterdir()) == ["notes.txt"]
