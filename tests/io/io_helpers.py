"""Helpers of the tests/io files."""
from chatdata import History


def batch(chats: list) -> History:
    """The batch (n, -1) of the list of chats ``chats``, also when it is empty (then no rows)."""
    return History.from_chats(chats)
