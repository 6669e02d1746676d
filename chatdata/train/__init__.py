"""Training batches from token sets: datasets, packing plans, samplers and collators.

Example:
    >>> from torch.utils.data import DataLoader
    >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
    >>> from chatdata.train import TokenDataset, PackedBatchSampler, collate_padding_free
    >>> toks = History.from_chats(load_sample_chats()[:8]).apply_chat_template(
    ...     tokenizer=load_sample_tokenizer(), tokenize=True, return_dict=True,
    ...     return_assistant_tokens_mask=True, add_generation_prompt=False)
    >>> ds = TokenDataset(toks.memmap("tokens/"))          # or TokenDataset("tokens/")
    >>> sampler = PackedBatchSampler(ds.lengths, max_tokens=8192, seed=0)
    >>> loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate_padding_free)
    >>> sum(int(b["input_ids"].numel()) for b in loader) == int(ds.lengths.sum())
    True
"""
from .collate import collate_padded, collate_padding_free
from .concat import ConcatTokenDataset
from .dataset import IGNORE_INDEX, TokenDataset, TokenRows
from .packing import PackingPlan, pack
from .sampler import PackedBatchSampler
from .weighted_loss import weighted_causal_lm_loss
from .tree_attention import tree_attention_mask, tree_block_mask, tree_logprobs, tree_model_inputs, tree_parents
from .trees import collate_prefix_tree
from .tree_packing import PrefixIndex, TreePackingPlan, pack_tree  # registers pack(..., strategy="tree")

__all__ = ["TokenDataset", "ConcatTokenDataset", "TokenRows", "pack", "PackingPlan", "PackedBatchSampler", "collate_padding_free",
           "collate_padded", "IGNORE_INDEX", "collate_prefix_tree", "tree_attention_mask", "tree_block_mask",
           "tree_logprobs", "tree_model_inputs", "tree_parents", "PrefixIndex", "TreePackingPlan", "pack_tree", "weighted_causal_lm_loss"]
