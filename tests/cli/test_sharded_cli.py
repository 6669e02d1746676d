"""Every subcommand reads a sharded dataset (``chatdata import --shard-size``) as it reads the
same conversations imported into one folder: same numbers, same text, same tokens."""
from __future__ import annotations

import json

import pytest
import torch

from chatdata.data import sample_tokenizer_path
from chatdata.io import open_dataset
from chatdata.td import load_memmap

from chatdata.cli import main

from cli_helpers import run_cli


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys):
    """Run ``chatdata ARGS`` in this process (the subcommands as ``python -m chatdata`` runs them)."""
    def run(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)
    return run


@pytest.fixture(scope="module")
def sharded_ds(tmp_path_factory, sample_jsonl):
    out = tmp_path_factory.mktemp("sharded") / "chats"
    res = run_cli("import", sample_jsonl, out, "--shard-size", "70")  # 300 conversations: 5 shards, the last short
    assert res.returncode == 0, res.stderr
    assert open_dataset(out).num_shards == 5
    return out


def test_info_counts_every_shard(cli, sharded_ds, sample_ds):
    flat = json.loads(cli("info", sample_ds, "--json").stdout)
    res = cli("info", sharded_ds, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == flat
    assert json.loads(res.stdout)["conversations"] == 300


def test_show_and_export_read_across_shards(cli, sharded_ds, sample_ds, tmp_path):
    for i in ("69", "70", "-1"):  # last of shard 0, first of shard 1, last overall
        a, b = cli("show", sample_ds, i), cli("show", sharded_ds, i)
        assert a.returncode == 0 and b.returncode == 0, b.stderr
        assert a.stdout == b.stdout
    res = cli("show", sharded_ds, "300")
    assert res.returncode == 1 and "out of range" in res.stderr and "300 conversations" in res.stderr
    assert cli("export", sharded_ds, tmp_path / "s.jsonl", "--chunk-size", "32").returncode == 0
    assert cli("export", sample_ds, tmp_path / "f.jsonl").returncode == 0
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "f.jsonl").read_bytes()


def test_tokenize_a_sharded_dataset(cli, sharded_ds, sample_ds, tmp_path):
    for src, out in ((sharded_ds, "s"), (sample_ds, "f")):
        res = cli("tokenize", src, tmp_path / out, "--batch-size", "64")
        assert res.returncode == 0, res.stderr
    s, f = load_memmap(tmp_path / "s"), load_memmap(tmp_path / "f")
    assert torch.equal(s.offsets, f.offsets)
    for key in ("input_ids", "assistant_masks"):
        assert torch.equal(s.values[key], f.values[key])


def test_info_on_a_sharded_token_set(cli, tmp_path, sample_ds):
    assert cli("tokenize", sample_ds, tmp_path / "tok").returncode == 0
    tokens = load_memmap(tmp_path / "tok")
    ds = open_dataset(tmp_path / "sharded_tok", mode="a")
    ds.append(tokens[0:100])
    ds.append(tokens[100:300])
    flat = json.loads(cli("info", tmp_path / "tok", "--json").stdout)
    res = cli("info", tmp_path / "sharded_tok", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == flat


def test_verify_checks_every_shard_and_the_manifest(cli, sharded_ds, tmp_path):
    import shutil

    res = cli("verify", sharded_ds)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith(f"ok: {sharded_ds}:")
    bad = tmp_path / "bad"
    shutil.copytree(sharded_ds, bad)
    shard = open_dataset(bad).shard_paths()[3]
    victim = next(shard.rglob("content.bytes.memmap"))
    data = bytearray(victim.read_bytes())
    data[5] = (data[5] + 1) % 128 or 65  # same size, still valid UTF-8: only the checksum can tell
    victim.write_bytes(bytes(data))
    (bad / "shards" / "shard-orphan").mkdir()
    res = cli("verify", bad)
    assert res.returncode == 1
    assert f"bad: {victim}: checksum mismatch" in res.stdout
    assert "shard-orphan (a shard folder the manifest does not name)" in res.stdout

    m = json.loads((bad / "manifest.json").read_text())
    m["shards"][1]["items"] += 1
    (bad / "manifest.json").write_text(json.dumps(m))
    res = cli("verify", bad, "--no-checksums")
    assert res.returncode == 1
    assert "holds 70 items, but the manifest (shard 1) says 71" in res.stdout
    assert "says 300 items in all, but its shards add up to 301" in res.stdout
    (bad / "manifest.json").write_text("{not json")
    res = cli("verify", bad)
    assert res.returncode == 1 and "manifest.json" in res.stdout and "not valid JSON" in res.stdout


def test_a_sharded_token_set_is_not_a_history(cli, tmp_path, sample_ds):
    assert cli("tokenize", sample_ds, tmp_path / "tok").returncode == 0
    open_dataset(tmp_path / "st", mode="a").append(load_memmap(tmp_path / "tok"))
    res = cli("export", tmp_path / "st", tmp_path / "x.jsonl")
    assert res.returncode == 1 and "sharded set of tokens, not of conversations" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_tokenizer_without_a_vocabulary_is_refused(cli, tmp_path, sample_ds):
    """A folder with tokenizer_config.json but no tokenizer.json loads in transformers as a
    tokenizer that encodes text to nothing; every message would become special tokens only."""
    import shutil

    folder = tmp_path / "tok_no_vocab"
    folder.mkdir()
    shutil.copy(sample_tokenizer_path() / "tokenizer_config.json", folder)
    res = cli("tokenize", sample_ds, tmp_path / "t", "--tokenizer", folder)
    assert res.returncode == 1
    assert "the tokenizer cannot encode text" in res.stderr and "no tokenizer.json" in res.stderr
    assert not (tmp_path / "t").exists()
    (folder / "tokenizer.json.gz").write_bytes(b"")
    res = cli("show", sample_ds, "0", "--tokenizer", folder)
    assert res.returncode == 1 and "gunzip -k" in res.stderr and "Traceback" not in res.stderr


def test_plain_and_sharded_outputs_do_not_replace_each_other(cli, sharded_ds, sample_ds, sample_jsonl, tmp_path):
    import shutil

    shards = tmp_path / "shards"
    shutil.copytree(sharded_ds, shards)
    res = cli("import", sample_jsonl, shards, "--overwrite", "-q")
    assert res.returncode == 1 and "holds a sharded dataset (manifest.json)" in res.stderr
    res = cli("tokenize", sample_ds, shards, "--overwrite", "-q")
    assert res.returncode == 1 and "holds a sharded dataset" in res.stderr
    assert open_dataset(shards).num_shards == 5  # untouched
    plain = tmp_path / "plain"
    shutil.copytree(sample_ds, plain)
    res = cli("import", sample_jsonl, plain, "--shard-size", "50", "--overwrite", "-q")
    assert res.returncode == 1 and "holds a plain (unsharded) dataset" in res.stderr
    assert load_memmap(plain).batch_size[0] == 300
