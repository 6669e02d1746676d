"""The chat-completion fields of the official client, through ``chatdata serve`` (a subprocess, in
front of the test backend's SGLang ``/generate``): each is honoured, passed to the backend, or
refused with a 400 naming it. Before, these were answered as if honoured: a
per-request ``chat_template`` was not used, beam search was not run, ``reasoning_effort`` and ``documents`` never reached
the template, ``stop_token_ids`` / ``min_tokens`` / ``ignore_eos`` never reached the backend; and
SGLang was asked for 4096 new tokens whatever its context had left (its 400 for a request
without ``max_tokens`` once the chat passed context - 4096 tokens)."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from chatdata.gateway import read_sessions

from gateway_helpers import sampled, start_gateway

# ChatML with a RAG block and Qwen3's switch: enable_thinking false writes an empty think block
TEMPLATE = """{%- if documents %}<|im_start|>system
DOCS {{ documents | tojson }}<|im_end|>
{% endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}{% endif %}"""
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def scripted(text: str) -> str:
    """The test backend's hook: the next answer is exactly ``text`` (see tiny_backend.py)."""
    return f"⟦reply {json.dumps(text)}⟧"


@pytest.fixture(scope="module")
def gateway(backend, tiny_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fields")
    (tmp / "chatml.jinja").write_text(TEMPLATE, encoding="utf-8")
    g = start_gateway(backend[0] + "/generate", tiny_model, tmp / "out", "--chat-template", str(tmp / "chatml.jinja"),
                      "--no-fsync")
    g.out = tmp / "out"
    g.client = openai.OpenAI(base_url=g.url + "/v1", api_key="none", max_retries=0, timeout=60)
    yield g
    g.kill()


@pytest.fixture(scope="module")
def tokenizer_of(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model))


def ask(g, text: str, session: str, **fields):
    return g.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}],
                                            extra_headers={"X-Session-Id": session}, **fields)


def test_sglang_without_max_tokens_gets_the_room_left_in_its_context(gateway, backend, tokenizer_of):
    since = len(sampled(backend[1]))
    r = ask(gateway, "hi " + scripted("hello<|im_end|>"), "room")  # asked for 4096 of a 4096 context: a 400
    assert r.choices[0].message.content == "hello" and r.choices[0].finish_reason == "stop"
    (gen,) = sampled(backend[1], since)
    assert gen["api"] == "sglang" and tokenizer_of.decode(gen["ids"]) == "hello<|im_end|>"


def test_reasoning_effort_and_documents_reach_the_template(gateway, backend, tokenizer_of):
    since = len(sampled(backend[1]))
    ask(gateway, "a " + scripted("ok<|im_end|>"), "think", max_tokens=8, reasoning_effort="none",
        extra_body={"documents": [{"title": "T", "text": "Zq-doc"}]})
    ask(gateway, "b " + scripted("ok<|im_end|>"), "think-low", max_tokens=8, reasoning_effort="low")
    ask(gateway, "c " + scripted("ok<|im_end|>"), "think-kw", max_tokens=8, reasoning_effort="none",
        extra_body={"chat_template_kwargs": {"enable_thinking": True}})  # the request's own setting wins, as vLLM
    none, low, kw = (tokenizer_of.decode(g["prompt"]) for g in sampled(backend[1], since))
    assert none.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and 'DOCS [{"title": "T", "text": "Zq-doc"}]' in none
    assert low.endswith("<|im_start|>assistant\n") and "DOCS" not in low
    assert kw.endswith("<|im_start|>assistant\n")


def test_stop_token_ids_reach_the_backend(gateway, backend, tokenizer_of):
    stop = tokenizer_of.encode(" world", add_special_tokens=False)
    assert len(stop) == 1
    r = ask(gateway, "x " + scripted("hello world and more<|im_end|>"), "stop-ids", max_tokens=16,
            extra_body={"stop_token_ids": stop})
    assert r.choices[0].message.content == "hello world" and r.choices[0].finish_reason == "stop"


# (fields, the param the 400 names, words of its message)
REFUSED = [
    ({"tools": TOOLS, "tool_choice": "none"}, "tool_choice", "leave 'tools' out"),
    ({"tool_choice": "auto"}, "tool_choice", "needs 'tools'"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort", "must be one of none, minimal"),
    ({"modalities": ["text", "audio"]}, "modalities", "text only"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio", "text only"),
    ({"web_search_options": {}}, "web_search_options", "searches nothing"),
    ({"extra_body": {"chat_template": "{{ messages }}"}}, "chat_template", "the template the gateway was started with"),
    ({"extra_body": {"use_beam_search": True}}, "use_beam_search", "no beam search"),
    ({"extra_body": {"bad_words": ["x"]}}, "bad_words", "does not constrain decoding"),
    ({"extra_body": {"allowed_token_ids": [1, 2]}}, "allowed_token_ids", "does not constrain decoding"),
    ({"extra_body": {"echo": True}}, "echo", "new assistant turn only"),
    ({"extra_body": {"prompt_logprobs": 1}}, "prompt_logprobs", "sampled tokens' logprobs only"),
    ({"extra_body": {"truncate_prompt_tokens": 10}}, "truncate_prompt_tokens", "whole conversation"),
    ({"extra_body": {"add_special_tokens": True}}, "add_special_tokens", "template's text"),
    ({"extra_body": {"include_reasoning": False}}, "include_reasoning", "reasoning"),
    ({"extra_body": {"regex": "[a-z]+"}}, "regex", "does not constrain decoding"),
    ({"extra_body": {"stop_token_ids": [-1]}}, "stop_token_ids", "list of token ids"),
    ({"extra_body": {"min_tokens": -1}}, "min_tokens", ">= 0"),
    ({"extra_body": {"ignore_eos": "yes"}}, "ignore_eos", "true or false"),
    ({"extra_body": {"documents": "not a list"}}, "documents", "must be a list of objects"),
    ({"user": 5}, "user", "'user' must be a string"),  # OpenAI's and vLLM's 400 (it was ignored)
    ({"logit_bias": {"5": 101}}, "logit_bias", "between -100 and 100"),
    ({"logit_bias": {"five": 1}}, "logit_bias", "token ids written as decimal strings"),
    # answered without usage chunks before (OpenAI and vLLM refuse it)
    ({"stream_options": {"include_usage": True}}, "stream_options", "only allowed when 'stream' is true"),
]


def test_logit_bias_reaches_sglang_and_biases_what_it_samples(gateway, backend, tokenizer_of):
    """logit_bias was refused (SGLang's sampling_params take it in OpenAI's shape). Greedy, a +100
    bias makes the token win every step; -100 bans the token greedy decoding picks. The stored
    logprobs stay the model's (before the bias), as the backend reports them."""
    since = len(sampled(backend[1]))
    plain = ask(gateway, "bias", "bias-0", max_tokens=1, temperature=0)
    (first,) = sampled(backend[1], since)
    favoured = tokenizer_of.convert_tokens_to_ids("Z")
    assert favoured not in first["ids"]
    ask(gateway, "bias", "bias-1", max_tokens=3, temperature=0, logit_bias={str(favoured): 100})
    ask(gateway, "bias", "bias-2", max_tokens=1, temperature=0, logit_bias={str(first["ids"][0]): -100})
    up, down = sampled(backend[1], since + 1)
    assert up["ids"] == [favoured] * 3 and up["logit_bias"] == {str(favoured): 100.0}
    assert down["ids"] != first["ids"] and down["logit_bias"] == {str(first["ids"][0]): -100.0}
    assert max(up["logprobs"]) < -1  # the model's own: a random model gives no token most of the mass
    assert plain.choices[0].finish_reason == "length"
    for sid in ("bias-0", "bias-1", "bias-2"):
        assert httpx.post(f"{gateway.url}/v1/sessions/{sid}/close").status_code == 200
    (rec,) = [r for r in read_sessions(gateway.out) if r["session_id"] == "bias-1"]
    mask = rec["assistant_masks"].bool()
    assert rec["input_ids"][mask].tolist() == [favoured] * 3
    assert rec["logprobs"][mask].tolist() == pytest.approx(up["logprobs"], abs=1e-6)


def test_a_logit_bias_of_a_token_outside_the_vocabulary_is_the_backends_400(gateway):
    with pytest.raises(openai.BadRequestError) as err:
        ask(gateway, "hi", "bias-oov", max_tokens=4, logit_bias={str(2**31 - 1): 5})
    assert "out-of-vocab" in err.value.body["message"]
    r = ask(gateway, "hi " + scripted("ok<|im_end|>"), "bias-oov", max_tokens=4)  # nothing was kept of the failed one
    assert r.choices[0].message.content == "ok"
    assert httpx.post(f"{gateway.url}/v1/sessions/bias-oov/close").status_code == 200
    (rec,) = [r for r in read_sessions(gateway.out) if r["session_id"] == "bias-oov"]
    assert rec["parent"] is None and rec["branch"] == 0


def test_fields_it_cannot_honour_are_refused_by_name_and_open_nothing(gateway):
    for fields, param, words in REFUSED:
        with pytest.raises(openai.BadRequestError) as err:
            ask(gateway, "hi", "refused", max_tokens=4, **fields)
        body = err.value.body
        assert body["param"] == param and words in body["message"], (fields, body)
    health = httpx.get(gateway.url + "/health").json()
    r = ask(gateway, "hi " + scripted("ok<|im_end|>"), "refused", max_tokens=4)  # the refused ones opened nothing
    assert r.choices[0].message.content == "ok"
    assert httpx.get(gateway.url + "/health").json()["open_sessions"] == health["open_sessions"] + 1


def test_the_served_forms_of_those_fields_are_answered(gateway):
    """What the gateway does anyway is not refused: auto with tools, parallel calls allowed,
    text output, platform bookkeeping (user, metadata, store, prediction) and unknown fields."""
    r = ask(gateway, "hi " + scripted("ok<|im_end|>"), "served", max_tokens=4, tools=TOOLS, tool_choice="auto",
            parallel_tool_calls=True, modalities=["text"], user="u1", metadata={"k": "v"}, store=False,
            prediction={"type": "content", "content": "ok"}, service_tier="auto",
            extra_body={"echo": False, "include_reasoning": True, "some_future_field": 1, "min_tokens": 0,
                        "ignore_eos": False, "tool_choice_none_ok": None})
    assert r.choices[0].message.content == "ok"
    r = ask(gateway, "hi " + scripted("ok<|im_end|>"), "served-none", max_tokens=4, tool_choice="none")
    assert r.choices[0].message.content == "ok"  # "none" without tools: nothing to refuse


@pytest.mark.parametrize("fields", [{"tool_choice": "required"}, {"parallel_tool_calls": False},
                                    {"tool_choice": {"type": "function", "function": {"name": "f"}}}])
def test_tool_call_wishes_harnesses_send_every_turn_are_served_as_sampled(gateway, fields):
    """smolagents' tool-calling agent sends tool_choice "required" on every turn, others
    parallel_tool_calls false: a 400 would make the gateway useless to them. Decoding stays free,
    so the harness gets what the policy sampled: here a text answer, not a forced call."""
    r = ask(gateway, "hi " + scripted("no call<|im_end|>"), f"wish-{sorted(fields)[0]}", max_tokens=8,
            tools=TOOLS, **fields)
    assert r.choices[0].message.content == "no call" and not r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "stop"


def test_an_injected_assistant_turn_and_a_tool_reply_without_call_id_are_prompt_text(gateway, tokenizer_of):
    """A harness may write an assistant turn itself (a canned greeting, a summary) and answer a
    call without its id: both are served, and only what the backend sampled is marked."""
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Zq-injected"},
            {"role": "tool", "content": "Zq-result"}, {"role": "user", "content": "go " + scripted("ok<|im_end|>")}]
    r = gateway.client.chat.completions.create(model="tiny", messages=msgs, max_tokens=4,
                                               extra_headers={"X-Session-Id": "injected"})
    assert r.choices[0].message.content == "ok"
    assert httpx.post(gateway.url + "/v1/sessions/injected/close").status_code == 200
    (rec,) = [x for x in read_sessions(gateway.out) if x["session_id"] == "injected"]
    ids, mask = rec["input_ids"], rec["assistant_masks"].bool()
    assert tokenizer_of.decode(ids[mask]) == "ok<|im_end|>"
    assert "Zq-injected" in tokenizer_of.decode(ids[~mask]) and "Zq-result" in tokenizer_of.decode(ids[~mask])
