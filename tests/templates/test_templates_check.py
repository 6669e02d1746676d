"""`chatdata templates check` and the report behind it."""
import pytest

from chatdata.cli import main
from chatdata.templates import get_chat_template
from chatdata.templates.report import SECTION_BUILDERS, Section, check_template, mark_spans

from template_paths import TEMPLATE_DIR


def test_report_sections_mark_what_is_learned():
    sections = check_template(get_chat_template("qwen"))
    assert [s.title for s in sections] == ["template facts", "plain chat", "tool-calling chat", "reasoning chat",
                                           "reasoning chat (2)"]
    tools = sections[2]
    marked = mark_spans(tools.text, tools.spans)
    assert '«<tool_call>\n{"name": "lookup", "arguments": {"word": "Wqarg first"}}\n</tool_call><|im_end|>»' in marked
    assert "«Wqans both found.<|im_end|>»" in marked
    learned = "".join(tools.text[s:e] for s, e in tools.spans)
    assert "Wqtool" not in learned and "Wqusr" not in learned and "Wqsys" not in learned


def test_report_is_extensible(monkeypatch):
    extra = lambda ctx: [Section("prefix preserving", [f"eots {ctx.profile.eots}"])]  # noqa: E731
    monkeypatch.setattr("chatdata.templates.report.SECTION_BUILDERS", SECTION_BUILDERS + [extra])
    assert check_template(get_chat_template("chatml_format"))[-1].lines == ["eots ('<|im_end|>',)"]


def test_cli_check_template_file_and_options(capsys):
    assert main(["templates", "check", str(TEMPLATE_DIR / "Qwen-Qwen3-0.6B.jinja"), "--no-eot", "--no-reasoning"]) == 0
    out = capsys.readouterr().out
    assert "== tool-calling chat ==" in out and "== reasoning chat ==" in out
    assert "«Wqans two.»" in out and "Wqrsn field.\n</think>" in out  # reasoning shown, not marked
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_cli_check_errors_are_one_line(capsys):
    assert main(["templates", "check", "no-such-template"]) == 1
    err = capsys.readouterr().err
    assert "not a template name" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        main(["templates"])


def test_cli_check_tokenizer_folder(tokenizer_dir, capsys):
    assert main(["templates", "check", str(tokenizer_dir / "qwen2.5-instruct")]) == 0
    out = capsys.readouterr().out
    assert "end of turn: '<|im_end|>'" in out and "«Wqans one.<|im_end|>»" in out
