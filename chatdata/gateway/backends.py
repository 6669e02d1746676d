"""Token-in, token-out backends: vLLM's ``/v1/completions`` and SGLang's ``/generate``.

Both take the prompt as token ids and answer with the ids they sampled, one logprob per id and
a finish reason; :class:`Generation` holds that. The fields used (see ``docs/gateway.md``):

* **vLLM** ``POST {url}/v1/completions`` with ``prompt`` (a list of ids), ``return_token_ids:
  true`` and ``logprobs: 0`` (and the sampling fields: ``min_tokens``, ``ignore_eos``,
  ``logit_bias``, ...);
  read ``choices[0].token_ids`` (the sampled ids, the stop token
  included), ``choices[0].logprobs.token_logprobs`` and ``choices[0].finish_reason``
  (``"stop"`` or ``"length"``); ``prompt_token_ids``, when answered, must be the prompt sent.
  vLLM's default ``max_tokens`` is 16, so it is always sent.
* **SGLang** ``POST {url}/generate`` with ``input_ids``, ``sampling_params`` (``max_new_tokens``,
  ``temperature``, ``top_p``, ``top_k``, ``min_p``, penalties, ``stop``, ``stop_token_ids``,
  ``sampling_seed``, ``min_new_tokens``, ``ignore_eos``, ``logit_bias``) and
  ``return_logprob: true``; read ``output_ids``, ``meta_info.output_token_logprobs`` (one
  ``[logprob, token_id, text]`` per sampled id) and ``meta_info.finish_reason.type``.

A connection the backend closed as it was reused is tried once more (nothing was answered on
it). A backend that is down or answers something else raises a 502
:class:`~chatdata.gateway.errors.GatewayError`, one that does not answer within the timeout a
504; a 4xx from it (a prompt longer than its
context) is passed on as a 400 with its message.

Example:
    >>> b = make_backend("http://127.0.0.1:8000", "auto")
    >>> type(b).__name__, b.url
    ('VLLMBackend', 'http://127.0.0.1:8000/v1/completions')
    >>> make_backend("http://127.0.0.1:30000/generate", "auto").url
    'http://127.0.0.1:30000/generate'
"""
from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any

from .errors import GatewayError
from .journal import MAX_TOKEN_ID
from .prompt_ids import PromptIds

__all__ = ["Generation", "Sampling", "VLLMBackend", "SGLangBackend", "make_backend", "check_url"]


@dataclass
class Sampling:
    """What the client asked for, in the backend's terms."""

    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None  # SGLang's min_new_tokens
    ignore_eos: bool = False
    logit_bias: dict[str, float] | None = None  # OpenAI's shape, which both engines take: {"15": -100.0}


# an answer bigger than this is parsed in a worker thread, and a prompt echo longer than _BIG_ECHO
# ids compared there: vLLM echoes every prompt id, and for a chat of 1.2 M ids (after a 5 MB tool
# output) parsing its 8.7 MB took about 210 ms and comparing it 80 ms, on every later turn
_BIG_ANSWER, _BIG_ECHO = 1 << 20, 1 << 17

_SAME_NAME = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "top_k", "min_p", "repetition_penalty")


@dataclass
class Generation:
    """What a backend sampled: ids, one logprob each, and why it stopped."""

    ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" or "length"


def _garbage(api: str, what: str) -> GatewayError:
    return GatewayError(502, f"the backend ({api}) answered something the gateway cannot use: {what}",
                        type="backend_error")


def _check(api: str, ids: Any, logprobs: Any, finish: Any, max_tokens: int) -> Generation:
    # ids as the session log keeps them (int64, and a vocabulary index below 2**31: see journal.py)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool)
                                                       and 0 <= i < MAX_TOKEN_ID for i in ids):
        raise _garbage(api, f"the sampled ids must be a non-empty list of token ids in [0, 2**31), got {ids!r:.200}")
    if len(ids) > max_tokens:  # a proxy or engine that ignores the limit: the turn is not what was asked
        raise _garbage(api, f"{len(ids)} sampled ids, more than the max_tokens={max_tokens} it was sent")
    if not isinstance(logprobs, list) or len(logprobs) != len(ids):
        raise _garbage(api, f"expected {len(ids)} logprobs (one per sampled id), got {logprobs!r:.200}")
    lps = []
    for v in logprobs:  # a sampled id had a chance: -inf (or NaN) is no logprob of it, nor JSON an answer can hold
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > 1e-3:
            raise _garbage(api, f"a logprob must be a finite number <= 0, got {v!r}")
        lps.append(float(v))
    if finish not in ("stop", "length"):
        raise _garbage(api, f"finish reason {finish!r} (expected 'stop' or 'length')")
    return Generation(ids, lps, finish)


class _HTTPBackend:
    api = ""

    def __init__(self, url: str, model: str | None = None, timeout: float = 600.0) -> None:
        self.url = url
        self.model = model
        self.timeout = timeout
        self._client = None

    async def start(self) -> None:
        import httpx

        self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=10.0),
                                         limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    prompt_field = ""

    def body(self, prompt: PromptIds, s: Sampling) -> bytes:
        """The request body: the prompt's kept JSON text spliced in front of the other fields
        (no Python int per prompt id is built; see :mod:`chatdata.gateway.prompt_ids`)."""
        rest = json.dumps(self.payload(s), separators=(",", ":")).encode()  # never empty: max_tokens is always sent
        return b'{"%s":%s,%s' % (self.prompt_field.encode(), prompt.json(), rest[1:])

    def payload(self, s: Sampling) -> dict:  # pragma: no cover - each backend has its own
        raise NotImplementedError

    async def _post(self, body: bytes) -> dict:
        import httpx

        if self._client is None:
            await self.start()
        try:
            try:
                resp = await self._client.post(self.url, content=body, headers={"content-type": "application/json"})
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                # a kept-alive connection the server closed as it was reused: nothing was answered, ask once more
                resp = await self._client.post(self.url, content=body, headers={"content-type": "application/json"})
        except httpx.TimeoutException:
            raise GatewayError(504, f"the backend at {self.url} did not answer within {self.timeout:g} s",
                               type="backend_error") from None
        except httpx.HTTPError as err:
            raise GatewayError(502, f"cannot reach the backend at {self.url}: {type(err).__name__}: {err}",
                               type="backend_error") from None
        if 400 <= resp.status_code < 500:
            raise GatewayError(400, f"the backend refused the request ({resp.status_code}): {_message(resp.text)}",
                               type="backend_error")
        if resp.status_code != 200:
            raise GatewayError(502, f"the backend answered HTTP {resp.status_code}: {_message(resp.text)}",
                               type="backend_error")
        try:
            raw = resp.content
            body = await asyncio.to_thread(json.loads, raw) if len(raw) > _BIG_ANSWER else resp.json()
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json can read
            raise _garbage(self.api, f"not JSON: {resp.text[:200]!r}") from None
        if not isinstance(body, dict):
            raise _garbage(self.api, f"not a JSON object: {resp.text[:200]!r}")
        return body

    def models_url(self) -> str:  # pragma: no cover - each backend has its own
        raise NotImplementedError

    async def context_length(self) -> int | None | bool:
        """``max_model_len`` from the server's ``/v1/models`` (vLLM's, and SGLang's beside its
        ``/generate``); None when the backend answers without it; False when it cannot be
        reached (still loading: ask again next time, as a None kept for good made every later
        request use the default max_tokens instead of the room left)."""
        import httpx

        if self._client is None:
            await self.start()
        try:
            resp = await self._client.get(self.models_url(), timeout=10.0)
        except httpx.ConnectError:  # nothing listens yet (a slow timeout is an answer: not asked per request)
            return False
        except httpx.HTTPError:
            return None
        try:
            data = resp.json().get("data") or []
            value = data[0].get("max_model_len") if data and isinstance(data[0], dict) else None
        except Exception:  # noqa: BLE001 - optional information: any other failure means "unknown"
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500]
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"][:500]
    return text[:500]


class VLLMBackend(_HTTPBackend):
    """vLLM's OpenAI-compatible completions with token-id prompts (see the module docstring)."""

    api = "vLLM /v1/completions"
    prompt_field = "prompt"

    def payload(self, s: Sampling) -> dict:
        """The fields besides the prompt.

        Example:
            >>> VLLMBackend("http://127.0.0.1:8000/v1/completions").payload(Sampling(max_tokens=8, seed=1))
            {'max_tokens': 8, 'logprobs': 0, 'return_token_ids': True, 'seed': 1}
        """
        p: dict = {"max_tokens": s.max_tokens, "logprobs": 0, "return_token_ids": True}
        if self.model:
            p["model"] = self.model
        for key in ("seed", *_SAME_NAME):
            if getattr(s, key) is not None:
                p[key] = getattr(s, key)
        if s.stop:
            p["stop"] = list(s.stop)
        if s.stop_token_ids:
            p["stop_token_ids"] = list(s.stop_token_ids)
        if s.min_tokens:
            p["min_tokens"] = s.min_tokens
        if s.ignore_eos:
            p["ignore_eos"] = True
        if s.logit_bias:
            p["logit_bias"] = s.logit_bias
        return p

    async def generate(self, prompt: PromptIds, s: Sampling) -> Generation:
        body = await self._post(self.body(prompt, s))
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _garbage(self.api, f"no choices in {json.dumps(body)[:200]}")
        c = choices[0]
        if "token_ids" not in c or c["token_ids"] is None:
            raise _garbage(self.api, "no 'token_ids' in the choice: the backend must be vLLM >= 0.10.2 "
                                     "(it returns the sampled ids when asked with return_token_ids)")
        echoed = c.get("prompt_token_ids")
        if echoed is not None and not (await asyncio.to_thread(prompt.equals, echoed)
                                       if isinstance(echoed, list) and len(echoed) > _BIG_ECHO else prompt.equals(echoed)):
            raise _garbage(self.api, "the prompt_token_ids it answered with are not the prompt it was sent")
        lp = c.get("logprobs")
        lps = lp.get("token_logprobs") if isinstance(lp, dict) else None
        return _check(self.api, c["token_ids"], lps, c.get("finish_reason"), s.max_tokens)

    def models_url(self) -> str:
        return self.url[: -len("/v1/completions")] + "/v1/models"


class SGLangBackend(_HTTPBackend):
    """SGLang's native ``/generate`` with ``input_ids`` (see the module docstring)."""

    api = "SGLang /generate"
    prompt_field = "input_ids"

    def payload(self, s: Sampling) -> dict:
        """The fields besides the prompt.

        Example:
            >>> SGLangBackend("http://127.0.0.1:30000/generate").payload(Sampling(max_tokens=8))
            {'sampling_params': {'max_new_tokens': 8}, 'return_logprob': True, 'stream': False}
        """
        sp: dict = {"max_new_tokens": s.max_tokens}
        for key in _SAME_NAME:
            if getattr(s, key) is not None:
                sp[key] = getattr(s, key)
        if s.top_k == 0:  # vLLM's "no top-k" (its default); SGLang refuses 0 and says -1
            sp["top_k"] = -1
        if s.seed is not None:
            sp["sampling_seed"] = s.seed
        if s.stop:
            sp["stop"] = list(s.stop)
        if s.stop_token_ids:
            sp["stop_token_ids"] = list(s.stop_token_ids)
        if s.min_tokens:
            sp["min_new_tokens"] = s.min_tokens
        if s.ignore_eos:
            sp["ignore_eos"] = True
        if s.logit_bias:
            sp["logit_bias"] = s.logit_bias
        return {"sampling_params": sp, "return_logprob": True, "stream": False}

    def models_url(self) -> str:
        """SGLang's OpenAI ``/v1/models`` (its ``max_model_len`` is the model's context length)
        at the server's root, beside ``/generate``; without it a request that gave no
        max_tokens asked for a fixed 4096 whatever room the context had left."""
        return self.url[: -len("/generate")] + "/v1/models"

    async def generate(self, prompt: PromptIds, s: Sampling) -> Generation:
        body = await self._post(self.body(prompt, s))
        meta = body.get("meta_info")
        if not isinstance(meta, dict):
            raise _garbage(self.api, f"no meta_info in {json.dumps(body)[:200]}")
        pairs = meta.get("output_token_logprobs")
        if not isinstance(pairs, list) or not all(isinstance(p, (list, tuple)) and len(p) >= 2 for p in pairs):
            raise _garbage(self.api, "meta_info.output_token_logprobs must list [logprob, token_id, ...] per sampled id "
                                     "(ask with return_logprob: true)")
        ids = body.get("output_ids")
        if ids is None:
            ids = [p[1] for p in pairs]
        elif [p[1] for p in pairs] != ids:
            raise _garbage(self.api, "output_ids and the ids of output_token_logprobs differ")
        finish = meta.get("finish_reason")
        kind = finish.get("type") if isinstance(finish, dict) else finish
        if kind == "abort":
            why = finish.get("message") if isinstance(finish, dict) else None
            raise GatewayError(502, f"the backend aborted the request: {why or 'no reason given'}", type="backend_error")
        return _check(self.api, ids, [p[0] for p in pairs], kind, s.max_tokens)


def check_url(url: Any) -> str:
    """``url`` if it can address a backend: ``http://`` or ``https://``, a host, a port in
    range, no query or fragment (the gateway appends the API's path), not the server's chat or
    models endpoint; else a ValueError saying what to write. A URL without its scheme (``localhost:8001``) used to start a gateway that
    answered every request with a 502.

    Example:
        >>> check_url("localhost:8001")
        Traceback (most recent call last):
        ...
        ValueError: backend URL 'localhost:8001' must start with http:// or https:// (e.g. http://localhost:8001)
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"backend URL must be a non-empty string like http://127.0.0.1:8001, got {url!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as err:
        raise ValueError(f"backend URL {url!r} cannot be parsed ({err})") from None
    if parts.scheme not in ("http", "https"):
        hint = f" (e.g. http://{url})" if "://" not in url else ""
        raise ValueError(f"backend URL {url!r} must start with http:// or https://{hint}")
    if not parts.hostname:
        raise ValueError(f"backend URL {url!r} has no host (e.g. http://127.0.0.1:8001)")
    if parts.query or parts.fragment or url != url.strip():
        raise ValueError(f"backend URL {url!r}: give the server's address and path only (no query, fragment "
                         "or spaces)")
    path = parts.path.rstrip("/")
    for wrong in ("/chat/completions", "/models"):
        if path.endswith(wrong):  # another endpoint of the server: root + /v1/completions was asked, a 404 each time
            raise ValueError(f"backend URL {url!r} names the server's {wrong.lstrip('/')} endpoint: give the server "
                             f"itself ({url.rstrip('/')[: -len(wrong)]}); the gateway sends token ids to its "
                             "/v1/completions (or SGLang's /generate)")
    return url


def make_backend(url: str, api: str = "auto", model: str | None = None, timeout: float = 600.0):
    """A backend client for ``url``: ``api`` is ``"vllm"``, ``"sglang"`` or ``"auto"`` (a URL
    ending in ``/generate`` is SGLang, anything else vLLM; ``/v1`` and ``/v1/completions`` may
    be given or left out). A URL that is not ``http(s)://host[:port][/path]`` is a ValueError
    (:func:`check_url`)."""
    url = check_url(url).rstrip("/")
    if api == "auto":
        api = "sglang" if url.endswith("/generate") else "vllm"
    if api == "sglang":
        return SGLangBackend(url if url.endswith("/generate") else url + "/generate", model, timeout)
    if api == "vllm":
        if url.endswith("/v1/completions"):
            return VLLMBackend(url, model, timeout)
        return VLLMBackend((url[:-3] if url.endswith("/v1") else url) + "/v1/completions", model, timeout)
    raise ValueError(f"backend api must be 'vllm', 'sglang' or 'auto', got {api!r}")
