"""An output folder whose open-session logs were damaged or hold foreign files: every record is
checked when read, so ``read_sessions(include_open=True)`` warns and leaves the log out (before:
a bare KeyError / 'not enough values to unpack' for the whole call), and a start refuses by name,
saying how to start anyway (before: a KeyError or IndexError from uvicorn's startup, and the
folder's lock kept by the failed start)."""
from __future__ import annotations

import json

import pytest

from chatdata.gateway import read_sessions
from chatdata.gateway.journal import Journal, read_journal
from chatdata.gateway.store import SessionStore


def record(b=0, parent=None, shared=0, text="a"):
    return {"b": b, "parent": parent, "shared": shared, "messages": [{"role": "user", "content": "q"}],
            "prompt": [1, 2], "ids": [3, 4], "logprobs": [-0.5, -0.5],
            "message": {"role": "assistant", "content": text}, "finish": "stop"}


def out_with_log(tmp_path, *records):
    out = tmp_path / "out"
    store = SessionStore(out, durable=False)
    store.open()
    j = Journal.create(store.journal_dir, "s1", durable=False)
    for r in records:
        j.append(r)
    store.close()
    return out, j.path


def tamper(path, line, change):
    lines = path.read_text().splitlines()
    obj = json.loads(lines[line])
    change(obj)
    lines[line] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


RECORD_DAMAGE = [
    ("no message", lambda r: r.pop("message"), r"'message' must be the stored assistant message"),
    ("message not an object", lambda r: r.update(message=5), r"'message' must be"),
    ("parent of one number", lambda r: r.update(parent=[0]), r"'parent' must be null or \[branch, messages\]"),
    ("parent of three numbers", lambda r: r.update(parent=[0, 1, 2]), r"'parent' must be null"),
    ("branch a string", lambda r: r.update(b="x"), r"bad branch number 'x'"),
    ("branch true", lambda r: r.update(b=True), r"bad branch number True"),
    ("messages a string", lambda r: r.update(messages="x"), r"'messages' must be a list of message objects"),
    ("shared a string", lambda r: r.update(shared="x"), r"'shared' must be a count of ids"),
    ("finish unknown", lambda r: r.update(finish="abort"), r"'finish' must be 'stop' or 'length'"),
]


@pytest.mark.parametrize("case, change, match", RECORD_DAMAGE, ids=[c[0] for c in RECORD_DAMAGE])
def test_a_damaged_record_is_named_when_read(tmp_path, case, change, match):
    out, path = out_with_log(tmp_path, record())
    tamper(path, 1, change)
    with pytest.raises(ValueError, match=rf"{path.name}:2: {match}"):
        read_journal(path)
    with pytest.warns(UserWarning, match=rf"an open session's log is left out: .*{match}"):
        assert read_sessions(out, include_open=True) == []


def test_a_header_without_uid_and_a_fork_past_its_parent_are_named(tmp_path):
    out, path = out_with_log(tmp_path, record())
    tamper(path, 0, lambda h: h.pop("uid"))
    with pytest.raises(ValueError, match="not a chatdata gateway session log"):
        read_journal(path)
    out, path = out_with_log(tmp_path / "2", record(), record(b=1, parent=[0, 9], shared=2))
    with pytest.warns(UserWarning, match=r"branch 1 takes 9 messages and 2 ids from branch 0, which holds 2 and 4"):
        assert read_sessions(out, include_open=True) == []


def test_a_committed_line_must_name_a_shard_not_a_path(tmp_path):
    """A 'committed' value is joined to the output folder at the next start: a path in it
    would have put a manifest entry pointing outside --out."""
    out, path = out_with_log(tmp_path, record())
    with open(path, "a") as f:
        f.write(json.dumps({"committed": "../../elsewhere"}) + "\n")
    with pytest.raises(ValueError, match=r":3: 'committed' must name a shard"):
        read_journal(path)


@pytest.mark.parametrize("damage", ["foreign file", "damaged record"])
def test_a_start_on_a_log_it_cannot_resume_is_refused_by_name_and_changes_nothing(tmp_path, damage):
    out, path = out_with_log(tmp_path, record())
    if damage == "foreign file":
        bad = out / "journal" / "notes.jsonl"
        bad.write_text("my notes\n")
    else:
        bad = path
        tamper(path, 1, lambda r: r.pop("message"))
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    words = rf"{bad.name}:.*move {bad.name} out of .*journal \(or delete it\) to start without it"
    with pytest.raises(ValueError, match=words):
        SessionStore(out, durable=False).preflight()
    store = SessionStore(out, durable=False)
    with pytest.raises(ValueError, match=words):
        store.open()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    bad.unlink()  # the user moves it away: the same process starts (the failed start let go of the lock)
    assert store.open() == ([] if damage == "damaged record" else [path])
    store.close()


@pytest.mark.parametrize("sub", ["tokens", "branches"])
def test_a_deleted_token_or_branch_dataset_is_named_and_a_start_refuses(tmp_path, sub):
    # a commit lists a shard in tokens/ and branches/ before the conversations: a shard only the
    # conversations list means the folder was deleted or edited since; before, a start recreated it
    # empty and read_sessions said "restart chatdata serve to finish its interrupted commit"
    import shutil

    out, path = out_with_log(tmp_path, record())
    store = SessionStore(out, durable=False)
    store.open()
    store.commit([path])
    store.close()
    shutil.rmtree(out / sub)
    with pytest.raises(ValueError, match=rf"{sub} lacks 1 of the 1 stored shards .*deleted, moved or edited.*new --out"):
        SessionStore(out, durable=False).open()
    assert not (out / sub).exists()  # the refused start recreated nothing
    if sub == "tokens":
        with pytest.raises(FileNotFoundError, match="tokens: no such dataset"):
            read_sessions(out)
    (out / sub).mkdir()
    store = SessionStore(out / "fresh", durable=False)  # an empty dataset in its place: named when read too
    store.open()
    store.close()
    shutil.copytree(out / "fresh" / sub, out / sub, dirs_exist_ok=True)
    with pytest.raises(ValueError, match=r"does not list: that folder was deleted, moved or edited"):
        read_sessions(out)
