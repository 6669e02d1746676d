"""An unfinished assistant message (``is_complete: False``, a generation cut by its token limit) is
trained without the end of its turn: templates render ``<|im_end|>`` after it all the same, but the
model never wrote it, and training it would teach the model to stop where the reply was cut."""
from __future__ import annotations

import pytest

import chatdata
from chatdata.templates import TemplateError, render_chats_with_spans, render_chats_with_weights
from template_paths import template_files

USER = {"role": "user", "content": "Tell me a story."}
AGAIN = {"role": "user", "content": "Go on please."}
DONE = {"role": "assistant", "content": "Once upon a time there was a fox."}
CUT = dict(DONE, is_complete=False)


def _spans(chats, template, tok, **kw):
    texts, spans = render_chats_with_spans(chats, template, tokenizer=tok, **kw)
    return texts, spans


@pytest.mark.parametrize("path", template_files(), ids=lambda p: p.stem)
def test_every_corpus_template_leaves_the_end_of_an_unfinished_turn_out(path, qwen_tok):
    template = path.read_text(encoding="utf-8")
    try:
        texts, default = _spans([[USER, DONE], [USER, CUT]], template, qwen_tok)
        _, no_eot = _spans([[USER, DONE], [USER, CUT]], template, qwen_tok, mask_eot=False)
    except TemplateError:  # the template refuses this chat (a guard model, a role it does not know): not ours
        pytest.skip("the template refuses a user + assistant chat")
    assert texts[0] == texts[1]  # templates render is_complete=False like a finished reply
    assert default[1] == no_eot[1] == no_eot[0]  # the unfinished one: the content only
    if default[0] != no_eot[0]:  # the template closes a turn: the finished one keeps its end
        trained = "".join(texts[0][s:e] for s, e in default[0])
        assert trained.startswith("".join(texts[1][s:e] for s, e in default[1]).rstrip())


@pytest.mark.parametrize("name", ["chatml_format", "llama3", "qwen"])
def test_only_the_unfinished_turn_loses_its_end(name, qwen_tok):
    template = chatdata.templates.get_chat_template(name)
    chats = [[USER, CUT, AGAIN, DONE], [USER, DONE, AGAIN, CUT], [USER, DONE, AGAIN, DONE]]
    texts, spans = _spans(chats, template, qwen_tok)
    _, no_eot = _spans(chats, template, qwen_tok, mask_eot=False)
    assert texts[0] == texts[1] == texts[2]
    split = texts[0].index(AGAIN["content"])

    def turn(sp, second):
        return [p for p in sp if (p[0] > split) == second]

    assert turn(spans[0], False) == turn(no_eot[0], False) and turn(spans[0], True) == turn(spans[2], True)
    assert turn(spans[1], False) == turn(spans[2], False) and turn(spans[1], True) == turn(no_eot[1], True)
    assert turn(spans[2], False) != turn(no_eot[2], False)  # a finished turn's end is trained


def test_history_masks_and_loss_weights_follow_is_complete(qwen_tok):
    h = chatdata.History.from_chats([[USER, DONE], [USER, CUT]])
    out = h.apply_chat_template(tokenizer=qwen_tok, chat_template_name="qwen", return_dict=True,
                                return_assistant_tokens_mask=True, add_generation_prompt=False)
    trained = [qwen_tok.decode(out["input_ids"][i][out["assistant_masks"][i].bool()]) for i in range(2)]
    assert trained == [DONE["content"] + "<|im_end|>", DONE["content"]]
    texts, weighted = render_chats_with_weights([[USER, CUT]], chatdata.templates.get_chat_template("qwen"),
                                                tokenizer=qwen_tok)
    assert [texts[0][w.start:w.end] for w in weighted[0]] == [DONE["content"]]


def test_from_text_of_a_cut_generation_trains_what_was_written(qwen_tok):
    text = "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nOnce upon a"
    h = chatdata.History.from_text(text, chat_template_name="qwen")
    assert h[-1].is_complete is False
    out = h.apply_chat_template(tokenizer=qwen_tok, chat_template_name="qwen", return_dict=True,
                                return_assistant_tokens_mask=True, add_generation_prompt=False)
    assert qwen_tok.decode(out["input_ids"][out["assistant_masks"].bool()]) == "Once upon a"


@pytest.mark.parametrize("stem", ["HuggingFaceTB-SmolLM3-3B-hfjs", "LFM2.5-8B-A1B"])
def test_generation_blocks_leave_the_end_of_an_unfinished_turn_out(stem, qwen_tok):
    from template_paths import TEMPLATE_DIR

    template = (TEMPLATE_DIR / f"{stem}.jinja").read_text(encoding="utf-8")
    chats = [[USER, DONE, AGAIN, CUT], [USER, DONE, AGAIN, DONE]]
    texts, spans = _spans(chats, template, qwen_tok)
    _, no_eot = _spans(chats, template, qwen_tok, mask_eot=False)
    assert spans[0][0] == spans[1][0] != no_eot[0][0]  # the finished turn keeps its end
    assert spans[0][1] == no_eot[0][1] != spans[1][1]  # the unfinished one does not
    assert texts[0][spans[0][1][0]:spans[0][1][1]].endswith(DONE["content"])
