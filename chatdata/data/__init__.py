"""Packaged sample data: realistic chat conversations and an offline Qwen2.5 tokenizer.

Everything here works without network access::

    >>> from chatdata.data import load_sample_chats, load_sample_tokenizer, sample_tools
    >>> chats = load_sample_chats()               # list of OpenAI-format message lists
    >>> len(chats)
    300
    >>> tok = load_sample_tokenizer()             # Qwen2.5 tokenizer from the packaged copy
    >>> text = tok.apply_chat_template(chats[0], tools=sample_tools(), tokenize=False)

Files (next to this module):

- ``sample_chats.jsonl.gz``: 300 conversations, one ``{"messages": [...]}`` per line,
  made by ``tools/make_sample_chats.py`` in the repository (deterministic; run it to
  regenerate; it is not part of the installed package).
- ``sample_tools.json``: JSON schemas of the tools the sample conversations call
  (``get_weather``, ``search_flights``, ``lookup_order``, ``track_package``,
  ``convert_currency``), for ``apply_chat_template(..., tools=...)``.
- ``qwen2.5-tokenizer/``: ``tokenizer.json.gz`` + ``tokenizer_config.json`` of
  Qwen2.5-Instruct (Apache-2.0, see ``LICENSE-NOTICE``). ``tokenizer.json`` is
  decompressed once into a cache folder by :func:`sample_tokenizer_path`.

The cache folder is ``$CHATDATA_CACHE/qwen2.5-tokenizer-<hash>`` when the
``CHATDATA_CACHE`` environment variable is set, else
``$XDG_CACHE_HOME/chatdata/qwen2.5-tokenizer-<hash>`` (default
``~/.cache/chatdata/...``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR",
    "TOKENIZER_SHA256",
    "sample_chats_path",
    "load_sample_chats",
    "sample_tools",
    "sample_tokenizer_path",
    "load_sample_tokenizer",
    "cache_root",
]

DATA_DIR = Path(__file__).resolve().parent
_TOKENIZER_SRC = DATA_DIR / "qwen2.5-tokenizer"

#: sha256 of each file of the extracted tokenizer folder (``tokenizer.json`` is the
#: decompressed content of the packaged ``tokenizer.json.gz``).
TOKENIZER_SHA256 = {
    "tokenizer.json": "37472ee9c0f2fa9d29c766dbb5e2ec0c19b1377f00b78737a82cdd60637a9c60",
    "tokenizer_config.json": "59ac50e3336b694066f3234821578101588d693ff38ba547c8303b4782bc321a",
}
_TOKENIZER_DIRNAME = "qwen2.5-tokenizer-" + TOKENIZER_SHA256["tokenizer.json"][:16]
_CHUNK = 1 << 20


# --------------------------------------------------------------------------------------
# sample chats
# --------------------------------------------------------------------------------------


def sample_chats_path() -> Path:
    """Path of the packaged ``sample_chats.jsonl.gz`` (gzip-compressed JSON lines).

    Example::

        >>> import gzip, json
        >>> with gzip.open(sample_chats_path(), "rt", encoding="utf-8") as f:
        ...     first = json.loads(next(f))
        >>> sorted(first)
        ['messages']
    """
    return DATA_DIR / "sample_chats.jsonl.gz"


def load_sample_chats() -> list[list[dict[str, Any]]]:
    """Load the sample conversations as a list of message lists (OpenAI format).

    Messages have ``role`` (``system``/``user``/``assistant``/``tool``) and a string
    ``content``; assistant messages that call tools also carry ``tool_calls`` as
    ``[{"type": "function", "function": {"name": ..., "arguments": {...}}}]`` and the
    following ``tool`` messages hold the tool's JSON output as a string.

    Example::

        >>> chats = load_sample_chats()
        >>> chats[0][0]["role"] in {"system", "user"}
        True
    """
    with gzip.open(sample_chats_path(), "rt", encoding="utf-8") as f:
        return [json.loads(line)["messages"] for line in f if line.strip()]


def sample_tools() -> list[dict[str, Any]]:
    """JSON schemas (OpenAI ``tools`` format) of the tools called in the sample chats.

    Example::

        >>> [t["function"]["name"] for t in sample_tools()][:2]
        ['get_weather', 'search_flights']
    """
    return json.loads((DATA_DIR / "sample_tools.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------------------


def cache_root() -> Path:
    """The chatdata cache folder: ``$CHATDATA_CACHE``, else ``$XDG_CACHE_HOME/chatdata``,
    else ``~/.cache/chatdata``. Not created by this function."""
    env = os.environ.get("CHATDATA_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "chatdata"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_valid(folder: Path) -> bool:
    """True when ``folder`` holds every tokenizer file with the recorded sha256."""
    try:
        return all(_sha256_file(folder / name) == sha for name, sha in TOKENIZER_SHA256.items())
    except OSError:
        return False


def _write_synced(dst: Path, chunks) -> str:
    h = hashlib.sha256()
    with open(dst, "wb") as out:
        for chunk in chunks:
            h.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return h.hexdigest()


def _read_chunks(f):
    return iter(lambda: f.read(_CHUNK), b"")


def _extract_to(folder: Path) -> None:
    """Decompress/copy the packaged tokenizer files into ``folder``, checking sha256."""
    with gzip.open(_TOKENIZER_SRC / "tokenizer.json.gz", "rb") as f:
        got = {"tokenizer.json": _write_synced(folder / "tokenizer.json", _read_chunks(f))}
    with open(_TOKENIZER_SRC / "tokenizer_config.json", "rb") as f:
        got["tokenizer_config.json"] = _write_synced(folder / "tokenizer_config.json", _read_chunks(f))
    shutil.copyfile(_TOKENIZER_SRC / "LICENSE-NOTICE", folder / "LICENSE-NOTICE")
    bad = [name for name, sha in TOKENIZER_SHA256.items() if got[name] != sha]
    if bad:
        raise RuntimeError(
            f"packaged tokenizer files {bad} in {_TOKENIZER_SRC} do not match their recorded "
            "sha256; the chatdata installation is corrupted, reinstall it"
        )


def _discard(folder: Path) -> None:
    """Move ``folder`` out of the way atomically, then delete it (no-op if it is gone)."""
    trash = folder.with_name(f".{folder.name}.stale-{uuid.uuid4().hex}")
    try:
        os.rename(folder, trash)
    except FileNotFoundError:
        return
    except OSError:
        if folder.is_file() or folder.is_symlink():
            folder.unlink(missing_ok=True)
            return
        raise
    shutil.rmtree(trash, ignore_errors=True)


def sample_tokenizer_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Folder holding the Qwen2.5 tokenizer (``tokenizer.json``, ``tokenizer_config.json``).

    On first use the packaged ``tokenizer.json.gz`` is decompressed into
    ``<cache_dir>/qwen2.5-tokenizer-<hash>`` (``cache_dir`` defaults to
    :func:`cache_root`). Later calls re-use it after checking the files' sha256 against
    :data:`TOKENIZER_SHA256`; a cache that fails the check (truncated, edited, missing
    file) is replaced by a fresh extraction.

    Extraction writes to a temporary folder next to the target and renames it into
    place, so concurrent processes never see a half-written folder: when two race, one
    rename wins and the other process uses the winner's (verified) copy.

    Example::

        >>> p = sample_tokenizer_path()
        >>> sorted(x.name for x in p.iterdir())
        ['LICENSE-NOTICE', 'tokenizer.json', 'tokenizer_config.json']
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    final = root / _TOKENIZER_DIRNAME
    if _is_valid(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
        try:
            _extract_to(tmp)
            os.chmod(tmp, 0o755)
            if final.exists() or final.is_symlink():
                if _is_valid(final):  # another process finished first
                    return final
                _discard(final)  # corrupted cache
            try:
                os.rename(tmp, final)
            except OSError:
                # target appeared meanwhile (a concurrent extraction won the race)
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if _is_valid(final):
            return final
    raise RuntimeError(f"could not set up the sample tokenizer cache in {final}")


def load_sample_tokenizer(cache_dir: str | os.PathLike | None = None, **kwargs: Any):
    """The packaged Qwen2.5 tokenizer as a ``transformers`` tokenizer, loaded offline.

    ``kwargs`` go to ``AutoTokenizer.from_pretrained`` (``local_files_only=True`` is
    always set, so no network access is attempted).

    Example::

        >>> tok = load_sample_tokenizer()
        >>> tok.apply_chat_template([{"role": "user", "content": "Bonjour 👋"}], tokenize=False)
        '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. ...'
    """
    from transformers import AutoTokenizer

    kwargs["local_files_only"] = True
    return AutoTokenizer.from_pretrained(str(sample_tokenizer_path(cache_dir)), **kwargs)
