"""``chatdata tokenize DS OUT --tokenizer PATH``: chat template + tokenizer over a whole dataset.

Conversations are rendered with the chat template (the tokenizer's own, or ``--template``),
tokenised in batches by the fast tokenizer, and the assistant mask of every token computed
from the rendered assistant spans. The output folder is a ragged stack saved in chatdata's
format: ``input_ids`` (int32) and ``assistant_masks`` (bool), one flat file each (plus a float32
``loss_weights`` column when ``--loss-weight`` / ``--message-weights`` / ``--final-answer-only``
ask for weights), plus int64 conversation offsets; it loads lazily::

    from chatdata.td import load_memmap
    tokens = load_memmap("tokens/")          # RaggedTensorDict, batch (n_conversations, -1)
    row = tokens[i]                          # TensorDict: row["input_ids"], row["assistant_masks"]
    labels = row["input_ids"].long().masked_fill(~row["assistant_masks"], -100)
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from .common import (CLIError, check_output, dataset_chunks, load_history, load_tokenizer, load_tools, plural,
                     positive_int, resolve_template, say)
from .progress import Progress, human_count
from .train_flags import add_selection_flags, check_roles_named, selection_from_args

MAX_REPORTED = 20

HELP = "apply the chat template and tokenizer to a dataset; write input_ids + assistant_masks"
EXAMPLE = """examples:
  chatdata tokenize ds/ tokens/ --tokenizer path/to/Qwen2.5-7B-Instruct
  chatdata tokenize ds/ tokens/ --tokenizer tok/ --template chatml_format --max-length 4096
  chatdata tokenize ds/ tokens/ --skip-bad          # leave out conversations the template rejects
  chatdata tokenize ds/ tokens/ --train-on assistant,tool --loss-weight tool=0.2   # + a loss_weights column
  chatdata tokenize ds/ tokens/ --last-turn-only    # only the last assistant turn of each conversation
  chatdata tokenize corpus/ tokens/ --tokenizer tok/ --ray            # a local Ray cluster
  chatdata tokenize corpus/ tokens/ --tokenizer tok/ --ray head:6379  # an existing one

the output loads lazily in a training loop:
  tokens = chatdata.load_memmap("tokens/"); row = tokens[0]
  row["input_ids"], row["assistant_masks"]"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("tokenize", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ds", help="a dataset folder (made by chatdata import)")
    p.add_argument("out", help="the folder to write the tokens to")
    p.add_argument("--tokenizer", metavar="PATH", help="a local Hugging Face tokenizer folder "
                   "(default: the Qwen2.5 tokenizer shipped with chatdata)")
    p.add_argument("--template", metavar="NAME", help="a bundled template name or a .jinja file "
                   "(default: the tokenizer's own chat template)")
    p.add_argument("--tools", metavar="FILE.json", help="JSON list of tool schemas passed to the template")
    p.add_argument("--max-length", type=positive_int, metavar="N", help="truncate each conversation to N tokens")
    p.add_argument("--no-reasoning", action="store_true",
                   help="do not train the reasoning the template renders (default: trained)")
    p.add_argument("--no-eot", action="store_true", help="do not train the end of each assistant turn "
                   "(default: trained, so the model learns to stop; off gives torchrl's content-only masks)")
    p.add_argument("--batch-size", type=positive_int, default=512, metavar="N", help="conversations per batch (default 512)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it already exists")
    p.add_argument("--skip-bad", action="store_true", help="leave out conversations the template rejects, "
                   "list them at the end (default: stop at the first, nothing written)")
    p.add_argument("--strict", action="store_true", help="with --skip-bad: exit 1 if any conversation was left out")
    p.add_argument("--allow-empty", action="store_true", help="write an empty token set for an empty dataset "
                   "(default: an error)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run on a Ray cluster (ADDRESS; default: a local one) and write a sharded token set")
    p.add_argument("--shard-size", type=positive_int, metavar="N",
                   help="with --ray: conversations per output shard (default 100000)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
    add_selection_flags(p, writes=True)
    p.set_defaults(func=run)
    return p


class TokenizeStats:
    def __init__(self):
        self.conversations = 0
        self.tokens = 0
        self.trained = 0
        self.seconds = 0.0
        self.skipped = []  # (conversation index, reason) of the conversations left out


def _encode(chats, template, tools, tokenizer, mask_options):
    """(ids, masks, loss weights or None) of ``chats``; ``mask_options`` holds mask_reasoning,
    mask_eot and the TrainSelection ``selection``."""
    from ..templates import render_chats_with_weights, tokenize_chats

    texts, weighted = render_chats_with_weights(chats, template, tools=tools, tokenizer=tokenizer,
                                                add_generation_prompt=False, **mask_options)
    spans = [[(w.start, w.end) for w in ws] for ws in weighted]
    span_weights = [[w.weight for w in ws] for ws in weighted] if mask_options["selection"].writes_weights else None
    enc = tokenize_chats(texts, spans, tokenizer, return_assistant_tokens_mask=True, span_weights=span_weights,
                         template=template)
    return enc["input_ids"], enc["assistant_masks"], enc.get("loss_weights")


def _encode_batch(chats, first: int, template, tools, tokenizer, skip_bad: bool, stats, mask_options):
    """Ids and masks of a batch of conversations (numbered from ``first``). When the template
    rejects one, the batch is redone one conversation at a time to name it: an error, or with
    ``skip_bad`` an entry in ``stats.skipped`` and the rest of the batch."""
    from ..templates import TemplateError

    try:
        return _encode(chats, template, tools, tokenizer, mask_options)
    except (TemplateError, ValueError):
        pass
    ids, masks, weights = [], [], []
    for j, chat in enumerate(chats):
        try:
            i, m, w = _encode([chat], template, tools, tokenizer, mask_options)
        except (TemplateError, ValueError) as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if not skip_bad:
                raise CLIError(f"conversation {first + j}: {reason} (pass --skip-bad to tokenize the others; "
                               "nothing written)") from None
            stats.skipped.append((first + j, reason))
            continue
        ids += i
        masks += m
        weights += w or []
    return ids, masks, (weights if mask_options["selection"].writes_weights else None)


def tokenize_dataset(ds, out, tokenizer, template: str, *, tools=None, max_length=None, batch_size: int = 512,
                     overwrite: bool = True, progress=None, skip_bad: bool = False,
                     allow_empty: bool = True, mask_reasoning: bool = True, mask_eot: bool = True,
                     selection=None) -> TokenizeStats:
    """Tokenise the History ``ds`` (a dataset or a path) into the folder ``out``; the mask options
    are those of ``History.apply_chat_template``, ``selection`` a ``TrainSelection`` (default:
    the assistant's turns); one that sets loss weights adds a float32 ``loss_weights`` column.

    A conversation the template rejects stops the run with an error naming it (nothing is
    written), or with ``skip_bad`` is left out and listed in ``stats.skipped``."""
    from ..td import TensorDict, RaggedTensorDict
    from ..td.storage import StreamWriter
    from ..templates import TrainSelection

    selection = selection if selection is not None else TrainSelection()
    weighted = selection.writes_weights
    columns = ("input_ids", "assistant_masks") + (("loss_weights",) if weighted else ())

    h = load_history(ds) if isinstance(ds, (str, Path)) else ds
    out = Path(out)
    check_output(out, overwrite, inputs=[ds] if isinstance(ds, (str, Path)) else ())
    n = len(h)
    if n == 0 and not allow_empty:
        raise CLIError(f"{ds if isinstance(ds, (str, Path)) else 'the dataset'} holds no conversation; "
                       "pass --allow-empty to write an empty token set")
    stats = TokenizeStats()
    bar = Progress("tokenizing", total=n, unit="conversations", item_name="tokens", enabled=progress)
    start = time.perf_counter()
    with StreamWriter(out, columns=columns) as w:
        for a, chunk in dataset_chunks(h, batch_size):
            chats = chunk.to_chats()
            ids, masks, wts = _encode_batch(chats, a, template, tools, tokenizer, skip_bad, stats,
                                            {"mask_reasoning": mask_reasoning, "mask_eot": mask_eot,
                                             "selection": selection})
            if max_length is not None:
                ids = [t[:max_length] for t in ids]
                masks = [m[:max_length] for m in masks]
                wts = wts and [t[:max_length] for t in wts]
            lengths = torch.tensor([len(t) for t in ids], dtype=torch.int64)
            offsets = torch.zeros(len(ids) + 1, dtype=torch.int64)
            torch.cumsum(lengths, 0, out=offsets[1:])
            flat_ids = torch.cat(ids).to(torch.int32) if ids else torch.zeros(0, dtype=torch.int32)
            flat_mask = torch.cat(masks).to(torch.bool) if masks else torch.zeros(0, dtype=torch.bool)
            if ids:
                cols = {"input_ids": flat_ids, "assistant_masks": flat_mask}
                if weighted:
                    cols["loss_weights"] = torch.cat(wts).to(torch.float32)
                vals = TensorDict(cols, [flat_ids.numel()])
                w.append(RaggedTensorDict(vals, offsets))
            stats.conversations += len(ids)
            stats.tokens += flat_ids.numel()
            stats.trained += int(flat_mask.sum())
            bar.update(len(chats), items=flat_ids.numel())
        if stats.conversations == 0:
            if n and stats.skipped:
                raise CLIError(f"every conversation was rejected by the template; first: conversation "
                               f"{stats.skipped[0][0]}: {stats.skipped[0][1]}")
            empty = {"input_ids": torch.zeros(0, dtype=torch.int32), "assistant_masks": torch.zeros(0, dtype=torch.bool)}
            if weighted:
                empty["loss_weights"] = torch.zeros(0, dtype=torch.float32)
            w.append(RaggedTensorDict(TensorDict(empty, [0]), torch.zeros(1, dtype=torch.int64)))
    bar.close()
    stats.seconds = time.perf_counter() - start
    return stats


def _run_on_ray(args) -> int:
    """``--ray``: chatdata.ray reads, tokenizes and writes the shards on the cluster."""
    from ..io.sharded import open_dataset
    from ..ray.jobs import tokenize_on_ray
    from ..td import FormatError

    try:
        open_dataset(args.ds)
    except (FileNotFoundError, FormatError, ValueError) as err:
        raise CLIError(f"{args.ds}: {err}") from None
    if args.skip_bad:
        raise CLIError("--skip-bad is not supported with --ray yet (a bad conversation stops the job)")
    out = Path(args.out)
    from .paths import check_apart

    check_apart(out, [args.ds])
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise CLIError(f"{out} already exists; pass --overwrite to replace it")
    tok = load_tokenizer(args.tokenizer)  # checked here, loaded again by every worker
    stats = tokenize_on_ray(args.ds, out, tokenizer=getattr(tok, "name_or_path", args.tokenizer),
                            chat_template=resolve_template(args.template, tok), tools=load_tools(args.tools),
                            max_length=args.max_length, batch_size=args.batch_size, rows_per_shard=args.shard_size or 100_000,
                            overwrite=args.overwrite, address=None if args.ray == "local" else args.ray)
    if not args.quiet:
        say(f"tokenized {human_count(stats.conversations)} conversations on Ray into {args.out} "
            f"({stats.shards} shards): {human_count(stats.tokens)} tokens in {stats.seconds:.2f} s")
    return 0


def _describe(selection) -> str:
    parts = [",".join(selection.train_on)]
    if selection.last_turn_only:
        parts.append("last turn only")
    lw = selection.loss_weights
    if isinstance(lw, dict):
        parts.append("weights " + ", ".join(f"{r}={w:g}" for r, w in lw.items()))
    elif lw is True:
        parts.append("message weights")
    elif callable(lw):
        parts.append(getattr(lw, "__name__", "weights").replace("_", " "))
    return "; ".join(parts)


def _warn_nothing_trained(h, where, selection) -> None:
    """A token set with no trained token trains nothing, silently: say why when the roles tell
    (no message has a trained role; ShareGPT's role names in OpenAI-shaped records).

    Example:
        >>> from chatdata import History
        >>> from chatdata.templates import TrainSelection
        >>> h = History.from_chats([[{"role": "human", "content": "q"}, {"role": "gpt", "content": "a"}]])
        >>> import contextlib, io; err = io.StringIO()
        >>> with contextlib.redirect_stderr(err): _warn_nothing_trained(h, "ds/", TrainSelection())
        >>> print(err.getvalue().split(";")[0])
        warning: no token of ds/ is trained: no message has the role 'assistant' (its roles: 'gpt', 'human')
    """
    import sys

    from .import_formats import SHAREGPT_ROLES
    from .info import dataset_roles

    roles = sorted(dataset_roles(h))
    trained = list(selection.train_on)
    if isinstance(selection.loss_weights, dict):  # a role given a weight is trained too
        trained += [r for r in selection.loss_weights if r not in trained]
    if any(r in roles for r in trained):
        return  # the roles are there: the template or the flags left them out; the summary said 0%
    said = f"warning: no token of {where} is trained: no message has the role {' or '.join(map(repr, trained))} " \
           f"(its roles: {', '.join(map(repr, roles))})"
    sharegpt = [r for r in roles if SHAREGPT_ROLES.get(r, r) != r]
    if sharegpt:
        said += (f"; {', '.join(map(repr, sharegpt))} are ShareGPT's names, which import maps to user/assistant only "
                 'from {"conversations": [{"from": ..., "value": ...}]} records: rename the roles in the source '
                 "and import it again")
    print(said, file=sys.stderr)


def run(args) -> int:
    if args.batch_size <= 0:
        raise CLIError("--batch-size must be > 0")
    if args.max_length is not None and args.max_length <= 0:
        raise CLIError("--max-length must be > 0")
    selection = selection_from_args(args)
    if args.shard_size is not None and args.ray is None:
        raise CLIError("--shard-size goes with --ray (the sharded output of a Ray run); without --ray the "
                       "token set is one folder", code=2)
    if args.ray is not None:
        if args.no_reasoning or args.no_eot or not selection.is_default:
            raise CLIError("--no-reasoning / --no-eot and the what-is-trained flags (--train-on, --last-turn-only, "
                           "--final-answer-only, --loss-weight, --message-weights) are not supported with --ray yet",
                           code=2)
        return _run_on_ray(args)
    h = load_history(args.ds)
    check_roles_named(args, selection, h, args.ds)
    check_output(args.out, args.overwrite, inputs=[args.ds, args.tokenizer, args.template, args.tools])  # before loading
    tok = load_tokenizer(args.tokenizer)
    template = resolve_template(args.template, tok)
    tools = load_tools(args.tools)
    if args.strict and not args.skip_bad:
        raise CLIError("--strict goes with --skip-bad (without it, the first bad conversation already stops "
                       "the run)", code=2)
    stats = tokenize_dataset(h, args.out, tok, template, tools=tools, max_length=args.max_length,
                             batch_size=args.batch_size, overwrite=args.overwrite, skip_bad=args.skip_bad,
                             allow_empty=args.allow_empty, mask_reasoning=not args.no_reasoning,
                             mask_eot=not args.no_eot, selection=selection)
    if not args.quiet:
        rate = stats.tokens / max(stats.seconds, 1e-9)
        share = 100 * stats.trained / max(stats.tokens, 1)
        say(f"tokenized {plural(stats.conversations, 'conversation')} into {args.out}: "
            f"{plural(stats.tokens, 'token')} ({share:.1f}% trained by the mask"
            f"{'' if selection.is_default else ': ' + _describe(selection)}) "
            f"in {stats.seconds:.2f} s, {human_count(rate)} tokens/s")
    if stats.tokens and not stats.trained:
        _warn_nothing_trained(h, args.ds, selection)
    if stats.skipped:
        import sys

        shown = ", ".join(str(i) for i, _ in stats.skipped[:MAX_REPORTED])
        more = f" and {len(stats.skipped) - MAX_REPORTED} more" if len(stats.skipped) > MAX_REPORTED else ""
        for i, reason in stats.skipped[:MAX_REPORTED]:
            print(f"conversation {i}: {reason}", file=sys.stderr)
        print(f"skipped {plural(len(stats.skipped), 'conversation')} the template rejects: {shown}{more}"
              f"{' (--strict: exit 1)' if args.strict else ''}", file=sys.stderr)
        if args.strict:
            return 1
    return 0
