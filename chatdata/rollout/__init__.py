"""Token-in, token-out multi-turn rollouts for RL, for any chat template.

The ids the policy generated are kept verbatim (masked, with their logprobs); only the text the
template adds between turns is tokenized, found by rendering a small fixed base and diffing
strings. ``drift()`` reports where a fresh full render would tokenize differently.

Example:
    >>> from chatdata import History
    >>> from chatdata.data import load_sample_tokenizer
    >>> from chatdata.rollout import Rollout
    >>> tok = load_sample_tokenizer()
    >>> ro = Rollout(History.from_chats([[{"role": "user", "content": "hi"}]]), tokenizer=tok)
    >>> ro.add_response([tok.encode("hello<|im_end|>", add_special_tokens=False)])
    >>> ro.add_messages([[{"role": "user", "content": "bye"}]])
    >>> ro.prompt_ids()[0].tolist() == tok.apply_chat_template(ro.history.to_chats()[0], add_generation_prompt=True)["input_ids"]
    True
"""
from .core import Rollout
from .conversation import Conversation
from .facts import TemplateFacts, rollout_section, template_facts

__all__ = ["Rollout", "Conversation", "TemplateFacts", "template_facts"]
