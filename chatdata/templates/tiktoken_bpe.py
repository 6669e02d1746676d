"""A tiktoken encoder that gives exactly a Hugging Face byte-level BPE tokenizer's ids, when one can.

tiktoken (OpenAI's BPE library, optional: ``pip install chatdata[fast]``) encodes byte-level
BPE several times faster than ``tokenizers``. Many Hugging Face tokenizers are byte-level BPE
vocabularies that came from tiktoken in the first place (Qwen2/2.5/3, Llama 3, Mistral's tekken,
DeepSeek, ...). :func:`tiktoken_bpe_for` rebuilds such a tokenizer as a ``tiktoken.Encoding``:

- the mergeable ranks are the model's vocabulary, each token's byte-level spelling turned back
  into bytes, with the token id as its rank;
- the split pattern is the pre-tokenizer's regex (``Split`` + ``ByteLevel(use_regex=False)``, or
  ``ByteLevel(use_regex=True)`` with its own pattern);
- the added tokens (special or not) are tiktoken's special tokens, all allowed, so they are split
  out of any text as ``tokenizers`` does;
- an NFC normalizer is honoured by encoding only text that is already NFC (other text goes to
  the Hugging Face tokenizer, see :meth:`TiktokenBPE.supports`).

It gives up (returns None, and the caller keeps the Hugging Face path) when anything is not
representable: another model or normalizer, BPE dropout, byte fallback, a subword prefix,
added tokens with ``lstrip``/``rstrip``/``single_word``, added tokens of which one is a
prefix of another (or, when some are ``normalized`` and some not, can overlap another), ``split_special_tokens``, offsets trimmed by the post-processor, a
pattern tiktoken's regex engine refuses -- or a probe text (every added token among words,
whitespace runs, digits, contractions, many scripts and a sweep of the Unicode planes) whose
ids differ from the tokenizer's own. Hugging Face stays the reference: this is a verified
accelerator, never a replacement.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> bpe = tiktoken_bpe_for(tok)
    >>> text = "<|im_start|>user\\nHéllo wörld 123<|im_end|>"
    >>> bpe.encode(text) == tok.encode(text, add_special_tokens=False)
    True
"""
from __future__ import annotations

import json
import os
import re
import unicodedata
import weakref
from typing import Any, Sequence

import numpy as np

from .backend import rust_backend, unpadded

__all__ = ["TiktokenBPE", "tiktoken_bpe_for", "why_not_tiktoken", "byte_level_chars", "encode_threads", "twin_allowed"]

# the pattern of tokenizers' ByteLevel pre-tokenizer with use_regex=True (GPT-2's)
_BYTE_LEVEL_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def byte_level_chars() -> dict[str, int]:
    """The byte-level alphabet: the printable character that stands for each byte in a
    byte-level BPE vocabulary (printable Latin-1 bytes stand for themselves, the others are
    shifted past U+00FF in byte order).

    Example:
        >>> chars = byte_level_chars()
        >>> chars["a"], chars["Ġ"], len(chars)
        (97, 32, 256)
    """
    kept = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, shifted = {}, 0
    for b in range(256):
        if b in kept:
            out[chr(b)] = b
        else:
            out[chr(256 + shifted)] = b
            shifted += 1
    return out


def _state(component) -> Any:
    return None if component is None else json.loads(component.__getstate__())


def _pattern_of(pre: Any) -> tuple[str | None, str]:
    """(regex, '') of a byte-level pre-tokenizer, or (None, why not)."""
    if pre is None:
        return None, "no pre-tokenizer (not byte-level BPE)"
    steps = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
    if len(steps) == 1 and steps[0].get("type") == "ByteLevel":
        b = steps[0]
        if b.get("add_prefix_space") or not b.get("use_regex", True):
            return None, "ByteLevel pre-tokenizer with add_prefix_space or without its regex"
        return _BYTE_LEVEL_PATTERN, ""
    if len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel":
        split, b = steps
        regex = (split.get("pattern") or {}).get("Regex")
        if regex is None or split.get("behavior") != "Isolated" or split.get("invert"):
            return None, "Split pre-tokenizer that is not an isolated regex"
        if b.get("add_prefix_space") or b.get("use_regex"):
            return None, "ByteLevel step with add_prefix_space or its own regex after a Split"
        return regex, ""
    return None, f"pre-tokenizer {[s.get('type') for s in steps]} is not Split + ByteLevel"


def _normalizer_ok(norm: Any) -> tuple[bool | None, str]:
    """(needs NFC, '') or (None, why not)."""
    if norm is None:
        return False, ""
    steps = norm["normalizers"] if norm.get("type") == "Sequence" else [norm]
    kinds = [s.get("type") for s in steps]
    if not kinds:
        return False, ""
    if kinds == ["NFC"]:
        return True, ""
    return None, f"normalizer {kinds} (only none or NFC are representable)"


def _offsets_trimmed(post: Any) -> bool:
    if post is None:
        return False
    steps = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    return any(s.get("type") in ("ByteLevel", "RobertaProcessing") and s.get("trim_offsets") for s in steps)


def _prefix_clash(tokens: Sequence[str]) -> str | None:
    ordered = sorted(tokens)
    for a, b in zip(ordered, ordered[1:]):
        if b.startswith(a):
            return f"the added token {a!r} is a prefix of {b!r}"
    return None


def _trie_pattern(words: Sequence[str]) -> str:
    """A regex matching exactly ``words`` (no word a prefix of another), factored as a trie so
    that a scan tries one branch per character instead of every word."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if "" in node or not alts:
            return ""  # words are prefix-free: a word's end has no children
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return emit(trie)


def _overlap(tokens: Sequence[str]) -> str | None:
    """Where an added token's end could be another's start (``tokenizers`` matches added tokens
    with ``normalized=False`` before the others, tiktoken all at once: the cuts agree unless two
    can overlap)."""
    prefixes = {t[:i] for t in tokens for i in range(1, len(t))}
    for t in tokens:
        for i in range(1, len(t)):
            if t[i:] in prefixes:
                return f"the added token {t!r} can overlap another one"
    return None


class TiktokenBPE:
    """A ``tiktoken.Encoding`` checked to give a Hugging Face tokenizer's ids, plus what the
    mask engine needs: ``char_widths[id]``, the number of characters each token starts (UTF-8
    lead bytes; an added token counts its characters), so that token ``t`` of a text ends at
    character ``cumsum(char_widths[ids])[t]``.

    Build it with :func:`tiktoken_bpe_for`.

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> bpe = tiktoken_bpe_for(load_sample_tokenizer())
        >>> bpe.encode("<|im_end|>\\n"), bpe.encode_array("hi").tolist(), bpe.encode_joined(["a", "b"]).tolist()
        ([151645, 198], [6023], [64, 151645, 65])
        >>> bpe.supports("café"), bpe.supports("cafe\\u0301"), bpe.decode([9707, 151645])
        (True, False, 'Hello<|im_end|>')
    """

    def __init__(self, encoding, char_widths: np.ndarray, nfc: bool, separator: str) -> None:
        self.encoding = encoding
        self.char_widths = char_widths
        self.nfc = nfc
        self.separator = separator  # an added token: joins texts without any merge across them
        self.separator_id = encoding.encode_single_token(separator)
        # the added tokens, longest spelling first at each place (they are prefix-free)
        self.special_re = re.compile("(" + _trie_pattern(list(encoding._special_tokens)) + ")")
        self._only_separator = {separator}
        self.piece_cache: dict | None = None  # segment -> ids, filled by the splice engine
        self.template_ok: dict[str, bool] = {}  # template -> the splice engine agreed with the full encode
        self.decodes_exactly = False  # set by tiktoken_bpe_for: decode() equals the tokenizer's (ByteLevel decoder)
        self.plain = None  # set by tiktoken_bpe_for: the same ids from a pattern without lookahead (tiktoken_cuts)

    def supports(self, text: str) -> bool:
        """Whether ``text`` encodes here exactly as in the tokenizer (not: text the NFC
        normalizer would change).
        """
        return not self.nfc or text.isascii() or unicodedata.is_normalized("NFC", text)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (added tokens split out, no special tokens added). The caller
        checks :meth:`supports` first.
        """
        found = set(self.special_re.findall(text))  # tiktoken copies the allowed set per call: keep it small
        return self.encoding.encode(text, allowed_special=found, disallowed_special=())

    def encode_array(self, text: str) -> np.ndarray:
        """:meth:`encode` as a 1-D int64 numpy array (no Python int per id)."""
        found = set(self.special_re.findall(text))
        return self.encoding.encode_to_numpy(text, allowed_special=found, disallowed_special=()).astype(np.int64)

    def encode_joined(self, segments: Sequence[str]) -> np.ndarray:
        """The ids of ``segments`` -- texts holding no added token -- laid end to end with
        :attr:`separator` between them (one call into tiktoken, without the GIL), as int64.
        """
        joined = self.separator.join(segments)
        if self.plain is not None:  # the fast regex engine, cut where the lookahead would cut
            return self.plain.encode_joined(joined)
        return self.encoding.encode_to_numpy(joined, allowed_special=self._only_separator,
                                             disallowed_special=()).astype(np.int64)

    def decode(self, ids: Sequence[int]) -> str | None:
        """The text of ``ids`` when their bytes are valid UTF-8, else None (the tokenizer's own
        decode then decides how to replace the broken bytes).
        """
        try:
            return self.encoding.decode_bytes(ids).decode("utf-8")
        except (UnicodeDecodeError, KeyError, ValueError, OverflowError):  # unknown or negative ids too
            return None


def twin_allowed() -> bool:
    """False when the environment variable ``CHATDATA_SPLICE`` is ``0``: the switch that sends
    masks (the splice engine) and rollouts back to the Hugging Face encode, to compare or to
    rule the twin out.

    Example:
        >>> twin_allowed() == (os.environ.get("CHATDATA_SPLICE", "1") != "0")
        True
    """
    return os.environ.get("CHATDATA_SPLICE", "1") != "0"


def encode_threads() -> int:
    """Threads for encoding: the usable cores (at most 8), or 1 when ``TOKENIZERS_PARALLELISM``
    is false (the switch Hugging Face users already set in forked workers).

    Example:
        >>> encode_threads() >= 1
        True
    """
    if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("0", "false", "no", "off"):
        return 1
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(8, n))


# -- building and checking ------------------------------------------------------------------
def _probe_texts(added: Sequence[str]) -> list[str]:
    """Texts whose ids must agree between both encoders before the tiktoken one is trusted."""
    words = ("Hello wörld! I'm here, YOU'LL see: it'S fine; they'd ſ've 'LL 're. naïve café über Ærø ǅemal "
             "ΣΑΣ σας Ωμέγα данные Привет мир 日本語のテキスト 中文句子。한국어 텍스트 العربية हिन्दी ภาษาไทย "
             "١٢٣ ⅫⅣ ²³ ½ 0.5 3.14159 1,000,000 12345678901234 x2y3z4 a1b2 ∑∫√ ≤≥ «quotes» “curly” ‘single’ "
             "👋🏽 👨‍👩‍👧 🇫🇷 ✓ ♥ def f(x):\n    return x**2  # comment\n\n\n{\"a\": [1, 2.5e-3, null]} "
             "<div class=\"x\">&amp;</div> https://example.com/a/b?c=d&e=f#g C:\\path\\to\\file.txt "
             "--- *** ___ ### !!! ??? ... ;; :: ,, '' \"\" `` ~~ ^^ || \\\\ // ")
    spaces = (" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \n \n", "\u00a0", "\u2003", "\u3000",
              "\u200b", "\ufeff", "\u180e", "\u2028", "\u2029", "\x0b", "\x0c", "\x85", "\u1680", "\u202f")
    out = [words, words.upper(), words.lower(), "a" * 300, " " * 70 + "x", "\n" * 9 + "y", "9" * 40, "é" * 50]
    out += [f"x{s}y{s}{s}Z{s}1{s}!{s}" for s in spaces]
    sweep = [chr(c) for c in range(0x20, 0x30000, 97) if not 0xD800 <= c < 0xE000]
    out += [" ".join(sweep[i:i + 400]) for i in range(0, len(sweep), 400)]
    out += ["".join(sweep[i:i + 400]) for i in range(0, len(sweep), 400)]
    out += ["".join(chr(c) for c in range(0x20, 0x250))]
    for i, tok in enumerate(added):
        pad = spaces[i % len(spaces)]
        out.append(f"{tok}word{pad}{tok}{pad}{tok}\n\n{tok}Hello{tok} 12{tok}{tok}é{pad}")
    return out


def _build(tokenizer) -> tuple[TiktokenBPE | None, str]:
    try:
        import tiktoken
    except ImportError:
        return None, "tiktoken is not installed (pip install chatdata[fast])"
    backend = rust_backend(tokenizer)
    if backend is None or not hasattr(backend, "get_added_tokens_decoder"):
        return None, "not a fast (Rust) Hugging Face tokenizer"
    if getattr(backend, "encode_special_tokens", False) or getattr(tokenizer, "split_special_tokens", False):
        return None, "split_special_tokens is set"
    model = backend.model
    if type(model).__name__ != "BPE":
        return None, f"model {type(model).__name__} is not BPE"
    if model.dropout or model.byte_fallback or model.continuing_subword_prefix or model.end_of_word_suffix:
        return None, "BPE with dropout, byte fallback or a subword prefix/suffix"
    nfc, why = _normalizer_ok(_state(backend.normalizer))
    if nfc is None:
        return None, why
    pattern, why = _pattern_of(_state(backend.pre_tokenizer))
    if pattern is None:
        return None, why
    if _offsets_trimmed(_state(backend.post_processor)):
        return None, "the post-processor trims offsets (masks would differ at spaces)"
    added = backend.get_added_tokens_decoder()
    for tid, tok in added.items():
        if tok.lstrip or tok.rstrip or tok.single_word:
            return None, f"added token {tok.content!r} has lstrip/rstrip/single_word"
    specials = {tok.content: tid for tid, tok in added.items()}
    if not specials:
        return None, "no added token to join texts with"
    clash = _prefix_clash(list(specials))
    if clash is None and len({tok.normalized for tok in added.values()}) > 1:
        clash = _overlap(list(specials))  # two matching passes: the same cuts only if no two can overlap
    if clash:
        return None, clash
    chars = byte_level_chars()
    vocab = {s: tid for s, tid in backend.get_vocab(with_added_tokens=False).items() if tid not in added}
    strange = set("".join(vocab)) - chars.keys()
    if strange:
        return None, f"vocabulary characters {sorted(strange)[:5]} are not byte-level"
    to_latin1 = {ord(c): b for c, b in chars.items()}  # each byte-level character -> its byte
    ranks = {s.translate(to_latin1).encode("latin-1"): tid for s, tid in vocab.items()}
    if len(ranks) != len(vocab) or any(bytes([b]) not in ranks for b in range(256)):
        return None, "the vocabulary does not hold every single byte once"
    try:
        encoding = tiktoken.Encoding(f"chatdata-{id(backend)}", pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens=specials)
    except Exception as err:  # noqa: BLE001 - tiktoken's regex engine refused the pattern
        return None, f"tiktoken cannot build it: {err}"
    size = max(max(ranks.values()), max(specials.values())) + 1
    widths = np.zeros(size, dtype=np.int64)
    spellings = list(ranks)
    raw = np.frombuffer(b"".join(spellings), dtype=np.uint8)
    starts = np.zeros(len(spellings), dtype=np.int64)
    np.cumsum(np.fromiter(map(len, spellings), dtype=np.int64, count=len(spellings))[:-1], out=starts[1:])
    lead = ((raw & 0xC0) != 0x80).astype(np.int64)  # UTF-8 lead bytes: one per character started
    widths[np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))] = np.add.reduceat(lead, starts)
    for content, tid in specials.items():
        widths[tid] = len(content)
    separator = min(specials, key=lambda s: (len(s), s))
    bpe = TiktokenBPE(encoding, widths, nfc, separator)
    probes = [unicodedata.normalize("NFC", t) if nfc else t for t in _probe_texts(list(specials))]
    encoded = unpadded(backend).encode_batch(probes, add_special_tokens=False)
    for text, enc in zip(probes, encoded):
        if bpe.encode(text) != enc.ids:
            return None, f"ids differ from the tokenizer's on the probe text {text[:60]!r}"
    bpe.plain = _checked_plain(tiktoken, bpe, pattern, ranks, specials, probes)
    decoder = _state(backend.decoder)
    bpe.decodes_exactly = (decoder is not None and decoder.get("type") == "ByteLevel" and all(
        bpe.decode(enc.ids) == backend.decode(enc.ids, skip_special_tokens=False) for enc in encoded[:8]))
    return bpe, ""


def _checked_plain(tiktoken, bpe: TiktokenBPE, pattern: str, ranks: dict, specials: dict, probes: list[str]):
    """The lookahead-free encoder of :mod:`.tiktoken_cuts`, if it gives the twin's ids on every
    probe text cut at the added tokens, else None."""
    from .tiktoken_cuts import lookahead_free

    plain = lookahead_free(tiktoken, f"chatdata-plain-{id(bpe)}", pattern, ranks, specials, bpe.separator)
    if plain is None:
        return None
    segments = [seg for text in probes for seg in bpe.special_re.split(text)[::2]]
    joined = bpe.separator.join(segments)
    want = bpe.encoding.encode_to_numpy(joined, allowed_special=bpe._only_separator, disallowed_special=())
    return plain if np.array_equal(plain.encode_joined(joined), want.astype(np.int64)) else None


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _key(tokenizer) -> tuple:
    """What the twin was built from, except the vocabulary itself (its size stands for it): a
    normalizer, pre-tokenizer, post-processor or decoder set on the tokenizer later, or BPE
    dropout switched on, changes the key and the twin is rebuilt (or refused). A few us."""
    backend = rust_backend(tokenizer)
    if backend is None:
        return (None,)
    parts = [getattr(backend, name, None) for name in ("normalizer", "pre_tokenizer", "post_processor", "decoder")]
    model = getattr(backend, "model", None)
    return (id(backend), backend.get_vocab_size(with_added_tokens=True), getattr(backend, "encode_special_tokens", None),
            bool(getattr(tokenizer, "split_special_tokens", False)),
            *(None if c is None else c.__getstate__() for c in parts),
            type(model).__name__, *(getattr(model, a, None) for a in ("dropout", "byte_fallback", "continuing_subword_prefix",
                                                                      "end_of_word_suffix")))


def _lookup(tokenizer) -> tuple[TiktokenBPE | None, str]:
    try:
        hit = _CACHE.get(tokenizer)
    except TypeError:  # not weak-referenceable: no cache
        return _build(tokenizer)
    key = _key(tokenizer)
    if hit is None or hit[0] != key:  # new, or tokens were added since
        hit = (key, *_build(tokenizer))
        _CACHE[tokenizer] = hit
    return hit[1], hit[2]


def tiktoken_bpe_for(tokenizer) -> TiktokenBPE | None:
    """The verified tiktoken twin of ``tokenizer`` (cached per tokenizer; rebuilt when tokens
    are added or its normalizer, pre-tokenizer, post-processor, decoder or BPE dropout
    change), or None when it has none (see the module docstring; :func:`why_not_tiktoken`
    says why).

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> tok = load_sample_tokenizer()
        >>> tiktoken_bpe_for(tok) is not None, why_not_tiktoken(tok)
        (True, '')
    """
    return _lookup(tokenizer)[0]


def why_not_tiktoken(tokenizer) -> str:
    """Why ``tokenizer`` has no tiktoken twin ('' when it has one).

    Example:
        >>> why_not_tiktoken(object())
        'not a fast (Rust) Hugging Face tokenizer'
    """
    return _lookup(tokenizer)[1]
