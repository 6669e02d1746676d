"""The template matrix: every check of chatdata's chat-template engine, run over many templates.

For each template and tokenizer: rendering byte-identical to transformers, assistant masks of a
plain, a tool-calling, a reasoning and a multimodal (list-of-parts) probe chat, token-in,
token-out rollouts for three sets of appended roles and five replayed failure modes, and the
template's facts. ``chatdata templates check --all`` writes the result to ``docs/templates.md``.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> from chatdata.templates import get_chat_template
    >>> rows = check_corpus({"qwen": get_chat_template("qwen")}, {"qwen2.5": load_sample_tokenizer()}, tito=False)
    >>> print(matrix_markdown(rows, ["qwen2.5"]).splitlines()[0])
    # Chat-template matrix
"""
from .corpus import TemplateRow, check_corpus, load_templates, load_tokenizers
from .report import matrix_markdown

__all__ = ["TemplateRow", "check_corpus", "load_templates", "load_tokenizers", "matrix_markdown"]
