"""The token-in, token-out gateway: an OpenAI-compatible server that records every session.

Agent harnesses speak the OpenAI chat API; inference engines take token ids. ``chatdata
serve`` (or :func:`create_app`, an ASGI app) sits between: per session only the text the
template adds is rendered and tokenized, the backend (vLLM's ``/v1/completions`` or SGLang's
``/generate``) gets token ids, the sampled ids and logprobs are kept verbatim, the answer is
parsed into an OpenAI message. Sessions fork where a client rewrites its history, and land in
``--out`` as sharded chatdata datasets; :func:`read_sessions` reads them back. Needs the
``serve`` extra (``pip install "chatdata[serve]"``: starlette, uvicorn, httpx). See
``docs/gateway.md``.

Example:
    >>> import tempfile
    >>> from chatdata.data import load_sample_tokenizer
    >>> app = create_app("http://127.0.0.1:8000/v1", load_sample_tokenizer(), tempfile.mkdtemp() + "/out")
    >>> app.state.gateway.backend.url
    'http://127.0.0.1:8000/v1/completions'
"""
from .app import Gateway, create_app
from .reader import read_sessions
from .store import is_gateway_output

__all__ = ["create_app", "read_sessions", "Gateway", "is_gateway_output"]
