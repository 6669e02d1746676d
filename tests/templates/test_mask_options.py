"""Mask options through the public History API: mask_reasoning, mask_eot, continue_final_message."""
import pytest

from chatdata import History

from template_paths import TEMPLATE_DIR

QWEN3 = (TEMPLATE_DIR / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
CHAT = [
    {"role": "system", "content": "Zqsys terse."},
    {"role": "user", "content": "Zqusr one?"},
    {"role": "assistant", "content": "Zqans one."},
    {"role": "user", "content": "Zqusr two?"},
    {"role": "assistant", "content": "Zqans two.", "reasoning_content": "Zqrsn because."},
]


def _learned(tok, out):
    return tok.decode(out["input_ids"][out["assistant_masks"].bool()].tolist())


def test_defaults_train_reasoning_content_and_eot(qwen_tok):
    out = History.from_chats(CHAT).apply_chat_template(
        tokenizer=qwen_tok, chat_template=QWEN3, add_generation_prompt=False, return_assistant_tokens_mask=True)
    assert _learned(qwen_tok, out) == "Zqans one.<|im_end|><think>\nZqrsn because.\n</think>\n\nZqans two.<|im_end|>"


def test_content_only_masks_like_torchrl(qwen_tok):
    # torchrl's History tests: every content is learned, no <|im_start|>/<|im_end|>, no role name
    out = History.from_chats(CHAT).apply_chat_template(
        tokenizer=qwen_tok, chat_template=QWEN3, add_generation_prompt=False, return_assistant_tokens_mask=True,
        mask_reasoning=False, mask_eot=False)
    learned = _learned(qwen_tok, out)
    assert learned == "Zqans one.Zqans two."
    for marker in ("<|im_start|>", "<|im_end|>", "assistant", "Zqrsn"):
        assert marker not in learned


def test_batch_with_options_is_ragged(qwen_tok):
    history = History.from_chats([CHAT, CHAT[:3]])
    out = history.apply_chat_template(tokenizer=qwen_tok, chat_template=QWEN3, add_generation_prompt=False,
                                      return_assistant_tokens_mask=True, mask_eot=False)
    # Qwen3 writes an empty think block in a final turn: the model learns to write it
    assert _learned(qwen_tok, out[1]) == "<think>\n\n</think>\n\nZqans one."


def test_continue_final_message_masks_up_to_the_cut(qwen_tok):
    chat = CHAT[:4] + [{"role": "assistant", "content": "Zqans partial"}]
    out = History.from_chats(chat).apply_chat_template(
        tokenizer=qwen_tok, continue_final_message=True, return_assistant_tokens_mask=True)
    ref = qwen_tok.apply_chat_template(chat, continue_final_message=True, tokenize=True, return_dict=True)
    assert out["input_ids"].tolist() == ref["input_ids"]
    assert out["assistant_masks"][-1] == 1
    assert _learned(qwen_tok, out) == "Zqans one.<|im_end|>Zqans partial"


def test_tool_call_only_turn_is_learned(qwen_tok):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": "Zqarg a"}}}
    chat = [{"role": "user", "content": "Zqusr go"}, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Zqtool out"}, {"role": "assistant", "content": "Zqans done"}]
    out = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False,
                                                       return_assistant_tokens_mask=True)
    learned = _learned(qwen_tok, out)
    assert "Zqarg a" in learned and "Zqans done<|im_end|>" in learned and "Zqtool" not in learned


def test_bad_option_values_fail_clearly(qwen_tok):
    with pytest.raises(TypeError):
        History.from_chats(CHAT).apply_chat_template(tokenizer=qwen_tok, return_assistant_tokens_mask=True,
                                                     mask_eot="no")
