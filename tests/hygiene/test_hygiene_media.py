"""Conversations that ask the same about different images (audio, files) are not duplicates:
the non-text parts of a message are part of its key, exact and near. Before, only the text
parts were read, so a vision dataset of "Describe this picture." over many images kept one."""
import json

from chatdata import History, load_memmap
from chatdata.cli import main
from chatdata.hygiene import dedup

ASK = "Describe this picture in as much detail as you can, please, including the colours."


def ask(image, text=ASK, shape="image_url"):
    part = {"type": "image_url", "image_url": {"url": image}} if shape == "image_url" else {"type": "image", "image": image}
    return [{"role": "user", "content": [part, {"type": "text", "text": text}]},
            {"role": "assistant", "content": "A cat on a red sofa, sleeping in the afternoon sun."}]


def test_the_same_question_about_other_images_is_kept():
    h = History.from_chats([ask("https://x/a.png"), ask("https://x/b.png"), ask("https://x/a.png"),
                            ask("b.png", shape="image"), ask("https://x/a.png", text=" " + ASK + "\n")])
    for mode in ("exact", "near"):
        assert dedup(h, mode).tolist() == [0, 1, 3], mode  # 2 and 4 repeat 0 (same image, same words)


def test_images_in_another_order_or_number_are_another_conversation():
    two = [{"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "image", "image": "b.png"},
                                        {"type": "text", "text": ASK}]}]
    swapped = [{"role": "user", "content": [two[0]["content"][1], two[0]["content"][0], two[0]["content"][2]]}]
    one = [{"role": "user", "content": [two[0]["content"][0], two[0]["content"][2]]}]
    text_only = [{"role": "user", "content": [{"type": "text", "text": ASK}]}]
    plain = [{"role": "user", "content": ASK}]
    h = History.from_chats([two, swapped, one, text_only, plain])
    assert dedup(h, "exact").tolist() == [0, 1, 2, 3]  # text parts alone are the plain text


def test_import_keeps_them(tmp_path, capsys):
    rows = [ask(f"https://x/{i}.png") for i in range(5)] + [ask("https://x/0.png")]
    (tmp_path / "v.jsonl").write_text("".join(json.dumps({"messages": r}) + "\n" for r in rows))
    assert main(["import", str(tmp_path / "v.jsonl"), str(tmp_path / "ds"), "--dedup", "near"]) == 0
    assert "near duplicates dropped: 1 in 1 clusters" in capsys.readouterr().out
    assert load_memmap(tmp_path / "ds").to_chats() == rows[:5]
