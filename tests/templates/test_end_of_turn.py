"""One owner of the end-of-turn rule (chatdata.templates.end_of_turn): the masks' profile and the
rollout's facts both take it from there, and differ only by its two named options."""
from chatdata.rollout import template_facts
from chatdata.templates.end_of_turn import end_of_turn
from chatdata.templates.profile import template_profile
from chatdata.templates.render import Renderer
from template_paths import TEMPLATE_DIR


def _src(name):
    return (TEMPLATE_DIR / name).read_text(encoding="utf-8")


def test_whitespace_only_end_is_the_masks_eot_and_the_rollouts_after_text():
    src = _src("llama-cpp-rwkv-world.jinja")  # turns end with "\n\n", and so does the conversation
    assert template_profile(Renderer(src)).eots == ("\n\n",)
    facts = template_facts(src)
    assert (facts.eot, facts.after_eot) == ("", "\n\n")
    assert end_of_turn("\n\nUser:", "\n\n", whitespace_end=True) == ("\n\n", "")
    assert end_of_turn("\n\nUser:", "\n\n", whitespace_end=False) == ("", "\n\n")


def test_gpt_oss_end_marker_is_trained_but_not_a_rollout_eot():
    src = _src("openai-gpt-oss-120b.jinja")  # <|end|> before another turn, <|return|> at the end
    assert {"<|end|>", "<|return|>"} <= set(template_profile(Renderer(src)).eots)
    assert template_facts(src).eot == ""
    tail_next, tail_end = "<|end|><|start|>user<|message|>", "<|return|>"
    assert end_of_turn(tail_next, tail_end, differing_final_marker=True).text == "<|end|>"
    assert end_of_turn(tail_next, tail_end, differing_final_marker=False).text == ""


def test_ordinary_ends_do_not_depend_on_the_options():
    for tails in (("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n"), ("<|eot_id|><|start_header_id|>", "<|eot_id|>"),
                  ("</s>[INST]", "</s>"), ("<|user|>", "")):
        answers = {end_of_turn(*tails, whitespace_end=w, differing_final_marker=d) for w in (0, 1) for d in (0, 1)}
        assert len(answers) == 1, tails
    assert end_of_turn("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n") == ("<|im_end|>", "\n")
    assert end_of_turn("<|im_end|>\n<|im_st", "<|im_end|>\n<|im_e").text == "<|im_end|>"  # a cut marker is dropped
