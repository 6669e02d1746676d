"""``Rollout``: multi-turn RL conversations kept as the ids the policy actually produced.

Per row (one environment) a rollout holds the conversation (message dicts) and its token
buffers. The policy's ids are kept verbatim and masked as assistant tokens; only the text the
template adds between turns is tokenized, found by rendering and diffing strings
(:mod:`chatdata.rollout.delta`), never by re-tokenizing kept ids.

Example:
    >>> from chatdata import History
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> ro = Rollout(History.from_chats([[{"role": "user", "content": "2+2?"}]]), tokenizer=tok)
    >>> ids = tok.encode("4<|im_end|>", add_special_tokens=False)
    >>> ro.add_response([ids])
    >>> ro.history.to_chats()[0][-1]
    {'role': 'assistant', 'content': '4'}
    >>> ro.tokens()[0]["assistant_masks"].sum().item() == len(ids)
    True
    >>> ro.drift()
    [None]
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..history import History
from ..td import RaggedTensorDict
from ..templates import Renderer, TemplateError, resolve_chat_template
from ..templates.parsers import parse_response, parser_for_template
from ..templates.render import prepare_chat
from ..templates.backend import rust_backend, unpadded
from ..templates.tiktoken_bpe import tiktoken_bpe_for, twin_allowed
from .buffers import TokenRow
from .delta import TurnDelta
from .extras import ExtrasSpec, RowSide, check_extras
from .facts import TemplateFacts, facts_for_renderer
from .inputs import chat_messages, per_row, response_ids, response_logprobs, row_indices
from .per_turn import build_tokens

__all__ = ["Rollout"]


class _Row:
    __slots__ = ("messages", "prepared", "tokens", "turn", "response", "complete", "last_user", "cache", "start",
                 "added")

    def __init__(self, messages: list[dict]) -> None:
        self.messages = [dict(m) for m in messages]  # as given / parsed: what ``history`` shows
        self.prepared = prepare_chat(self.messages)  # normalised for the template
        self.tokens = TokenRow()
        self.turn: int | None = None  # index of the last generated assistant message
        self.response = ""  # its decoded text
        self.complete = True
        self.start = 0  # where the ids of the last generated assistant message start
        self.added = True  # add_messages was called since the last response (or there was none)
        self.last_user = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None)
        self.cache: dict = {}


def _as_chats(history: Any) -> list[list[dict]]:
    if isinstance(history, History):
        if history.ndim == 1:
            return [history.to_chats()]
        if history.ndim != 2:
            raise ValueError(f"Rollout takes a History of batch (B, -1), got batch size {tuple(history.batch_size)}")
        chats = history.to_chats()  # "<none>" messages pad stacked histories: never part of a chat
        return [[m for m in c if m.get("role") != "<none>"] for c in chats]
    if isinstance(history, (list, tuple)) and all(isinstance(c, (list, tuple)) for c in history):
        return [list(c) for c in history]
    raise TypeError("Rollout takes a History of batch (B, -1) or a list of conversations (lists of message dicts)")


class Rollout:
    """A batch of ``B`` conversations, one per environment, kept as token ids for RL.

    Args:
        history: the starting conversations, a History of batch ``(B, -1)`` (or a list of
            message-dict lists).
        tokenizer: the policy's tokenizer (a ``transformers`` tokenizer).
        chat_template / chat_template_name: the template (source, or a registered name);
            default the tokenizer's own template.
        tools: tool schemas passed to the template.
        **template_kwargs: more template variables (``enable_thinking=False``, ...).

    Rows finish at different times: ``add_response`` and ``add_messages`` take ``rows=``,
    and a row not named costs nothing. See ``docs/rollout.md`` for the rules.
    """

    def __init__(self, history: Any, tokenizer: Any = None, chat_template: str | None = None,
                 chat_template_name: str | None = None, tools: Any = None, **template_kwargs: Any) -> None:
        if tokenizer is None:
            raise ValueError("Rollout needs the policy's tokenizer (tokenizer=...)")
        if isinstance(tokenizer, (str, bytes, Path)) or not callable(getattr(tokenizer, "decode", None)):
            raise TypeError(f"Rollout needs the policy's tokenizer object (a transformers tokenizer), got "
                            f"{type(tokenizer).__name__}: load it first, e.g. AutoTokenizer.from_pretrained(name)")
        self.tokenizer = tokenizer
        self.template = resolve_chat_template(tokenizer, chat_template, chat_template_name, tools)
        self.tools = tools
        self.renderer = Renderer(self.template, tools=tools, tokenizer=tokenizer, **template_kwargs)
        self.facts: TemplateFacts = facts_for_renderer(self.renderer)
        self._delta = TurnDelta(self.renderer, self.facts.eot)
        if not self.facts.fixed_base_delta:
            self._delta.known.whole = True
        self.parser = parser_for_template(self.template)
        self._encode_fast = self._decode_fast = self._twin = None
        backend = rust_backend(tokenizer)
        probe = self.facts.generation_prompt + " Héllo,\n\n  wörld 42" + self.facts.eot + self.facts.after_eot
        if backend is not None and unpadded(backend).encode(probe, add_special_tokens=False).ids == tokenizer.encode(
                probe, add_special_tokens=False):  # the Rust backend alone gives the tokenizer's ids: use it
            # padding / truncation left on the shared backend by the caller's own tok(...) calls: off each time
            self._encode_fast = lambda text, **kw: unpadded(backend).encode(text, **kw)
            self._decode_fast = backend.decode
            if twin_allowed():  # the verified tiktoken twin: same ids, faster (None when there is none)
                self._twin = tiktoken_bpe_for(tokenizer)
        self._rows = [_Row(chat_messages(i, c, "Rollout")) for i, c in enumerate(_as_chats(history))]
        self._sides = [RowSide() for _ in self._rows]  # turn spans and extras (rollout/extras.py)
        self._extras = ExtrasSpec()
        for i, row in enumerate(self._rows):
            row.tokens.set_pending(self._encode(self._render(i, row.prepared)))

    # -- tokenizer --------------------------------------------------------------------------
    def _encode(self, text: str):
        """The ids of ``text`` (a list, or an int64 numpy array from the tiktoken twin)."""
        if self._twin is not None and self._twin.supports(text):
            return self._twin.encode_array(text)
        return self._encode_reference(text)

    def _encode_reference(self, text: str) -> list[int]:
        """The tokenizer's own ids of ``text`` (what :meth:`drift` compares with)."""
        if self._encode_fast is not None:
            return self._encode_fast(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _decode(self, ids: list[int]) -> str:
        if self._twin is not None and self._twin.decodes_exactly:
            text = self._twin.decode(ids)  # None for bytes that are not UTF-8 or unknown ids: the tokenizer decides
            if text is not None:
                return text
        if self._decode_fast is not None:
            return self._decode_fast(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _render(self, i: int, chat: list[dict], gen: bool = True) -> str:
        try:
            return self.renderer.render(chat, add_generation_prompt=gen)
        except TemplateError as err:
            raise ValueError(f"row {i}: the chat template cannot render this conversation: {err}") from err

    # -- rows -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows)

    @property
    def batch_size(self) -> torch.Size:
        return torch.Size([len(self._rows), -1])

    def _row_indices(self, rows: Any, n_items: int | None, what: str) -> list[int]:
        idx = row_indices(rows, len(self._rows), what)
        if n_items is not None and n_items != len(idx):
            raise ValueError(f"{what}: got {n_items} items for {len(idx)} rows")
        return idx

    # -- the API ------------------------------------------------------------------------------
    def prompt_ids(self, rows: Any = None) -> list[torch.Tensor]:
        """Per row, a 1-D int64 tensor: the kept ids so far plus the generation prompt (a view;
        for a row without drift it equals ``tokenizer.apply_chat_template(chat,
        add_generation_prompt=True)``).

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok)
            >>> ro.prompt_ids()[0][-3:]  # '<|im_start|>', 'assistant', a newline
            tensor([151644,  77091,    198])
        """
        return [self._rows[i].tokens.ids() for i in self._row_indices(rows, None, "prompt_ids")]

    def add_response(self, ids: Sequence[Any], logprobs: Sequence[Any] | None = None, extras: Any = None,
                     rows: Any = None) -> None:
        """Append what the policy generated: one 1-D id tensor (or list) per row of ``rows``
        (all rows by default), EOT included, kept verbatim and masked as assistant tokens, with
        optional ``logprobs`` of the same lengths (a row without them, or ``logprobs=None``,
        gets NaN logprobs on its ids in :meth:`tokens`). ``extras`` maps a column name to one tensor per
        row whose first dim is the response length (``{"routed_experts": [int16 (R, layers, k)]}``);
        see :mod:`chatdata.rollout.extras`. The decoded text is parsed with the template
        family's parser (content, ``tool_calls``, ``reasoning_content``) into a message appended
        to the row's conversation.

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok)
            >>> ro.add_response([torch.tensor([19, 151645])], logprobs=[torch.tensor([-0.1, -0.2])])
            >>> ro.history.to_chats()[0][-1]
            {'role': 'assistant', 'content': '4'}
        """
        ids = per_row(ids, "id")
        logprobs = None if logprobs is None else per_row(logprobs, "logprob")
        idx = self._row_indices(rows, len(ids), "add_response")
        if logprobs is not None and len(logprobs) != len(idx):
            raise ValueError(f"add_response: got {len(logprobs)} logprob tensors for {len(idx)} rows")
        checked = []
        for k, i in enumerate(idx):
            t = response_ids(i, ids[k])
            lp = None
            if logprobs is not None and logprobs[k] is not None:
                lp = response_logprobs(i, logprobs[k], t.numel())
            self._check_follows(i)
            checked.append((i, t, lp))
        side = check_extras(extras, idx, [t.numel() for _, t, _ in checked], self._extras)
        for (i, t, lp), ex in zip(checked, side):  # all rows validated first: a bad row changes nothing
            start = len(self._rows[i].tokens)  # == len(prompt_ids()): the prompt the policy was given
            self._add_one_response(i, t, lp)
            self._sides[i].record(start, start + t.numel(), ex)

    def _check_follows(self, i: int) -> None:
        """A response must follow new messages, or continue a response cut before its end of turn."""
        row = self._rows[i]
        if not row.added and row.complete:
            raise ValueError(f"row {i}: its last response ended its turn and no message was added since, so "
                             f"prompt_ids() holds no generation prompt; call add_messages first (a tool result or a "
                             f"user turn, or an empty list for another assistant turn)")

    def _add_one_response(self, i: int, ids: torch.Tensor, logprobs: torch.Tensor | None) -> None:
        row = self._rows[i]
        continues = not row.added  # the last response was cut before its end of turn: this one goes on with it
        start = row.start if continues else len(row.tokens)
        row.tokens.commit_response(ids, logprobs)
        # a continuation is decoded with the ids before it: a character split across the cut is whole again
        text = self._decode(row.tokens.ids()[start:].tolist() if continues else ids.tolist())
        prefix, stop = self.facts.turn_prefix, self.facts.eot or self.facts.after_eot
        body = text[len(prefix):] if prefix and text.startswith(prefix) else text
        try:
            msg = parse_response(body, self.parser, stop)
        except ValueError:  # malformed tool-call JSON: keep the text as the content
            msg = parse_response(body, None, stop)
        if continues:  # one assistant message: the cut one, now with the rest
            row.messages[-1] = msg
            row.prepared[-1:] = prepare_chat([msg])
        else:
            row.messages.append(msg)
            row.prepared.extend(prepare_chat([msg]))
        row.turn, row.response, row.complete = len(row.messages) - 1, text, msg.get("is_complete", True)
        row.start, row.added = start, False

    def add_messages(self, msgs: Sequence[Any], rows: Any = None) -> None:
        """Append tool results or user turns: one list of message dicts (or a History) per row
        of ``rows``. Only the text the template adds after the last kept token is tokenized.

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok)
            >>> ro.add_response([tok.encode("4<|im_end|>")])
            >>> ro.add_messages([[{"role": "user", "content": "and 3+3?"}]])
            >>> print(tok.decode(ro.prompt_ids()[0][-16:]))
            <|im_end|>
            <|im_start|>user
            and 3+3?<|im_end|>
            <|im_start|>assistant
            <BLANKLINE>
        """
        if isinstance(msgs, History):
            msgs = _as_chats(msgs)
        if type(msgs) is not list and (isinstance(msgs, (str, bytes, Mapping)) or not isinstance(msgs, Sequence)):
            raise TypeError(f"add_messages takes one list of message dicts per row, got {type(msgs).__name__}")
        idx = self._row_indices(rows, len(msgs), "add_messages")
        new = []
        for k, i in enumerate(idx):
            m = msgs[k]
            if isinstance(m, History):
                m = m.to_chats() if m.ndim == 1 else [m.to_chats()]
            new.append((i, chat_messages(i, m, "add_messages")))
        texts, done = [], []
        try:  # every row's new text first: a row the template refuses leaves every row as it was
            for i, m in new:
                row = self._rows[i]
                done.append((row, len(row.messages), len(row.prepared), row.last_user))
                for msg in m:
                    if msg.get("role") == "user":
                        row.last_user = len(row.messages)
                    row.messages.append(msg)
                row.prepared.extend(prepare_chat(m))
                texts.append(self._pending_text(i, row))
        except BaseException:
            for row, n_msgs, n_prepared, last_user in done:
                del row.messages[n_msgs:], row.prepared[n_prepared:]
                row.last_user = last_user
            raise
        for (i, _), text in zip(new, texts):
            row = self._rows[i]
            row.tokens.set_pending(self._encode(text))
            row.added = True

    def _pending_text(self, i: int, row: _Row) -> str:
        if row.turn is None:
            return self._render(i, row.prepared)
        try:
            return self._delta.after_turn(row.prepared, row.turn, row.response, row.complete, row.cache, row.last_user)
        except TemplateError as err:
            raise ValueError(f"row {i}: the chat template cannot render this conversation: {err}") from err

    @property
    def history(self) -> History:
        """The whole conversations as a History of batch ``(B, -1)``."""
        return History.from_chats([list(r.messages) for r in self._rows])

    def tokens(self, per_turn: bool = False, compact: bool = True) -> RaggedTensorDict:
        """A ragged TensorDict of batch ``(B, -1)``: ``input_ids`` (every id so far),
        ``assistant_masks`` (1 exactly on generated ids), ``logprobs`` (as given on generated ids;
        NaN on those of a response given without logprobs, so a loss that reads them is NaN rather
        than silently taking probability 1; 0.0 where the mask is 0) and every
        extra given to ``add_response`` (0 elsewhere). Save it with ``.memmap(path)``;
        ``chatdata.load_memmap`` reads it back and ``chatdata.train.TokenDataset`` trains on it.

        ``per_turn=True``: one row per assistant turn (rollout-row order, then turn order): the
        ids ``prompt_ids()`` returned just before that turn's ``add_response`` (the prompt the
        policy was given), then the turn's sampled ids verbatim, with ``assistant_masks``,
        ``logprobs`` and extras on those ids only. Use it whenever ``drift()`` is not None; see
        :mod:`chatdata.rollout.per_turn`. ``compact=False`` keeps narrow-stored integer extras
        in their own dtype instead of uint8/int8 plus a ``column_dtypes`` entry."""
        return build_tokens([r.tokens for r in self._rows], self._sides, self._extras, per_turn, compact)

    def turn_spans(self, rows: Any = None) -> list[torch.Tensor]:
        """Per row, an int64 ``(turns, 2)`` tensor: each sampled turn's ``[start, end)`` in the row's ids
        (``start`` is the length of the prompt the policy was given for it).

        Example:
            >>> from chatdata.data import load_sample_tokenizer
            >>> tok = load_sample_tokenizer()
            >>> ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok)
            >>> start = len(ro.prompt_ids()[0])
            >>> ro.add_response([tok.encode("4<|im_end|>")])
            >>> ro.turn_spans()[0].tolist() == [[start, start + 2]]
            True
        """
        return [torch.tensor(self._sides[i].turns, dtype=torch.int64).reshape(-1, 2)
                for i in self._row_indices(rows, None, "turn_spans")]

    def drift(self, rows: Any = None) -> list[int | None]:
        """Per row, ``None`` if the kept ids agree with a fresh full render and tokenize of the
        conversation, else the first index where they differ. The fresh ids may go on after a
        final generated turn with what the template writes after its EOT (Qwen's newline).
        Never raises for a difference: that is what it reports."""
        out = []
        for i in self._row_indices(rows, None, "drift"):
            row = self._rows[i]
            pending = row.tokens.pending > 0 or row.turn is None
            fresh = self._encode_reference(self._render(i, row.prepared, gen=pending))  # the tokenizer, not the twin
            kept = row.tokens.ids().tolist()
            out.append(_first_difference(kept, fresh, "" if pending else self.facts.after_eot, self._decode))
        return out


def _first_difference(kept: list[int], fresh: list[int], allowed_tail: str, decode) -> int | None:
    n = min(len(kept), len(fresh))
    if kept[:n] != fresh[:n]:
        return next(j for j in range(n) if kept[j] != fresh[j])
    if len(kept) == len(fresh):
        return None
    if len(fresh) > len(kept) and allowed_tail and decode(fresh[len(kept):]) == allowed_tail:
        return None
    return n
