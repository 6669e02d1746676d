"""``History``: conversations as a tensorclass whose last batch dim is the message index.

A single conversation is a 1-D History (batch ``(n_messages,)``); a batch of conversations of
different lengths is a 2-D History of batch ``(n_chats, -1)`` held column-wise: one flat column
per field for all messages plus int64 per-conversation offsets (a
:class:`~chatdata.td.RaggedTensorDict`), so building it, indexing a conversation (``h[i]``) or a
message (``h[i, j]``) never creates per-conversation objects. See
:mod:`chatdata.history.columns` for the columns; setting fields, ``h[i] = message``, ``append``
and ``extend`` are in :mod:`chatdata.history.changes`.

Example:
    >>> h = History.from_chats([[{"role": "user", "content": "2+2?"}],
    ...                         [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]])
    >>> h.batch_size, h[1].role, h[1, 0].content
    (torch.Size([2, -1]), ['user', 'assistant'], 'hi')
    >>> h.to_chats()[0]
    [{'role': 'user', 'content': '2+2?'}]
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict, TensorClass, TensorDict
from ..td.core import is_integer_dtype
from ..td.tensorclass import register_tensorclass
from .changes import ChangeMethods, int_index, one_key, own_columns, storage_of
from .columns import CONTENT_ABSENT, FLAGS_KEY, _nest as nest, build_storage, column, normalize_storage, storage_to_chats
from .content import ContentBase
from .copy_on_write import current_storage, is_view_index, link_view
from .field_checks import check_content_rule, check_message_columns, message_column
from .selection import SelectMethods
from .state import StateMethods

__all__ = ["History"]


def _is_complete_per_message(self: "History"):
    """``is_complete``: one bool per message (nested lists for a batch), even when all messages
    share one value (stored as a constant); a bool for a single message."""
    storage = self._storage
    if isinstance(storage, RaggedTensorDict):
        flags = column(storage.values, "is_complete")
        off = storage.offsets.tolist()
        return [flags[a:b] for a, b in zip(off[:-1], off[1:])]
    if not storage.batch_size:
        return column(storage, "is_complete")[0]
    return nest(column(storage, "is_complete"), storage.batch_size)


def _set_is_complete(self: "History", value) -> None:
    self.set("is_complete", value)


class History(ChangeMethods, SelectMethods, StateMethods, TensorClass["nocast"]):  # as torchrl: bools and lists stored as given, not cast to tensors
    """Chat messages with the fields ``role``, ``content``, ``is_complete``, ``tool_calls``,
    ``tool_responses`` and ``extra`` (a dict of any other message keys: ``name``,
    ``tool_call_id``, ``reasoning_content``, ...).

    Args:
        role: the sender (``"system"``, ``"user"``, ``"assistant"``, ``"tool"``, ...).
        content: a str, a list of part dicts, or a :class:`ContentBase` (stored as part dicts).
        is_complete: whether the message was terminated (False for an unfinished generation);
            reads as one bool per message (nested lists for a batch), as in torchrl.
        tool_calls: the tool calls of an assistant message (list of dicts) or None.
        tool_responses: tool responses (list of str) or None.
        extra: the message's other keys (dict) or None.
        batch_size: ``()`` for one message (the default), ``(n,)`` for a conversation.

    Example:
        >>> h = History(role=["system", "user"], content=["Be brief.", "2+2?"], batch_size=(2,))
        >>> _ = h.append(History(role="assistant", content="4"))
        >>> h.to_chats()[-1]
        {'role': 'assistant', 'content': '4'}
    """

    role: str
    content: str | ContentBase
    is_complete: bool = True
    tool_calls: list[dict] | None = None
    tool_responses: list[str] | None = None
    extra: dict | None = None

    # memmap also saves these JSON columns as typed copies that to_arrow() reads without
    # parsing (chatdata.td.storage.typed_copies; chatdata.io registers Arrow's)
    _typed_json_copies = ("tool_calls", "tool_responses", "extra")
    # the key-presence bits (chatdata.history.columns) are stored beside the fields: to_tensordict,
    # state_dict and a saved folder hold them, from_tensordict and load_state_dict take them back
    _storage_keys = (FLAGS_KEY,)

    # tensordict keeps a tensorclass's TensorDict in the instance dict as ``_tensordict`` and
    # torchrl code reads ``history.__dict__["_tensordict"]``: History keeps its storage there
    @property
    def _storage(self):
        d = self.__dict__
        if "_view_of" in d:  # h[i], h[a:b]: re-taken when h's columns were replaced (copy_on_write)
            return current_storage(self)
        try:
            return d["_tensordict"]
        except KeyError:
            raise AttributeError("_storage") from None

    @_storage.setter
    def _storage(self, value) -> None:
        self.__dict__["_tensordict"] = value

    def __init__(self, *args, batch_size=None, device=None, names=None, **kwargs):
        self.__dict__["_building"] = True
        super().__init__(*args, batch_size=() if batch_size is None else batch_size, device=device, **kwargs)

    def __post_init__(self):
        self.__dict__.pop("_building", None)
        storage = self._storage
        if "role" not in storage._tensordict:  # role=None: the constructor left it unset
            raise ValueError("History: 'role' must be a str (one per message), got None")
        normalize_storage(storage)
        check_content_rule(storage)

    def __repr__(self) -> str:
        from ..td.core import indent, leaf_repr

        storage = self._storage
        if isinstance(storage, RaggedTensorDict):  # a batch of conversations: each column described
            values = storage.values
            lines = [f"{k}={storage.field_repr(values._get_raw(k))}" for k in sorted(values.keys()) if k != FLAGS_KEY]
        else:
            lines = [f"{k}={leaf_repr(storage._get_raw(k))}" for k in sorted(storage._tensordict) if k != FLAGS_KEY]
        lines += [f"batch_size={self.batch_size}", f"device={self.device}", f"is_shared={self.is_shared()}"]
        body = ",\n".join(lines)
        return f"{type(self).__name__}(\n{indent(body)})"

    @classmethod
    def _check_loaded(cls, storage, folder) -> None:
        """Called by the loader before a saved History is built: its schema must be a
        History's, else a FormatError names the file (:mod:`chatdata.history.schema`)."""
        from .schema import check_loaded_storage

        check_loaded_storage(storage, folder)

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_chats(cls, chats) -> "History":
        """A History from OpenAI-style message dicts.

        A list of message dicts gives a conversation (batch ``(n_messages,)``); a list of such
        lists gives a batch ``(n_chats, -1)`` stored column-wise. An empty list is read as no
        chats (batch ``(0, -1)``), so a filtered-out dataset exports no rows rather than one empty
        conversation; a conversation without messages is ``History.from_chats([[]])[0]``. Every message key is kept:
        keys beyond the fields go to ``extra``; ``to_chats()`` gives the input back exactly.

        Raises ``ValueError`` naming the chat and message for a bad input (a chat that is not
        a list, a message without a str ``role``, content that is not a str, None or a list
        of known parts, ...).

        Example:
            >>> History.from_chats([{"role": "user", "content": "hi", "name": "bob"}]).extra
            [{'name': 'bob'}]
        """
        if isinstance(chats, History):
            return chats
        if not isinstance(chats, (list, tuple)):
            raise ValueError(f"from_chats takes a list of message dicts or a list of chats, got {type(chats).__name__}")
        if not chats:  # no chats: a batch of none, never one phantom conversation (see the docstring)
            return cls._from_storage(RaggedTensorDict(build_storage([], [0]), torch.zeros(1, dtype=torch.int64)))
        if isinstance(chats[0], Mapping):
            return cls._from_storage(build_storage(list(chats), None))
        types = set(map(type, chats))
        if not types <= {list, tuple}:
            i, bad = next((i, c) for i, c in enumerate(chats) if not isinstance(c, (list, tuple)))
            raise ValueError(f"chat {i}: a chat must be a list of message dicts, got {type(bad).__name__}")
        offsets = [0, *itertools.accumulate(map(len, chats))]
        flat = [m for c in chats for m in c]
        storage = build_storage(flat, offsets)
        return cls._from_storage(RaggedTensorDict(storage, torch.from_numpy(np.array(offsets, dtype=np.int64))))

    @classmethod
    def from_text(cls, text: str | list[str], chat_template_name: str | None = None,
                  chat_template: str | None = None, tokenizer: Any = None) -> "History":
        """Parse rendered chat text back into a History (a list of texts gives a batch).

        The parser is the one registered for ``chat_template_name``; without a name, the
        registered template whose source equals ``chat_template`` (or the tokenizer's own
        template) is used, and ``chatml_format`` when neither is given. An unterminated final
        message gets ``is_complete=False``; malformed tool-call JSON raises ``ValueError``, and so
        does text that is not blank but holds no message of the format (text rendered with another
        template). Text outside the format's turns is not read.

        Example:
            >>> History.from_text("<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nyo").is_complete
            [True, False]
        """
        from .chat_template import parse_text

        return cls.from_chats(parse_text(text, chat_template_name, chat_template, tokenizer))

    @classmethod
    def default_spec(cls, shape=(-1,)):
        """A spec (``Composite`` of ``NonTensor``) for environments returning Histories."""
        from ..specs import history_default_spec

        return history_default_spec(cls, shape)

    # -- reading -------------------------------------------------------------------------
    def conversation_offsets(self) -> torch.Tensor:
        """int64 offsets of the conversations in the flat message columns: conversation ``i``
        is messages ``offsets[i]:offsets[i+1]`` (``[0, n]`` for one conversation).

        Example:
            >>> History.from_chats([[{"role": "user", "content": "a"}], []]).conversation_offsets().tolist()
            [0, 1, 1]
        """
        storage = self._storage
        if isinstance(storage, RaggedTensorDict):
            return storage.offsets.as_subclass(torch.Tensor)
        if self.ndim == 1:
            return torch.tensor([0, self.batch_size[0]], dtype=torch.int64)
        if self.ndim == 2:
            n, m = self.batch_size
            return torch.arange(n + 1, dtype=torch.int64) * m
        raise ValueError(f"conversation_offsets needs a conversation or a batch of them, got {tuple(self.batch_size)}")

    def message_column(self, name: str):
        """The raw column ``name`` (role, content, tool_calls, ...) over all messages, flat: a
        NonTensorStack, a NonTensorData constant, or a tensor. Statistics over a whole dataset
        read it without building per-conversation objects.

        Example:
            >>> h = History.from_chats([[{"role": "user", "content": "hi"}]])
            >>> h.message_column("role").value_counts()
            {'user': 1}
        """
        storage = self._storage
        values = storage.values if isinstance(storage, RaggedTensorDict) else storage.reshape(-1)
        try:
            return values._get_raw(name)
        except KeyError:
            raise KeyError(f"History has no column {name!r}; columns: {sorted(values.keys())}") from None

    @classmethod
    def from_message_columns(cls, columns: Mapping, offsets) -> "History":
        """A batch of conversations from flat message columns (the inverse of
        :meth:`message_column` / :meth:`conversation_offsets`), without per-message objects.

        ``columns`` maps ``role`` (required) and optionally ``content``, ``is_complete``,
        ``tool_calls``, ``tool_responses``, ``extra`` and ``_flags`` (int8 key-presence bits,
        see :mod:`chatdata.history.columns`) to a NonTensorStack, a NonTensorData constant or a
        list with one value per message; ``offsets`` (int64, ``n_chats + 1``) bounds each chat.
        The content rule is :meth:`from_chats`'s: a ``None`` content is kept as ``"content": None``
        (a message dict with ``"content": None`` gives the same), and without a ``content`` column
        no message has a ``content`` key (as a message dict without one); either way only an
        assistant message with ``tool_calls`` or ``reasoning_content`` may lack content.
        Values given as lists or constants are checked as :meth:`from_chats` checks them
        (``ValueError`` naming the column and message); NonTensorStacks (a History's or a loaded
        folder's columns) are taken as they are. The History has columns of its own: writes into it
        never reach the caller's columns nor theirs it (as :meth:`copy`, strings are shared).

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> h = History.from_message_columns({"role": ["user", "assistant"], "content": ["a", "b"]}, [0, 2])
            >>> h.to_chats()
            [[{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'}]]
        """
        if not isinstance(columns, Mapping):
            raise TypeError(f"from_message_columns takes a dict of columns (name -> values), got {type(columns).__name__}")
        try:
            offsets = torch.as_tensor(offsets)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"offsets must be a 1-D sequence of ints, got {type(offsets).__name__}") from None
        if not is_integer_dtype(offsets.dtype):
            raise ValueError(f"offsets must be ints, got {offsets.dtype}")
        offsets = offsets.to(torch.int64)
        if offsets.ndim != 1 or offsets.numel() < 1 or int(offsets[0]) != 0:
            raise ValueError("offsets must be a 1-D int64 sequence starting at 0")
        n = int(offsets[-1])
        unknown = set(columns) - {*cls._field_names, FLAGS_KEY}
        if unknown or "role" not in columns:
            raise ValueError(f"from_message_columns takes role and optionally "
                             f"{[*cls._field_names[1:], FLAGS_KEY]}; got {sorted(columns)}")
        entries = {name: message_column(name, value, n) for name, value in columns.items()}
        # the caller's own column objects (another History's, a loaded folder's) get their own index
        # and tensors: a write into the History (h[i][j] = message) would change them in place, and a
        # loaded flags tensor is the folder's file (strings are shared, never copied; a range
        # index, what a loaded or built column has, is copied in O(1))
        entries.update(own_columns({k: v for k, v in entries.items() if v is columns[k]}))
        given = [k for k, v in columns.items() if not isinstance(v, NonTensorStack)]
        if "content" not in entries:  # no message has a content key: from_chats's messages without one
            entries["content"], given = NonTensorData(None, batch_size=(n,)), [*given, "content"]
            flags = entries.get(FLAGS_KEY)
            entries[FLAGS_KEY] = torch.full((n,), CONTENT_ABSENT, dtype=torch.int8) if flags is None \
                else flags | CONTENT_ABSENT
        td = TensorDict._new_unsafe(entries, torch.Size([n]), None)
        normalize_storage(td)
        check_message_columns(td, given)
        return cls._from_storage(RaggedTensorDict(td, offsets))

    def to_chats(self):
        """Message dicts: a list per conversation (lists of lists for a batch), a dict for a
        single message. ``History.from_chats(x).to_chats() == x``.

        A message holds ``role``, ``content`` (unless the input message had none), then
        ``is_complete`` if it was given or is False, ``tool_calls`` / ``tool_responses`` if given
        or not None, then the ``extra`` keys.
        """
        return storage_to_chats(storage_of(self))

    def tolist(self):
        """Same as :meth:`to_chats`."""
        return self.to_chats()

    def copy(self) -> "History":
        """A shallow copy: a new History over new containers sharing the column data
        (tensordict's ``copy``). ``append``/``extend``, setting a field and writing messages
        (``c[i] = message``) on one never change the other: each column's index and the flag
        tensors are copied (strings are shared, never copied).

        Example:
            >>> h = History.from_chats([{"role": "user", "content": "a"}])
            >>> c = h.copy()
            >>> _ = h.append(History(role="assistant", content="b"))
            >>> c[0] = {"role": "system", "content": "s"}
            >>> c.role, h.role
            (['system'], ['user', 'assistant'])
        """
        storage = self._storage.clone(recurse=False)
        entries = (storage.values if isinstance(storage, RaggedTensorDict) else storage)._tensordict
        entries.update(own_columns(entries))  # c[i] = message writes into the columns in place
        return type(self)._from_storage(storage)

    def __getitem__(self, index):
        """``h["role"]`` reads a field (or the ``_flags`` column); a key that is neither is a
        ``KeyError`` (``h["contents"]`` gave None). Any other index selects conversations or
        messages. ``h.get(key, default)`` still gives ``default`` (None) for a missing key."""
        key = one_key(index)  # ("role",) is "role"
        if type(key) is str and key not in self._field_names and key != FLAGS_KEY:
            raise KeyError(f"History has no field {key!r}; its fields are {list(self._field_names)}")
        return super().__getitem__(index)

    def _index(self, index):
        # a DataLoader hands out 0-d tensors as indices: they select like the int they hold
        index = int_index(index)
        out = super()._index(index)
        if isinstance(out, History) and is_view_index(index, isinstance(self.__dict__.get("_tensordict"), RaggedTensorDict)):
            # out shares self's columns: a message written into it (out[j] = message) is written into
            # self, and a column self must first copy (a constant, a loaded file) is copied there
            link_view(out, self, index)
        return out

    # -- templates -----------------------------------------------------------------------
    def apply_chat_template(
        self,
        *,
        tokenizer: Any = None,
        add_generation_prompt: bool = True,
        chat_template: str | None = None,
        chat_template_name: str | None = None,
        continue_final_message: bool = False,
        tokenize: bool | None = None,
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_dict: bool | None = None,
        return_assistant_tokens_mask: bool = False,
        tools: Any = None,
        documents: Any = None,
        train_on: Any = "assistant",
        last_turn_only: bool = False,
        loss_weights: Any = None,
        **template_kwargs: Any,
    ):
        """Render (and optionally tokenise) the conversations with a chat template.

        Template choice: ``chat_template`` (jinja source) over ``chat_template_name`` (a
        registered template) over ``tokenizer.chat_template`` over ``chatml_format``. Rendering
        is byte-identical to ``tokenizer.apply_chat_template(chat, tokenize=False, ...)``.
        ``continue_final_message=True`` turns off ``add_generation_prompt``.

        Returns, for one conversation (a 1-D History) / a batch:

        * ``tokenize=False`` (the default unless masks or tensors are asked): a str / a list of str;
        * ``tokenize=True``: ``input_ids`` of shape ``(1, L)`` / a nested jagged tensor
          ``(B, j)`` (``(B, L)`` when ``padding``);
        * ``return_dict=True`` (default when ``return_assistant_tokens_mask``): a TensorDict of
          batch ``(L,)`` with ``input_ids``, ``attention_mask`` (and ``assistant_masks``) / for a
          batch a RaggedTensorDict of batch ``(B, -1)`` (``out[i]`` is conversation ``i``'s
          tokens; ``out["input_ids"]`` a nested tensor, or a dense ``(B, L)`` view when every
          conversation has ``L`` tokens, as torchrl's lazy stack gives), or with ``padding`` a
          TensorDict of batch ``(B, L)``.

        Assistant masks cover every assistant turn as the template renders it: its content, its
        tool calls, its reasoning and the end of the turn (the end-of-turn token, or the text that
        ends it on templates without one), never a role header or a system/user/tool turn; for any
        template (``{% generation %}`` blocks are honoured when present). Pass
        ``mask_reasoning=False`` to leave the rendered reasoning out and ``mask_eot=False`` to leave
        the end of the turn out (``mask_eot=False`` gives torchrl's content-only masks); see
        ``docs/masks.md``. A turn that cannot be placed raises ``UnplaceableTurnError``.

        Beyond the assistant (they imply ``return_assistant_tokens_mask=True``; the mask is then
        "trained", whatever the role): ``train_on=["assistant", "tool"]`` also trains the roles it
        names (their content as the template renders it, and the end of their turn), never a role
        header; ``last_turn_only=True`` trains only the last trained turn; ``loss_weights`` --
        ``{"assistant": 1.0, "tool": 0.2}`` per role, ``True`` (each message's own ``"weight"``
        key), or a callable ``(chat, k) -> float`` per turn -- adds a float32 ``loss_weights``
        column (0 where the mask is 0). See :class:`chatdata.templates.TrainSelection`.

        Example:
            >>> h = History.from_chats([{"role": "user", "content": "hi"}])
            >>> h.apply_chat_template(chat_template_name="chatml_format")
            '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
        """
        from .chat_template import apply_chat_template

        return apply_chat_template(
            self, tokenizer=tokenizer, add_generation_prompt=add_generation_prompt, chat_template=chat_template,
            chat_template_name=chat_template_name, continue_final_message=continue_final_message,
            tokenize=tokenize, padding=padding, truncation=truncation, max_length=max_length,
            return_tensors=return_tensors, return_dict=return_dict,
            return_assistant_tokens_mask=return_assistant_tokens_mask, tools=tools, documents=documents,
            train_on=train_on, last_turn_only=last_turn_only, loss_weights=loss_weights, **template_kwargs,
        )



# a field property would give the stored constant (one bool for all messages); torchrl's
# History gives one value per message, so the property is replaced after the class is built
History.is_complete = property(_is_complete_per_message, _set_is_complete)

# torchrl saves its History under this class name: such folders load as chatdata's History
register_tensorclass("torchrl.data.llm.history.History", History)
