"""The gateway's output folder without a server: commits interrupted at each step are finished or
undone at the next start, a reused session id keeps unique branch numbers, open logs are readable,
and a folder is refused when it is someone else's or another gateway's."""
from __future__ import annotations

import json

import pytest

import chatdata
from chatdata.cli import main
from chatdata.gateway import read_sessions
from chatdata.gateway.journal import Journal, read_journal
from chatdata.gateway.store import BRANCHES, TOKENS, SessionStore
from chatdata.io.sharded import SHARDS, commit_shards, new_shard_name


def record(b, prompt, ids, text, parent=None, shared=0, messages=None):
    return {"b": b, "parent": parent, "shared": shared, "messages": messages or [], "prompt": prompt, "ids": ids,
            "logprobs": [-0.5] * len(ids), "message": {"role": "assistant", "content": text}, "finish": "stop"}


def session(store, sid, n=1):
    j = Journal.create(store.journal_dir, sid, durable=False)
    j.append(record(0, [1, 2], [3, 4], "a", messages=[{"role": "user", "content": "q"}]))
    for k in range(1, n):
        j.append(record(k, [9], [5], f"fork {k}", parent=[0, 1], shared=2, messages=[{"role": "user", "content": "z"}]))
    return j


def names(out, sub=""):
    return {s["path"] for s in chatdata.open_dataset(out / sub).manifest["shards"]}


def test_a_commit_cut_after_its_log_marks_is_finished_at_the_next_start(tmp_path):
    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    j = session(store, "s1", n=2)
    head, records, _ = read_journal(j.path)
    from chatdata.gateway.journal import branches_from_journal

    name = new_shard_name()  # what commit() does, stopped after the token manifest (a kill)
    folders = [out / sub / SHARDS / name for sub in ("", TOKENS, BRANCHES)]
    store._write([(head, b) for b in branches_from_journal(records)], folders)
    j.mark_committed(name)
    commit_shards(out / TOKENS, [{"path": f"{SHARDS}/{name}", "items": 2}], "tokens")
    store.close()
    assert names(out) == set() and names(out, TOKENS) == {f"{SHARDS}/{name}"}

    again = SessionStore(out, durable=False)
    assert again.open() == []  # finished, not resumed: nothing is stored twice
    again.close()
    for sub in ("", TOKENS, BRANCHES):
        assert names(out, sub) == {f"{SHARDS}/{name}"}
    recs = read_sessions(out)
    assert [(r["branch"], r["parent"]) for r in recs] == [(0, None), (1, (0, 2))]
    assert recs[1]["input_ids"].tolist() == [1, 2, 9, 5] and recs[1]["assistant_masks"].tolist() == [0, 0, 0, 1]
    assert not list(store.journal_dir.iterdir())
    assert main(["verify", str(out)]) == 0


def test_a_commit_cut_before_its_log_marks_is_undone_and_the_session_resumed(tmp_path):
    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    j = session(store, "s1")
    orphan = out / SHARDS / new_shard_name()  # a shard folder written, then a kill before any log names it
    chatdata.History.from_chats([[{"role": "user", "content": "x"}]]).memmap(str(orphan))
    store.close()
    again = SessionStore(out, durable=False)
    assert again.open() == [j.path]  # to resume
    assert not orphan.exists()
    assert again.commit([j.path]) is not None
    again.close()
    assert len(read_sessions(out)) == 1


def test_a_reused_session_id_gets_new_branch_numbers_and_open_logs_are_read(tmp_path):
    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    store.commit([session(store, "same", n=2).path])
    store.commit([session(store, "same", n=2).path])  # the name used again after it was stored
    open_log = session(store, "still-open")
    store.close()
    recs = read_sessions(out)
    assert [(r["session_id"], r["branch"], r["parent"]) for r in recs] == [
        ("same", 0, None), ("same", 1, (0, 2)), ("same", 2, None), ("same", 3, (2, 2))]
    with_open = read_sessions(out, include_open=True)
    assert [r["session_id"] for r in with_open][-1] == "still-open" and open_log.path.exists()


def test_folders_that_cannot_be_used_are_refused(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="did not write"):
        SessionStore(foreign).open()
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]  # nothing created in it
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        SessionStore(tmp_path / "file").open()
    first = SessionStore(tmp_path / "out", durable=False)
    first.open()
    with pytest.raises(ValueError, match="another chatdata serve is writing"):
        SessionStore(tmp_path / "out").open()
    first.close()
    SessionStore(tmp_path / "out").open()
    with pytest.raises(ValueError, match="not a folder written by chatdata serve"):
        read_sessions(foreign)
    bad = tmp_path / "out" / "journal" / "bad.jsonl"
    bad.write_text(json.dumps({"no": "header"}) + "\n")
    with pytest.raises(ValueError, match="not a chatdata gateway session log"):
        read_journal(bad)


# -- the log's packed number lists (journal version 2) ---------------------------------------------
def test_logged_numbers_come_back_bit_for_bit(tmp_path):
    import math
    import struct

    import torch

    lps = [-0.0, -1e-300, -5e-324, -0.1 + 1e-17, -math.inf, -123456.789, -2.0 ** -1074 * 3]
    ids = [0, 151643, 2 ** 31 - 1, 7, 8, 9, 10]
    j = Journal.create(tmp_path, "s1", durable=False)
    rec = record(0, torch.tensor([5, 6, 2 ** 31 - 2], dtype=torch.int32), ids, "a")  # int32: packed as int64
    rec["logprobs"] = lps
    j.append(rec)
    line = json.loads(j.path.read_text().splitlines()[1])
    assert set(line["logprobs"]) == {"f64le"} and set(line["prompt"]) == {"i64le"}  # packed on disk
    _, (back,), _ = read_journal(j.path)
    assert back["prompt"] == [5, 6, 2 ** 31 - 2] and back["ids"] == ids
    assert [struct.pack("<d", x) for x in back["logprobs"]] == [struct.pack("<d", x) for x in lps]


def test_a_version_1_log_with_plain_lists_still_reads(tmp_path):
    path = tmp_path / "old.jsonl"
    head = {"journal": "chatdata-gateway-journal", "version": 1, "session_id": "s1", "uid": "u", "created": 0}
    path.write_text(json.dumps(head) + "\n" + json.dumps(record(0, [1, 2], [3, 4], "a")) + "\n")
    _, (rec,), _ = read_journal(path)
    assert rec["prompt"] == [1, 2] and rec["ids"] == [3, 4] and rec["logprobs"] == [-0.5, -0.5]


@pytest.mark.parametrize("bad, match", [
    ({"f64le": "not base64!"}, r"bad 'logprobs'"),
    ({"f64le": "AAAA"}, r"3 bytes is not a whole number of 8-byte values"),
    ({"i64le": "AAAAAAAAAAA="}, r"expected a list or \{'f64le'"),
    ("[-0.5]", r"expected a list or"),
], ids=["not-base64", "torn-value", "wrong-tag", "a-string"])
def test_a_bad_packed_field_names_the_file_and_line(tmp_path, bad, match):
    j = Journal.create(tmp_path, "s1", durable=False)
    j.append(record(0, [1], [3], "a"))
    lines = j.path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["logprobs"] = bad
    j.path.write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match=rf"{j.path.name}:2: .*{match}"):
        read_journal(j.path)


def test_a_log_torn_by_a_kill_is_cut_before_the_resumed_session_appends(tmp_path):
    """The torn line was never answered; a record appended right behind it used to make one
    garbled line of both, and the next start refused the whole log."""
    from chatdata.gateway.journal import branches_from_journal

    j = Journal.create(tmp_path, "s1", durable=False)
    j.append(record(0, [1, 2], [3, 4], "a"))
    with open(j.path, "ab") as f:
        f.write(b'{"b":0,"parent":null,"shared":0,"messages":[],"prompt":{"i64le":"AAA')  # a kill mid-write
    head, records, _ = read_journal(j.path)
    assert len(records) == 1
    again = Journal.reopen(j.path, head["session_id"], head["uid"], durable=False)
    again.append(record(0, [5], [6], "b"))
    _, records, _ = read_journal(j.path)
    assert [b.ids for b in branches_from_journal(records)] == [[1, 2, 3, 4, 5, 6]]


def test_a_record_whose_logprobs_do_not_match_its_ids_is_a_clear_error(tmp_path):
    from chatdata.gateway.journal import branches_from_journal

    rec = record(0, [1, 2], [3, 4], "a")
    rec["logprobs"] = [-0.5] * 3
    with pytest.raises(ValueError, match=r"record 0: 3 logprobs for 2 sampled ids"):
        branches_from_journal([rec])


@pytest.mark.parametrize("change, match", [
    (lambda r: r.update(ids=[3, 2 ** 40]), r"'ids' holds an id outside \[0, 2\*\*31\)"),
    (lambda r: r.update(prompt=[-1]), r"'prompt' holds an id outside"),
    (lambda r: r.update(logprobs=[-0.5]), r"'logprobs' must hold one value per sampled id \(2\)"),
    (lambda r: r.update(ids=[], logprobs=[]), r"'ids' is empty"),
], ids=["huge-id", "negative-id", "logprobs-short", "no-sampled-id"])
def test_a_record_that_cannot_be_a_completed_request_is_refused_by_name(tmp_path, change, match):
    """With packed numbers a flipped character still decodes to a plausible number: what a
    record must hold is checked when the log is read, naming the file and line."""
    j = Journal.create(tmp_path, "s1", durable=False)
    rec = record(0, [1, 2], [3, 4], "a")
    change(rec)
    j.append(rec)
    with pytest.raises(ValueError, match=rf"{j.path.name}:2: {match}"):
        read_journal(j.path)


def test_a_log_from_a_newer_chatdata_is_refused_clearly(tmp_path):
    j = Journal.create(tmp_path, "s1", durable=False)
    j.append(record(0, [1], [3], "a"))
    lines = j.path.read_text().splitlines()
    head = json.loads(lines[0])
    head["version"] = 99
    j.path.write_text(json.dumps(head) + "\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match=r"session log version 99 is newer than this chatdata reads"):
        read_journal(j.path)


def test_open_sessions_read_while_they_are_stored_are_never_missing(tmp_path):
    """read_sessions(include_open=True) read the stored rows, then the logs: a session whose
    commit ran between the two reads was in neither (a snapshot of 40 sessions showed 36 to 39),
    and a log removed while the logs were listed was a FileNotFoundError."""
    import threading

    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    logs = [session(store, f"s{k}").path for k in range(40)]
    counts, errors, done = [], [], threading.Event()

    def reader():
        try:
            while not done.is_set() or not counts:
                counts.append(sorted(r["session_id"] for r in read_sessions(out, include_open=True)))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for path in logs:
            store.commit([path])
    finally:
        done.set()
        t.join()
        store.close()
    assert not errors, errors
    assert counts and all(c == sorted(f"s{k}" for k in range(40)) for c in counts), [len(c) for c in counts]
    assert len(read_sessions(out)) == 40 and len(read_sessions(out, include_open=True)) == 40


def test_a_log_that_cannot_be_stored_keeps_no_other_session_out(tmp_path):
    """Sessions idle at once are stored as one shard: a log History refuses (a NaN in a tool
    call's arguments, which gateways before the body reader refused NaN did log) failed the whole
    batch at every try, and the good sessions never reached the datasets."""
    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    good = [session(store, f"good-{k}").path for k in range(2)]
    bad = Journal.create(store.journal_dir, "bad", durable=False)
    call = {"type": "function", "id": "c1", "function": {"name": "f", "arguments": {"a": float("nan")}}}
    bad.append({**record(0, [1, 2], [3, 4], "", messages=[{"role": "user", "content": "q"}]),
                "message": {"role": "assistant", "content": "", "tool_calls": [call]}})
    with pytest.raises(ValueError, match=rf"1 session log\(s\) could not be stored and stay in .*{bad.path.name}.*nan"):
        store.commit([good[0], bad.path, good[1]])
    store.close()
    assert sorted(r["session_id"] for r in read_sessions(out)) == ["good-0", "good-1"]
    assert [p.name for p in (out / "journal").iterdir()] == [bad.path.name]  # the bad one stays, for the next start
    assert main(["verify", str(out)]) == 0


def test_a_start_on_a_log_that_can_be_neither_resumed_nor_stored_names_it(tmp_path):
    """Was a traceback of History's at the server's startup, naming no file."""
    from chatdata.data import load_sample_tokenizer
    from chatdata.gateway import create_app
    import asyncio

    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    bad = Journal.create(store.journal_dir, "bad", durable=False)  # a prompt no template renders: not resumable
    call = {"type": "function", "id": "c1", "function": {"name": "f", "arguments": {"a": float("inf")}}}
    bad.append({**record(0, [1, 2], [3, 4], "", messages=[{"role": "user", "content": "q"}]),
                "message": {"role": "assistant", "content": "", "tool_calls": [call]}})
    store.close()
    app = create_app("http://127.0.0.1:9", load_sample_tokenizer(), out, durable=False)

    async def start():
        async with app.router.lifespan_context(app):
            pass
    with pytest.raises(ValueError, match=rf"neither resumed nor stored: {bad.path.name}: .*inf.* Move them out of "):
        asyncio.run(start())
    assert [p.name for p in (out / "journal").iterdir()] == [bad.path.name]
    bad.path.rename(tmp_path / bad.path.name)  # as the message says: then the same folder starts
    asyncio.run(start())
