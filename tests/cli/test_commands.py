"""chatdata info / tokenize / show / demo / --help, and one-line errors, driven as a user would."""
import json
import struct
import zlib

import pytest
import torch

from chatdata import History, load_memmap
from chatdata.data import load_sample_chats, sample_tokenizer_path

from cli_helpers import ROOT, run_cli, write_jsonl

SUBCOMMANDS = ("import", "export", "info", "tokenize", "show", "demo")


def _png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    # every chunk's CRC is right and the pixels decompress to the right size
    pos, idat = 8, b""
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IDAT":
            idat += body
        pos += 12 + n
    channels = {2: 3, 6: 4}[data[25]]  # RGB or RGBA (matplotlib writes RGBA)
    assert len(zlib.decompress(idat)) == h * (1 + channels * w)
    return w, h


def test_help_everywhere():
    res = run_cli("--help", process=True)  # `python -m chatdata` as typed; the rest run main() in-process
    assert res.returncode == 0 and "chatdata demo" in res.stdout
    for cmd in SUBCOMMANDS:
        res = run_cli(cmd, "--help")
        assert res.returncode == 0, cmd
        assert "examples:" in res.stdout and f"chatdata {cmd}" in res.stdout, cmd


def test_every_command_the_readme_lists_has_help_with_examples():
    """README's "The command" block and ``chatdata --help`` name the same subcommands, and each
    one's ``--help`` (``templates check`` / ``list`` too) has examples, as the README promises."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## The command", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    listed = {tuple(line.split()[1:3]) if line.split()[1] == "templates" else (line.split()[1],)
              for line in block.splitlines() if line.startswith("chatdata ")}
    from chatdata.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {c[0] for c in listed} == set(sub.choices), "README's command block and `chatdata --help` differ"
    for cmd in sorted(listed):
        res = run_cli(*cmd, "--help")
        assert res.returncode == 0 and "examples:" in res.stdout and f"chatdata {' '.join(cmd)}" in res.stdout, cmd
    # the one-line summaries name every format the commands read and write (they said JSON only)
    summaries = {a.dest: a.help for a in sub._choices_actions}
    assert "Parquet" in summaries["import"] and "Arrow" in summaries["import"] and "Parquet" in summaries["export"]
    res = run_cli(process=True)
    assert res.returncode == 2 and "COMMAND" in res.stdout


def test_info(tmp_path, sample_ds):
    png = tmp_path / "h.png"
    res = run_cli("info", sample_ds, "--plot", png)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "conversations             300" in out and "messages                  1,986" in out
    for role in ("assistant", "user", "system", "tool"):
        assert role in out
    assert "messages/conversation" in out and "p99" in out
    assert _png_size(png.read_bytes()) == (640, 480)
    res = run_cli("info", sample_ds, "--json")
    stats = json.loads(res.stdout)
    chats = load_sample_chats()
    lens = sorted(len(c) for c in chats)
    assert stats["conversations"] == 300 and stats["messages"] == sum(lens)
    assert stats["messages_per_conversation"]["max"] == lens[-1]
    assert stats["messages_per_conversation"]["min"] == lens[0]
    roles = {}
    for c in chats:
        for m in c:
            roles[m["role"]] = roles.get(m["role"], 0) + 1
    assert stats["roles"] == roles
    calls = [m["tool_calls"] for c in chats for m in c if m.get("tool_calls")]
    assert stats["tool_calls"] == sum(map(len, calls)) and stats["messages_with_tool_calls"] == len(calls)
    sizes = sorted(len(m["content"].encode()) for c in chats for m in c)
    assert stats["content_bytes_per_message"]["max"] == sizes[-1]
    assert stats["content_bytes"] == sum(sizes)


def test_tokenize_matches_apply_chat_template(tmp_path, sample_ds):
    from chatdata.data import load_sample_tokenizer

    out = tmp_path / "tokens"
    res = run_cli("tokenize", sample_ds, out, "--tokenizer", sample_tokenizer_path(), "--batch-size", "64")
    assert res.returncode == 0, res.stderr
    assert "tokenized 300 conversations" in res.stdout and "tokens/s" in res.stdout
    tokens = load_memmap(out)
    assert tokens.batch_size[0] == 300
    tok = load_sample_tokenizer()
    h = History.load_memmap(sample_ds)
    for i in (0, 17, 299):
        ref = h[i].apply_chat_template(tokenizer=tok, add_generation_prompt=False, tokenize=True,
                                       return_dict=True, return_assistant_tokens_mask=True)
        row = tokens[i]
        assert row["input_ids"].long().tolist() == ref["input_ids"].tolist()
        assert row["assistant_masks"].long().tolist() == ref["assistant_masks"].tolist()
    assert tokens.values["input_ids"].dtype == torch.int32
    # truncation, another template
    res = run_cli("tokenize", sample_ds, tmp_path / "t2", "--tokenizer", sample_tokenizer_path(),
                  "--template", "chatml_format", "--max-length", "50")
    assert res.returncode == 0, res.stderr
    t2 = load_memmap(tmp_path / "t2")
    assert int((t2.offsets[1:] - t2.offsets[:-1]).max()) == 50
    # existing output needs --overwrite
    res = run_cli("tokenize", sample_ds, out, "--tokenizer", sample_tokenizer_path())
    assert res.returncode == 1 and "--overwrite" in res.stderr


def test_show_markers_and_color(sample_ds):
    res = run_cli("show", sample_ds, "0")
    assert res.returncode == 0, res.stderr
    assert "<|im_start|>assistant\n[[" in res.stdout and "<|im_end|>]]" in res.stdout
    assert "\x1b[" not in res.stdout
    assert "<|im_start|>user\n[[" not in res.stdout  # user turns are not trained
    res = run_cli("show", sample_ds, "-1", "--color", "always", "--template", "chatml_format")
    assert res.returncode == 0 and "\x1b[1;32m" in res.stdout


PROCESS_CASES = {("frobnicate",), ("info", "{tmp}/missing")}


@pytest.mark.parametrize("args, message", [
    (("show", "{ds}", "5000"), "out of range"),
    (("show", "{ds}", "0", "--template", "nope"), "unknown template"),
    (("show", "{ds}", "0", "--tokenizer", "{tmp}/no-tokenizer"), "no such folder"),
    (("show", "{ds}", "0", "--tokenizer", "{tmp}"), "not a tokenizer folder"),
    (("tokenize", "{ds}", "{tmp}/t", "--tokenizer", "{tmp}/missing"), "no such folder"),
    (("tokenize", "{ds}", "{tmp}/t", "--template", "nope"), "unknown template"),
    (("tokenize", "{ds}", "{tmp}/t", "--template", "Qwen"), "unknown template; did you mean 'qwen'?"),
    (("show", "{ds}", "0", "--template", "chatml"), "did you mean 'chatml_format'?"),
    (("templates", "check", "llama-3"), "chatdata templates check: error: llama-3: not a template name, .jinja file or "
                                        "tokenizer folder; did you mean 'llama3'?"),
    (("info", "{tmp}"), "not a chatdata dataset"),
    (("info", "{tmp}/missing"), "no such dataset"),
    (("info", "{tmp}/file.txt"), "is a file"),
    (("export", "{tmp}/tokens_ds", "{tmp}/x.jsonl"), "not a History dataset"),
    (("show", "{ds}", "x"), "invalid int value"),
    (("frobnicate",), "invalid choice"),
    (("tokenise", "{ds}", "{tmp}/t"), "invalid choice: 'tokenise' (choose from 'import', "),
    (("tokenise", "{ds}", "{tmp}/t"), "; did you mean 'tokenize'? (see `chatdata --help`)"),
    (("templates", "chek", "qwen"), "chatdata templates: error: argument ACTION: invalid choice: 'chek' (choose from "
                                    "'check', 'list'); did you mean 'check'?"),
    (("tokenize", "{ds}", "{tmp}/t", "--max-lenght", "5"), "chatdata tokenize: error: unrecognized arguments: "
     "--max-lenght 5; did you mean --max-length? (see `chatdata tokenize --help`)"),
    (("show", "{ds}", "0", "--colour", "never", "--no-eos"), "chatdata show: error: unrecognized arguments: --colour never "
     "--no-eos; did you mean --color for --colour, --no-eot for --no-eos? (see `chatdata show --help`)"),
    (("templates", "check", "qwen", "--frob"), "chatdata templates check: error: unrecognized arguments: --frob "
                                               "(see `chatdata templates check --help`)"),
])
def test_errors_are_one_clear_line(tmp_path, sample_ds, args, message):
    (tmp_path / "file.txt").write_text("hi")
    TensorDictLike = torch.zeros(3)
    from chatdata import TensorDict

    TensorDict({"x": TensorDictLike}, [3]).memmap(tmp_path / "tokens_ds")
    argv = [a.format(ds=sample_ds, tmp=tmp_path) for a in args]
    # a usage error and a failed command also as real processes: stderr is the one line even with
    # whatever importing torch and transformers or exiting could print (the rest run main() in-process)
    res = run_cli(*argv, process=args in PROCESS_CASES)
    assert res.returncode != 0
    assert message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1


def test_demo(tmp_path):
    res = run_cli("demo", "--out", tmp_path / "demo")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    for step in ("1/4", "2/4", "3/4", "4/4", "chatdata import", "chatdata info", "chatdata tokenize", "chatdata show"):
        assert step in out
    assert "[[" in out and "done in" in out
    assert History.load_memmap(tmp_path / "demo" / "chats").to_chats() == load_sample_chats()
    assert load_memmap(tmp_path / "demo" / "tokens").batch_size[0] == 300
    _png_size((tmp_path / "demo" / "lengths.png").read_bytes())
    again = run_cli("demo", "--out", tmp_path / "demo")  # like every subcommand: no silent overwrite
    assert again.returncode == 1 and "--overwrite" in again.stderr
    assert run_cli("demo", "--out", tmp_path / "demo", "--overwrite").returncode == 0


def test_console_script_entry_point(capsys):
    from importlib.metadata import entry_points

    from chatdata.cli import main

    eps = [e for e in entry_points(group="console_scripts") if e.name == "chatdata"]
    assert eps and eps[0].value == "chatdata.cli:main"
    assert eps[0].load() is main
    assert main(["info", "/nonexistent/ds"]) == 1
    assert "no such dataset" in capsys.readouterr().err


def test_main_called_from_python_leaves_the_process_as_it_was(tmp_path, sample_ds, monkeypatch):
    """A command quiets transformers' logs and lets the tokenizer use its threads for its own run;
    main() called in-process gives both back (a caller's later batch encodes keep their setting)."""
    import logging
    import os

    from chatdata.cli import main

    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    before = logging.getLogger("transformers").level
    logging.getLogger("transformers").setLevel(logging.INFO)
    try:
        assert main(["tokenize", str(sample_ds), str(tmp_path / "tok"), "-q"]) == 0
        assert "TOKENIZERS_PARALLELISM" not in os.environ
        assert logging.getLogger("transformers").level == logging.INFO
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
        assert main(["tokenize", str(sample_ds), str(tmp_path / "tok2"), "-q"]) == 0
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    finally:
        logging.getLogger("transformers").setLevel(before)


def test_a_hub_model_id_as_tokenizer_says_how_to_make_the_local_folder(tmp_path, sample_ds):
    """The commands never download: a newcomer passing ``Org/Name`` learns how to save it once."""
    res = run_cli("tokenize", sample_ds, tmp_path / "t", "--tokenizer", "Qwen/Qwen2.5-7B-Instruct", cwd=tmp_path)
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert ("--tokenizer Qwen/Qwen2.5-7B-Instruct: no such folder; the commands read a local folder and never "
            "download: save the Hub tokenizer once with python -c \"from transformers import AutoTokenizer; "
            "AutoTokenizer.from_pretrained('Qwen/Qwen2.5-7B-Instruct').save_pretrained('Qwen2.5-7B-Instruct')\" "
            "and pass --tokenizer Qwen2.5-7B-Instruct") in res.stderr, res.stderr
    (tmp_path / "models").mkdir()  # a folder of that name here: a mistyped path, not a model id
    res = run_cli("show", sample_ds, "0", "--tokenizer", "models/tok", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.strip().endswith("--tokenizer models/tok: no such folder"), res.stderr
    assert not (tmp_path / "t").exists()


def test_a_template_file_in_the_working_folder_is_read_whatever_its_suffix(tmp_path, sample_ds):
    """``--template chat_template.txt`` was 'unknown template' while ``./chat_template.txt`` was read."""
    from chatdata.templates import get_chat_template

    (tmp_path / "chat_template.txt").write_text(get_chat_template("chatml_format"), encoding="utf-8")
    (tmp_path / "qwen").write_text("{{ 'a file named like a bundled template' }}", encoding="utf-8")
    bare = run_cli("show", sample_ds, "0", "--template", "chat_template.txt", cwd=tmp_path)
    pathed = run_cli("show", sample_ds, "0", "--template", "./chat_template.txt", cwd=tmp_path)
    named = run_cli("show", sample_ds, "0", "--template", "chatml_format", cwd=tmp_path)
    assert bare.returncode == 0 and bare.stdout == pathed.stdout == named.stdout, bare.stderr
    res = run_cli("templates", "check", "chat_template.txt", cwd=tmp_path)
    assert res.returncode == 0 and "== plain chat ==" in res.stdout, res.stderr
    # a bundled name wins over a file of that name
    assert run_cli("show", sample_ds, "0", "--template", "qwen", cwd=tmp_path).stdout == \
        run_cli("show", sample_ds, "0", "--template", "qwen").stdout


def test_tokenize_warns_when_no_message_has_a_trained_role(tmp_path):
    """OpenAI-shaped records with ShareGPT's role names (human / gpt) tokenized to rows with no
    trained token (Qwen's template renders no turn of an unknown role) and said only '0.0% trained'."""
    src = write_jsonl(tmp_path / "chats.jsonl", [{"messages": [{"role": "human", "content": "hi"},
                                                               {"role": "gpt", "content": "yo"}]}])
    assert run_cli("import", src, tmp_path / "ds").returncode == 0
    res = run_cli("tokenize", tmp_path / "ds", tmp_path / "tokens")
    assert res.returncode == 0 and "(0.0% trained by the mask" in res.stdout, res.stdout + res.stderr
    assert res.stderr.strip() == (
        f"warning: no token of {tmp_path / 'ds'} is trained: no message has the role 'assistant' (its roles: 'gpt', "
        "'human'); 'gpt', 'human' are ShareGPT's names, which import maps to user/assistant only from "
        '{"conversations": [{"from": ..., "value": ...}]} records: rename the roles in the source and import it again')
    # the ShareGPT records themselves import as user / assistant and train the reply: no warning
    src = write_jsonl(tmp_path / "sg.jsonl", [{"conversations": [{"from": "human", "value": "hi"},
                                                                  {"from": "gpt", "value": "yo"}]}])
    assert run_cli("import", src, tmp_path / "ds2").returncode == 0
    res = run_cli("tokenize", tmp_path / "ds2", tmp_path / "tokens2")
    assert res.returncode == 0 and res.stderr == "" and "(0.0% trained" not in res.stdout, res.stdout + res.stderr
