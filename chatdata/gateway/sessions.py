"""Open sessions as trees of branches, and which branch a request continues.

A *session* is one agent's chat; each *branch* is one :class:`~chatdata.rollout.Conversation`
(the kept ids, masks and logprobs) plus the messages it holds as clients sent or received them.
A request is routed (:meth:`SessionTable.route`) to

* **extend** a branch whose messages are a prefix of the request's (only the new messages are
  rendered and tokenized);
* **fork** it where the request departs from it (a rewritten or compacted history, a subagent,
  two requests on one branch at once): a new branch that shares every kept turn before that
  point, id for id;
* or start a new branch (a new session, or a new root in a named session when nothing is shared).

With ``X-Session-Id`` the session is the named one. Without it, the request joins the open
session one of whose generated turns it repeats (found through an index of generated turns, so
an unknown chat costs a few dictionary look-ups); otherwise it starts a new session.

A message the session already holds is compared as sent (dict equality), then, if that
differs, by what the template renders from it (:func:`~chatdata.gateway.requests.message_key`).
The messages a body repeats byte for byte from the session's previous body are that body's own
dicts (:mod:`chatdata.gateway.body_prefix`, found by :meth:`SessionTable.memo_for`, without the
header through :mod:`chatdata.gateway.memo_index`), and a
branch keeps the equal dicts it is sent, so the repeated messages compare by identity: routing
costs O(new messages) plus a pointer check per old one.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> import tempfile, pathlib
    >>> table = SessionTable(load_sample_tokenizer(), None, pathlib.Path(tempfile.mkdtemp()), durable=False)
    >>> from chatdata.gateway.requests import parse_chat_request
    >>> req = parse_chat_request(b'{"messages": [{"role": "user", "content": "hi"}]}')
    >>> plan = table.route(req, "s1"); plan.kind
    'new'
    >>> plan = table.prepare(plan, req); len(plan.prompt) > 0
    True
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..rollout import Conversation
from .body_prefix import BodyMemo
from .errors import GatewayError
from .journal import Journal
from .memo_index import MemoIndex
from .prompt_ids import IdsText, PromptIds
from .requests import ChatRequest, message_key, normalize_message

__all__ = ["Branch", "Session", "SessionTable", "Plan", "openai_message", "cut_at_stop"]



def openai_message(msg: dict) -> dict:
    """The OpenAI form of a parsed assistant message (what the client receives and echoes):
    ``content`` (None when there is only tool calls), ``tool_calls`` with ``arguments`` as a
    JSON string, ``reasoning_content`` when the template has it.

    Example:
        >>> openai_message({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "c1",
        ...                 "function": {"name": "f", "arguments": {"x": 1}}}]})["tool_calls"][0]["function"]
        {'name': 'f', 'arguments': '{"x": 1}'}
    """
    calls = msg.get("tool_calls") or []
    out: dict = {"role": "assistant", "content": msg.get("content") or (None if calls else "")}
    if calls:
        out["tool_calls"] = [{"id": c.get("id"), "type": "function", "function": {
            "name": c["function"]["name"],
            "arguments": a if isinstance(a := c["function"]["arguments"], str) else json.dumps(a, ensure_ascii=False)}}
            for c in calls]
    if msg.get("reasoning_content"):
        out["reasoning_content"] = msg["reasoning_content"]
    return out


def cut_at_stop(content: str | None, stops) -> str | None:
    r"""``content`` cut where the first of the ``stops`` strings in it begins (what an OpenAI
    server returns for a turn a stop string ended), or None when it holds none of them (the
    string ended inside the reasoning or a tool call, or the parser trimmed it).

    Example:
        >>> cut_at_stop("Action: search\nObservation: x", ["\nObservation", "Final"])
        'Action: search'
        >>> cut_at_stop("no stop here", ["STOP"]) is None
        True
    """
    if not content:
        return None
    at = min((i for i in (content.find(x) for x in stops) if i >= 0), default=-1)
    return None if at < 0 else content[:at]


def _answer_key(msg: dict, sent: dict) -> tuple:
    """The key the client's copy of an answer is routed by: the stored message's, or, for a turn
    whose content the client received cut at a stop string, the cut content's (a request without
    ``X-Session-Id`` finds its session through these keys).

    Example:
        >>> msg = {"role": "assistant", "content": "Act STOP"}
        >>> _answer_key(msg, {"role": "assistant", "content": "Act "}) == message_key({"role": "assistant", "content": "Act "})
        True
    """
    cut = sent.get("content")
    if cut is not None and cut != msg.get("content"):
        return message_key({**msg, "content": cut})
    return message_key(msg)


def _attach_call_ids(msg: dict, ids: list | None = None) -> None:
    """Give every parsed tool call an id (the template's when it wrote one; else ``ids`` or a new one)."""
    for k, call in enumerate(msg.get("tool_calls") or ()):
        if "id" not in call:
            call["id"] = ids[k] if ids and k < len(ids) and ids[k] else f"call_{uuid.uuid4().hex[:24]}"


class Branch:
    """One branch of a session: its conversation and the messages as clients saw them."""

    __slots__ = ("number", "conv", "seen", "keys", "busy", "engine_key", "ids_text", "preparing")

    def __init__(self, number: int, conv: Conversation, seen: list, keys: list, engine_key: str) -> None:
        self.number, self.conv, self.seen, self.keys, self.engine_key = number, conv, seen, keys, engine_key
        self.busy = False
        self.preparing: Any = None  # an asyncio.Event while a worker thread renders into conv (see Gateway.chat)
        self.ids_text = IdsText()  # the committed ids as JSON text, for the backend (see prompt_ids)

    def match(self, raw: list) -> int:
        """How many leading messages of ``raw`` this branch holds. A message equal to the one
        held replaces it (the same value), so that the next request, which repeats the same
        parsed dicts (:mod:`chatdata.gateway.body_prefix`), is compared by identity."""
        seen, keys = self.seen, self.keys
        n = min(len(raw), len(seen))
        for i in range(n):
            m = raw[i]
            held = seen[i]
            if m is held:
                continue
            if m == held:
                seen[i] = m
                continue
            try:
                if message_key(normal := normalize_message(m, i)) == keys[i] and _same_reasoning(normal, held):
                    continue
            except GatewayError:
                pass  # a malformed message is a new one: it is reported when normalised
            return i
        return n


def _same_reasoning(sent: dict, held: dict) -> bool:
    """Whether the reasoning of a message sent back (normalised) is the held one's: dropped (no
    or empty reasoning) or unchanged. Reasoning sent back changed is an edit of the turn, as
    changed text is (a template such as Qwen3's renders it in a tool loop).

    Example:
        >>> held = {"role": "assistant", "content": "ok", "reasoning_content": "plan A"}
        >>> [_same_reasoning(m, held) for m in ({"content": "ok"}, {"reasoning_content": "plan A"},
        ...                                     {"reasoning_content": "plan B"})]
        [True, True, False]
    """
    mine = sent.get("reasoning_content")
    if not mine:
        return True
    theirs = held.get("reasoning_content", held.get("reasoning")) if isinstance(held, dict) else None
    return mine == theirs


class Session:
    """An open session: its branches (``None`` where a number is taken by a request still being
    logged), its log, and how many requests are in flight."""

    __slots__ = ("id", "branches", "journal", "last_used", "inflight", "closed", "memo")

    def __init__(self, session_id: str, journal: Journal | None) -> None:
        self.id = session_id
        self.memo: BodyMemo | None = None  # what the session's next body may repeat (see SessionTable.memo_for)
        self.branches: list[Branch | None] = []
        self.journal = journal
        self.last_used = time.monotonic()
        self.inflight = 0
        self.closed = False


@dataclass
class Plan:
    """Where a request goes, and (after :meth:`SessionTable.prepare`) the prompt to send."""

    kind: str  # "extend", "fork", "new"
    session_id: str
    session: Session | None = None
    branch: Branch | None = None
    k: int = 0  # messages shared with ``branch``
    conv: Conversation | None = None
    mark: Any = None
    base: int = 0  # ids the branch held before this request (the prompt past them is logged)
    new_raw: list = field(default_factory=list)
    new_norm: list = field(default_factory=list)
    prompt: Any = field(default_factory=list)  # the ids past ``base`` (a 1-D tensor): what the log keeps
    full: PromptIds | None = None  # every id to send
    fork: Any = None  # a fork's Conversation.fork_later (taken by begin, called by render)
    engine: dict = field(default_factory=dict)


def _grow(conv: Conversation, new: list) -> None:
    """Add the request's new messages; with none, make sure the prompt ends with the generation prompt."""
    if new or conv.committed == len(conv.prompt_ids()):
        conv.add_messages(new)


class SessionTable:
    """The open sessions of a gateway (see the module docstring)."""

    def __init__(self, tokenizer: Any, chat_template: str | None, journal_dir: Path, durable: bool = True,
                 template_kwargs: dict | None = None) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.journal_dir = Path(journal_dir)
        self.durable = durable
        self.template_kwargs = dict(template_kwargs or {})
        self.sessions: dict[str, Session] = {}
        self._turns: dict[tuple, list[tuple[Session, Branch]]] = {}
        self._memos = MemoIndex()  # the sessions' last bodies, found from a new body's bytes

    # -- the bodies requests repeat ---------------------------------------------------------------
    def memo_for(self, raw: bytes, session_id: str | None) -> BodyMemo | None:
        """The previous body (:mod:`chatdata.gateway.body_prefix`) whose messages ``raw``
        repeats byte for byte: the named session's, else the longest one among open sessions
        whose bodies start with the same bytes. Any choice parses exactly; this one parses least."""
        if not isinstance(raw, bytes):
            return None
        named = self.sessions.get(session_id) if session_id is not None else None
        if named is not None and named.memo is not None and raw.startswith(named.memo.prefix):
            return named.memo
        return self._memos.find(raw)

    def keep_memo(self, s: Session, memo: BodyMemo | None) -> None:
        """Remember the body a completed request of ``s`` sent, for the session's next one."""
        old, s.memo = s.memo, None
        if old is not None:
            self._memos.remove(s, old)
        if s.closed:
            return
        s.memo = memo
        if memo is not None:
            self._memos.add(s, memo)

    # -- routing --------------------------------------------------------------------------------
    def route(self, req: ChatRequest, session_id: str | None) -> Plan:
        """Decide where ``req`` goes (no side effect)."""
        raw, key = req.raw_messages, req.engine_key
        if session_id is not None:
            s = self.sessions.get(session_id)
            if s is None:
                return Plan("new", session_id)
            return self._best(s, s.branches, raw, key) or Plan("new", session_id, s)
        for i in range(len(raw) - 1, -1, -1):
            m = raw[i]
            if m.get("role") != "assistant":
                continue
            try:
                mk = message_key(normalize_message(m, i))
            except GatewayError:
                continue
            found = self._turns.get((i, mk))
            if found:
                by_session: dict[int, tuple[Session, list]] = {}
                for s, b in found:
                    by_session.setdefault(id(s), (s, []))[1].append(b)
                for s, branches in by_session.values():
                    plan = self._best(s, branches, raw, key, at_least=i + 1)
                    if plan is not None:
                        return plan
        return Plan("new", f"sess-{uuid.uuid4().hex[:20]}")

    def _best(self, s: Session, branches: list, raw: list, key: str, at_least: int = 1) -> Plan | None:
        best, best_k = None, 0
        for b in reversed(branches):
            if b is None or b.engine_key != key:
                continue
            k = b.match(raw)
            if k == len(b.seen) and not b.busy and k >= at_least:
                return Plan("extend", s.id, s, b, k)
            if k > best_k:
                best, best_k = b, k
        if best is None or best_k < at_least:
            return None
        return Plan("fork", s.id, s, best, best_k)

    # -- a request's life ---------------------------------------------------------------------------
    def prepare(self, plan: Plan, req: ChatRequest) -> Plan:
        """Render the request's new messages into ``plan.prompt`` (ids to send). Raises a 400
        :class:`GatewayError` for a malformed message or one the template refuses; nothing is
        changed then. It is :meth:`begin` (the part that reads or changes the table) then
        :meth:`render` (the part that may run in a worker thread)."""
        self.begin(plan, req)
        try:
            return self.render(plan)
        except BaseException:
            self.abort(plan)
            raise

    def begin(self, plan: Plan, req: ChatRequest) -> Plan:
        """The part of :meth:`prepare` that touches the table, run on the event loop: the new
        messages are normalised, an extended branch is marked busy (and checkpointed, for
        :meth:`abort`), a fork takes what it shares of its branch (messages, turns, a view of
        their ids: :meth:`~chatdata.rollout.Conversation.fork_later`; cheap, nothing is
        rendered). A 400 here changes nothing."""
        plan.new_raw = req.raw_messages[plan.k:]
        plan.new_norm = [normalize_message(m, plan.k + j) for j, m in enumerate(plan.new_raw)]
        plan.engine = {"tools": req.tools, "template_kwargs": req.template_kwargs}
        if plan.kind == "extend":
            plan.conv = plan.branch.conv
            plan.mark, plan.base = plan.conv.checkpoint(), plan.conv.committed
            plan.branch.busy = True
        elif plan.kind == "fork":  # what the fork keeps is taken now; :meth:`render` renders it
            plan.fork = plan.branch.conv.fork_later(plan.k)
        return plan

    def render(self, plan: Plan) -> Plan:
        """Render and encode the new messages of a :meth:`begin` plan (and a fork's shared
        prefix), and build the backend's prompt. It changes only the plan's own conversation (a
        fork's or a new one, or the extended branch's, which :meth:`begin` marked busy) and reads
        nothing else of the table (a fork reads what :meth:`begin` took of its source branch, not
        the branch), so it may run in a worker thread while the event loop serves other requests,
        the fork's source branch included (the caller keeps requests that would read an extended
        branch waiting). On an error the caller calls :meth:`abort`."""
        try:
            if plan.kind == "new":
                plan.conv = self._conversation(plan.new_norm, plan.engine)
            else:
                if plan.kind == "fork":  # the shared prefix, re-rendered from what begin() took of the branch
                    plan.conv = plan.fork()
                    plan.base = plan.conv.committed
                _grow(plan.conv, plan.new_norm)
        except ValueError as err:  # the template refuses the conversation
            raise GatewayError(400, f"the chat template cannot render these messages: {err}", param="messages") from None
        ids = plan.conv.prompt_ids()
        # the branch's committed ids are serialised once, not on every turn
        plan.full = plan.branch.ids_text.prompt(ids, plan.base) if plan.kind == "extend" else PromptIds(ids)
        plan.full.json()  # here: off the loop too when this runs in a thread
        plan.prompt = ids[plan.base:]  # a view (the log packs its bytes; nothing appends inside it)
        return plan

    def _conversation(self, messages: list, engine: dict) -> Conversation:
        kwargs = {**self.template_kwargs, **(engine.get("template_kwargs") or {})}
        return Conversation(messages, tokenizer=self.tokenizer, chat_template=self.chat_template,
                            tools=engine.get("tools"), **kwargs)

    def abort(self, plan: Plan) -> None:
        """Undo a begun or prepared request that failed (its rendering, or its generation)."""
        if plan.kind == "extend" and plan.mark is not None:
            plan.conv.rollback(plan.mark)
            plan.mark = None
            plan.branch.busy = False

    def complete(self, plan: Plan, ids: list[int], logprobs: list[float], finish: str,
                 call_ids: list | None = None, stop: tuple = (), sent_content: str | None = None
                 ) -> tuple[dict, dict, dict]:
        """Keep what the backend sampled: returns ``(stored message, the message the client
        receives, log record)``. The record must be in the session's log before :meth:`publish`
        makes the turn visible.

        A turn that one of the request's ``stop`` strings ended is stored as every id sampled
        (the stop string's ids too), while the client receives its content cut where the stop
        string begins, as OpenAI's and vLLM's servers answer (a ReAct harness stopping at
        ``"Observation:"`` parses its action from that content). The cut content is logged
        (``sent_content``, given back here when the log is replayed), so the client's copy of the
        turn keeps routing to this branch after a restart."""
        msg = plan.conv.add_response(ids, logprobs)
        _attach_call_ids(msg, call_ids)
        record = {"b": None, "parent": None, "shared": plan.base if plan.kind == "fork" else 0,
                  "messages": plan.new_norm, "prompt": plan.prompt, "ids": ids, "logprobs": logprobs,
                  "message": msg, "finish": finish}
        sent = openai_message(msg)
        if sent_content is None and stop and finish == "stop":
            sent_content = cut_at_stop(sent["content"], stop)
        if sent_content is not None:
            sent["content"] = record["sent_content"] = sent_content
        if plan.kind != "extend":
            record["engine"] = plan.engine
        if plan.kind == "fork":
            record["parent"] = [plan.branch.number, plan.k]
        return msg, sent, record

    def session_for(self, plan: Plan) -> Session:
        """The session a completed request belongs to (created on a new session's first answer)."""
        s = plan.session  # kept even if it is being stored: its commit waits for this request
        if s is None:
            s = self.sessions.get(plan.session_id)
            if s is None:
                s = Session(plan.session_id, Journal.create(self.journal_dir, plan.session_id, self.durable))
                self.sessions[s.id] = s
        plan.session = s
        return s

    def number(self, plan: Plan) -> int:
        """The branch number the completed request is logged under (a new branch takes the next
        free number at once, so requests logged at the same time never share one)."""
        if plan.kind == "extend":
            return plan.branch.number
        plan.session.branches.append(None)
        return len(plan.session.branches) - 1

    def publish(self, plan: Plan, number: int, msg: dict, sent: dict) -> Branch:
        """Make a logged turn visible to routing: branch ``number`` now holds the new messages
        and the answer (``sent`` is the OpenAI form the client received)."""
        keys = [message_key(m) for m in plan.new_norm] + [_answer_key(msg, sent)]
        if plan.kind == "extend":
            b = plan.branch
            b.seen += [*plan.new_raw, sent]
            b.keys += keys
            b.busy = False
        else:
            s = plan.session
            head_seen = plan.branch.seen[:plan.k] if plan.kind == "fork" else []
            head_keys = plan.branch.keys[:plan.k] if plan.kind == "fork" else []
            b = Branch(number, plan.conv, head_seen + [*plan.new_raw, sent], head_keys + keys,
                       json.dumps([plan.engine.get("tools"), plan.engine.get("template_kwargs") or {}],
                                  sort_keys=True, ensure_ascii=False))
            s.branches[number] = b
        plan.session.last_used = time.monotonic()
        if plan.session.closed:  # stored once this request is logged: routing must not find it
            return b
        index = plan.conv.turns if plan.kind != "extend" else plan.conv.turns[-1:]  # a fork's replayed turns too
        for a, _, _ in index:
            self._turns.setdefault((a, b.keys[a]), []).append((plan.session, b))
        return b

    # -- resuming and closing ------------------------------------------------------------------------
    def resume(self, path: Path, head: dict, records: list[dict]) -> Session:
        """Rebuild an open session from its log (``records`` replayed through the same steps as
        live requests); raises ValueError when the replayed prompts differ from the logged ones."""
        s = Session(head["session_id"], Journal.reopen(Path(path), head["session_id"], head["uid"], self.durable))
        for n, r in enumerate(records):
            b = r["b"]
            if b < len(s.branches) and s.branches[b] is not None:
                plan = Plan("extend", s.id, s, s.branches[b], len(s.branches[b].seen))
            elif r.get("parent") is None:
                plan = Plan("new", s.id, s)
            else:
                pb, k = r["parent"]
                plan = Plan("fork", s.id, s, s.branches[pb], k)
            plan.new_raw = plan.new_norm = r["messages"]
            plan.engine = r.get("engine") or {"tools": None, "template_kwargs": {}}
            if plan.kind == "extend":
                plan.base = plan.branch.conv.committed
                plan.conv = plan.branch.conv
                plan.mark = plan.conv.checkpoint()
                _grow(plan.conv, plan.new_norm)
            elif plan.kind == "fork":
                plan.conv = plan.branch.conv.fork(plan.k)
                plan.base = plan.conv.committed
                _grow(plan.conv, plan.new_norm)
            else:
                plan.conv = self._conversation(plan.new_norm, plan.engine)
            plan.prompt = plan.conv.prompt_ids()[plan.base:].tolist()
            if plan.prompt != r["prompt"]:
                raise ValueError(f"{path}: record {n}: the prompt rendered now differs from the logged one "
                                 "(was the gateway restarted with another tokenizer or template?)")
            msg, sent, _ = self.complete(plan, r["ids"], r["logprobs"], r["finish"],
                                         [c.get("id") for c in r["message"].get("tool_calls") or ()],
                                         sent_content=r.get("sent_content"))
            while plan.kind != "extend" and len(s.branches) <= b:
                s.branches.append(None)
            self.publish(plan, b, msg, sent)
        self.sessions[s.id] = s
        return s

    def remove(self, s: Session) -> None:
        """Forget a session (it is being stored): routing no longer finds it."""
        s.closed = True
        if self.sessions.get(s.id) is s:
            del self.sessions[s.id]
        if s.memo is not None:
            self._memos.remove(s, s.memo)
            s.memo = None
        for b in s.branches:
            if b is None:
                continue
            for a, _, _ in b.conv.turns:
                if a >= len(b.keys):  # a turn whose logging failed: never published, so never indexed
                    continue
                entries = self._turns.get((a, b.keys[a]))
                if entries:
                    entries[:] = [e for e in entries if e[1] is not b]
                    if not entries:
                        del self._turns[(a, b.keys[a])]

    def idle(self, older_than: float) -> list[Session]:
        """Sessions with nothing in flight, unused for ``older_than`` seconds."""
        now = time.monotonic()
        return [s for s in self.sessions.values() if s.inflight == 0 and now - s.last_used >= older_than]
