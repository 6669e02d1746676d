"""Views people can look at: token chips coloured by role and loss weight, as one HTML page.

``chatdata show ... --html FILE`` and ``chatdata templates check ... --html FILE`` use it; in
Python, build sections and write the page:

Example:
    >>> from chatdata.view import chat_section, write_html
    >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
    >>> section = chat_section(load_sample_chats()[0], load_sample_tokenizer(), loss_weights={"user": 0.3})
    >>> write_html("chat.html", "one chat", [section]).name
    'chat.html'
"""
from .chips import TokenChip, chips_from_ids, chips_from_rendering
from .html import ViewSection, html_page, write_html
from .sections import chat_section, report_sections, token_row_section

__all__ = ["TokenChip", "chips_from_ids", "chips_from_rendering", "ViewSection", "html_page", "write_html",
           "chat_section", "report_sections", "token_row_section"]
