"""Multimodal chats: content given as a list of parts (image, video, audio, text) in a History.

The parts survive from_chats / to_chats / memmap exactly; rendered through a vision-language
processor's template they give transformers' text, and no token of a placeholder is ever trained,
also when the assistant's own content holds an image.
"""
from __future__ import annotations

from pathlib import Path


from chatdata import History
from chatdata.td import load_memmap
from chatdata.templates import render_chats_with_spans

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "image", "url": "https://x/cat.png"}, {"type": "text", "text": "What is it?"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat, drawn:"}, {"type": "image", "url": "https://x/out.png"},
                                      {"type": "text", "text": "as you see."}]},
    {"role": "user", "content": [{"type": "text", "text": "And these?"}, {"type": "video", "url": "https://x/dog.mp4"},
                                 {"type": "audio", "url": "https://x/bark.wav", "mime_type": "audio/wav"}]},
    {"role": "assistant", "content": "A dog and a bark."},
]


def test_parts_round_trip_through_history_and_memmap(tmp_path):
    chats = [CHAT, CHAT[:3], [{"role": "user", "content": []}]]
    h = History.from_chats(chats)
    assert h.to_chats() == chats
    h.memmap(tmp_path / "h")
    back = load_memmap(tmp_path / "h")
    assert back.to_chats() == chats
    assert back[0, 3].content[2] == {"type": "audio", "url": "https://x/bark.wav", "mime_type": "audio/wav"}


def test_vision_template_masks_never_train_a_placeholder(qwen_tok):
    template = (TEMPLATES / "Qwen-Qwen2.5-VL-7B-Instruct.jinja").read_text(encoding="utf-8")
    h = History.from_chats([CHAT])
    text = h.apply_chat_template(tokenizer=qwen_tok, chat_template=template, add_generation_prompt=False,
                                 tokenize=False)[0]
    assert text == qwen_tok.apply_chat_template(CHAT, chat_template=template, tokenize=False)
    out = h.apply_chat_template(tokenizer=qwen_tok, chat_template=template, add_generation_prompt=False, tokenize=True,
                                return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out[0]["input_ids"], out[0]["assistant_masks"].bool()
    learned = qwen_tok.decode(ids[mask])
    assert "A cat, drawn:" in learned and "as you see." in learned and "A dog and a bark." in learned
    pad = qwen_tok.convert_tokens_to_ids("<|image_pad|>")
    assert (ids == pad).sum() == 2 and not mask[ids == pad].any()  # the assistant's own image too
    for marker in ("<|vision_start|>", "<|vision_end|>", "<|video_pad|>"):
        assert not mask[ids == qwen_tok.convert_tokens_to_ids(marker)].any()
    assert "What is it?" not in learned and "And these?" not in learned


def test_placeholder_inside_a_generation_block_is_cut(qwen_tok):
    # an author's {% generation %} block around everything the assistant says, parts included
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
                "{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% else %}<image>{% endif %}{% endfor %}"
                "<|im_end|>{% endgeneration %}{% else %}{{ m.content if m.content is string else 'x' }}<|im_end|>"
                "{% endif %}\n{% endfor %}")
    chat = [{"role": "user", "content": "hi"}, CHAT[2]]
    texts, spans = render_chats_with_spans([chat], template)
    learned = [texts[0][s:e] for s, e in spans[0]]
    assert learned == ["A cat, drawn:", "as you see.<|im_end|>"]
