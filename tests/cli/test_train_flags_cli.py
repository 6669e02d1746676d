"""The what-is-trained flags of `chatdata tokenize / show / templates check`, and their --html pages."""
from __future__ import annotations

import pytest
import torch

from chatdata import History
from chatdata.cli import main
from chatdata.data import load_sample_chats, load_sample_tokenizer, sample_tools
from chatdata.td import load_memmap
from chatdata.train import TokenDataset

@pytest.fixture(scope="module")
def small_ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("wds") / "chats"
    History.from_chats(load_sample_chats()[:8]).memmap(path)
    return path


@pytest.fixture(scope="module")
def weighted_tokens(small_ds, tmp_path_factory):
    out = tmp_path_factory.mktemp("wtok") / "tokens"
    assert main(["tokenize", str(small_ds), str(out), "-q", "--loss-weight", "user=0.5"]) == 0
    return out


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory):
    from chatdata.data import DATA_DIR

    return DATA_DIR / "sample_tools.json"


def _run(*args):
    return main([str(a) for a in args])


def test_tokenize_flags_write_what_the_api_gives(small_ds, tools_file, tmp_path, capsys):
    out = tmp_path / "tokens"
    assert _run("tokenize", small_ds, out, "--tools", tools_file, "--train-on", "assistant,tool",
                "--loss-weight", "tool=0.25", "--loss-weight", "user=0.5") == 0
    assert "trained by the mask: assistant,tool; weights tool=0.25, user=0.5" in capsys.readouterr().out
    ref = History.load_memmap(small_ds).apply_chat_template(
        tokenizer=load_sample_tokenizer(), tools=sample_tools(), add_generation_prompt=False,
        train_on=["assistant", "tool"], loss_weights={"tool": 0.25, "user": 0.5})
    got = load_memmap(out)
    assert got.values["loss_weights"].dtype == torch.float32
    assert torch.equal(got.offsets, ref.offsets)
    assert torch.equal(got.values["input_ids"].long(), ref.values["input_ids"])
    assert torch.equal(got.values["assistant_masks"], ref.values["assistant_masks"].bool())
    assert torch.equal(got.values["loss_weights"], ref.values["loss_weights"])
    assert TokenDataset(out).has_loss_weights


def test_last_turn_final_answer_and_message_weights(small_ds, tmp_path):
    tok = load_sample_tokenizer()
    h = History.load_memmap(small_ds)
    assert _run("tokenize", small_ds, tmp_path / "last", "--last-turn-only", "-q") == 0
    got = load_memmap(tmp_path / "last")
    assert "loss_weights" not in got.keys()  # 0/1 only: the mask says it all
    ref = h.apply_chat_template(tokenizer=tok, add_generation_prompt=False, last_turn_only=True)
    assert torch.equal(got.values["assistant_masks"], ref.values["assistant_masks"].bool())
    assert _run("tokenize", small_ds, tmp_path / "final", "--final-answer-only", "-q") == 0
    ds = TokenDataset(tmp_path / "final")
    assert ds.has_loss_weights and int(ds.trained_lengths().sum()) <= int(got.values["assistant_masks"].sum())
    assert _run("tokenize", small_ds, tmp_path / "msg", "--message-weights", "-q") == 0
    assert TokenDataset(tmp_path / "msg").has_loss_weights


@pytest.mark.parametrize("args, message", [
    (("tokenize", "{ds}", "{tmp}/t", "--loss-weight", "tool"), "ROLE=WEIGHT"),
    (("tokenize", "{ds}", "{tmp}/t", "--loss-weight", "tool=lots"), "not a number"),
    (("tokenize", "{ds}", "{tmp}/t", "--loss-weight", "tool=-1"), ">= 0"),
    (("tokenize", "{ds}", "{tmp}/t", "--train-on", ","), "at least one role"),
    (("tokenize", "{ds}", "{tmp}/t", "--final-answer-only", "--last-turn-only"), "does not combine"),
    (("tokenize", "{ds}", "{tmp}/t", "--train-on", "tool", "--ray"), "not supported with --ray"),
    (("show", "{tokens}", "0", "--train-on", "tool"), "is a token set"),
])
def test_bad_flags_are_usage_errors(small_ds, weighted_tokens, tmp_path, capsys, args, message):
    args = [a.format(ds=small_ds, tmp=tmp_path, tokens=weighted_tokens) for a in args]
    assert _run(*args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_template_that_drops_a_trained_role_names_it(tmp_path, capsys):
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {}}}]}, {"role": "tool", "content": "out"},
        {"role": "assistant", "content": "a"}]
    History.from_chats([chat]).memmap(tmp_path / "ds")
    jinja = tmp_path / "drops_tools.jinja"
    jinja.write_text("{% for m in messages %}{% if m.role != 'tool' %}<{{ m.role }}>{{ m.content }}</s>"
                     "{% endif %}{% endfor %}")
    assert _run("tokenize", tmp_path / "ds", tmp_path / "t", "--template", jinja, "--train-on", "assistant,tool") == 1
    err = capsys.readouterr().err
    assert "conversation 0" in err and "message 2 (tool)" in err and "not in the rendering" in err


def test_html_page_and_text_view(small_ds, tmp_path, capsys):
    """The pages themselves are checked in a real browser (tests/view/test_html_in_chromium.py)."""
    page = tmp_path / "chat.html"
    assert _run("show", small_ds, 2, "--train-on", "assistant,user", "--html", page) == 0
    text = page.read_text(encoding="utf-8")
    assert text.count('class="tok"') > 50 and 'data-role="user"' in text and "<script src" not in text
    assert _run("show", small_ds, 2, "--html", page) == 1  # no silent overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert _run("show", small_ds, 2, "--train-on", "user", "--color", "never") == 0
    shown = capsys.readouterr().out
    assert "<|im_start|>user\n[[" in shown and "<|im_start|>assistant\n[[" not in shown
