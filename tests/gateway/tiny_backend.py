"""A small inference backend for the gateway tests: a tiny random transformers model served with
the documented subset of vLLM's and SGLang's token-in protocols, on 127.0.0.1.

Run: ``python tiny_backend.py --model DIR --record FILE [--port 0]``; it prints
``ready http://127.0.0.1:PORT`` when it serves.

* ``POST /v1/completions`` (vLLM): ``prompt`` (a list of token ids, or a string), ``max_tokens``
  (default 16, as vLLM), ``temperature``, ``top_p``, ``seed``, ``stop`` (strings), ``stop_token_ids``,
  ``logprobs`` (k: the sampled token's logprob and the top k), ``return_token_ids``, ``n`` (1),
  ``model``, ``logit_bias`` (token ids as strings; a bias is clamped to [-100, 100] and an id outside
  the model's vocabulary is a 400, as vLLM). Answers ``{"id", "object": "text_completion", "created", "model", "choices": [{"index",
  "text", "logprobs": {"text_offset", "token_logprobs", "tokens", "top_logprobs"} | null,
  "finish_reason": "stop" | "length", "stop_reason", "token_ids", "prompt_token_ids",
  "prompt_logprobs"}], "usage"}``; the stop token is part of ``token_ids``; errors are
  ``{"error": {"message", "type", "param", "code"}}``. ``GET /v1/models`` lists the model with
  its ``max_model_len``.
* ``POST /generate`` (SGLang): ``input_ids``, ``sampling_params`` (``max_new_tokens`` default 128,
  ``temperature``, ``top_p``, ``stop``, ``stop_token_ids``, ``sampling_seed``, ``logit_bias``: token ids as
  strings, an id outside the vocabulary a 400, as SGLang's ``SamplingParams.verify``), ``return_logprob``.
  Answers ``{"text", "output_ids", "meta_info": {"id", "finish_reason": {"type": "stop", "matched": id}
  | {"type": "length", "length": n}, "prompt_tokens", "completion_tokens", "cached_tokens",
  "output_token_logprobs": [[logprob, token_id, null], ...]}}``.

Logprobs are the model's raw ones (log-softmax of the logits before temperature and logit bias,
vLLM's default), so a forward of the same model over the ids reproduces them; a logit bias is
added to the logits the token is sampled (or picked greedily) from. With a ``seed`` the sampling is
deterministic. Streaming, ``n > 1`` and penalties are refused with a 400 (not implemented here).

Test hook (not part of either protocol): when the prompt's last turn holds
``⟦reply <JSON string>⟧``, the backend emits exactly the tokens of that text (tokenized by the
model's tokenizer, special tokens included) instead of sampling, with the model's logprob of
each (one teacher-forced forward); ``max_tokens`` and stop ids apply as for sampled tokens, and a
reply without a stop id goes on sampling. Scripted agents use it to get tool calls from a random
model. Every generation is appended to ``--record`` as a JSON line:
``{"api", "prompt", "ids", "logprobs", "finish", "seed", "scripted", "logit_bias"}``.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
import uuid

import torch

DIRECTIVE = "⟦reply "


class Engine:
    def __init__(self, path: str, record: str, max_model_len: int = 4096) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        self.name = path
        self.max_model_len = max_model_len
        self.record = record
        self.lock = threading.Lock()
        self.rng = torch.Generator().manual_seed(0)

    def scripted(self, prompt: list[int]) -> list[int] | None:
        text = self.tok.decode(prompt, skip_special_tokens=False)
        at = text.rfind(DIRECTIVE)
        if at < 0 or text.count("<|im_start|>assistant", at) != 1:
            return None
        end = text.find("⟧", at)
        reply = json.loads(text[at + len(DIRECTIVE):end])
        return self.tok.encode(reply, add_special_tokens=False)

    @torch.no_grad()
    def generate(self, api: str, prompt: list[int], max_tokens: int, temperature: float | None, top_p: float | None,
                 seed: int | None, stop: list[str], stop_ids: list[int], bias: dict[int, float] | None = None
                 ) -> tuple[list[int], list[float], str, object]:
        forced = (self.scripted(prompt) or [])[:max_tokens]
        ends = self.eos | set(stop_ids)
        cut = next((k for k, t in enumerate(forced) if t in ends), None)
        if cut is not None:
            forced = forced[:cut + 1]
        hit_at = next((k for k in range(len(forced)) if stop and any(
            x in self.tok.decode(forced[:k + 1], skip_special_tokens=True) for x in stop)), None)
        if hit_at is not None:  # a stop string ends the reply (its ids are part of the output)
            forced = forced[:hit_at + 1]
        gen = torch.Generator().manual_seed(seed) if seed is not None else self.rng
        with self.lock:
            # one forward over the prompt and the scripted ids (teacher forcing) gives their logprobs
            out = self.model(input_ids=torch.tensor([prompt + forced]), use_cache=True, logits_to_keep=len(forced) + 1)
            past, logits = out.past_key_values, out.logits[0].float()
            ids, lps, finish, reason = [], [], "length", None
            for k, tok in enumerate(forced):
                ids.append(tok)
                lps.append(float(torch.log_softmax(logits[k], -1)[tok]))
            last = logits[len(forced)]
            if forced and forced[-1] in ends:
                finish, reason = "stop", (forced[-1] if forced[-1] in stop_ids else None)
            elif hit_at is not None:
                text = self.tok.decode(forced, skip_special_tokens=True)
                finish, reason = "stop", next(x for x in stop if x in text)
            while finish == "length" and len(ids) < max_tokens:  # sampled by the model
                logp = torch.log_softmax(last, -1)  # raw: before the bias
                if bias:
                    last = last.clone()
                    for t, b in bias.items():
                        last[t] += b
                if temperature == 0:
                    tok = int(torch.argmax(last))
                else:
                    probs = torch.softmax(last / (1.0 if temperature is None else temperature), -1)
                    if top_p is not None and top_p < 1.0:
                        sp, si = torch.sort(probs, descending=True)
                        keep = torch.cumsum(sp, 0) - sp < top_p
                        probs = torch.zeros_like(probs).scatter(0, si[keep], sp[keep])
                    tok = int(torch.multinomial(probs, 1, generator=gen))
                ids.append(tok)
                lps.append(float(logp[tok]))
                if tok in ends:
                    finish, reason = "stop", (tok if tok in stop_ids else None)
                    break
                if stop:
                    text = self.tok.decode(ids, skip_special_tokens=True)
                    hit = next((s for s in stop if s in text), None)
                    if hit is not None:
                        finish, reason = "stop", hit
                        break
                if len(ids) < max_tokens:
                    out = self.model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                    past, last = out.past_key_values, out.logits[0, -1].float()
            with open(self.record, "a", encoding="utf-8") as f:
                f.write(json.dumps({"api": api, "prompt": prompt, "ids": ids, "logprobs": lps, "finish": finish,
                                    "seed": seed, "scripted": bool(forced),
                                    "logit_bias": {str(k): v for k, v in (bias or {}).items()} or None}) + "\n")
        return ids, lps, finish, reason


def _error(status: int, message: str, param: str | None = None, kind: str = "BadRequestError"):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status)


def _int_list(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v)


def build_app(engine: Engine):
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def unsupported(body: dict, params: dict) -> str | None:
        if body.get("stream"):
            return "stream is not implemented by this test backend"
        if body.get("n", 1) != 1:
            return "n must be 1 in this test backend"
        if any(params.get(k) for k in ("presence_penalty", "frequency_penalty")):
            return "penalties are not implemented by this test backend"
        return None

    def run(api: str, prompt: list[int], max_tokens: int, params: dict, seed_key: str):
        """Generate, or a 400 response when the prompt and max_tokens overflow the context."""
        if len(prompt) + max_tokens > engine.max_model_len:
            return _error(400, f"This model's maximum context length is {engine.max_model_len} tokens. However, you "
                               f"requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, "
                               f"{max_tokens} in the completion).", "prompt")
        stop = params.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        bias = params.get("logit_bias")
        if bias is not None:
            try:
                bias = {int(k): (min(100.0, max(-100.0, float(v))) if api == "vllm" else float(v))
                        for k, v in bias.items()}
            except (AttributeError, TypeError, ValueError):
                return _error(400, "logit_bias must map token ids (integers as strings) to numbers", "logit_bias")
            vocab = engine.model.config.vocab_size
            bad = [k for k in bias if not 0 <= k < vocab]
            if bad:
                return _error(400, f"token_id(s) {bad} in logit_bias contain out-of-vocab token ids "
                                   f"(vocabulary size {vocab})", "logit_bias")
        return engine.generate(api, prompt, max_tokens, params.get("temperature"), params.get("top_p"),
                               params.get(seed_key), stop, params.get("stop_token_ids") or [], bias)

    def completions(request):  # sync: starlette runs it in its thread pool
        try:
            body = json.loads(request.scope["body"])
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        if body.get("model") not in (None, engine.name):
            return _error(404, f"The model `{body['model']}` does not exist.", "model", "NotFoundError")
        err = unsupported(body, body)
        if err:
            return _error(400, err)
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt = engine.tok.encode(prompt, add_special_tokens=False)
        if not _int_list(prompt):
            return _error(400, "prompt must be a string or a non-empty list of token ids", "prompt")
        max_tokens = body.get("max_tokens", 16)
        out = run("vllm", prompt, 16 if max_tokens is None else max_tokens, body, "seed")
        if not isinstance(out, tuple):
            return out
        ids, lps, finish, reason = out
        k = body.get("logprobs")
        logprobs = None
        if k is not None:
            tokens = [engine.tok.decode([i]) for i in ids]
            offsets, pos = [], 0
            for t in tokens:
                offsets.append(pos)
                pos += len(t)
            logprobs = {"text_offset": offsets, "token_logprobs": lps, "tokens": tokens,
                        "top_logprobs": [{t: lp} for t, lp in zip(tokens, lps)]}
        ret = bool(body.get("return_token_ids"))
        return JSONResponse({
            "id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": "text_completion", "created": int(time.time()),
            "model": engine.name,
            "choices": [{"index": 0, "text": engine.tok.decode(ids, skip_special_tokens=True), "logprobs": logprobs,
                         "finish_reason": finish, "stop_reason": reason, "token_ids": ids if ret else None,
                         "prompt_logprobs": None, "prompt_token_ids": prompt if ret else None}],
            "usage": {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + len(ids),
                      "completion_tokens": len(ids), "prompt_tokens_details": None}})

    def generate(request):
        try:
            body = json.loads(request.scope["body"])
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict) or not _int_list(body.get("input_ids")):
            return _error(400, "input_ids must be a non-empty list of token ids", "input_ids")
        sp = body.get("sampling_params") or {}
        err = unsupported(body, sp)
        if err:
            return _error(400, err)
        prompt = body["input_ids"]
        out = run("sglang", prompt, sp.get("max_new_tokens", 128), sp, "sampling_seed")
        if not isinstance(out, tuple):
            return out
        ids, lps, finish, reason = out
        reason_obj = ({"type": "length", "length": len(ids)} if finish == "length"
                      else {"type": "stop", "matched": reason if reason is not None else ids[-1]})
        meta = {"id": uuid.uuid4().hex, "finish_reason": reason_obj, "prompt_tokens": len(prompt),
                "completion_tokens": len(ids), "cached_tokens": 0}
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[lp, i, None] for lp, i in zip(lps, ids)]
        return JSONResponse({"text": engine.tok.decode(ids, skip_special_tokens=True), "output_ids": ids,
                             "meta_info": meta})

    def models(request):
        return JSONResponse({"object": "list", "data": [{"id": engine.name, "object": "model", "owned_by": "tests",
                                                         "max_model_len": engine.max_model_len}]})

    class ReadBody:  # sync endpoints cannot await the body: read it first
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                chunks, more = [], True
                while more:
                    msg = await receive()
                    chunks.append(msg.get("body", b""))
                    more = msg.get("more_body", False)
                scope["body"] = b"".join(chunks)
            await self.app(scope, receive, send)

    app = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]),
                            Route("/generate", generate, methods=["POST"]),
                            Route("/v1/models", models, methods=["GET"])])
    return ReadBody(app)


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--max-model-len", type=int, default=4096)
    args = p.parse_args()
    torch.set_num_threads(1)
    engine = Engine(args.model, args.record, args.max_model_len)
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    sock.listen(256)
    print(f"ready http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(build_app(engine), log_level="warning")).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
