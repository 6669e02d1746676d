"""chatdata.ray on a real local Ray cluster (ray.init(num_cpus=2)); the session's one (``ray_cluster`` in
tests/conftest.py)."""
from pathlib import Path

import pytest

import chatdata
import chatdata.ray as cray
from chatdata import History, open_dataset
from chatdata.data import load_sample_chats

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DATA = ROOT / "tests" / "data" / "tokenizers" / "qwen2.5-instruct"
CHATS = load_sample_chats()[:120]


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    """The real Qwen2.5 tokenizer from tests/data (its tokenizer.json is stored gzipped)."""
    import gzip
    import shutil

    dst = tmp_path_factory.mktemp("tok") / "qwen2.5-instruct"
    dst.mkdir()
    for f in TOKENIZER_DATA.iterdir():
        if f.name.endswith(".gz"):
            with gzip.open(f, "rb") as fin, open(dst / f.name[:-3], "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(f, dst / f.name)
    return dst


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ray") / "corpus"
    ds = open_dataset(path, mode="a")
    for a in range(0, len(CHATS), 50):  # shards of 50, 50, 20
        ds.append(History.from_chats(CHATS[a:a + 50]))
    return path


def test_read_write_sharded_roundtrip(ray_cluster, corpus, tmp_path):
    rd = cray.read(corpus)
    assert rd.count() == len(CHATS)
    assert rd.num_blocks() == 3  # one block per shard
    assert rd.schema().names == ["messages"]
    out = cray.write(rd, tmp_path / "copy", rows_per_shard=32)
    assert out.num_shards >= 4 and all(out.shard(k).batch_size[0] <= 32 for k in range(out.num_shards))
    back = open_dataset(tmp_path / "copy")
    assert sorted(map(repr, back.to_chats())) == sorted(map(repr, CHATS))  # every conversation, none twice
    assert back.to_chats() == CHATS  # and in order
    # a plain (unsharded) dataset reads too
    History.from_chats(CHATS[:7]).memmap(tmp_path / "plain")
    assert cray.read(tmp_path / "plain").num_blocks() == 1


def test_tokenize_matches_apply_chat_template_and_cli(ray_cluster, corpus, tmp_path, tokenizer_path):
    from transformers import AutoTokenizer

    TOKENIZER = tokenizer_path
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER), local_files_only=True)
    tools = chatdata.data.sample_tools()
    ctx = ray_cluster.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # Ray Data keeps row order only when asked (datasets copy it)
    try:
        toks = cray.tokenize(cray.read(corpus), tokenizer=TOKENIZER, chat_template_name="qwen", tools=tools,
                             batch_size=40)
        rows = toks.take_all()
    finally:
        ctx.execution_options.preserve_order = False
    ref = History.from_chats(CHATS).apply_chat_template(
        tokenizer=tok, chat_template_name="qwen", tools=tools, tokenize=True, return_assistant_tokens_mask=True,
        add_generation_prompt=False)
    assert len(rows) == len(CHATS)
    for i, r in enumerate(rows):
        assert list(r["input_ids"]) == ref[i]["input_ids"].tolist()
        assert list(r["assistant_masks"]) == ref[i]["assistant_masks"].bool().tolist()
    # `chatdata tokenize --ray` on the running cluster writes a sharded token set
    from chatdata.cli import main

    assert main(["tokenize", str(corpus), str(tmp_path / "tokens"), "--tokenizer", str(TOKENIZER),
                 "--template", "qwen", "--ray", "--shard-size", "64", "-q"]) == 0
    tokens = open_dataset(tmp_path / "tokens")
    assert tokens.kind == "tokens" and len(tokens) == len(CHATS)
    ref = History.from_chats(CHATS).apply_chat_template(
        tokenizer=tok, chat_template_name="qwen", tokenize=True, return_assistant_tokens_mask=True,
        add_generation_prompt=False)
    for i in (0, 63, 64, len(CHATS) - 1):
        assert tokens[i]["input_ids"].tolist() == ref[i]["input_ids"].tolist()
        assert tokens[i]["assistant_masks"].tolist() == ref[i]["assistant_masks"].bool().tolist()


def test_a_write_that_fails_in_one_worker_leaves_the_folder_as_it_was_and_the_retry_works(ray_cluster, tmp_path):
    import pyarrow as pa

    good = [[{"role": "user", "content": str(i)}] for i in range(6)]
    bad = pa.table({"messages": good[:5] + [None]})  # the last batch (rows 4, 5) cannot be read
    fresh = tmp_path / "fresh"
    with pytest.raises(Exception, match="messages is null"):
        cray.write(ray_cluster.data.from_arrow(bad), fresh, rows_per_shard=2)
    assert not fresh.exists()  # the shards of rows 0..3 are gone, and so is the folder made for them
    assert cray.write(ray_cluster.data.from_arrow(pa.table({"messages": good})), fresh,
                      rows_per_shard=2).to_chats() == good  # the retry: no "not a sharded dataset" refusal
    before = sorted(p.relative_to(fresh) for p in fresh.rglob("*"))
    for ds in (ray_cluster.data.from_arrow(bad),  # a bad row; tokens into a History dataset:
               ray_cluster.data.from_arrow(pa.table({"input_ids": [[1, 2], [3]]}))):
        with pytest.raises(Exception, match="messages is null|cannot add tokens shards"):
            cray.write(ds, fresh, rows_per_shard=2, overwrite=ds.count() == 6)
        assert sorted(p.relative_to(fresh) for p in fresh.rglob("*")) == before
    assert open_dataset(fresh).to_chats() == good


def test_shards_with_content_as_json_in_one_and_text_in_another_are_read_as_they_are(ray_cluster, tmp_path):
    plain = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": '"quoted"'}]]
    mixed = [[{"role": "user", "content": [{"type": "text", "text": "yo"}]}, {"role": "assistant", "content": "ok"}]]
    src = open_dataset(tmp_path / "src", mode="a")
    for chats in (plain, mixed, plain):
        src.append(History.from_chats(chats))
    # Ray joins the blocks into one batch: the mixed shard's content was read as plain text ('"ok"')
    out = cray.write(cray.read(tmp_path / "src"), tmp_path / "copy", rows_per_shard=10)
    assert out.to_chats() == plain + mixed + plain


def test_tokenize_with_a_relative_tokenizer_folder_reads_it_from_the_callers_folder(ray_cluster, corpus, tmp_path,
                                                                                    tokenizer_path, monkeypatch):
    """`chatdata tokenize corpus/ tokens/ --tokenizer tok/ --ray` (docs/scale.md): the workers run in
    their session's folder, where "tok/" named nothing, and every task failed loading it."""
    import shutil

    from chatdata.cli import main

    shutil.copytree(tokenizer_path, tmp_path / "tok")
    monkeypatch.chdir(tmp_path)
    toks = cray.tokenize(cray.read(corpus), tokenizer="tok/", chat_template_name="qwen").take_all()
    assert len(toks) == len(CHATS)
    assert main(["tokenize", str(corpus), "tokens/", "--tokenizer", "tok/", "--ray", "-q"]) == 0
    tokens = open_dataset(tmp_path / "tokens")
    from transformers import AutoTokenizer

    ref = History.from_chats(CHATS[:1]).apply_chat_template(
        tokenizer=AutoTokenizer.from_pretrained("tok/", local_files_only=True), tokenize=True, return_assistant_tokens_mask=True, add_generation_prompt=False)
    assert len(tokens) == len(CHATS) and tokens[0]["input_ids"].tolist() == ref[0]["input_ids"].tolist()


def _call(arguments):
    return [{"type": "function", "function": {"name": "f", "arguments": arguments}}]


# shards whose tables disagree on a message field (key orders, types, JSON text or not, explicit None)
_SHARDS = {
    "argument orders": [[[{"role": "assistant", "content": None, "tool_calls": _call({"b": 1, "a": 2})}]],
                        [[{"role": "assistant", "content": "z", "tool_calls": _call({"a": 1, "b": 2})}]]],
    "extra key orders": [[[{"role": "user", "content": "q", "name": "x", "meta": {"k": 1}}]],
                         [[{"role": "user", "content": "s", "meta": {"z": 1, "k": 2}, "name": "y"}]]],
    "json and plain": [[[{"role": "user", "content": "s", "meta": {"z": 1}}, {"role": "user", "content": "t", "meta": 2}]],
                       [[{"role": "user", "content": "t", "meta": "str"}]],
                       [[{"role": "user", "content": [{"type": "text", "text": "p"}]}]]],
    "None and empty": [[[{"role": "assistant", "content": "a", "tool_calls": None, "name": None}], []],
                       [[], [{"role": "user", "content": "b"}]]],
}


@pytest.mark.parametrize("case", sorted(_SHARDS))
def test_shards_that_disagree_come_back_exactly_through_ray(ray_cluster, tmp_path, case):
    """The chats a sharded dataset holds come back from Ray Data's blocks, written back by
    ``cray.write`` (whatever its batch boundaries) and read from each block, with every key order
    kept: Ray joins blocks under one schema, so a field two shards hold differently is one way in all."""
    parts = _SHARDS[case]
    src = open_dataset(tmp_path / "src", mode="a")
    for chats in parts:
        src.append(History.from_chats(chats))
    want = [c for chats in parts for c in chats]
    rd = cray.read(tmp_path / "src")
    blocks = [History.from_arrow(ray_cluster.get(ref)).to_chats() for ref in rd.to_arrow_refs()]
    assert [c for b in blocks for c in b] == want
    for rows in (1, 2, 10):
        got = cray.write(rd, tmp_path / f"copy{rows}", rows_per_shard=rows).to_chats()
        assert got == want
        # inside every value each key keeps its order (before, Ray's joined blocks gave the tool arguments
        # {"a", "b"} of one shard the order {"b", "a"} of another). A message's own keys come in the
        # order of the table it was written from (docs/scale.md), so that order follows Ray's batches
        assert _nested_orders(got) == _nested_orders(want)


def _nested_orders(chats):
    import json

    return [[{k: json.dumps(v) for k, v in m.items()} for m in c] for c in chats]


def test_a_conversation_without_messages_is_one_row_through_ray(ray_cluster, tmp_path):
    # a plain dataset of one conversation (h[i] saved, batch (0,) when it has no messages) read as no row,
    # and an empty batch (batch (0, -1)) must stay no row
    h = History.from_chats([[], [{"role": "user", "content": "a"}]])
    h[0].memmap(tmp_path / "one")
    assert cray.read(tmp_path / "one").take_all() == [{"messages": []}]
    h[0:0].memmap(tmp_path / "none")
    assert cray.read(tmp_path / "none").count() == 0
    assert cray.write(cray.read(tmp_path / "one"), tmp_path / "copy").to_chats() == [[]]
