"""Helpers of the tests/io files."""
from chatdata import History


def batch(chats: list) -> History:
    """The batch (n, -1) of the list of chats ``chats``, also when it is empty:
    ``History.from_chats([])`` is one conversation without messages (batch ``(0,)``), which every
    export (to_arrow, Parquet, a shard) writes as one row, as it does ``h[i]`` of an empty one."""
    return History.from_chats(chats) if chats else History.from_chats([[]])[0:0]
