"""The chat-template engine: bundled templates, HF-identical rendering, assistant spans and
token masks for any template, and output parsers.

Example:
    >>> from chatdata.templates import get_chat_template, render_chats
    >>> render_chats([[{"role": "user", "content": "hi"}]], get_chat_template("chatml_format"))
    ['<|im_start|>user\\nhi<|im_end|>\\n']
"""
from .errors import TemplateError, UnplaceableTurnError
from .jinja_env import compile_template, has_generation_tags
from .parsers import ParserSpec, parse_chat_text
from .registry import add_chat_template, get_chat_template, list_chat_templates, resolve_chat_template
from .render import Renderer, render_chats, render_chats_detailed
from .profile import TemplateProfile, template_profile
from .spans import assistant_spans, render_chats_with_spans
from .selection import TrainSelection, final_answer
from .tokenization import char_masks_to_token_masks, tokenize_chats
from .weighted_spans import WeightedSpan, render_chats_with_weights

__all__ = [
    "TemplateError", "UnplaceableTurnError", "TemplateProfile", "template_profile", "compile_template", "has_generation_tags", "ParserSpec", "parse_chat_text",
    "add_chat_template", "get_chat_template", "list_chat_templates", "resolve_chat_template",
    "Renderer", "render_chats", "render_chats_detailed", "assistant_spans", "render_chats_with_spans",
    "char_masks_to_token_masks", "tokenize_chats", "TrainSelection", "final_answer", "WeightedSpan",
    "render_chats_with_weights",
]
