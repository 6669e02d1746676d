"""Clean data on the way in: tool calls checked against their tools, exact and near duplicates
removed, benchmark prompts kept out. Takes Histories; ``chatdata import`` and ``chatdata.ray``
use it. One concern per module:

* :mod:`~chatdata.hygiene.tool_calls` - ``check_tool_calls``, ``decode_arguments``;
* :mod:`~chatdata.hygiene.normalize` and :mod:`~chatdata.hygiene.exact` - exact duplicates;
* :mod:`~chatdata.hygiene.words` and :mod:`~chatdata.hygiene.near` - near duplicates (MinHash-LSH);
* :mod:`~chatdata.hygiene.decontam` - benchmark n-gram overlap;
* :mod:`~chatdata.hygiene.dedup` - the ``dedup`` entry point;
* :mod:`~chatdata.hygiene.reports` and :mod:`~chatdata.hygiene.screen` - reports, and all checks as
  one streaming step for importers.

Example:
    >>> from chatdata import History
    >>> from chatdata import hygiene
    >>> h = History.from_chats([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "hi"}]])
    >>> hygiene.dedup(h).tolist(), hygiene.check_tool_calls(h)
    ([0], [])
"""
from .decontam import ContaminationIndex, decontaminate, load_prompts
from .dedup import dedup, find_duplicates, parse_dedup
from .reports import HygieneReport
from .screen import Screen
from .tool_calls import PROBLEMS, check_tool_calls, decode_arguments

__all__ = ["check_tool_calls", "decode_arguments", "dedup", "find_duplicates", "decontaminate", "load_prompts",
           "ContaminationIndex", "HygieneReport", "Screen", "parse_dedup", "PROBLEMS"]
