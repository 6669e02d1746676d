"""Registry of named chat templates, and the rule that picks the template to use.

Bundled templates are ``.jinja`` data files next to this module (``chatml_format``, ``qwen``,
``llama3``, ``mistral``, and torchrl's names ``llama`` (Llama 4 headers), ``deepseek``,
``falcon``, ``dialogpt``); more can be registered at runtime with :func:`add_chat_template`.
A template is never guessed from a model path or name by built-in rules: it is given
explicitly, chosen by keywords the user registered, taken from the tokenizer, or the plain
ChatML default is used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .parser_spec import ParserSpec

_HERE = Path(__file__).resolve().parent
_BUNDLED = ("chatml_format", "qwen", "llama3", "mistral", "llama", "deepseek", "falcon", "dialogpt")
_TEMPLATES: dict[str, str] = {}
_PARSERS: dict[str, Any] = {}
_FAMILY_KEYWORDS: dict[str, list[str]] = {}
# torchrl's names for these registries (code that cleans up after add_chat_template uses them)
_CHAT_TEMPLATES = _TEMPLATES
_CUSTOM_INVERSE_PARSERS = _PARSERS
_CUSTOM_MODEL_FAMILY_KEYWORDS = _FAMILY_KEYWORDS
DEFAULT_TEMPLATE_NAME = "chatml_format"


def _load_bundled() -> None:
    for name in _BUNDLED:
        if name not in _TEMPLATES:
            _TEMPLATES[name] = (_HERE / f"{name}.jinja").read_text(encoding="utf-8")


def list_chat_templates() -> list[str]:
    """Names of all registered templates, sorted.

    Example:
        >>> "qwen" in list_chat_templates()
        True
    """
    _load_bundled()
    return sorted(_TEMPLATES)


def get_chat_template(name: str) -> str:
    """Return the jinja source of the registered template ``name``.

    Raises ``ValueError`` naming the known templates if ``name`` is unknown.

    Example:
        >>> get_chat_template("chatml_format").startswith("{%- for message in messages %}")
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"chat template name must be a str, got {type(name).__name__}")
    _load_bundled()
    try:
        return _TEMPLATES[name]
    except KeyError:
        raise ValueError(f"Unknown chat template name {name!r}; {unknown_name_hint(name)}") from None


def close_template_names(name: str) -> list[str]:
    """The registered names spelt like ``name`` (another case, a missing suffix or separator, a
    typo), best first: what an error about an unknown name suggests.

    Example:
        >>> close_template_names("Qwen"), close_template_names("chatml"), close_template_names("llama-3")
        (['qwen'], ['chatml_format'], ['llama3'])
        >>> close_template_names("gpt")
        []
    """
    import difflib

    def squash(s: str) -> str:
        return "".join(c for c in s.lower() if c.isalnum())

    names = list_chat_templates()
    key = squash(name)
    if not key:
        return []
    exact = [n for n in names if squash(n) == key]
    if exact:
        return exact
    by_squashed = {squash(n): n for n in names}
    close = [by_squashed[k] for k in difflib.get_close_matches(key, list(by_squashed), n=3, cutoff=0.75)]
    prefixed = [n for n in names if len(key) >= 3 and squash(n).startswith(key) and n not in close]
    return close + prefixed


def unknown_name_hint(name: str) -> str:
    """The end of an error about the unknown template name ``name``: the close names, if any,
    then every registered one.

    Example:
        >>> unknown_name_hint("qwn")
        "did you mean 'qwen'? known templates: chatml_format, deepseek, dialogpt, ..., qwen"
    """
    close = close_template_names(name)
    guess = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
    return f"{guess}known templates: {', '.join(list_chat_templates())}"


def add_chat_template(
    template_name: str | None = None,
    template: str | None = None,
    inverse_parser: Any = None,
    model_family_keywords: list[str] | None = None,
    *,
    overwrite: bool = False,
    name: str | None = None,
    parser: Any = None,
) -> None:
    """Register ``template`` (jinja source) under ``template_name``, optionally with an output
    parser and model-family keywords. The signature is torchrl's
    (``add_chat_template(template_name=..., template=..., inverse_parser=...,
    model_family_keywords=...)``); ``name=`` / ``parser=`` are accepted as aliases.

    ``inverse_parser`` is a :class:`chatdata.templates.parsers.ParserSpec` (a table entry) or a
    callable ``text -> list[dict]`` (or ``text -> History``); it is what ``History.from_text``
    uses for this name. ``model_family_keywords``: when a tokenizer whose ``name_or_path``
    contains one of them (case-insensitive) is used without an explicit template, this template
    is chosen over the tokenizer's own -- only for keywords registered here, never built-in
    guesses. Unlike torchrl, ``{% generation %}`` blocks are optional (masks are derived from
    the rendering) and re-registering a name with a different template needs ``overwrite=True``.

    Example:
        >>> add_chat_template("mini", "{% for m in messages %}{{ m.role }}: {{ m.content }}\\n{% endfor %}")
        >>> get_chat_template("mini")[:2]
        '{%'
    """
    if name is not None:
        if template_name is not None and template_name != name:
            raise TypeError("add_chat_template got both template_name= and name=; pass one")
        template_name = name
    if parser is not None:
        if inverse_parser is not None and inverse_parser is not parser:
            raise TypeError("add_chat_template got both inverse_parser= and parser=; pass one")
        inverse_parser = parser
    if not isinstance(template_name, str) or not template_name:
        raise TypeError("chat template name must be a non-empty str")
    if not isinstance(template, str):
        raise TypeError(f"chat template must be a str (jinja source), got {type(template).__name__}")
    keywords = _check_keywords(model_family_keywords)
    if inverse_parser is not None:
        _check_parser(template_name, inverse_parser)
    _load_bundled()
    if template_name in _TEMPLATES and not overwrite and _TEMPLATES[template_name] != template:
        raise ValueError(f"chat template {template_name!r} is already registered; pass overwrite=True to replace it")
    from .render import compile_template  # validate the syntax now, not at first use

    compile_template(template)
    _TEMPLATES[template_name] = template
    if inverse_parser is not None:
        _PARSERS[template_name] = inverse_parser
    if keywords is not None:
        _FAMILY_KEYWORDS[template_name] = keywords


def _check_keywords(keywords) -> list[str] | None:
    if keywords is None:
        return None
    if isinstance(keywords, str) or not all(isinstance(k, str) and k for k in keywords):
        raise TypeError("model_family_keywords must be a list of non-empty str")
    return [k.lower() for k in keywords]


def template_name_for_model(tokenizer: Any) -> str | None:
    """The template registered with a ``model_family_keywords`` entry found in the tokenizer's
    ``name_or_path`` (case-insensitive), or None. Only user-registered keywords count.

    Example:
        >>> template_name_for_model(None) is None
        True
    """
    if not _FAMILY_KEYWORDS or tokenizer is None:
        return None
    path = str(getattr(tokenizer, "name_or_path", "") or "").lower()
    if not path:
        return None
    for template_name, keywords in _FAMILY_KEYWORDS.items():
        if template_name in _TEMPLATES and any(k in path for k in keywords):
            return template_name
    return None


def get_parser(name: str) -> Any:
    """The output parser registered for ``name`` (``None`` if it has none)."""
    return _PARSERS.get(name)


def register_parser(name: str, parser: Any) -> None:
    """Attach an output parser (a ``ParserSpec`` or a callable) to an already registered (or
    bundled) template name."""
    _check_parser(name, parser)
    _PARSERS[name] = parser


def _check_parser(name: str, parser: Any) -> None:
    """TypeError at registration for a parser that parse_chat_text could not call."""
    if not (isinstance(parser, ParserSpec) or callable(parser)):
        raise TypeError(f"the parser for {name!r} must be a ParserSpec or a callable text -> messages, "
                        f"got {type(parser).__name__} {parser!r:.40}")


def _template_from_tokenizer(tokenizer: Any, tools: Any) -> str | None:
    tmpl = getattr(tokenizer, "chat_template", None)
    if isinstance(tmpl, dict):
        if tools is not None and "tool_use" in tmpl:
            return tmpl["tool_use"]
        if "default" in tmpl:
            return tmpl["default"]
        raise ValueError(
            "The tokenizer has several chat templates and none is named 'default'; pass "
            f"chat_template= one of {sorted(tmpl)}"
        )
    return tmpl


def resolve_chat_template(
    tokenizer: Any = None,
    chat_template: str | None = None,
    chat_template_name: str | None = None,
    tools: Any = None,
) -> str:
    """Choose the template source: ``chat_template`` > ``chat_template_name`` > a template
    registered with ``model_family_keywords`` matching the tokenizer's ``name_or_path`` > the
    tokenizer's own ``chat_template`` > ``chatml_format``.

    If the tokenizer holds a dict of named templates (as transformers allows), ``chat_template``
    may also be one of its names; otherwise the ``"tool_use"`` entry is used when ``tools`` are
    given and exists, else ``"default"``.

    Example:
        >>> resolve_chat_template(chat_template_name="qwen") == get_chat_template("qwen")
        True
        >>> resolve_chat_template() == get_chat_template("chatml_format")
        True
    """
    if chat_template is not None:
        if not isinstance(chat_template, str):
            raise TypeError(f"chat_template must be a str, got {type(chat_template).__name__}")
        named = getattr(tokenizer, "chat_template", None)
        if isinstance(named, dict) and chat_template in named:
            return named[chat_template]
        return chat_template
    if chat_template_name is not None:
        return get_chat_template(chat_template_name)
    by_keyword = template_name_for_model(tokenizer)
    if by_keyword is not None:
        return get_chat_template(by_keyword)
    if tokenizer is not None:
        tmpl = _template_from_tokenizer(tokenizer, tools)
        if tmpl is not None:
            return tmpl
    return get_chat_template(DEFAULT_TEMPLATE_NAME)


TemplateParser = Callable[[str], list]
