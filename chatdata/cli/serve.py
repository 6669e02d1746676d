"""``chatdata serve``: the OpenAI-compatible token-in, token-out gateway (see ``docs/gateway.md``).

Point an agent harness at it (``OPENAI_BASE_URL=http://127.0.0.1:8000/v1``); it forwards token
ids to a vLLM or SGLang backend and records every session in ``--out``. It prints its URL when
ready, and stores open sessions on SIGTERM or Ctrl-C.

Example:
    >>> main(["serve", "--backend", "http://127.0.0.1:8001", "--tokenizer", "tok/", "--out", "sessions/"])  # doctest: +SKIP
    chatdata serve: ready at http://127.0.0.1:8000/v1 (backend http://127.0.0.1:8001/v1/completions, recording to sessions/)
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

from .common import CLIError, checked_template, int_arg, load_tokenizer, positive_int, read_template_file, say

KEEP_ALIVE_S = 20  # seconds an idle client connection stays open (see run())
HELP = "serve an OpenAI-compatible gateway that records every session as token data"
EXAMPLE = """examples:
  chatdata serve --backend http://127.0.0.1:8001 --tokenizer path/to/tokenizer --out sessions/
  chatdata serve --backend http://127.0.0.1:30000/generate --tokenizer tok/ --out sessions/ --port 8010
  OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=none my-agent ...   # then, in another shell
  chatdata info sessions/"""


def port_number(text: str) -> int:
    """An argparse ``type`` for ``--port``: an integer in [0, 65535] (0 picks a free port).

    Example:
        >>> port_number("8000")
        8000
    """
    import argparse

    v = int_arg(text)
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is not a port: give 1 to 65535, or 0 to pick a free one")
    return v


def add_parser(sub):
    import argparse

    p = sub.add_parser("serve", help=HELP, description=HELP + " (token-in, token-out: see docs/gateway.md).",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", required=True, metavar="URL",
                   help="vLLM's server (http://host:port or .../v1) or SGLang's .../generate")
    p.add_argument("--tokenizer", required=True, metavar="PATH", help="the folder of the policy's tokenizer")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--chat-template", metavar="FILE", help="a jinja chat template file (default: the tokenizer's)")
    g.add_argument("--chat-template-name", metavar="NAME", help="a bundled template (chatdata templates list)")
    p.add_argument("--out", required=True, metavar="DIR", help="where sessions are stored (an earlier --out resumes)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--backend-api", choices=("auto", "vllm", "sglang"), default="auto",
                   help="the backend's protocol (default: from the URL; .../generate is SGLang)")
    p.add_argument("--model-name", help="the model name /v1/models lists (default: the tokenizer folder's name)")
    p.add_argument("--backend-model", help="the 'model' field sent to vLLM (default: none, its served model)")
    p.add_argument("--idle-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="store a session unused this long (default 300)")
    p.add_argument("--backend-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="wait this long for the backend's answer, then answer 504 (default 600)")
    p.add_argument("--max-tokens", type=positive_int, default=4096,
                   help="generation limit when a request gives none and the backend does not tell its context")
    p.add_argument("--max-body-mb", type=float, default=64.0, metavar="MIB",
                   help="the largest request body accepted, in MiB (default 64; larger is a 413)")
    p.add_argument("--no-fsync", action="store_true",
                   help="do not fsync each request (a killed gateway still loses nothing; a power loss may)")
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.set_defaults(func=run)
    return p


def _bind(host: str, port: int):
    import errno
    import socket

    if not host.strip():  # bind('') listens on every interface: an unset "$HOST" must not open the gateway to all
        raise CLIError("--host is empty: give an address to listen on (127.0.0.1 for this machine only, "
                       "0.0.0.0 for every interface)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        hint = ("another server is there? try another --port, or --port 0" if err.errno == errno.EADDRINUSE
                else "is --host an address of this machine?")
        raise CLIError(f"cannot listen on {host}:{port}: {err.strerror or err} ({hint})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(args) -> int:
    try:
        import httpx  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as err:
        raise CLIError(f"chatdata serve needs the serve extra ({err.name} is not installed): "
                       'pip install "chatdata[serve]"') from None
    from ..gateway import create_app
    from ..gateway.backends import check_url
    from ..gateway.store import SessionStore

    for flag, value in (("--idle-timeout", args.idle_timeout), ("--backend-timeout", args.backend_timeout),
                        ("--max-body-mb", args.max_body_mb)):
        if not value > 0:  # nan too
            raise CLIError(f"{flag} must be positive, got {value}")
    try:  # the cheap checks first: a wrong --backend or --out is said before the tokenizer loads
        check_url(args.backend)
        SessionStore(args.out).preflight()
    except ValueError as err:
        raise CLIError(f"--backend: {err}" if "URL" in str(err) else str(err)) from None
    template = None
    if args.chat_template:  # a missing file, a folder, not UTF-8, not Jinja: one line naming the flag
        template = checked_template(read_template_file(args.chat_template, "--chat-template"),
                                    f"--chat-template {args.chat_template}")
    if args.chat_template_name is not None:  # a misspelt name is said before the tokenizer loads, with the close names
        from ..templates import list_chat_templates
        from ..templates.registry import unknown_name_hint

        if args.chat_template_name not in list_chat_templates():
            raise CLIError(f"--chat-template-name {args.chat_template_name}: unknown template; "
                           f"{unknown_name_hint(args.chat_template_name)}")
    sock = _bind(args.host, args.port)  # before the slow loads: a port in use is said at once
    try:
        tok = load_tokenizer(args.tokenizer)  # a folder without a vocabulary is refused (it encodes text to nothing)
        app = create_app(args.backend, tok, args.out, chat_template=template,
                         chat_template_name=args.chat_template_name, backend_api=args.backend_api,
                         model_name=args.model_name or Path(args.tokenizer).name, backend_model=args.backend_model,
                         idle_timeout=args.idle_timeout, durable=not args.no_fsync, default_max_tokens=args.max_tokens,
                         timeout=args.backend_timeout, max_body_mb=args.max_body_mb)
    except BaseException as err:
        sock.close()
        if isinstance(err, (ValueError, OSError)):
            raise CLIError(str(err)) from None
        raise
    host, port = sock.getsockname()[:2]
    gw = app.state.gateway
    shown = f"[{host}]" if ":" in host else host

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets=sockets)
            if self.started:
                say(f"chatdata serve: ready at http://{shown}:{port}/v1 (backend {gw.backend.url}, recording to {args.out})")

        @contextlib.contextmanager
        def capture_signals(self):  # SIGTERM / Ctrl-C: shut down (storing sessions), then exit 0
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            old = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    # keep idle connections past a client's own expiry (httpx and the openai SDK: 5 s, as is
    # uvicorn's default; aiohttp: 15 s): an agent that runs a tool for a few seconds then reuses
    # its connection must never race the server closing it (a ReadError a client without retries
    # passes on); not much longer, as connections a client abandons hold a descriptor until then
    config = uvicorn.Config(app, log_level="warning", access_log=args.access_log, lifespan="on",
                            timeout_graceful_shutdown=30, timeout_keep_alive=KEEP_ALIVE_S)
    server = Server(config)
    server.run(sockets=[sock])
    if not server.started:
        print("chatdata serve: error: the gateway did not start (see the message above)", file=sys.stderr)
        return 1
    say(f"chatdata serve: stopped; sessions are in {args.out}")
    return 0
