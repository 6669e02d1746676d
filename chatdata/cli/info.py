"""``chatdata info DS``: counts and length quantiles of a History dataset, from its offsets.

Everything is computed with torch ops on the memory-mapped offset columns (no string is
decoded, except the few distinct role names and the messages that carry tool calls):
messages per conversation are the conversation offsets' differences, and the size of a
message is its content's UTF-8 byte count (the content column's offsets' differences; equal to
characters for ASCII text).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .common import CLIError, load_history, plural, say
from .progress import human_bytes, human_count

HELP = "show counts, roles, tool calls and length quantiles of a dataset"
EXAMPLE = """examples:
  chatdata info ds/
  chatdata info ds/ --plot lengths.png"""
QUANTILES = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))


def add_parser(sub):
    import argparse

    p = sub.add_parser("info", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ds", help="a dataset folder (made by chatdata import) or a token set (chatdata tokenize)")
    p.add_argument("--plot", metavar="FILE.png", help='also draw the length histograms into FILE (.png, .svg or .pdf; matplotlib: pip install "chatdata[plot]")')
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.set_defaults(func=run)
    return p


def _column_lengths(entry, n: int) -> torch.Tensor:
    """Encoded size of every message's value of a column (from its offsets when packed)."""
    from ..td import NonTensorData, NonTensorStack
    from ..td.nontensor import to_json

    if isinstance(entry, NonTensorStack):
        return entry.value_nbytes().reshape(-1)
    if isinstance(entry, NonTensorData):
        v = entry.data
        k = 0 if v is None else len((v if isinstance(v, str) else to_json(v)).encode())
        return torch.full((n,), k, dtype=torch.int64)
    raise CLIError(f"unexpected column type {type(entry).__name__}")


def _role_counts(entry, n: int) -> dict:
    from ..td import NonTensorData

    if isinstance(entry, NonTensorData):
        return {entry.data: n} if n else {}
    return entry.value_counts()


def dataset_roles(h) -> dict:
    """Messages per role of a dataset (plain or sharded), from the role column alone.

    Example:
        >>> dataset_roles(History.from_chats([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]]))
        {'user': 1, 'assistant': 1}
    """
    if hasattr(h, "shard"):
        return _summed(dataset_roles(h.shard(k)) for k in range(h.num_shards))
    return _role_counts(h.message_column("role"), int(h.conversation_offsets()[-1]))


def _summed(counts) -> dict:
    """Counts per key over several dicts of counts, keys in the order first seen."""
    out: dict = {}
    for c in counts:
        for key, n in c.items():
            out[key] = out.get(key, 0) + n
    return out


def _quantiles(x: torch.Tensor) -> dict:
    if x.numel() == 0:
        return {name: 0 for name, _ in QUANTILES} | {"mean": 0.0}
    s, _ = torch.sort(x)
    n = s.numel()
    out = {name: int(s[min(n - 1, int(q * (n - 1) + 0.5))]) for name, q in QUANTILES}
    out["mean"] = float(x.double().mean())
    return out


def dataset_stats(h) -> dict:
    """The numbers ``chatdata info`` prints, plus the raw lengths for plotting; for a sharded
    dataset, each shard's numbers summed (quantiles over every shard's lengths)."""
    if hasattr(h, "shard"):
        parts = [_history_stats(h.shard(k)) for k in range(h.num_shards)]
        return _merge_stats(parts) if parts else _history_stats(h[0:0])
    return _history_stats(h)


_SUMMED = ("conversations", "messages", "tool_calls", "messages_with_tool_calls", "conversations_with_tool_calls",
           "content_bytes")


def _merge_stats(parts: list) -> dict:
    out = {k: sum(p[k] for p in parts) for k in _SUMMED}
    out["roles"] = _summed(p["roles"] for p in parts)
    out["_per_conv"] = torch.cat([p["_per_conv"] for p in parts])
    out["_content_bytes"] = torch.cat([p["_content_bytes"] for p in parts])
    out["messages_per_conversation"] = _quantiles(out["_per_conv"])
    out["content_bytes_per_message"] = _quantiles(out["_content_bytes"])
    return out


def _history_stats(h) -> dict:
    offsets = h.conversation_offsets()
    column = h.message_column
    n_msgs = int(offsets[-1])
    per_conv = offsets[1:] - offsets[:-1]
    content_bytes = _column_lengths(column("content"), n_msgs)
    roles = _role_counts(column("role"), n_msgs)
    calls_entry = column("tool_calls")
    n_calls = msgs_with_calls = convs_with_calls = 0
    from ..td import NonTensorStack

    if isinstance(calls_entry, NonTensorStack):
        lens = _column_lengths(calls_entry, n_msgs)
        has = torch.nonzero(lens > 4).reshape(-1)  # JSON "null" is 4 bytes, "[]" 2: anything longer is a call list
        msgs_with_calls = has.numel()
        if msgs_with_calls:
            calls = calls_entry[has].tolist()
            n_calls = sum(len(c) for c in calls if isinstance(c, list))
            conv_of = torch.searchsorted(offsets, has, right=True) - 1
            convs_with_calls = torch.unique(conv_of).numel()
    elif calls_entry is not None and isinstance(getattr(calls_entry, "data", None), list) and calls_entry.data:
        msgs_with_calls, n_calls = n_msgs, n_msgs * len(calls_entry.data)
        convs_with_calls = int((per_conv > 0).sum())
    return {
        "conversations": per_conv.numel(), "messages": n_msgs, "roles": roles,
        "tool_calls": n_calls, "messages_with_tool_calls": msgs_with_calls,
        "conversations_with_tool_calls": convs_with_calls,
        "content_bytes": int(content_bytes.sum()),
        "messages_per_conversation": _quantiles(per_conv),
        "content_bytes_per_message": _quantiles(content_bytes),
        "_per_conv": per_conv, "_content_bytes": content_bytes,
    }


PLOT_INSTALL = 'pip install "chatdata[plot]"'


def can_plot() -> bool:
    """Whether matplotlib (the optional ``plot`` extra) is installed, without importing it.

    Example:
        >>> isinstance(can_plot(), bool)
        True
    """
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def plot(stats: dict, path) -> None:
    """Draw the two length histograms into an image with matplotlib (the optional ``plot`` extra):
    PNG, SVG or PDF, as the name's suffix says.

    Example:
        >>> h = History.from_chats([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]])
        >>> plot(dataset_stats(h), "lengths.png")
        >>> Path("lengths.png").stat().st_size > 0
        True
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CLIError(f"--plot draws with matplotlib, which is not installed: {PLOT_INSTALL}") from None
    import numpy as np

    per_conv = stats["_per_conv"].numpy()
    sizes = stats["_content_bytes"].numpy()
    fig = Figure(figsize=(6.4, 4.8), dpi=100, layout="constrained")  # 640 x 480 pixels
    top, bottom = fig.subplots(2, 1)
    if per_conv.size:
        lo, hi = int(per_conv.min()), int(per_conv.max())
        bins = np.arange(lo, hi + 2) - 0.5 if hi - lo < 60 else 40
        top.hist(per_conv, bins=bins, color="#4278c8")
    top.set_title("Messages per conversation")
    top.set_ylabel("conversations")
    if sizes.size:
        p99 = float(np.quantile(sizes, 0.99))
        bottom.hist(np.minimum(sizes, p99), bins=40, range=(float(sizes.min()), max(p99, float(sizes.min()) + 1)),
                    color="#4278c8")
    bottom.set_title("Content bytes per message (values above p99 in the last bar)")
    bottom.set_ylabel("messages")
    fig.savefig(path, format=Path(path).suffix.lower().lstrip(".") or "png")


def _disk(path) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(root, name))
            files += 1
    return total, files


def format_stats(stats: dict, path=None) -> str:
    lines = []
    w = 26
    lines.append(f"{'conversations':<{w}}{human_count(stats['conversations'])}")
    lines.append(f"{'messages':<{w}}{human_count(stats['messages'])}")
    roles = "  ".join(f"{r} {human_count(k)}" for r, k in stats["roles"].items())
    lines.append(f"{'roles':<{w}}{roles or '-'}")
    lines.append(f"{'tool calls':<{w}}{human_count(stats['tool_calls'])} in "
                 f"{plural(stats['messages_with_tool_calls'], 'message')} "
                 f"({plural(stats['conversations_with_tool_calls'], 'conversation')})")
    lines.append(f"{'content':<{w}}{human_bytes(stats['content_bytes'])} (UTF-8)")
    head = "".join(f"{name:>9}" for name, _ in QUANTILES) + f"{'mean':>9}"
    lines.append(f"{'':<{w}}{head}")
    for label, key in (("messages/conversation", "messages_per_conversation"),
                       ("content bytes/message", "content_bytes_per_message")):
        q = stats[key]
        row = "".join(f"{human_count(q[name]):>9}" for name, _ in QUANTILES) + f"{q['mean']:>9.1f}"
        lines.append(f"{label:<{w}}{row}")
    if path is not None:
        size, files = _disk(path)
        lines.append(f"{'on disk':<{w}}{human_bytes(size)} in {files} files")
    return "\n".join(lines)


def run(args) -> int:
    import json

    from .info_tokens import is_token_set, run_token_info

    if is_token_set(args.ds):  # a tokenized folder: lengths, trained share, histogram
        return run_token_info(args)
    h = load_history(args.ds)
    stats = dataset_stats(h)
    if args.plot:
        from .common import check_plot_output

        plot(stats, check_plot_output(args.plot, inputs=[args.ds]))  # --plot replaces a plot
    from ..gateway import is_gateway_output

    sessions = None
    if is_gateway_output(args.ds):  # chatdata serve's output: its token set and session trees too
        from ..gateway.reader import summarize

        sessions = summarize(args.ds)
    if args.json:
        out = {k: v for k, v in stats.items() if not k.startswith("_")}
        say(json.dumps(out if sessions is None else {**out, "gateway": sessions}, indent=2))
    else:
        say(f"dataset {args.ds}")
        say(format_stats(stats, args.ds))
        if sessions is not None:
            say(f"{'sessions (chatdata serve)':<26}{plural(sessions['sessions'], 'session')}, "
                f"{plural(sessions['branches'], 'branch', 'branches')} ({plural(sessions['forks'], 'fork')}), "
                f"{plural(sessions['turns'], 'turn')} ({sessions['truncated_turns']:,} truncated), "
                f"{plural(sessions['open_session_logs'], 'session')} still open")
            say(f"{'tokens (OUT/tokens)':<26}{human_count(sessions['tokens'])}, "
                f"{human_count(sessions['sampled_tokens'])} sampled (assistant_masks)")
        if args.plot:
            say(f"histograms written to {args.plot}")
    return 0
