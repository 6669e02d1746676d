"""``chatdata serve`` flags a user gets wrong: each is one line naming the flag, before anything
is written to --out (the command runs in-process through ``chatdata.cli.main``; nothing here
starts a server)."""
from __future__ import annotations

import shutil

import pytest

from chatdata.cli import main
from chatdata.data import sample_tokenizer_path
from chatdata.gateway import create_app


def serve(capsys, tmp_path, *flags, tokenizer=None, backend="http://127.0.0.1:9") -> str:
    args = ["serve", "--backend", backend, "--tokenizer", str(tokenizer or sample_tokenizer_path()),
            "--out", str(tmp_path / "out"), *flags]
    with pytest.raises(SystemExit) as exc:
        code = main(args)
        raise SystemExit(code)
    err = capsys.readouterr().err
    assert exc.value.code not in (0, None) and "Traceback" not in err and "internal error" not in err, err
    assert not (tmp_path / "out").exists(), "a refused start wrote to --out"
    return err


@pytest.mark.parametrize("url, words", [
    ("localhost:8001", "must start with http:// or https:// (e.g. http://localhost:8001)"),
    ("ftp://127.0.0.1:8001", "must start with http:// or https://"),
    ("http://", "has no host"),
    ("http://[bad", "cannot be parsed"),
    ("http://127.0.0.1:99999", "cannot be parsed"),
    ("http://127.0.0.1:8001?x=1", "no query"),
    ("http://127.0.0.1:8001/v1/chat/completions", "names the server's chat/completions endpoint: give the server "
                                                  "itself (http://127.0.0.1:8001/v1)"),
    ("http://127.0.0.1:8001/v1/models/", "names the server's models endpoint"),
])
def test_a_backend_url_that_cannot_be_reached_is_refused_at_start(capsys, tmp_path, url, words):
    """Before: the gateway said it was ready and answered every request with a 502."""
    err = serve(capsys, tmp_path, backend=url)
    assert "--backend" in err and words in err, err


def test_create_app_refuses_a_backend_url_without_scheme(tmp_path):
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        create_app("127.0.0.1:8001", sample_tokenizer_path(), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["70000", "-1"])
def test_a_port_out_of_range_is_a_usage_error(capsys, tmp_path, value):
    """Before: 'internal error: OverflowError: bind(): port must be 0-65535'."""
    err = serve(capsys, tmp_path, "--port", value)
    assert "--port" in err and "is not a port" in err, err


def test_max_tokens_zero_is_a_usage_error(capsys, tmp_path):
    err = serve(capsys, tmp_path, "--max-tokens", "0")
    assert "--max-tokens" in err and "must be > 0" in err, err


def test_chat_template_that_is_not_a_template(capsys, tmp_path):
    binary = tmp_path / "t.jinja"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    err = serve(capsys, tmp_path, "--chat-template", str(binary))  # before: a bare UnicodeDecodeError message
    assert f"--chat-template {binary}: not a UTF-8 text file" in err, err
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in %}", encoding="utf-8")
    err = serve(capsys, tmp_path, "--chat-template", str(broken))
    assert f"--chat-template {broken} is not a valid Jinja template" in err, err
    err = serve(capsys, tmp_path, "--chat-template", str(tmp_path))  # before: "no such file" for a folder
    assert "is a folder" in err, err


def test_a_tokenizer_folder_without_a_vocabulary_is_refused(capsys, tmp_path):
    """A folder with tokenizer_config.json but no tokenizer.json (here: only tokenizer.json.gz)
    loads in transformers as a tokenizer that encodes every text to no ids. Before, the gateway
    served with it: every message the agents sent was stored as nothing but the template's
    special tokens."""
    folder = tmp_path / "tok"
    shutil.copytree(sample_tokenizer_path(), folder)
    (folder / "tokenizer.json").unlink()
    err = serve(capsys, tmp_path, tokenizer=folder)
    assert f"--tokenizer {folder}: the tokenizer cannot encode text" in err, err
    err = serve(capsys, tmp_path, tokenizer=tmp_path)
    assert "not a tokenizer folder" in err, err


@pytest.mark.parametrize("setting, words", [
    ({"idle_timeout": 0}, "idle_timeout must be a positive number of seconds, got 0"),
    ({"idle_timeout": float("nan")}, "idle_timeout must be a positive number"),
    ({"timeout": -1.0}, "timeout must be a positive number"),
    ({"timeout": "600"}, "timeout must be a positive number"),
    ({"default_max_tokens": 0}, "default_max_tokens must be an integer >= 1"),
    ({"default_max_tokens": 8.5}, "default_max_tokens must be an integer >= 1"),
    ({"offload_chars": -1}, "offload_chars must be an integer >= 0"),
    ({"offload_chars": True}, "offload_chars must be an integer >= 0"),
    # every request was a 500 (a TypeError of the Conversation), or was rendered without its generation prompt
    ({"template_kwargs": {"tools": []}}, "template_kwargs may not set tools"),
    ({"template_kwargs": {"add_generation_prompt": False}}, "template_kwargs may not set add_generation_prompt"),
    ({"template_kwargs": {"messages": [], "tokenizer": 1}}, "template_kwargs may not set messages, tokenizer"),
    ({"template_kwargs": "enable_thinking=False"}, "template_kwargs must be a dict of template variables"),
    ({"template_kwargs": {1: True}}, "template_kwargs must be a dict of template variables"),
])
def test_create_app_refuses_settings_it_would_run_with_silently_wrong(tmp_path, setting, words):
    """(Refused before the tokenizer loads.) idle_timeout=0 stored every session right after each of its requests (every turn a new
    tree); NaN never stored an idle one; default_max_tokens=0 sent max_tokens 0 to the backend."""
    with pytest.raises(ValueError, match=words):
        create_app("http://127.0.0.1:9", sample_tokenizer_path(), tmp_path / "out", **setting)
    assert not (tmp_path / "out").exists()


def test_a_template_that_does_not_write_the_messages_is_refused(capsys, tmp_path):
    """A file that is plain text to Jinja (a README, a config) compiled, and every conversation
    rendered to the same prompt: the gateway served, and the agents' messages were lost."""
    readme = tmp_path / "README.md"
    readme.write_text("# My model\n\nUse it well.\n", encoding="utf-8")
    err = serve(capsys, tmp_path, "--chat-template", str(readme))
    assert "the chat template does not write the messages' text" in err, err
    ok = tmp_path / "ok.jinja"  # no role markers at all, but it writes the messages: served as before
    ok.write_text("{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    app = create_app("http://127.0.0.1:9", sample_tokenizer_path(), tmp_path / "ok-out", chat_template=ok.read_text())
    assert app.state.gateway.template == ok.read_text()


def test_create_app_refuses_a_tokenizer_folder_without_a_vocabulary(tmp_path):
    """The Python API's own probe (the CLI refuses the folder earlier, by its flag)."""
    folder = tmp_path / "tok"
    shutil.copytree(sample_tokenizer_path(), folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match=r"loses the messages' text .* it has no vocabulary"):
        create_app("http://127.0.0.1:9", str(folder), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_empty_host_and_a_port_in_use_are_said_before_loading(capsys, tmp_path):
    """--host '' (an unset "$HOST") listened on every interface; a port in use, or a host that is
    not this machine's, said 'another server there?' for either, after the tokenizer had loaded."""
    import socket

    err = serve(capsys, tmp_path, "--host", "")
    assert "--host is empty" in err, err
    err = serve(capsys, tmp_path, "--host", "192.0.2.1")  # TEST-NET-1: never an address of this machine
    assert "cannot listen on 192.0.2.1" in err and "is --host an address of this machine?" in err, err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        err = serve(capsys, tmp_path, "--port", str(port), tokenizer=tmp_path / "no-such-tokenizer")
    assert f"cannot listen on 127.0.0.1:{port}" in err and "another server is there?" in err, err


def test_create_app_refuses_an_out_that_is_a_file_or_a_foreign_folder(tmp_path):
    # was: create_app returned, and the server's startup then failed with a traceback
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        create_app("http://127.0.0.1:9", "no-such-tokenizer", tmp_path / "file")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="non-empty folder that chatdata serve did not write"):
        create_app("http://127.0.0.1:9", "no-such-tokenizer", tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_a_misspelt_chat_template_name_is_refused_before_the_tokenizer_loads(capsys, tmp_path):
    """Before: the name was looked up after the tokenizer loaded (seconds), in the engine's words
    ("Unknown chat template name"), without the flag."""
    err = serve(capsys, tmp_path, "--chat-template-name", "lama3", tokenizer=tmp_path / "no-such-tokenizer")
    assert "--chat-template-name lama3: unknown template; did you mean 'llama3' or 'llama'?" in err, err
