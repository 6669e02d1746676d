"""Every ```python block of README.md and docs/*.md runs as written.

Each file's blocks run in order in one fresh namespace, in an empty working directory, after the
file's inputs are made here with real parts (the packaged sample chats and Qwen2.5 tokenizer, a
tiny random Qwen2, real pyarrow). The names a block takes from its prose (``model``, ``rows``,
``tools``, ...) are given by the file's inputs below. A block that cannot run on a CPU test machine
by nature has an HTML comment ``<!-- not run: REASON -->`` on the line before it: only those are
skipped, and each must say why.

The ``chatdata ...`` lines of the ```bash blocks of docs/*.md run too, each through
``chatdata.cli.main`` (README's shell walk has its own test: tests/cli/test_readme.py).
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SHELL_FENCE = re.compile(r"^```(?:bash|sh|shell)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->\s*\Z", re.S)


def python_blocks(path: Path, fence: re.Pattern = FENCE) -> list[tuple[int, str, str | None]]:
    """(line, code, reason it is not run or None) of each ```python block (or ``fence``'s), in order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in fence.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = NOT_RUN.search(before)
        if "not run" in before and skip is None:
            raise AssertionError(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}: write '<!-- not run: REASON -->'")
        blocks.append((text.count("\n", 0, m.start()) + 2, m.group(1), skip and skip.group(1).strip()))
    return blocks


# -- the inputs the blocks name ---------------------------------------------------------------------------

def _chats(n: int = 6) -> list:
    from chatdata.data import load_sample_chats

    return load_sample_chats()[:n]


def tiny_model(seed: int = 0):
    """A 2-layer Qwen2 with random weights and the Qwen2.5 vocabulary (no download)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, use_cache=False,
                      attn_implementation="sdpa", tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).eval()


def _tokens(n: int = 3):
    """Short token rows of the sample chats, as ``chatdata tokenize`` writes them."""
    from chatdata import History
    from chatdata.data import load_sample_tokenizer

    chats = sorted(_chats(60), key=lambda c: sum(len(str(m.get("content") or "")) for m in c))[:n]
    return History.from_chats(chats).apply_chat_template(
        tokenizer=load_sample_tokenizer(), add_generation_prompt=False, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True)


def _rows(tokens, logprobs: bool = False, weights: bool = False) -> list[dict]:
    rows = []
    for i in range(tokens.batch_size[0]):
        ids, mask = tokens[i]["input_ids"], tokens[i]["assistant_masks"]
        row = {"input_ids": ids, "labels": ids.masked_fill(mask == 0, -100)}
        if logprobs:
            row["logprobs"] = torch.full((len(ids),), -0.5)
        if weights:
            row["loss_weights"] = mask.to(torch.float32)
        rows.append(row)
    return rows


def inputs_readme() -> dict:
    return {}


def inputs_gateway() -> dict:
    """A sessions/ folder as a gateway writes it: one session with a fork, stored."""
    from chatdata.gateway.journal import Journal
    from chatdata.gateway.store import SessionStore

    def record(b, prompt, ids, text, parent=None, shared=0, messages=()):
        return {"b": b, "parent": parent, "shared": shared, "messages": list(messages), "prompt": prompt, "ids": ids,
                "logprobs": [-0.5] * len(ids), "message": {"role": "assistant", "content": text}, "finish": "stop"}

    store = SessionStore("sessions", durable=False)
    store.open()
    j = Journal.create(store.journal_dir, "s1", durable=False)
    j.append(record(0, [1, 2], [3, 4], "a", messages=[{"role": "user", "content": "q"}]))
    j.append(record(1, [9], [5], "b", parent=[0, 1], shared=2, messages=[{"role": "user", "content": "z"}]))
    store.commit([j.path])
    store.close()
    return {}


def inputs_hygiene() -> dict:
    import chatdata
    from chatdata.data import sample_tools

    prompt = "a benchmark prompt of at least thirteen words, as a list, a dict or a file"
    chats = _chats(8)
    chats += [chats[0], [{"role": "user", "content": f"Q: {prompt}"}, {"role": "assistant", "content": "A"}]]
    chatdata.open_dataset("corpus/", mode="a").append(chatdata.History.from_chats(chats))  # a copy, a leak
    Path("gsm8k.jsonl").write_text(json.dumps({"question": prompt}) + "\n", encoding="utf-8")
    return {"tools": sample_tools()}


def inputs_rollout() -> dict:
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()

    class Policy:  # answers each prompt with a fixed reply ending in the end-of-turn token
        def generate(self, prompts):
            ids = [torch.tensor(tok.encode("4<|im_end|>")) for _ in prompts]
            return ids, [torch.full((len(i),), -0.1) for i in ids]

    class Env:  # row 0 gets one more user turn, then every row is done (None)
        def step(self, history):
            return [[{"role": "user", "content": "and 3+3?"}] if len(chat) == 2 and k == 0 else None
                    for k, chat in enumerate(history.to_chats())]

    return {"chats": [[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "3+3?"}]],
            "policy": Policy(), "env": Env()}


def inputs_scale() -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import chatdata

    chats = _chats(6)
    chatdata.History.from_chats(chats).memmap("ds/")
    pq.write_table(pa.table({"messages": chats}), "train.parquet")
    return {"i": 0, "j": 1, "a": 0, "b": 2, "ids": [1, 0]}


def inputs_train() -> dict:
    tokens = _tokens()
    tokens.memmap("tokens/")
    return {"model": tiny_model(), "rows": _rows(tokens, weights=True)}


def inputs_trees() -> dict:
    tokens = _tokens()
    tokens.memmap("rollouts/")
    return {"model": tiny_model(), "rows": _rows(tokens, logprobs=True)}


INPUTS = {"README.md": inputs_readme, "gateway.md": inputs_gateway, "hygiene.md": inputs_hygiene,
          "rollout.md": inputs_rollout, "scale.md": inputs_scale, "train.md": inputs_train, "trees.md": inputs_trees}
WITH_CODE = [p for p in DOCS if FENCE.search(p.read_text(encoding="utf-8"))]


# -- what the blocks' comments say they give -------------------------------------------------------------

def check_readme(n: dict) -> None:
    assert (n["history"][1].role, n["history"][0, 2].content) == (["user", "assistant"], "4")
    assert n["again"].to_chats() == n["chats"]
    assert set(n["TokenDataset"]("tokens/")[0]) >= {"input_ids", "assistant_masks", "labels"}
    assert set(n["batch"]) == {"input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k",
                               "max_length_q", "max_length_k", "seq_idx"}
    assert n["batch"]["input_ids"].shape[0] == 1
    assert set(n["ro"].tokens().keys()) == {"input_ids", "assistant_masks", "logprobs"}
    assert n["ds"].batch_size[0] == 2 * n["h"].batch_size[0]


def check_gateway(n: dict) -> None:
    records = n["read_sessions"]("sessions/")
    assert [(r["session_id"], r["branch"], r["parent"]) for r in records] == [("s1", 0, None), ("s1", 1, (0, 2))]
    for r in records:
        assert r["history"].batch_dims == 1  # one conversation: its messages
        assert r["input_ids"].dim() == 1 and r["input_ids"].shape == r["assistant_masks"].shape == r["logprobs"].shape
    row = n["ds"][1]
    assert torch.equal(row["labels"] == -100, row["assistant_masks"] == 0)
    from chatdata.train import collate_prefix_tree  # the prose: each session's tree laid out once

    shared = records[1]["parent"][1]
    assert collate_prefix_tree(records)["input_ids"].numel() == sum(len(r["input_ids"]) for r in records) - shared
    # the prose's commands on the same folder: info, show (stored ids, sampled ones marked), verify
    sys.path.append(str(ROOT / "tests" / "cli"))
    from cli_helpers import run_cli

    info = run_cli("info", "sessions/")
    assert info.returncode == 0 and "1 session, 2 branches (1 fork)" in info.stdout, info.stdout + info.stderr
    show = run_cli("show", "sessions/tokens", "0")
    assert show.returncode == 0 and "4 tokens, 2 trained" in show.stdout, show.stdout + show.stderr
    assert run_cli("verify", "sessions/").returncode == 0


def check_hygiene(n: dict) -> None:
    assert n["kept"].dtype == n["flagged"].dtype == np.int64  # the Ray block's, as the local ones
    assert all(set(p) == {"conversation", "message", "problem", "detail"} for p in n["problems"])
    assert n["clean"].batch_size[0] <= n["h"].batch_size[0]
    # the Ray block's results are row numbers that equal the local functions' on the same rows
    local = n["chatdata"].open_dataset("corpus/")[:]
    assert n["kept"].tolist() == n["hygiene"].dedup(local, mode="near", threshold=0.8).tolist() == [*range(8), 9]
    assert n["flagged"].tolist() == n["hygiene"].decontaminate(local, "gsm8k.jsonl").tolist() == [9]
    assert n["problems"] == n["hygiene"].check_tool_calls(local, n["tools"])
    dup, _ = n["hygiene"].find_duplicates(local, mode="near")
    assert n["dup"].tolist() == dup.tolist() and (n["dup"] < 0).sum() == len(n["kept"])


def check_rollout(n: dict) -> None:
    ro = n["ro"]
    assert n["active"] == [] and n["batch"].batch_size == torch.Size([2, -1])
    assert set(n["batch"].keys()) == {"input_ids", "assistant_masks", "logprobs"}
    assert [len(c) for c in ro.history.to_chats()] == [4, 2] and ro.drift() == [None, None]
    import chatdata

    assert torch.equal(chatdata.load_memmap("rollouts/")[0]["input_ids"], n["batch"][0]["input_ids"])


def check_scale(n: dict) -> None:
    assert n["h2"].to_chats() == n["h3"].to_chats() == n["h"].to_chats()
    assert n["ds"].batch_size[0] == n["h"].batch_size[0]


def check_train(n: dict) -> None:
    assert torch.isfinite(n["loss"]) and n["weights"].shape == n["batch"]["labels"].shape


def check_trees(n: dict) -> None:
    assert n["logprobs"].shape == n["batch"]["logprobs"].shape == n["ratio"].shape
    assert n["logprobs"].shape[0] == len(n["rows"])
    assert sum(len(b) for b in n["sampler"]) == len(n["ds"])


CHECKS = {"README.md": check_readme, "gateway.md": check_gateway, "hygiene.md": check_hygiene,
          "rollout.md": check_rollout, "scale.md": check_scale, "train.md": check_train, "trees.md": check_trees}
NEEDS_RAY = {"hygiene.md"}  # its Ray block runs on the session's local cluster (conftest's ray_cluster)


def test_every_docs_file_with_python_has_its_inputs():
    assert {p.name for p in WITH_CODE} == set(INPUTS) == set(CHECKS)


@pytest.mark.parametrize("path", WITH_CODE, ids=lambda p: p.name)
def test_docs_python_blocks_run(path, tmp_path, monkeypatch, request):
    if path.name in NEEDS_RAY:
        request.getfixturevalue("ray_cluster")
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(path)
    names = {"__name__": "__docs__"}
    names.update(INPUTS[path.name]())
    ran = 0
    for line, code, not_run in blocks:
        if not_run is not None:
            assert not_run, f"{path.name}:{line}: a block that is not run says why"
            continue
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), names)
        except Exception as e:
            raise AssertionError(f"{path.name}: the block at line {line} fails: {type(e).__name__}: {e}") from e
        ran += 1
    assert ran, f"{path.name}: no block ran"
    CHECKS[path.name](names)


def test_a_block_marked_not_run_must_say_why(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- not run: needs a GPU -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
                   "<!-- not run: -->\n```python\nz = 3\n```\n", encoding="utf-8")
    assert [(code, why) for _, code, why in python_blocks(doc)] == [("x = 1\n", "needs a GPU"), ("y = 2\n", None),
                                                                   ("z = 3\n", "")]


# -- the shell lines of docs/*.md ---------------------------------------------------------------------------

def shell_commands(path: Path) -> list[tuple[int, list[str]]]:
    """(line, argv after ``chatdata``) of each ``chatdata`` line of the file's shell blocks not marked not run."""
    out = []
    for line, code, not_run in python_blocks(path, SHELL_FENCE):
        if not_run is not None:
            assert not_run, f"{path.name}:{line}: a block that is not run says why"
            continue
        for k, text in enumerate(code.splitlines()):
            words = shlex.split(text, comments=True)
            if words[:1] == ["chatdata"]:
                out.append((line + k, words[1:]))
    return out


def shell_inputs_hygiene() -> None:
    from chatdata.data import sample_tools

    prompt = "one two three four five six seven eight nine ten eleven twelve thirteen"
    chats = [*_chats(12), _chats(1)[0], [{"role": "user", "content": f"Solve: {prompt}?"},
                                         {"role": "assistant", "content": "no"}]]  # a copy, a contaminated one
    Path("chats.jsonl").write_text("".join(json.dumps({"messages": c}) + "\n" for c in chats), encoding="utf-8")
    Path("tools.json").write_text(json.dumps(sample_tools()), encoding="utf-8")
    for name, column in (("gsm8k.jsonl", "question"), ("bench.jsonl", "prompt")):
        Path(name).write_text(json.dumps({column: prompt}) + "\n", encoding="utf-8")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": [prompt]}), "mmlu.parquet")


def shell_inputs_scale() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chatdata.data import sample_tokenizer_path

    chats = _chats(8)
    pq.write_table(pa.table({"messages": chats}), "train.parquet")
    Path("hub_repo/data").mkdir(parents=True)
    for k in range(2):
        pq.write_table(pa.table({"messages": chats[4 * k:4 * k + 4]}), f"hub_repo/data/part-{k}.parquet")
    shutil.copytree(sample_tokenizer_path(), "tok")


SHELL_INPUTS = {"hygiene.md": shell_inputs_hygiene, "scale.md": shell_inputs_scale}
WITH_SHELL = [p for p in DOCS[1:] if shell_commands(p)]
SHELL_NEEDS_RAY = {"scale.md"}  # `chatdata tokenize ... --ray` on the session's local cluster


def test_every_docs_file_with_chatdata_lines_has_its_inputs():
    assert {p.name for p in WITH_SHELL} == set(SHELL_INPUTS)


@pytest.mark.parametrize("path", WITH_SHELL, ids=lambda p: p.name)
def test_docs_chatdata_lines_run(path, tmp_path, monkeypatch, request):
    if path.name in SHELL_NEEDS_RAY:
        request.getfixturevalue("ray_cluster")
    sys.path.append(str(ROOT / "tests" / "cli"))
    from cli_helpers import run_cli

    monkeypatch.chdir(tmp_path)
    SHELL_INPUTS[path.name]()
    for line, argv in shell_commands(path):
        if argv[0] == "import":  # the lines are alternatives writing the same output: each starts afresh
            out = Path(argv[2])
            for old in (out, out.parent / (out.name + ".hygiene")):
                shutil.rmtree(old, ignore_errors=True)
        res = run_cli(*argv)
        assert res.returncode == 0, f"{path.name}:{line}: chatdata {' '.join(argv)}\n{res.stderr[-2000:]}"
        said = res.stdout + res.stderr
        if "--decontaminate" in argv:
            benches = [b for b in argv if b in ("gsm8k.jsonl", "mmlu.parquet", "bench.jsonl")]
            assert benches and all(f"contaminated by {b}: 1" in said for b in benches), said
        if "--dedup" in argv:
            assert "duplicates dropped: 1" in said, said
