"""Shared helpers of the ``chatdata`` subcommands: errors, opening datasets and tokenizers."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import CLIError

__all__ = ["CLIError", "positive_int", "load_history", "load_tokenizer", "resolve_template", "say", "color_enabled",
           "plural", "check_output", "dataset_chunks", "check_not_inside_dataset"]


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts (``--chunk-size``, ``--max-length``, ...): an integer > 0, else
    a usage error (exit 2) saying so.

    Example:
        >>> positive_int("8192")
        8192
    """
    import argparse

    v = int_arg(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return v


def int_arg(text: str) -> int:
    """``text`` as an int for an argparse ``type``, else a usage error saying it is not one.

    Example:
        >>> int_arg("-3")
        -3
    """
    import argparse

    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def say(*args, **kwargs) -> None:
    """Print to stdout (flushed, so it interleaves well with progress on stderr)."""
    print(*args, **kwargs, flush=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in the right number, ``n`` with thousands separators.

    Example:
        >>> plural(1, "conversation"), plural(2_000, "conversation"), plural(0, "bad line")
        ('1 conversation', '2,000 conversations', '0 bad lines')
    """
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def check_output(out, overwrite: bool, *, kind: str = "folder", inputs=(), make_parents: bool = True) -> None:
    """The one overwrite rule of every subcommand: an existing output is replaced only with
    ``--overwrite``, and a folder only if it is empty or holds a chatdata dataset (never a folder
    of someone else's files). ``kind`` is ``"folder"`` or ``"file"``. The output must also be
    apart from the command's ``inputs`` (not one of them, not inside one, not holding one) and its
    folder writable (created by the command when ``make_parents``): checked before any work.

    Example:
        >>> import tempfile; check_output(tempfile.mkdtemp(), overwrite=False)  # empty: fine
    """
    from .paths import check_apart, check_writable

    given, out = str(out), Path(out)
    check_apart(out, inputs)
    from .paths import inside_dataset

    top = inside_dataset(out)
    if top is not None:  # writing there would break that dataset (replace its storage, or add to it)
        raise CLIError(f"{out} is inside the dataset {top}; writing there would damage it: choose a path outside it")
    if kind == "file":
        if given.endswith(("/", os.sep)):  # Path() would drop the slash and write a file of that name
            raise CLIError(f"{given} names a folder (it ends with '/'); give a file name")
        if out.is_dir():
            raise CLIError(f"{out} is a folder; give a file name")
        if out.exists() and not overwrite:
            raise CLIError(f"{out} already exists; pass --overwrite to replace it")
        check_writable(out, make_parents=make_parents)
        return
    if not out.exists():
        check_writable(out, make_parents=make_parents)
        return
    if not out.is_dir():
        raise CLIError(f"{out} exists and is a file; choose another output folder")
    if any(out.iterdir()):
        if (out / "manifest.json").is_file() and not (out / "meta.json").is_file():
            raise CLIError(f"{out} holds a sharded dataset (manifest.json), which this command does not replace; "
                           "choose another output folder (`chatdata import --shard-size N --overwrite` replaces "
                           "a sharded dataset)")
        if not (out / "meta.json").is_file():
            raise CLIError(f"{out} is a non-empty folder that is not a chatdata dataset; refusing to replace it")
        if not overwrite:
            raise CLIError(f"{out} already holds a dataset; pass --overwrite to replace it")
    check_writable(out, make_parents=make_parents)


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_output(plot, inputs=()) -> Path:
    """The file ``--plot`` draws into: its name must end in .png, .svg or .pdf (the format it is
    written in). It replaces an existing plot without ``--overwrite``, so any other name is
    refused: a plot never lands on a data file (``--plot chats.jsonl``) or takes a format its
    name does not say.

    Example:
        >>> check_plot_output("lengths.png").name
        'lengths.png'
    """
    if Path(str(plot)).suffix.lower() not in PLOT_SUFFIXES:
        raise CLIError(f"--plot {plot}: give a file name ending in {', '.join(PLOT_SUFFIXES)} "
                       "(the image format), e.g. --plot lengths.png")
    check_output(plot, True, kind="file", inputs=inputs, make_parents=False)
    return Path(plot)


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stdout
    return stream.isatty() and os.environ.get("NO_COLOR") is None and os.environ.get("TERM") != "dumb"


def check_not_inside_dataset(path) -> None:
    """Refuse a path that is part of a dataset (``ds/_storage``, ``ds/meta.json``, a token set's
    ``_values``), naming the dataset to pass instead (loading it gave its internal class's name).

    Example:
        >>> from chatdata import History
        >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("ds/")
        >>> check_not_inside_dataset("ds/_storage")
        Traceback (most recent call last):
        ...
        chatdata.cli.errors.CLIError: ds/_storage is part of the dataset ds (how it is stored inside), not a dataset; pass ds
    """
    from .paths import inside_dataset

    top = inside_dataset(path)
    if top is not None:
        if not Path(path).exists():
            raise CLIError(f"{path}: no such dataset; it would lie inside the dataset {top}: pass {top}")
        raise CLIError(f"{path} is part of the dataset {top} (how it is stored inside), not a dataset; pass {top}")


def load_history(path):
    """The History saved at ``path`` (by ``chatdata import`` or ``History.memmap``), lazily; for
    a sharded folder (``chatdata import --shard-size``) the lazy History over its shards
    (:func:`chatdata.open_dataset`), which indexes, slices and counts (``len``) as a History does."""
    from ..history import History
    from ..td import load_memmap
    from ..td import FormatError

    p = Path(path)
    check_not_inside_dataset(p)
    if not p.exists():
        raise CLIError(f"{path}: no such dataset (run `chatdata import SRC {path}` first)")
    if not p.is_dir():
        raise CLIError(f"{path} is a file, not a dataset folder (make one with `chatdata import {path} OUT`)")
    from ..io.sharded import is_sharded, open_dataset

    if is_sharded(p):
        try:
            ds = open_dataset(p)
        except (FormatError, ValueError) as err:
            raise CLIError(f"{path} is not a readable sharded dataset: {err}") from None
        if ds.kind not in ("History", None):
            raise CLIError(f"{path} is a sharded set of {ds.kind}, not of conversations "
                           "(sharded History datasets are made by `chatdata import --shard-size`)")
        return ds
    if not (p / "meta.json").exists():  # no dataset at all: say that, and how one is made
        from ..io.sharded import _UNCOMMITTED, uncommitted_shards
        from .paths import datasets_in

        if uncommitted_shards(p):
            raise CLIError(_UNCOMMITTED.format(p=path, manifest="manifest.json"))

        held = datasets_in(p)
        if held:  # a folder of outputs (chatdata demo --out): name what it holds
            raise CLIError(f"{path} is not a chatdata dataset but a folder holding datasets ("
                           f"{', '.join(str(d) for d in held)}); pass one of them")
        raise CLIError(f"{path} is not a chatdata dataset (no meta.json: it holds "
                       f"{'nothing' if not any(p.iterdir()) else 'other files'}); make one with "
                       f"`chatdata import SRC {path}`")
    try:
        obj = load_memmap(p)
    except (FormatError, FileNotFoundError) as err:
        raise CLIError(f"{path} is not a chatdata dataset: {err}") from None
    if not isinstance(obj, History):
        from ..td import RaggedTensorDict

        if isinstance(obj, RaggedTensorDict) and "input_ids" in set(obj.keys()):
            raise CLIError(f"{path} is a token set (made by `chatdata tokenize`), not a History dataset; give the "
                           "dataset it was made from (datasets are made by `chatdata import`)")
        raise CLIError(f"{path} holds a {type(obj).__name__}, not a History dataset "
                       "(datasets are made by `chatdata import`)")
    if obj.ndim != 2:
        obj = obj.unsqueeze(0) if obj.ndim == 1 else obj
    if obj.ndim != 2:
        raise CLIError(f"{path} holds a History of batch size {tuple(obj.batch_size)}, not a batch of conversations")
    return obj


def dataset_chunks(ds, size: int):
    """``(start, History)`` pieces of at most ``size`` consecutive conversations of what
    :func:`load_history` returned; a sharded dataset's pieces never cross a shard (no copies).

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": str(i)}] for i in range(5)])
        >>> [(a, c.batch_size[0]) for a, c in dataset_chunks(h, 2)]
        [(0, 2), (2, 2), (4, 1)]
    """
    if hasattr(ds, "iter_chunks"):
        start = 0
        for chunk in ds.iter_chunks(size):
            n = int(chunk.batch_size[0])
            if n:
                yield start, chunk
            start += n
        return
    n = len(ds)
    for a in range(0, n, size):
        yield a, ds[a:a + size]


def load_tokenizer(path):
    """A transformers tokenizer from a local folder (offline); the packaged Qwen2.5 one if None or
    its folder in the package (chatdata/data/qwen2.5-tokenizer, whose tokenizer.json is gzipped)."""
    import logging
    import warnings

    from ..data import DATA_DIR, sample_tokenizer_path

    if path is None or Path(path).resolve() == DATA_DIR / "qwen2.5-tokenizer":
        # the packaged folder holds tokenizer.json gzipped: its decompressed copy in the cache
        path = sample_tokenizer_path()
    p = Path(path)
    if not p.exists():
        raise CLIError(f"--tokenizer {path}: no such folder{_hub_id_hint(str(path))}")
    if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
        raise CLIError(f"--tokenizer {path}: not a tokenizer folder (no tokenizer.json or tokenizer_config.json)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception as err:  # transformers raises many types (OSError, ValueError, ...)
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CLIError(f"--tokenizer {path}: cannot load the tokenizer ({msg})") from None
    if not getattr(tok, "is_fast", False):
        raise CLIError(f"--tokenizer {path}: a fast (Rust) tokenizer is needed (tokenizer.json)")
    _check_vocabulary(tok, p)
    return tok


def _hub_id_hint(path: str) -> str:
    """For a missing ``--tokenizer`` spelt like a Hub model id (``Org/Name``): how to make the
    local folder the commands need (they never download).

    Example:
        >>> _hub_id_hint("Qwen/Qwen2.5-7B-Instruct")[:60]
        '; the commands read a local folder and never download: save '
        >>> _hub_id_hint("path/to/tok/"), _hub_id_hint("./tok")
        ('', '')
    """
    parts = path.split("/")
    if len(parts) != 2 or not all(parts) or path.startswith((".", "~")) or os.sep != "/" and os.sep in path:
        return ""
    if Path(parts[0]).exists():  # a folder here: a path with a typo, not a model id
        return ""
    return ("; the commands read a local folder and never download: save the Hub tokenizer once with "
            f"python -c \"from transformers import AutoTokenizer; AutoTokenizer.from_pretrained('{path}')"
            f".save_pretrained('{parts[1]}')\" and pass --tokenizer {parts[1]}")


_PROBE_TEXT = "Hello, world! 123"


def _check_vocabulary(tok, p: Path) -> None:
    """Refuse a tokenizer that cannot encode plain text. transformers builds one without a
    vocabulary from a folder that has ``tokenizer_config.json`` but no ``tokenizer.json``; it
    would turn every message into nothing but the template's special tokens."""
    ids = tok.encode(_PROBE_TEXT, add_special_tokens=False)
    if ids and "world" in tok.decode(ids).lower():  # lenient: normalisers may change case or spaces
        return
    hint = ""
    if (p / "tokenizer.json.gz").is_file():
        hint = f"; decompress it first: gunzip -k {p / 'tokenizer.json.gz'}"
    elif not (p / "tokenizer.json").is_file():
        hint = "; the folder has no tokenizer.json (copy it from the model's files)"
    raise CLIError(f"--tokenizer {p}: the tokenizer cannot encode text ({_PROBE_TEXT!r} gives {len(ids)} "
                   f"token{'s' if len(ids) != 1 else ''}, decoded {tok.decode(ids)!r}){hint}")


def resolve_template(name, tokenizer):
    """Template source: ``--template NAME`` (a bundled/registered name or a .jinja file), else
    the tokenizer's own template (or one registered for its model family). A tokenizer without
    one, a file that is not UTF-8 and a template that is not valid Jinja are one-line errors here,
    before any conversation is rendered."""
    from ..templates import get_chat_template, list_chat_templates, resolve_chat_template
    from ..templates.registry import template_name_for_model, unknown_name_hint

    if name is not None:
        if name.endswith(".jinja") or os.sep in name or (name not in list_chat_templates() and Path(name).is_file()):
            # a file in the working folder is read as ./NAME is, whatever its suffix (chat_template.txt)
            return checked_template(read_template_file(name, "--template"), f"--template {name}")
        if name not in list_chat_templates():
            raise CLIError(f"--template {name}: unknown template; {unknown_name_hint(name)} "
                           "(or give a path to a .jinja file)")
        return get_chat_template(name)
    where = f"--tokenizer {getattr(tokenizer, 'name_or_path', '') or 'the tokenizer'}"
    if not getattr(tokenizer, "chat_template", None) and template_name_for_model(tokenizer) is None:
        raise CLIError(f"{where} has no chat template; pass --template NAME (e.g. "
                       f"{', '.join(list_chat_templates()[:3])}) or --template FILE.jinja")
    try:
        return checked_template(resolve_chat_template(tokenizer), f"{where}: its chat template")
    except ValueError as err:
        raise CLIError(str(err)) from None


def read_template_file(path, flag: str) -> str:
    """The text of the template file ``path`` (given by ``flag``); a one-line error if it is missing,
    a folder or not UTF-8."""
    p = Path(path)
    if p.is_dir():
        raise CLIError(f"{flag} {path} is a folder; give a .jinja file")
    if not p.is_file():
        raise CLIError(f"{flag} {path}: no such file")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise CLIError(f"{flag} {path}: not a UTF-8 text file ({err.reason} at byte {err.start})") from None


def checked_template(source: str, what: str) -> str:
    """``source`` if it compiles as a chat template, else a one-line error naming ``what`` and the line.

    Example:
        >>> checked_template("{{ messages | length }}", "t")
        '{{ messages | length }}'
    """
    from ..templates import TemplateError
    from ..templates.jinja_env import compile_template

    try:
        compile_template(source)
    except TemplateError as err:
        line = getattr(err.__cause__, "lineno", None)
        raise CLIError(f"{what} is not a valid Jinja template{f' (line {line})' if line else ''}: "
                       f"{str(err).removeprefix('invalid chat template: ')}") from None
    return source


def load_tools(path):
    """Tool schemas (a JSON list) from ``--tools FILE``."""
    import json

    if path is None:
        return None
    try:
        tools = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CLIError(f"--tools {path}: no such file") from None
    except IsADirectoryError:
        raise CLIError(f"--tools {path} is a folder; give a JSON file (a list of tool schemas)") from None
    except OSError as err:
        raise CLIError(f"--tools {path}: cannot read it ({err.strerror or err})") from None
    except ValueError as err:
        raise CLIError(f"--tools {path}: not valid JSON ({err})") from None
    if not isinstance(tools, list):
        raise CLIError(f"--tools {path}: expected a JSON list of tool schemas")
    return tools
