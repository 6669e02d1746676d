"""``chatdata info TOKENS`` for a token set (made by ``chatdata tokenize``): lengths, trained share, histogram.

Lengths come from the offsets; the trained share is one sum over the memory-mapped mask column.
``info.py`` dispatches here when its argument is a token set (this module has no ``add_parser``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from .common import CLIError, say
from .progress import human_count

QUANTILES = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
__all__ = ["is_token_set", "open_token_set", "token_set_stats", "format_token_stats", "run_token_info"]


def is_token_set(path) -> bool:
    """True when ``path`` is a folder holding a token set (ragged ``input_ids`` + ``assistant_masks``)."""
    from ..td import RaggedTensorDict, load_memmap

    from ..io.sharded import is_sharded, open_dataset

    p = Path(path)
    if p.is_dir() and is_sharded(p):
        try:
            return open_dataset(p).kind == "tokens"
        except Exception:  # an unreadable manifest: the History path reports it
            return False
    if not (p.is_dir() and (p / "meta.json").is_file()):
        return False
    try:
        obj = load_memmap(p)
    except Exception:  # not a readable chatdata folder: the History path reports it
        return False
    return isinstance(obj, RaggedTensorDict) and "input_ids" in set(obj.keys())


def open_token_set(path, *, allow_empty: bool = False) -> list:
    """The parts of the token set at ``path`` as TokenDatasets: the folder, or each shard of a
    sharded one (``chatdata tokenize --ray``); ``[]`` for an empty one when ``allow_empty``.
    Anything else is a CLIError naming it.

    Example:
        >>> from chatdata import History
        >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("ds/")
        >>> open_token_set("ds/")
        Traceback (most recent call last):
        ...
        chatdata.cli.errors.CLIError: ds/ is not a token set: ... got History
    """
    from ..io.sharded import is_sharded, open_dataset
    from ..td import FormatError
    from ..train import ConcatTokenDataset, TokenDataset
    from .common import check_not_inside_dataset

    check_not_inside_dataset(path)
    try:
        if is_sharded(path):
            ds = open_dataset(path)
            if ds.kind not in ("tokens", None):
                raise CLIError(f"{path} is a sharded {ds.kind} dataset, not a token set; make one with "
                               f"`chatdata tokenize {path} TOKENS`")
            if allow_empty and len(ds) == 0:
                return []
            return ConcatTokenDataset(ds).parts
        if allow_empty and _is_empty(path):
            return []
        return [TokenDataset(path)]
    except (ValueError, TypeError, FileNotFoundError, FormatError) as err:
        raise CLIError(str(err)) from None


def _is_empty(path) -> bool:
    from ..td import RaggedTensorDict, load_memmap

    try:
        obj = load_memmap(path)
    except Exception:  # TokenDataset says what is wrong with it
        return False
    return isinstance(obj, RaggedTensorDict) and "input_ids" in set(obj.keys()) and obj.offsets.numel() == 1


def _histogram(lengths: torch.Tensor, bins: int = 12) -> list[tuple[int, int, int]]:
    """(low, high, count) per equal-width bin over [min, max]."""
    lo, hi = int(lengths.min()), int(lengths.max())
    width = max(-(-(hi - lo + 1) // bins), 1)
    counts = torch.bincount(torch.clamp((lengths - lo) // width, max=bins - 1), minlength=bins)
    return [(lo + k * width, lo + (k + 1) * width, int(c)) for k, c in enumerate(counts.tolist()) if lo + k * width <= hi]


def token_set_stats(path) -> dict:
    """The numbers ``chatdata info TOKENS`` prints (and the lengths, under ``_lengths``); a
    sharded token set (``chatdata tokenize --ray``) counts every shard."""
    sets = open_token_set(path, allow_empty=True)  # info describes an empty one (tokenize --allow-empty)
    empty = torch.zeros(0, dtype=torch.int64)
    lengths = torch.cat([empty] + [ds.lengths for ds in sets])
    tokens = int(lengths.sum())
    per_seq = torch.cat([empty] + [ds.trained_lengths() for ds in sets])
    trained = int(per_seq.sum())
    s, _ = torch.sort(lengths)
    n = s.numel()
    q = {name: int(s[min(n - 1, int(f * (n - 1) + 0.5))]) if n else 0 for name, f in QUANTILES}
    q["mean"] = float(lengths.double().mean()) if n else 0.0
    return {"sequences": n, "tokens": tokens, "trained_tokens": trained,
            "trained_fraction": trained / tokens if tokens else 0.0,
            "sequences_without_trained_tokens": int((per_seq == 0).sum()), "length_quantiles": q,
            "length_histogram": _histogram(lengths) if n else [], "_lengths": lengths}


def format_token_stats(st: dict) -> str:
    w = 24
    lines = [f"{'sequences':<{w}}{human_count(st['sequences'])}",
             f"{'tokens':<{w}}{human_count(st['tokens'])}",
             f"{'trained tokens':<{w}}{human_count(st['trained_tokens'])} ({100 * st['trained_fraction']:.1f}%, "
             "assistant mask)"]
    if st["sequences_without_trained_tokens"]:
        lines.append(f"{'no trained token':<{w}}{st['sequences_without_trained_tokens']} sequences")
    q = st["length_quantiles"]
    lines.append(f"{'':<{w}}" + "".join(f"{name:>9}" for name, _ in QUANTILES) + f"{'mean':>9}")
    lines.append(f"{'tokens/sequence':<{w}}" + "".join(f"{q[name]:>9}" for name, _ in QUANTILES) + f"{q['mean']:>9.1f}")
    lines.append("length histogram (tokens per sequence):")
    top = max([c for _, _, c in st["length_histogram"]] + [1])
    for lo, hi, c in st["length_histogram"]:
        lines.append(f"  {lo:>7}-{hi:<7} {'#' * round(40 * c / top):<40} {c}")
    return "\n".join(lines)


def _plot(st: dict, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError('--plot draws with matplotlib, which is not installed: pip install "chatdata[plot]"') from None
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(st["_lengths"].numpy(), bins=50, color="#4278c8")
    ax.set_xlabel("tokens per sequence")
    ax.set_ylabel("sequences")
    ax.set_title(f"{st['sequences']} sequences, {100 * st['trained_fraction']:.1f}% of tokens trained")
    fig.tight_layout()
    fig.savefig(out, format=out.suffix.lower().lstrip("."))
    plt.close(fig)


def run_token_info(args) -> int:
    """``chatdata info`` on a token set (``args.ds``, ``args.plot``, ``args.json``)."""
    import json

    st = token_set_stats(args.ds)
    if getattr(args, "plot", None):
        from .common import check_plot_output

        _plot(st, check_plot_output(args.plot, inputs=[args.ds]))  # --plot replaces a plot
    if getattr(args, "json", False):
        say(json.dumps({k: v for k, v in st.items() if not k.startswith("_")}, indent=2))
    else:
        say(f"token set {args.ds}")
        say(format_token_stats(st))
        if getattr(args, "plot", None):
            say(f"histogram written to {args.plot}")
    return 0
