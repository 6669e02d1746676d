"""The ASGI app: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``,
``POST /v1/sessions/{id}/close``, on Starlette.

Each chat request is routed to a session branch (:mod:`chatdata.gateway.sessions`), only its
new messages are rendered and tokenized, the prompt ids go to the backend
(:mod:`chatdata.gateway.backends`), the sampled ids and logprobs are kept verbatim, the
completed request is written to the session's log (:mod:`chatdata.gateway.journal`) and only
then answered. Sessions are stored (:mod:`chatdata.gateway.store`) when closed, when idle for
``idle_timeout`` seconds, and at shutdown (uvicorn's SIGTERM). A restart on the same ``out``
resumes the sessions that were open.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> import tempfile
    >>> app = create_app("http://127.0.0.1:9", load_sample_tokenizer(), tempfile.mkdtemp() + "/out")
    >>> sorted(r.path for r in app.routes)
    ['/health', '/v1/chat/completions', '/v1/models', '/v1/sessions/{session_id:path}/close']
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from .backends import Sampling, make_backend
from .errors import GatewayError
from .journal import read_journal
from .requests import parse_chat_request, reserved_names
from .sizes import rendered_chars, text_chars, verbatim_chars
from .responses import chat_logprobs, completion_body, finish_reason, sse_chunks
from .sessions import SessionTable
from .store import SessionStore
from .token_bytes import TokenBytes, longest_token

__all__ = ["Gateway", "create_app", "OFFLOAD_CHARS"]

# new messages holding more characters than this are rendered and encoded in a worker thread
# (about 10 ms of work at 64 Ki characters; below it the hop to a thread costs more than it frees)
OFFLOAD_CHARS = 1 << 16

log = logging.getLogger("chatdata.gateway")


def _load_tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        p = Path(tokenizer)
        if not p.is_dir():
            raise ValueError(f"--tokenizer {tokenizer}: no such folder (give the folder of a saved tokenizer)")
        return AutoTokenizer.from_pretrained(str(p))
    return tokenizer


def _session_header(value: str | None) -> str | None:
    if value is None:
        return None
    if not value or len(value) > 256 or not value.isprintable() or not value.isascii():
        # not ASCII: header bytes carry no encoding (read as Latin-1, 'café' sent as UTF-8 was stored as 'cafÃ©')
        raise GatewayError(400, "the X-Session-Id header must be 1 to 256 printable ASCII characters", param="X-Session-Id")
    return value


def _check_settings(idle_timeout: Any, timeout: Any, default_max_tokens: Any, template_kwargs: Any = None) -> None:
    """Refuse settings the gateway would run with silently wrong: an idle timeout of 0 (or less)
    stored every session right after each request, so each turn began a new tree; NaN never
    stored an idle session; a default max_tokens of 0 made every request without one fail;
    template variables named like what the gateway passes itself."""
    for name, v in (("idle_timeout", idle_timeout), ("timeout", timeout)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:  # NaN too
            raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
    if isinstance(default_max_tokens, bool) or not isinstance(default_max_tokens, int) or default_max_tokens < 1:
        raise ValueError(f"default_max_tokens must be an integer >= 1, got {default_max_tokens!r}")
    if template_kwargs is not None and (not isinstance(template_kwargs, dict)
                                        or not all(isinstance(k, str) for k in template_kwargs)):
        raise ValueError(f"template_kwargs must be a dict of template variables by name, got {template_kwargs!r:.200}")
    if reserved_names(template_kwargs):  # every request was a 500 (tools, messages), or rendered without
        # its generation prompt (add_generation_prompt: False), or the start a TypeError (tokenizer)
        raise ValueError(f"template_kwargs may not set {reserved_names(template_kwargs)} (only template variables; "
                         "the gateway sets these itself)")


_PROBE = ("Zq9gw-user-0", "Zq9gw-assistant-0", "Zq9gw-user-1")


def _check_messages_survive(template: str, tokenizer: Any, kwargs: dict) -> None:
    """Refuse a template that does not write the messages' text (a file that is plain text to
    Jinja, such as a README, or a config given as --chat-template): every conversation rendered
    to the same prompt and the agents' messages were lost silently. Refuse as well a tokenizer
    that loses that text (a folder with ``tokenizer_config.json`` but no ``tokenizer.json``
    loads as one that encodes text to no ids). A template that refuses the probe chat outright
    says so on the first request instead."""
    from ..templates import Renderer, TemplateError

    chat = [{"role": r, "content": c} for r, c in zip(("user", "assistant", "user"), _PROBE)]
    try:
        text = Renderer(template, tokenizer=tokenizer, **kwargs).render(chat, add_generation_prompt=True)
    except (TemplateError, ValueError, TypeError):
        return
    missing = [c for c in _PROBE if c not in text]
    if missing:
        raise ValueError(f"the chat template does not write the messages' text (a probe chat of three messages "
                         f"rendered as {text[:120]!r}): give a chat template (a Jinja file that loops over "
                         "messages), or leave it out to use the tokenizer's")
    back = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=False)
    if any(c not in back for c in _PROBE):
        where = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ValueError(f"the tokenizer {where} loses the messages' text (a rendered probe chat decodes to "
                         f"{back[:120]!r}): it has no vocabulary? (a folder needs tokenizer.json, not only "
                         "tokenizer_config.json or a compressed copy)")


class Gateway:
    """The gateway's state: tokenizer and template, backend, open sessions, output folder.

    Args: as :func:`create_app`.
    """

    def __init__(self, backend: str, tokenizer: Any, out, chat_template: str | None = None,
                 chat_template_name: str | None = None, backend_api: str = "auto", model_name: str | None = None,
                 backend_model: str | None = None, idle_timeout: float = 300.0, durable: bool = True,
                 default_max_tokens: int = 4096, template_kwargs: dict | None = None, timeout: float = 600.0,
                 offload_chars: int = OFFLOAD_CHARS) -> None:
        from ..rollout import template_facts
        from ..templates import resolve_chat_template

        _check_settings(idle_timeout, timeout, default_max_tokens, template_kwargs)
        if isinstance(offload_chars, bool) or not isinstance(offload_chars, int) or offload_chars < 0:
            raise ValueError(f"offload_chars must be an integer >= 0 (characters), got {offload_chars!r}")
        self.offload_chars = offload_chars
        self.preparing = 0  # requests whose new messages a worker thread renders now (GET /health says it)
        self.backend = make_backend(backend, backend_api, backend_model, timeout)  # its URL is checked before any load
        self.store = SessionStore(out, durable)
        self.store.preflight(logs=False)  # a file or a foreign folder is refused here, not in the server's startup
        self.tokenizer = _load_tokenizer(tokenizer)
        self.template = resolve_chat_template(self.tokenizer, chat_template, chat_template_name, None)
        kwargs = dict(template_kwargs or {})
        _check_messages_survive(self.template, self.tokenizer, kwargs)
        facts = template_facts(self.template, tokenizer=self.tokenizer, **kwargs)
        eot_id = self.tokenizer.convert_tokens_to_ids(facts.eot) if facts.eot else None
        unk = getattr(self.tokenizer, "unk_token_id", None)
        self.stop_token_ids = (eot_id,) if isinstance(eot_id, int) and eot_id != unk else ()
        self.token_bytes = TokenBytes(self.tokenizer)  # the answer's logprobs: each token's own bytes
        self.model_name = model_name or (Path(str(tokenizer)).name if isinstance(tokenizer, (str, Path))
                                         else getattr(self.tokenizer, "name_or_path", "") or "chatdata")
        self.table = SessionTable(self.tokenizer, self.template, self.store.journal_dir, durable, kwargs)
        self.idle_timeout = idle_timeout
        self.default_max_tokens = default_max_tokens
        self._context: int | None | bool = False  # False: not known yet (not asked, or the backend was down)
        self._longest: int | None = None  # longest_token(tokenizer), once a request needs it
        self._idle_task: asyncio.Task | None = None
        self._commit_lock: asyncio.Lock | None = None
        self.started = time.time()

    # -- life ---------------------------------------------------------------------------------------
    async def startup(self) -> None:
        """Open the output folder, resume its open sessions, start the idle committer."""
        self._commit_lock = asyncio.Lock()
        pending = await asyncio.to_thread(self.store.open)
        stale = []
        for path in pending:
            try:
                head, records, _ = read_journal(path)
                self.table.resume(path, head, records)
            except (ValueError, RuntimeError, KeyError, TypeError) as err:
                log.warning("chatdata serve: session log %s cannot be resumed (%s); storing it as it is", path, err)
                stale.append(path)
        if stale:
            try:
                await asyncio.to_thread(self.store.commit, stale)
            except ValueError as err:  # was a traceback of History's, naming no file
                raise ValueError(f"session logs that can be neither resumed nor stored: {err}. Move them out of "
                                 f"{self.store.journal_dir} (or delete them) to start") from None
        await self.backend.start()
        self._idle_task = asyncio.create_task(self._idle_loop())

    async def shutdown(self) -> None:
        """Store every open session, release the folder."""
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
        try:
            await self.commit(list(self.table.sessions.values()))
        finally:
            self.store.close()
            await self.backend.aclose()

    async def _idle_loop(self) -> None:
        tick = max(0.05, min(self.idle_timeout / 4, 5.0))
        while True:
            await asyncio.sleep(tick)
            idle = self.table.idle(self.idle_timeout)
            if idle:
                try:
                    await self.commit(idle)
                except Exception:  # noqa: BLE001 - logged; the logs stay for the next start
                    log.exception("chatdata serve: storing idle sessions failed (their logs are kept)")
            idle = None  # the stored sessions (their conversations) are not kept alive until the next tick

    async def commit(self, sessions: list) -> str | None:
        """Store ``sessions`` now (they leave the table at once; requests in flight finish first)."""
        if not sessions:
            return None
        for s in sessions:
            self.table.remove(s)
        while any(s.inflight for s in sessions):
            await asyncio.sleep(0.005)
        async with self._commit_lock:
            return await asyncio.to_thread(self.store.commit, [s.journal.path for s in sessions])

    # -- requests -------------------------------------------------------------------------------------
    async def _context_length(self) -> int | None:
        if self._context is False:
            self._context = await self.backend.context_length()
        return self._context or None

    def _check_fits(self, new_messages: list, context: int | None) -> None:
        """Refuse, before rendering, new messages whose text alone cannot fit the context (a
        token holds at most ``longest_token`` characters): a 10 MB tool output was rendered and
        encoded on the event loop, every session waiting for it (seconds per MB), and then
        refused as too long for the context anyway."""
        if not context:
            return
        chars = verbatim_chars(new_messages)
        if chars <= context:  # at least one character per token
            return
        if self._longest is None:
            self._longest = longest_token(self.tokenizer)
        if chars > context * self._longest:
            raise GatewayError(400, f"the new messages hold {chars} characters, more than the backend's context of "
                                    f"{context} tokens can hold (a token is at most {self._longest} characters)",
                               param="messages", code="context_length_exceeded")

    async def _max_tokens(self, asked: int | None, prompt_len: int) -> int:
        await self._context_length()
        if self._context:
            room = self._context - prompt_len
            if room <= 0:
                raise GatewayError(400, f"the conversation is {prompt_len} tokens, and the backend's context is "
                                        f"{self._context}: nothing is left to generate", param="messages",
                                   code="context_length_exceeded")
            return min(asked, room) if asked else room
        return asked or self.default_max_tokens

    def _stop_ids(self, req) -> tuple[int, ...]:
        """The template's end-of-turn id, then the request's own stop ids. With ``ignore_eos`` the
        end-of-turn id is left out: it is the model's EOS for chat models (Qwen's ``<|im_end|>``),
        which the engines then ignore, but not as a stop id the gateway sends."""
        eot = () if req.ignore_eos else self.stop_token_ids
        return (*eot, *dict.fromkeys(i for i in req.stop_token_ids if i not in eot))

    def _render_chars(self, plan, new_chars: int, req) -> int:
        """What rendering ``plan`` costs, in characters: its new messages (their calls' arguments
        and reasoning too), and for a fork or a new branch the tools it renders and the messages a
        fork shares with its source, which it renders again (a retry after a 5 MB tool output
        re-renders that output). ``new_chars``: :func:`rendered_chars` of the new messages.
        O(shared messages) for a fork."""
        n = new_chars
        if n > self.offload_chars or plan.kind == "extend":
            return n
        if req.tools:
            n += text_chars(req.tools)
        if plan.kind == "fork":
            n += rendered_chars(plan.branch.seen[:plan.k])
        return n

    async def _render_off_loop(self, plan) -> None:
        """``table.render(plan)`` in a worker thread, so that rendering and encoding a message of
        many MB (seconds) holds up no other session, nor ``/health``. While it runs, requests
        routed to the branch it extends wait (``branch.preparing``); a cancelled request waits
        for the thread before its caller undoes the plan (the thread works on that branch)."""
        b = plan.branch if plan.kind == "extend" else None
        if b is not None:
            b.preparing = asyncio.Event()
        self.preparing += 1
        fut = asyncio.get_running_loop().run_in_executor(None, self.table.render, plan)
        cancelled = False
        try:
            while not fut.done():
                try:
                    await asyncio.wait({fut})
                except asyncio.CancelledError:
                    cancelled = True
        finally:
            self.preparing -= 1
            if b is not None:
                b.preparing.set()
                b.preparing = None
        if cancelled:
            raise asyncio.CancelledError
        fut.result()

    async def chat(self, raw: bytes, session_header: str | None) -> tuple[dict, dict, Any]:
        """Serve one chat request: returns (response body pieces, headers, request)."""
        sid = _session_header(session_header)
        context = await self._context_length()  # asked first: no await may come between route and begin
        req = parse_chat_request(raw, self.table.memo_for(raw, sid))
        plan = self.table.route(req, sid)
        while plan.branch is not None and plan.branch.preparing is not None:
            # a worker thread renders into that branch: wait for it, then route again (as if its
            # rendering had run here before this request, as a small one does)
            await plan.branch.preparing.wait()
            plan = self.table.route(req, sid)
        new = req.raw_messages[plan.k:]
        self._check_fits(new, context)
        self.table.begin(plan, req)
        counted = plan.session
        if counted is not None:
            counted.inflight += 1
        generated = False
        try:
            new_chars = rendered_chars(new)
            if self._render_chars(plan, new_chars, req) > self.offload_chars:
                await self._render_off_loop(plan)
            else:
                self.table.render(plan)
            prompt = plan.full
            sampling = Sampling(max_tokens=await self._max_tokens(req.max_tokens, len(prompt)),
                                temperature=req.temperature, top_p=req.top_p, stop=tuple(req.stop),
                                stop_token_ids=self._stop_ids(req),
                                seed=req.seed, min_tokens=req.min_tokens, ignore_eos=req.ignore_eos,
                                presence_penalty=req.presence_penalty, frequency_penalty=req.frequency_penalty,
                                top_k=req.top_k, min_p=req.min_p, repetition_penalty=req.repetition_penalty,
                                logit_bias=req.logit_bias)
            gen = await self.backend.generate(prompt, sampling)
            msg, sent, record = self.table.complete(plan, gen.ids, gen.logprobs, gen.finish_reason, stop=req.stop)
            generated = True
            s = self.table.session_for(plan)
            if counted is None:
                s.inflight += 1
                counted = s
            number = self.table.number(plan)
            record["b"] = number
            try:
                # fsync off the event loop, and a big line's JSON and write too (a 5 MB request's
                # line took 70-180 ms); either way the answer waits for it
                if s.journal.durable or new_chars + len(plan.prompt) + len(gen.ids) > self.offload_chars:
                    await asyncio.to_thread(s.journal.append, record)
                else:
                    s.journal.append(record)
            except BaseException:  # not logged: the branch holds a turn the log lacks, so the session
                self.table.remove(s)  # leaves routing (its log, whole up to here, is stored as it is)
                raise
            self.table.publish(plan, number, msg, sent)
            self.table.keep_memo(s, req.memo)
        finally:
            if not generated:
                self.table.abort(plan)  # nothing was sampled or kept: the branch is as it was
            if counted is not None:
                counted.inflight -= 1
        finish = finish_reason(msg, gen.finish_reason)
        lps = None
        if req.logprobs:
            lps = chat_logprobs(self.token_bytes(gen.ids), gen.logprobs)
        pieces = {"cid": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()),
                  "model": req.model or self.model_name, "message": sent, "finish": finish,
                  "counts": (len(prompt), len(gen.ids)), "logprobs": lps}
        headers = {"X-Session-Id": s.id, "X-Chatdata-Branch": str(number)}
        return pieces, headers, req


async def read_body(request, limit: float) -> bytes:
    """The request's body, read in chunks; a 413 once it passes ``limit`` bytes (by its
    Content-Length, or while it streams in), so one huge body never fills the gateway's memory.

    Example:
        >>> import asyncio
        >>> from starlette.requests import Request
        >>> async def receive():
        ...     return {"type": "http.request", "body": b"x" * 10, "more_body": False}
        >>> asyncio.run(read_body(Request({"type": "http", "headers": []}, receive), 100))
        b'xxxxxxxxxx'
    """
    def too_large() -> GatewayError:
        return GatewayError(413, f"the request body is larger than this gateway's limit of {limit / 2**20:g} MiB "
                                 "(chatdata serve --max-body-mb)", code="request_too_large")

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(backend: str, tokenizer: Any, out, chat_template: str | None = None,
               chat_template_name: str | None = None, backend_api: str = "auto", model_name: str | None = None,
               backend_model: str | None = None, idle_timeout: float = 300.0, durable: bool = True,
               default_max_tokens: int = 4096, template_kwargs: dict | None = None, timeout: float = 600.0,
               max_body_mb: float = 64.0, offload_chars: int = OFFLOAD_CHARS):
    """The gateway as an ASGI app (Starlette); run it with uvicorn.

    Args:
        backend: the backend's URL (vLLM's server root or ``/v1``, or SGLang's ``/generate``).
        tokenizer: the policy's tokenizer, or the folder it is saved in.
        out: the output folder (created; an earlier gateway's folder is resumed).
        chat_template / chat_template_name: the template source or a registered name (default:
            the tokenizer's own).
        backend_api: ``"vllm"``, ``"sglang"`` or ``"auto"`` (from the URL).
        model_name: the name ``/v1/models`` lists (default: the tokenizer folder's name).
        backend_model: the ``model`` field sent to vLLM (default: none, its only model).
        idle_timeout: seconds after which an unused session is stored.
        durable: fsync logs and shards (a stored request survives a power loss, not only a kill).
        default_max_tokens: the generation limit when the request gives none and the backend
            does not tell its context length.
        template_kwargs: template variables for every request (``enable_thinking=False``, ...).
        timeout: seconds to wait for the backend.
        max_body_mb: the largest request body accepted, in MiB (a larger one is a 413).
        offload_chars: requests whose new messages hold more characters than this are rendered
            and encoded in a worker thread, so that other sessions and ``/health`` are served
            meanwhile (0: every request; the stored data are the same either way).
    """
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    if isinstance(max_body_mb, bool) or not isinstance(max_body_mb, (int, float)) or not max_body_mb > 0:
        raise ValueError(f"max_body_mb must be a positive number of MiB, got {max_body_mb!r}")
    limit = max_body_mb * 2**20
    gw = Gateway(backend, tokenizer, out, chat_template, chat_template_name, backend_api, model_name, backend_model,
                 idle_timeout, durable, default_max_tokens, template_kwargs, timeout, offload_chars)

    async def chat(request):
        pieces, headers, req = await gw.chat(await read_body(request, limit), request.headers.get("x-session-id"))
        if req.stream:
            chunks = sse_chunks(pieces["cid"], pieces["created"], pieces["model"], pieces["message"], pieces["finish"],
                                pieces["counts"], req.include_usage, pieces["logprobs"])
            return StreamingResponse(iter(list(chunks)), media_type="text/event-stream", headers=headers)
        body = completion_body(pieces["cid"], pieces["created"], pieces["model"], pieces["message"], pieces["finish"],
                               pieces["counts"], pieces["logprobs"])
        return JSONResponse(body, headers=headers)

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": gw.model_name, "object": "model",
                                                         "created": int(gw.started), "owned_by": "chatdata"}]})

    async def health(request):
        return JSONResponse({"status": "ok", "open_sessions": len(gw.table.sessions), "preparing": gw.preparing})

    async def close(request):
        sid = request.path_params["session_id"]
        s = gw.table.sessions.get(sid)
        if s is None:
            raise GatewayError(404, f"no open session {sid!r} (it may be stored already, or never started)",
                               type="not_found_error", param="session_id")
        shard = await gw.commit([s])  # waits for the session's requests in flight: their branches are stored too
        n = sum(b is not None for b in s.branches)
        return JSONResponse({"id": sid, "object": "session", "closed": True, "branches": n, "shard": shard})

    async def on_gateway_error(request, exc: GatewayError):
        return JSONResponse(exc.body(), status_code=exc.status)

    async def on_http_error(request, exc: HTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        body = {"error": {"message": f"{exc.detail}: {request.method} {request.url.path}", "type": kind,
                          "param": None, "code": None}}
        return JSONResponse(body, status_code=exc.status_code)

    async def on_error(request, exc: Exception):
        log.exception("chatdata serve: internal error on %s %s", request.method, request.url.path)
        body = {"error": {"message": f"internal error in the gateway: {type(exc).__name__}: {exc}",
                          "type": "server_error", "param": None, "code": None}}
        return JSONResponse(body, status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            await gw.startup()
        except BaseException:
            gw.store.close()  # the folder is free again (a start that failed holds it no longer)
            raise
        try:
            yield
        finally:
            await gw.shutdown()

    app = Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/sessions/{session_id:path}/close", close, methods=["POST"]),  # ids may hold '/' 
    ], exception_handlers={GatewayError: on_gateway_error, HTTPException: on_http_error, Exception: on_error},
        lifespan=lifespan)
    app.state.gateway = gw
    return app
