"""Writers of sharded datasets killed (SIGKILL) in the middle of a shard: the shards already
committed stay whole, nothing a reader trips over is left, `chatdata verify` says what is there
(the unfinished shard listed as a leftover; a folder whose first write never committed reported as
no dataset yet), and the write can go on: appends continue, and an import or a Ray write run again
into the folder of a killed one starts over beside its leftovers instead of refusing the folder.

The writer is a real process that writes part of a shard, says so, then waits on its stdin: the
kill lands in the middle of the shard every time, without timing."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chatdata import FormatError, History, open_dataset
from chatdata.cli import main
from chatdata.io import verify_dataset
from chatdata.io.tables import import_tables

ROOT = Path(__file__).resolve().parents[2]

# commits `committed` shards of 3 (0: none), then writes 2 conversations of a new shard and waits
_WRITER = """
import sys
from chatdata import History
from chatdata.io.sharded import ShardedWriter
path, committed = sys.argv[1], int(sys.argv[2])
def chats(tag, n):
    return History.from_chats([[{"role": "user", "content": f"{tag}-{i} é"}] for i in range(n)])
for k in range(committed):
    w = ShardedWriter(path, shard_size=3)
    w.append(chats(f"c{k}", 3))
    w.close()
w = ShardedWriter(path, shard_size=3)
w.append(chats("done", 3))   # one whole shard of this write, not committed
w.append(chats("half", 2))   # and one in the middle
print("ready", flush=True)
sys.stdin.read()              # killed here
w.close()
"""


def _kill_mid_shard(path, committed: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(committed)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line == "ready\n", p.stderr.read()
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=60)
        p.stdin.close()
        p.stdout.close()
        p.stderr.close()


def _chats(tag, n):
    return [[{"role": "user", "content": f"{tag}-{i} é"}] for i in range(n)]


def test_a_writer_killed_mid_shard_keeps_the_committed_shards_and_verify_lists_what_it_left(tmp_path):
    path = tmp_path / "corpus"
    _kill_mid_shard(path, committed=2)
    ds = open_dataset(path)
    assert ds.num_shards == 2 and ds.to_chats() == _chats("c0", 3) + _chats("c1", 3)
    unfinished = [p for p in (path / "shards").iterdir() if p.name.startswith(".")]
    assert len(unfinished) == 1  # the shard in the middle: its temporary folder, with the writer's lock
    report = verify_dataset(path)
    assert report.ok, report.problems
    assert len(report.leftovers) == 2  # the whole shard no manifest names, and the unfinished one
    assert any(str(unfinished[0]) in x and "unfinished shard" in x for x in report.leftovers)
    # the write goes on: an append lands next to the old shards
    w = open_dataset(path, mode="a")
    w.append(History.from_chats(_chats("after", 1)))
    assert open_dataset(path).to_chats() == _chats("c0", 3) + _chats("c1", 3) + _chats("after", 1)
    assert verify_dataset(path).ok


def _parquet(tmp_path, chats):
    import pyarrow.parquet as pq

    f = tmp_path / "src.parquet"
    pq.write_table(History.from_chats(chats).to_arrow(), f)
    return f


def test_an_import_killed_before_its_commit_is_no_dataset_yet_and_running_it_again_writes_it(tmp_path, capsys):
    path = tmp_path / "corpus"
    _kill_mid_shard(path, committed=0)  # what `chatdata import --shard-size` leaves: shards, no manifest
    assert not (path / "manifest.json").exists()
    report = verify_dataset(path)
    assert not report.ok  # the truth: there is no dataset here yet
    assert "has not committed" in report.problems[0].message and "Run the write again" in report.problems[0].message
    assert len(report.leftovers) == 2
    with pytest.raises(FormatError, match="shards of a sharded write that has not committed"):
        open_dataset(path)
    assert main(["verify", str(path)]) == 1
    assert main(["info", str(path)]) != 0
    assert "has not committed" in capsys.readouterr().err
    # run again: it writes the dataset beside the leftovers (it used to refuse the folder as foreign)
    src = _parquet(tmp_path, _chats("imp", 4))
    assert main(["import", str(src), str(path), "--shard-size", "3", "-q"]) == 0
    assert open_dataset(path).to_chats() == _chats("imp", 4)
    report = verify_dataset(path)
    assert report.ok and len(report.leftovers) == 2
    # and so does a plain append into such a folder
    path2 = tmp_path / "corpus2"
    _kill_mid_shard(path2, committed=0)
    open_dataset(path2, mode="a").append(History.from_chats(_chats("a", 2)))
    assert open_dataset(path2).to_chats() == _chats("a", 2)


@pytest.mark.parametrize("junk", ["notes.txt", "shards/notes.txt", "shards/mydata"])
def test_a_folder_with_a_shards_subfolder_of_other_files_is_still_refused(tmp_path, junk):
    path = tmp_path / "mine"
    (path / "shards").mkdir(parents=True)
    (path / "shards" / "shard-0-x").mkdir()  # looks like a leftover, beside something that is not
    target = path / junk
    if junk.endswith(".txt"):
        target.write_text("mine")
    else:
        target.mkdir()
    before = sorted(p.relative_to(path) for p in path.rglob("*"))
    with pytest.raises(ValueError, match="not a .*chatdata dataset"):
        open_dataset(path, mode="a")
    with pytest.raises(ValueError, match="not a sharded chatdata dataset"):
        import_tables(_parquet(tmp_path, _chats("x", 1)), path, shard_size=2, overwrite=False)
    assert sorted(p.relative_to(path) for p in path.rglob("*")) == before
    assert not verify_dataset(path).ok


def test_verify_does_not_list_the_shard_a_live_writer_is_writing(tmp_path):
    from chatdata.io.sharded import ShardedWriter

    path = tmp_path / "corpus"
    open_dataset(path, mode="a").append(History.from_chats(_chats("a", 1)))
    w = ShardedWriter(path, shard_size=3)
    w.append(History.from_chats(_chats("b", 1)))  # its shard is open (locked by this process)
    try:
        report = verify_dataset(path)
        assert report.ok and report.leftovers == []
    finally:
        w.abort()
    assert not [p for p in (path / "shards").iterdir() if p.name.startswith(".")]
    assert json.loads((path / "manifest.json").read_text())["items"] == 1


def test_a_folder_holding_only_an_empty_shards_folder_is_a_write_that_never_committed(tmp_path):
    (tmp_path / "c" / "shards").mkdir(parents=True)  # a writer killed right after making it
    report = verify_dataset(tmp_path / "c")
    assert not report.ok and "has not committed" in report.problems[0].message and report.leftovers == []
    (tmp_path / "empty").mkdir()
    assert "is not a saved collection" in verify_dataset(tmp_path / "empty").problems[0].message
    open_dataset(tmp_path / "c", mode="a").append(History.from_chats(_chats("x", 1)))
    assert verify_dataset(tmp_path / "c").ok
