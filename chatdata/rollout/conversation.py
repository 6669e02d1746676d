"""``Conversation``: one rollout row on its own, cheap to start, fork at a message, and drop.

A server that records many chats at once (``chatdata serve``) needs one token-in, token-out
row per chat: created when the chat starts, dropped when it is stored, forked when a client
rewrites the history. A :class:`Conversation` is that row: a one-row :class:`Rollout` (the
same rendering of only the delta, the same verbatim ids, masks and logprobs) plus the spans of
the turns it generated, so that

* :meth:`fork` gives a new conversation holding the first ``n`` messages, whose ids are this
  one's ids for every generated turn it keeps (replayed through the same engine, so they share
  their exact prefix);
* :meth:`checkpoint` / :meth:`rollback` undo messages added for a request that then failed.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> c = Conversation([{"role": "user", "content": "hi"}], tokenizer=tok)
    >>> msg = c.add_response(tok.encode("hello<|im_end|>", add_special_tokens=False))
    >>> c.add_messages([{"role": "user", "content": "bye"}])
    >>> f = c.fork(2)                                   # the user turn and the generated answer
    >>> f.tokens()["input_ids"].tolist() == c.tokens()["input_ids"].tolist()
    True
    >>> msg, len(f.messages)
    ({'role': 'assistant', 'content': 'hello'}, 2)
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from .core import Rollout
from .inputs import chat_messages

__all__ = ["Conversation"]


class _Mark(NamedTuple):
    """What :meth:`Conversation.checkpoint` saves."""

    n_messages: int
    n_prepared: int
    last_user: int | None
    pending: torch.Tensor
    added: bool
    n_turns: int
    owner: object  # the row the mark was taken of
    last: object  # its last message then (the same dict while the mark holds)


class Conversation:
    """One conversation kept as token ids (see the module docstring).

    Args:
        messages: the starting messages (dicts with a str ``role``).
        tokenizer, chat_template, chat_template_name, tools, **template_kwargs: as for
            :class:`~chatdata.rollout.Rollout`.
    """

    __slots__ = ("_ro", "_config", "_turns")

    def __init__(self, messages: Sequence[Mapping], tokenizer: Any = None, chat_template: str | None = None,
                 chat_template_name: str | None = None, tools: Any = None, **template_kwargs: Any) -> None:
        self._config = dict(tokenizer=tokenizer, chat_template=chat_template, chat_template_name=chat_template_name,
                            tools=tools, **template_kwargs)
        self._ro = Rollout([chat_messages(0, messages, "Conversation")], **self._config)
        self._turns: list[tuple[int, int, int]] = []  # (message index, first id, end) per generated turn

    # -- reading ------------------------------------------------------------------------------
    @property
    def messages(self) -> list[dict]:
        """The messages so far (the row's own list: read it, do not change it)."""
        return self._ro._rows[0].messages

    @property
    def turns(self) -> list[tuple[int, int, int]]:
        """Per generated turn: its message index and the span ``[start, end)`` of its ids."""
        return list(self._turns)

    def prompt_ids(self) -> torch.Tensor:
        """The ids to generate from: the kept ids plus the generation prompt (a view)."""
        return self._ro._rows[0].tokens.ids()

    @property
    def committed(self) -> int:
        """How many ids end with the last generated turn (the part a stored record holds)."""
        return self._ro._rows[0].tokens.committed

    def tokens(self) -> dict[str, torch.Tensor]:
        """``input_ids``, ``assistant_masks`` and ``logprobs`` up to the last generated turn
        (1-D views; the masks are 1 exactly on generated ids; logprobs NaN on the ids of a
        response given without logprobs, 0.0 where the mask is 0)."""
        t, n = self._ro._rows[0].tokens, self.committed
        return {"input_ids": t.ids()[:n], "assistant_masks": t.mask()[:n], "logprobs": t.logprobs()[:n]}

    # -- growing ------------------------------------------------------------------------------
    def add_messages(self, messages: Sequence[Mapping]) -> None:
        """Append non-generated messages (tool results, user turns, ...); only the text the
        template adds after the kept ids is tokenized."""
        self._ro.add_messages([list(messages)], rows=[0])

    def add_response(self, ids: Any, logprobs: Any = None) -> dict:
        """Append generated ``ids`` (kept verbatim) with their ``logprobs``; returns the parsed
        assistant message (the row's own dict)."""
        start = len(self._ro._rows[0].tokens)  # the generated ids follow the prompt
        self._ro.add_response([ids], logprobs=None if logprobs is None else [logprobs], rows=[0])
        row = self._ro._rows[0]
        self._turns.append((len(row.messages) - 1, start, row.tokens.committed))
        return row.messages[-1]

    # -- undo and fork --------------------------------------------------------------------------
    def checkpoint(self) -> tuple:
        """A mark to :meth:`rollback` to (taken before adding a request's messages)."""
        row = self._ro._rows[0]
        return _Mark(len(row.messages), len(row.prepared), row.last_user,
                     row.tokens.ids()[row.tokens.committed:].clone(), row.added, len(self._turns), row,
                     row.messages[-1] if row.messages else None)

    def rollback(self, mark: tuple) -> None:
        """Drop the messages added since ``mark`` (no turn may have been generated since, and the
        messages it kept must still be there: a mark of another conversation, or one whose messages
        an earlier rollback removed, is refused before anything changes)."""
        if not isinstance(mark, _Mark):
            raise TypeError(f"rollback takes a mark from checkpoint(), got {type(mark).__name__}")
        n_msgs, n_prepared, last_user, pending, added, n_turns, owner, last = mark
        row = self._ro._rows[0]
        if owner is not row:
            raise ValueError("rollback: the mark is another conversation's (take it with this one's checkpoint())")
        if len(self._turns) != n_turns:
            raise ValueError("rollback: a turn was generated after this checkpoint")
        if n_msgs > len(row.messages) or (n_msgs and row.messages[n_msgs - 1] is not last):
            # an older rollback removed what the mark kept: its pending ids are of messages gone since
            raise ValueError("rollback: the messages this checkpoint kept were rolled back and replaced since; "
                             "take a new checkpoint()")
        del row.messages[n_msgs:]
        del row.prepared[n_prepared:]
        row.last_user = last_user
        row.cache = {}
        row.tokens.set_pending(pending)
        row.added = added

    def fork(self, n_messages: int) -> "Conversation":
        """A new conversation holding the first ``n_messages`` messages. Each generated turn it
        keeps is replayed with this one's ids and logprobs, so both share their ids up to the
        last kept turn (and the parsed messages are this one's own dicts).

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> c = Conversation([{"role": "user", "content": "hi"}], tokenizer=tok)
            >>> _ = c.add_response(tok.encode("yo<|im_end|>", add_special_tokens=False))
            >>> again = c.fork(1)                     # before the answer: the same prompt
            >>> torch.equal(again.prompt_ids(), c.prompt_ids()[:len(again.prompt_ids())])
            True
        """
        return self.fork_later(n_messages)()

    def fork_later(self, n_messages: int) -> Callable[[], "Conversation"]:
        """:meth:`fork` in two steps: this call checks ``n_messages`` and takes what the fork
        needs (the kept messages and turns, and a view of their ids, which are never written
        again); the function it returns renders the fork. That function reads nothing of this
        conversation, so it may run in another thread while this one grows, is rolled back or
        gets a response (a server renders the shared prefix of a big fork off its event loop).

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> c = Conversation([{"role": "user", "content": "hi"}], tokenizer=tok)
            >>> _ = c.add_response(tok.encode("yo<|im_end|>", add_special_tokens=False))
            >>> build = c.fork_later(2)
            >>> c.add_messages([{"role": "user", "content": "more"}])   # this one goes on meanwhile
            >>> f = build()
            >>> len(f.messages), torch.equal(f.tokens()["input_ids"], c.tokens()["input_ids"])
            (2, True)
        """
        msgs = self.messages
        if not isinstance(n_messages, int) or isinstance(n_messages, bool) or not 1 <= n_messages <= len(msgs):
            raise ValueError(f"fork: n_messages must be in [1, {len(msgs)}] (an int), got {n_messages!r}")
        msgs = msgs[:n_messages]  # a list of its own: the row may append, roll back or replace meanwhile
        keep = [t for t in self._turns if t[0] < n_messages]
        end = keep[-1][2] if keep else 0
        t = self._ro._rows[0].tokens
        # committed ids are never rewritten (growing copies them to a new buffer, and messages and
        # responses are written after them): views of the kept ones stay as they are now
        ids, logp = t.ids()[:end], t.logprobs()[:end]
        config = self._config
        return lambda: Conversation._replay(config, msgs, keep, ids, logp)

    @staticmethod
    def _replay(config: dict, msgs: list, keep: list, ids: torch.Tensor, logp: torch.Tensor) -> "Conversation":
        n_messages = len(msgs)
        first = keep[0][0] if keep else n_messages
        new = Conversation(msgs[:first], **config)
        prev = first
        for a, s, e in keep:
            if a > prev:
                new.add_messages(msgs[prev:a])
            lp = logp[s:e]  # NaN: the turn came without logprobs, and is replayed without them
            new.add_response(ids[s:e].clone(), None if bool(lp.isnan().any()) else lp.clone())
            new._ro._rows[0].messages[-1] = msgs[a]  # the same message (ids a server added stay)
            prev = a + 1
        if n_messages > prev:
            new.add_messages(msgs[prev:n_messages])
        if keep and not torch.equal(new.tokens()["input_ids"], ids):
            raise RuntimeError("fork: replaying the kept turns gave other ids than the conversation holds "
                               "(the template renders differently than when these turns were generated)")
        return new
