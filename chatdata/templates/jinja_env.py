"""The jinja2 environment chat templates run in, configured like transformers' one.

Sandboxed (``ImmutableSandboxedEnvironment``), ``trim_blocks`` and ``lstrip_blocks``, the
``loopcontrols`` extension, a ``tojson`` filter without HTML escaping and with the signature
``tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)``,
``raise_exception(msg)`` raising :class:`TemplateError`, ``strftime_now(fmt)``, restricted
``dict`` / ``namespace`` globals, and the ``{% generation %}...{% endgeneration %}`` tag whose
character spans are recorded while a tracker is active (see :func:`generation_tracker`).
Compiled templates are cached by their source string.
"""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.runtime
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateError

_state = threading.local()


class _Tracker:
    """Running output of one render, so ``{% generation %}`` can know where it is."""

    __slots__ = ("blocks", "seen", "length", "spans")

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.seen = 0  # number of blocks already added to ``length``
        self.length = 0
        self.spans: list[tuple[int, int]] = []

    def position(self) -> int:
        blocks = self.blocks
        for i in range(self.seen, len(blocks)):
            self.length += len(blocks[i])
        self.seen = len(blocks)
        return self.length


class GenerationExtension(jinja2.ext.Extension):
    """``{% generation %}body{% endgeneration %}``: renders ``body`` and records its span."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        text = caller()
        tracker = getattr(_state, "tracker", None)
        if tracker is not None:
            start = tracker.position()
            tracker.spans.append((start, start + len(text)))
        return text


@contextmanager
def generation_tracker():
    """Activate span recording for renders done (via ``Template.generate``) in this block."""
    if getattr(_state, "tracker", None) is not None:
        raise RuntimeError("generation tracker is already active in this thread")
    tracker = _Tracker()
    _state.tracker = tracker
    try:
        yield tracker
    finally:
        _state.tracker = None


def _raise_exception(message):
    raise TemplateError(message)


class JSONCachedDict(dict):
    """A dict whose ``tojson`` text is made once per set of options: the tool schemas a renderer
    owns are the same in every render (a rollout renders them at every turn). Only
    :func:`json_cached` makes them, as private copies that nothing changes afterwards (the
    sandbox refuses every mutating method). A copy or a pickle of one is a plain dict (no cache
    to go stale when the copy is changed)."""

    __slots__ = ("_json_texts",)

    def __reduce_ex__(self, protocol):
        return dict, (dict(self),)


class JSONCachedList(list):
    """A list whose ``tojson`` text is made once per set of options (see :class:`JSONCachedDict`)."""

    __slots__ = ("_json_texts",)

    def __reduce_ex__(self, protocol):
        return list, (list(self),)


_JSON_SCALARS = (str, int, float, bool, type(None))


def _plain_json(value) -> bool:
    """Whether ``value`` is made of exactly dict / list / tuple / str / int / float / bool / None
    (no subclass, no other object a caller could still change or that prints itself)."""
    t = type(value)
    if t in _JSON_SCALARS:
        return True
    if t is dict:
        return all(type(k) in _JSON_SCALARS and _plain_json(v) for k, v in value.items())
    if t is list or t is tuple:
        return all(_plain_json(v) for v in value)
    return False


def _cached_copy(value):
    if type(value) is dict:
        out = JSONCachedDict((k, _cached_copy(v)) for k, v in value.items())
    elif type(value) is list:
        out = JSONCachedList(_cached_copy(v) for v in value)
    elif type(value) is tuple:  # immutable: kept a tuple, its dicts and lists copied
        return tuple(_cached_copy(v) for v in value)
    else:
        return value
    out._json_texts = {}
    return out


def json_cached(value):
    """A private copy of ``value`` with every dict and list made a ``JSONCached*`` one, when
    ``value`` is plain JSON data (exactly dict / list / tuple / str / int / float / bool / None); else
    ``value`` itself, uncached. The copy is a snapshot: later changes to ``value`` do not reach it.

    Example:
        >>> tools = json_cached([{"name": "f"}])
        >>> _tojson(tools), _tojson(tools[0], indent=2) == '{\\n  "name": "f"\\n}'
        ('[{"name": "f"}]', True)
        >>> from collections import OrderedDict
        >>> type(json_cached([OrderedDict(name="f")])).__name__  # not plain: kept, never cached
        'list'
    """
    return _cached_copy(value) if _plain_json(value) else value


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    texts = getattr(x, "_json_texts", None) if type(x) is JSONCachedDict or type(x) is JSONCachedList else None
    if texts is not None:
        try:
            key = (ensure_ascii, indent, None if separators is None else tuple(separators), sort_keys)
            text = texts.get(key)
        except TypeError:  # unhashable options: json.dumps below says what is wrong with them
            key = text = None
        if text is None:
            text = json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
            if key is not None:
                texts[key] = text
        return text
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


class _Dict:
    """``dict(...)`` for templates, without exposing the ``dict`` type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """A jinja namespace refusing underscore-prefixed attribute names."""

    def __init__(*args, **kwargs):  # noqa: N805 - same trick as jinja's Namespace
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for key in attrs:
            _Namespace._check(key)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, got {name!r}"
            )


_DICT_TYPES = (dict, JSONCachedDict)
_DICT_ATTRS = frozenset(dir(dict))
# jinja2's own loop variable: its public read-only properties (loop.first, loop.index0, ...)
_LOOP_PROPERTIES = frozenset({"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth",
                              "depth0", "previtem", "nextitem"})
# str's public methods: str is immutable and none of them reaches outside the string; format and
# format_map stay with the sandbox, which checks what a format string reads
_STR_METHODS = frozenset(a for a in dir(str) if not a.startswith("_")) - {"format", "format_map"}


class _ChatEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with ``message.role`` on a plain dict looked up as an item at once: what the
    sandbox ends up doing for any name that is not a dict attribute, without first raising and
    catching an AttributeError (templates do this for every field of every message). Every
    other lookup (a dict attribute such as ``items`` or ``update``, any other type) goes through
    the sandbox's own checks unchanged. A ``JSONCachedDict``'s own slot is not a dict attribute,
    so ``tools[0]._json_texts`` is an item lookup, undefined like on a plain dict. ``loop.first``
    and the other read-only properties of jinja2's loop variable, a string's public methods
    (``content.split``; ``format`` stays with the sandbox) and a namespace's public names
    (``ns.found``) are read at once too: the sandbox would allow each of them after its checks."""

    def getattr(self, obj, attribute):
        t = type(obj)
        if t in _DICT_TYPES and type(attribute) is str and attribute not in _DICT_ATTRS:
            try:
                return obj[attribute]
            except KeyError:
                # named as jinja2 names a plain dict (the cached subclass is an implementation detail)
                return self.undefined(hint=f"'dict object' has no attribute {attribute!r}", obj=obj, name=attribute)
        if t is jinja2.runtime.LoopContext and attribute in _LOOP_PROPERTIES:
            return getattr(obj, attribute)  # what the sandbox returns: public properties, never unsafe
        if t is str and attribute in _STR_METHODS:
            return getattr(obj, attribute)  # content.split, .startswith, .strip: the sandbox allows them all
        if t is _Namespace and type(attribute) is str and not attribute.startswith("_"):
            try:  # ns.flag: a namespace holds plain values; a name it lacks is undefined, as in the sandbox
                value = getattr(obj, attribute)
            except AttributeError:
                return self.undefined(obj=obj, name=attribute)
            return self.wrap_str_format(value) or value  # a str.format kept in it: sandboxed as the sandbox does
        return super().getattr(obj, attribute)


def _make_environment() -> ImmutableSandboxedEnvironment:
    env = _ChatEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationExtension, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _Dict()
    env.globals["namespace"] = _Namespace
    return env


ENV = _make_environment()


@lru_cache(maxsize=256)
def compile_template(template: str) -> jinja2.Template:
    """Compile (once; cached by source) a chat template in the transformers-like environment.

    Example:
        >>> compile_template("{{ messages | length }}").render(messages=[1, 2])
        '2'
    """
    if not isinstance(template, str):
        raise TypeError(f"chat template must be a str, got {type(template).__name__}")
    try:
        return ENV.from_string(template)
    except jinja2.TemplateSyntaxError as err:
        raise TemplateError(f"invalid chat template: {err}") from err


def has_generation_tags(template: str) -> bool:
    """Whether ``template`` uses ``{% generation %}`` blocks."""
    if not isinstance(template, str):
        raise TypeError(f"chat template must be a str, got {type(template).__name__}")
    return _has_generation(template)


@lru_cache(maxsize=256)
def _has_generation(template: str) -> bool:
    import re

    return re.search(r"\{%-?\s*generation\s*-?%\}", template) is not None
