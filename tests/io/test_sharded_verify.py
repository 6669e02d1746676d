"""chatdata.io.verify_dataset: one report for a plain or a sharded folder."""
from __future__ import annotations

import chatdata
from chatdata.io import open_dataset, verify_dataset


def _chats(n, tag):
    return chatdata.History.from_chats([[{"role": "user", "content": f"{tag} {i}"},
                                         {"role": "assistant", "content": "ok"}] for i in range(n)])


def test_plain_and_sharded_folders(tmp_path):
    _chats(3, "p").memmap(str(tmp_path / "plain"))
    plain = verify_dataset(tmp_path / "plain")
    assert plain.ok and plain.files > 0
    ds = open_dataset(tmp_path / "sharded", mode="a")
    ds.append(_chats(3, "a"))
    ds.append(_chats(2, "b"))
    report = verify_dataset(tmp_path / "sharded")
    assert report.ok and report.files == 2 * plain.files and report.checksummed == report.files
    assert report.leftovers == []


def test_a_missing_shard_is_named(tmp_path):
    import shutil

    ds = open_dataset(tmp_path / "s", mode="a")
    ds.append(_chats(2, "a"))
    ds.append(_chats(2, "b"))
    gone = ds.shard_paths()[1]
    shutil.rmtree(gone)
    report = verify_dataset(tmp_path / "s")
    assert not report.ok
    assert any(p.path == str(gone) and "does not exist" in p.message for p in report.problems)


def test_an_empty_sharded_dataset_is_whole(tmp_path):
    open_dataset(tmp_path / "e", mode="a")
    report = verify_dataset(tmp_path / "e")
    assert report.ok and report.files == 0


def test_a_shard_named_twice_is_a_problem(tmp_path):
    import json

    ds = open_dataset(tmp_path / "s", mode="a")
    ds.append(_chats(2, "a"))
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    m["shards"].append(dict(m["shards"][0]))
    m["items"] = 4
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(m))
    report = verify_dataset(tmp_path / "s")
    assert not report.ok and any("twice" in p.message for p in report.problems)
