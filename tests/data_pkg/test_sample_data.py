"""Tests for chatdata.data (sample chats, packaged Qwen2.5 tokenizer) and
benchmarks/synthetic.py."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import chatdata.data as cdata
from chatdata.data import (
    TOKENIZER_SHA256,
    load_sample_chats,
    load_sample_tokenizer,
    sample_chats_path,
    sample_tokenizer_path,
    sample_tools,
)

REPO = Path(__file__).resolve().parents[2]


def _load_synthetic():
    spec = importlib.util.spec_from_file_location("_chatdata_bench_synthetic", REPO / "benchmarks" / "synthetic.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


synthetic = _load_synthetic()


@pytest.fixture(scope="module")
def chats():
    return load_sample_chats()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_sample_tokenizer(cache_dir=tmp_path_factory.mktemp("tokcache"))


@pytest.fixture
def count_extractions(monkeypatch):
    calls = []
    real = cdata._extract_to

    def counting(folder):
        calls.append(folder)
        return real(folder)

    monkeypatch.setattr(cdata, "_extract_to", counting)
    return calls


# --------------------------------------------------------------------------------------
# sample chats
# --------------------------------------------------------------------------------------


def test_sample_chats_file_and_count(chats):
    assert sample_chats_path().is_file()
    assert sample_chats_path().name == "sample_chats.jsonl.gz"
    assert len(chats) == 300
    lengths = [len(c) for c in chats]
    assert min(lengths) == 2 and max(lengths) == 16
    assert len(set(lengths)) >= 10  # varied lengths


def test_sample_chats_structure(chats):
    for conv in chats:
        assert isinstance(conv, list)
        roles = [m["role"] for m in conv]
        assert set(roles) <= {"system", "user", "assistant", "tool"}
        assert "system" not in roles[1:]
        assert roles[-1] == "assistant" and not conv[-1].get("tool_calls")
        assert "user" in roles
        for m in conv:
            assert isinstance(m["content"], str)
            assert set(m) <= {"role", "content", "tool_calls"}
            if m["role"] != "assistant" or not m.get("tool_calls"):
                assert m["content"].strip()


def test_sample_chats_system_prompts_and_multiturn(chats):
    with_system = sum(c[0]["role"] == "system" for c in chats)
    assert 100 <= with_system <= 250
    multi_turn = sum(sum(m["role"] == "user" for m in c) >= 3 for c in chats)
    assert multi_turn >= 50


def test_sample_chats_tool_calls(chats):
    names = {t["function"]["name"] for t in sample_tools()}
    assert {"get_weather", "search_flights", "lookup_order"} <= names
    used = set()
    n_tool_convs = 0
    for conv in chats:
        n_tool_convs += any(m.get("tool_calls") for m in conv)
        for i, m in enumerate(conv):
            if m["role"] == "assistant" and m.get("tool_calls"):
                tcs = m["tool_calls"]
                for tc in tcs:
                    assert tc["type"] == "function"
                    assert tc["function"]["name"] in names
                    assert isinstance(tc["function"]["arguments"], dict)
                    used.add(tc["function"]["name"])
                # one tool response per call, right after, each a JSON object as a string
                responses = conv[i + 1 : i + 1 + len(tcs)]
                assert [r["role"] for r in responses] == ["tool"] * len(tcs)
                for r in responses:
                    assert isinstance(json.loads(r["content"]), dict)
            if m["role"] == "tool":
                assert conv[i - 1]["role"] in {"tool", "assistant"}
    assert n_tool_convs >= 40
    assert {"get_weather", "search_flights", "lookup_order"} <= used


def test_sample_chats_non_ascii(chats):
    text = "\n".join(m["content"] for c in chats for m in c)
    assert any("\u3040" <= ch <= "\u30ff" for ch in text)  # Japanese kana
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)  # CJK ideographs
    for s in ["é", "ç", "ü", "ß", "ö", "¿", "√", "∫", "²", "≈", "∎"]:
        assert s in text, s
    assert any(unicodedata.category(ch) == "So" and ord(ch) > 0x1F000 for ch in text)  # emoji
    non_ascii = sum(any(not m["content"].isascii() for m in c) for c in chats)
    assert non_ascii >= 100
    assert "```python" in text and "```sql" in text  # coding help with code blocks


def test_sample_chats_generator_reproduces_packaged_file():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "make_sample_chats.py"
    spec = importlib.util.spec_from_file_location("make_sample_chats", path)
    make_sample_chats = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_sample_chats)

    assert make_sample_chats.dumps(make_sample_chats.generate()) == sample_chats_path().read_bytes()


def test_sample_chats_render_with_qwen_template(chats, tokenizer):
    tools = sample_tools()
    for conv in chats:
        text = tokenizer.apply_chat_template(conv, tools=tools, tokenize=False)
        assert text.count("<|im_start|>") >= len([m for m in conv if m["role"] != "tool"])
        n_calls = sum(len(m.get("tool_calls") or []) for m in conv)
        assert text.count('<tool_call>\n{"name": "') == n_calls
        assert text.count("<tool_response>") == sum(m["role"] == "tool" for m in conv)
    ids = tokenizer.apply_chat_template(chats[0], tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert len(ids) > 10


# --------------------------------------------------------------------------------------
# packaged tokenizer
# --------------------------------------------------------------------------------------


def test_tokenizer_package_files():
    src = Path(cdata.__file__).parent / "qwen2.5-tokenizer"
    assert (src / "tokenizer.json.gz").is_file()
    assert (src / "tokenizer_config.json").is_file()
    notice = (src / "LICENSE-NOTICE").read_text()
    assert "Apache License, Version 2.0" in notice and "Qwen/Qwen2.5-7B-Instruct" in notice
    assert "Alibaba Cloud" in notice
    sha = hashlib.sha256((src / "tokenizer_config.json").read_bytes()).hexdigest()
    assert sha == TOKENIZER_SHA256["tokenizer_config.json"]


def test_tokenizer_loads_offline(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("CHATDATA_CACHE", str(tmp_path / "cache"))
    tok = load_sample_tokenizer()
    assert tok.eos_token == "<|im_end|>"
    text = "Bonjour ! Grüß Gott. 日本語のテキスト、中文文本 😀 ∫₀¹ x² dx = 1/3"
    ids = tok(text)["input_ids"]
    assert len(ids) > 10
    assert tok.decode(ids) == text
    assert tok.convert_tokens_to_ids("<|im_start|>") == 151644
    assert (tmp_path / "cache").is_dir()
    assert Path(tok.name_or_path).parent == tmp_path / "cache"


def test_tokenizer_path_layout_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATDATA_CACHE", str(tmp_path))
    p = sample_tokenizer_path()
    assert p.parent == tmp_path
    assert p.name == "qwen2.5-tokenizer-" + TOKENIZER_SHA256["tokenizer.json"][:16]
    assert sorted(x.name for x in p.iterdir()) == ["LICENSE-NOTICE", "tokenizer.json", "tokenizer_config.json"]
    for name, sha in TOKENIZER_SHA256.items():
        assert hashlib.sha256((p / name).read_bytes()).hexdigest() == sha
    assert [x.name for x in tmp_path.iterdir()] == [p.name]  # no temporary leftovers


def test_default_cache_root(monkeypatch, tmp_path):
    monkeypatch.delenv("CHATDATA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cdata.cache_root() == tmp_path / "xdg" / "chatdata"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cdata.cache_root() == tmp_path / "home" / ".cache" / "chatdata"


def test_tokenizer_cache_is_reused(tmp_path, count_extractions):
    p1 = sample_tokenizer_path(tmp_path)
    st1 = (p1 / "tokenizer.json").stat()
    p2 = sample_tokenizer_path(tmp_path)
    assert p1 == p2
    assert len(count_extractions) == 1
    st2 = (p2 / "tokenizer.json").stat()
    assert (st1.st_ino, st1.st_mtime_ns) == (st2.st_ino, st2.st_mtime_ns)


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "config"])
def test_corrupted_cache_is_reextracted(tmp_path, count_extractions, damage):
    p = sample_tokenizer_path(tmp_path)
    tj = p / "tokenizer.json"
    if damage == "truncate":
        tj.write_bytes(tj.read_bytes()[: 1000])
    elif damage == "flip":
        data = bytearray(tj.read_bytes())
        data[len(data) // 2] ^= 0x01
        tj.write_bytes(bytes(data))
    elif damage == "delete":
        tj.unlink()
    else:
        (p / "tokenizer_config.json").write_text("{}")
    assert not cdata._is_valid(p)
    p2 = sample_tokenizer_path(tmp_path)
    assert p2 == p
    assert len(count_extractions) == 2
    assert cdata._is_valid(p2)
    assert [x.name for x in tmp_path.iterdir()] == [p.name]


def test_stray_file_at_cache_path_is_replaced(tmp_path):
    (tmp_path / cdata._TOKENIZER_DIRNAME).write_text("not a folder")
    p = sample_tokenizer_path(tmp_path)
    assert p.is_dir() and cdata._is_valid(p)


def test_bad_package_checksum_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(cdata, "TOKENIZER_SHA256", {**TOKENIZER_SHA256, "tokenizer.json": "0" * 64})
    with pytest.raises(RuntimeError, match="sha256"):
        sample_tokenizer_path(tmp_path)
    assert not (tmp_path / cdata._TOKENIZER_DIRNAME).exists()
    assert list(tmp_path.iterdir()) == []  # temporary folder cleaned up


def test_concurrent_extraction_processes(tmp_path):
    # load chatdata/data/__init__.py on its own (it needs only the standard library), so
    # the processes reach the extraction together instead of waiting on `import chatdata`
    code = (
        "import sys, importlib.util as u; "
        "s = u.spec_from_file_location('cd_data', sys.argv[2]); d = u.module_from_spec(s); "
        "s.loader.exec_module(d); "
        "p = d.sample_tokenizer_path(sys.argv[1]); print(p, d._is_valid(p))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), cdata.__file__], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert {tuple(o) for o in outs} == {(str(tmp_path / cdata._TOKENIZER_DIRNAME), "True")}
    assert [x.name for x in tmp_path.iterdir()] == [cdata._TOKENIZER_DIRNAME]


def test_concurrent_extraction_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(6) as ex:
        paths = list(ex.map(lambda _: sample_tokenizer_path(tmp_path), range(6)))
    assert len(set(paths)) == 1 and cdata._is_valid(paths[0])
    assert [x.name for x in tmp_path.iterdir()] == [cdata._TOKENIZER_DIRNAME]


# --------------------------------------------------------------------------------------
# benchmarks/synthetic.py
# --------------------------------------------------------------------------------------


def test_synthetic_vocab():
    assert len(synthetic.VOCAB) == 2000 == len(set(synthetic.VOCAB))
    assert all(w.isascii() and w.isalpha() and w.islower() for w in synthetic.VOCAB)
    assert synthetic.VOCAB == synthetic._make_vocab()


def test_synthetic_deterministic():
    a = synthetic.make_conversations(500, seed=0)
    assert a == synthetic.make_conversations(500, seed=0)
    assert a != synthetic.make_conversations(500, seed=1)
    assert synthetic.make_conversations(37, seed=0) == a[:37]
    assert synthetic.make_conversations(0) == []


def test_synthetic_prefix_stable_across_blocks():
    n = synthetic._BLOCK + 10
    big = synthetic.make_conversations(n, seed=3)
    assert len(big) == n
    assert synthetic.make_conversations(synthetic._BLOCK - 5, seed=3) == big[: synthetic._BLOCK - 5]
    chunks = list(synthetic.iter_conversations(n, seed=3))
    assert [len(c) for c in chunks] == [synthetic._BLOCK, 10]


def test_synthetic_bounds():
    convs = synthetic.make_conversations(3000, seed=7)
    vocab = set(synthetic.VOCAB)
    lengths, n_words, n_system = set(), [], 0
    for conv in convs:
        assert 2 <= len(conv) <= 12
        lengths.add(len(conv))
        roles = [m["role"] for m in conv]
        if roles[0] == "system":
            n_system += 1
            roles = roles[1:]
        assert roles == [("user", "assistant")[i % 2] for i in range(len(roles))]
        for m in conv:
            assert set(m) == {"role", "content"}
            words = m["content"].split(" ")
            assert set(words) <= vocab
            n_words.append(len(words))
    assert lengths == set(range(2, 13))
    assert min(n_words) >= 20 and max(n_words) <= 400
    assert min(n_words) < 40 and max(n_words) > 380
    assert 0.45 < n_system / len(convs) < 0.55


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "bare"])
def test_synthetic_write_jsonl(tmp_path, fmt):
    convs = synthetic.make_conversations(50, seed=2)
    # a non-synthetic conversation takes the json.dumps fallback path
    convs.append([{"role": "user", "content": 'quote " and \\ and é 😀'}, {"role": "assistant", "content": "ok"}])
    path = tmp_path / f"x.{fmt}.jsonl"
    assert synthetic.write_jsonl(path, convs, fmt=fmt) == len(convs)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(convs)
    for line, conv in zip(lines, convs):
        assert line == synthetic.format_line(conv, fmt)
        obj = json.loads(line)
        if fmt == "openai":
            assert obj == {"messages": conv}
        elif fmt == "bare":
            assert obj == conv
        else:
            back = {"system": "system", "human": "user", "gpt": "assistant"}
            assert [{"role": back[t["from"]], "content": t["value"]} for t in obj["conversations"]] == conv
    with pytest.raises(ValueError):
        synthetic.write_jsonl(path, convs, fmt="nope")


def test_synthetic_cli(tmp_path):
    out = tmp_path / "s.jsonl"
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "synthetic.py"), "120", str(out), "--format", "sharegpt", "--seed", "5"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 120
    expected = synthetic.make_conversations(120, seed=5)
    assert [synthetic.format_line(c, "sharegpt") for c in expected] == lines
