"""``chatdata pack TOKENS --max-tokens N``: plan packed batches over a token set and report how well they fill.

Only the lengths are read (from the offsets); the plan is what
``chatdata.train.PackedBatchSampler`` computes each epoch.
"""
from __future__ import annotations

import time

from .common import CLIError, positive_int, say
from .progress import human_count

HELP = "plan packed batches of a tokenized dataset: bins, efficiency, distance to the lower bound"
EXAMPLE = """examples:
  chatdata pack tokens/ --max-tokens 8192
  chatdata pack tokens/ --max-tokens 4096 --strategy ffd --overflow truncate

in training (padding-free batches, one bin per step):
  ds = chatdata.train.TokenDataset("tokens/")
  sampler = chatdata.train.PackedBatchSampler(ds.lengths, max_tokens=8192)
  DataLoader(ds, batch_sampler=sampler, collate_fn=chatdata.train.collate_padding_free)"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("pack", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tokens", help="a token set folder (made by chatdata tokenize)")
    p.add_argument("--max-tokens", type=positive_int, required=True, metavar="N", help="tokens per bin (batch)")
    p.add_argument("--strategy", choices=("bfd", "ffd"), default="bfd",
                   help="best-fit decreasing (default) or first-fit decreasing")
    p.add_argument("--overflow", choices=("error", "truncate", "split", "drop"), default="error",
                   help="what to do with a sequence longer than N (default: error)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(func=run)
    return p


def pack_stats(tokens, max_tokens: int, strategy: str = "bfd", overflow: str = "error") -> dict:
    """The numbers ``chatdata pack`` prints."""
    import torch

    from ..train import pack
    from .info_tokens import open_token_set

    parts = open_token_set(tokens)  # a folder or a sharded token set (chatdata tokenize --ray)
    lengths = torch.cat([p.lengths for p in parts])
    try:
        start = time.perf_counter()
        plan = pack(lengths, max_tokens, strategy=strategy, overflow=overflow)
        seconds = time.perf_counter() - start
    except ValueError as err:
        raise CLIError(str(err).replace("pass overflow='truncate', 'split' or 'drop'",
                                        "pass --overflow truncate|split|drop")) from None
    except (FileNotFoundError, TypeError) as err:
        raise CLIError(str(err)) from None
    bins, lb = len(plan), plan.lower_bound
    return {"sequences": int(lengths.numel()), "tokens": int(lengths.sum()), "longest": int(lengths.max()),
            "max_tokens": max_tokens, "strategy": strategy, "overflow": overflow, "bins": bins,
            "packed_tokens": plan.num_tokens, "dropped": int(plan.dropped.numel()),
            "efficiency": plan.efficiency, "lower_bound": lb, "over_lower_bound": bins - lb,
            "over_lower_bound_pct": 100.0 * (bins - lb) / lb if lb else 0.0,
            "sequences_per_bin": plan.indices.numel() / bins if bins else 0.0, "seconds": seconds}


def format_pack_stats(s: dict) -> str:
    lines = [
        f"{'sequences':<22}{human_count(s['sequences'])} ({human_count(s['tokens'])} tokens, longest {s['longest']})",
        f"{'bins':<22}{human_count(s['bins'])} of {s['max_tokens']} tokens ({s['strategy']}), "
        f"{s['sequences_per_bin']:.1f} sequences per bin",
        f"{'efficiency':<22}{100 * s['efficiency']:.2f}% of the bin tokens are real tokens",
        f"{'lower bound':<22}ceil({s['packed_tokens']} / {s['max_tokens']}) = {s['lower_bound']} bins: "
        f"+{s['over_lower_bound']} ({s['over_lower_bound_pct']:+.2f}%)",
        f"{'planned in':<22}{1000 * s['seconds']:.1f} ms",
    ]
    if s["dropped"]:
        lines.insert(2, f"{'dropped':<22}{s['dropped']} sequences longer than {s['max_tokens']} tokens")
    return "\n".join(lines)


def run(args) -> int:
    import json

    if args.max_tokens <= 0:
        raise CLIError(f"--max-tokens must be > 0, got {args.max_tokens}")
    stats = pack_stats(args.tokens, args.max_tokens, args.strategy, args.overflow)
    if args.json:
        say(json.dumps(stats, indent=2))
    else:
        say(f"token set {args.tokens}")
        say(format_pack_stats(stats))
    return 0
