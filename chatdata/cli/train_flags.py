"""The flags that choose what is trained, shared by ``tokenize``, ``show`` and ``templates check``:
``--train-on``, ``--last-turn-only``, ``--final-answer-only``, ``--loss-weight ROLE=W`` and
``--message-weights`` (see ``chatdata.templates.TrainSelection``). Not a subcommand."""
from __future__ import annotations

from .common import CLIError

__all__ = ["add_selection_flags", "selection_from_args", "check_roles_named"]


def add_selection_flags(parser, writes: bool = False) -> None:
    """The flags, on ``parser``; ``writes``: the command writes a token set (``tokenize``), so the
    weights become a column and roles no message has are refused; else they are shown."""
    weights = "writes a float loss_weights column" if writes else "shown as each trained token's weight"
    g = parser.add_argument_group("what is trained (default: every assistant turn, weight 1)")
    g.add_argument("--train-on", metavar="ROLES", default="assistant",
                   help="comma-separated roles whose turns are trained, e.g. assistant,tool (default: assistant); "
                        "their content as the template renders it and the end of their turn, never a role header"
                        + ("; a misspelt role (one no message has, spelt almost like one it has) and a list of roles "
                           "no message has are refused" if writes else
                           "; a misspelt role (spelt almost like one the chat has) is refused"))
    g.add_argument("--last-turn-only", action="store_true",
                   help="train only the last trained turn of each conversation")
    g.add_argument("--final-answer-only", action="store_true",
                   help="train only the final answer: the last message, when it is an assistant message without "
                        "tool calls")
    g.add_argument("--loss-weight", action="append", default=[], metavar="ROLE=W",
                   help="loss weight of a role's tokens (repeatable), e.g. --loss-weight tool=0.2; a role given "
                        f"here is trained; {weights}; a message's own \"weight\" key wins")
    g.add_argument("--message-weights", action="store_true",
                   help=f"use each message's own \"weight\" key (a number >= 0) as its loss weight; {weights}")


def _role_weights(items) -> dict:
    out = {}
    for item in items:
        role, sep, value = item.partition("=")
        if not sep or not role.strip():
            raise CLIError(f"--loss-weight takes ROLE=WEIGHT (e.g. tool=0.2), got {item!r}", code=2)
        try:
            out[role.strip()] = float(value)
        except ValueError:
            raise CLIError(f"--loss-weight {item!r}: {value!r} is not a number", code=2) from None
    return out


def selection_from_args(args):
    """The ``TrainSelection`` the flags ask for (bad values are a usage error, exit 2)."""
    from ..templates import TrainSelection, final_answer

    roles = [r.strip() for r in args.train_on.split(",") if r.strip()]
    if not roles:
        raise CLIError("--train-on needs at least one role, e.g. --train-on assistant,tool", code=2)
    weights = _role_weights(args.loss_weight)
    if args.final_answer_only and (weights or args.message_weights or args.last_turn_only):
        raise CLIError("--final-answer-only chooses one turn by itself: it does not combine with --loss-weight, "
                       "--message-weights or --last-turn-only", code=2)
    loss_weights = final_answer if args.final_answer_only else (weights or (True if args.message_weights else None))
    try:
        return TrainSelection(roles, args.last_turn_only, loss_weights)
    except (TypeError, ValueError) as err:
        raise CLIError(f"--loss-weight: {err}", code=2) from None


def check_roles_named(args, selection, h, where) -> None:
    """Refuse, before any work, roles of ``--train-on`` / ``--loss-weight`` that would silently
    train nothing in the dataset ``h`` (named ``where``): one spelt almost like a role it has
    (``assistent``, ``usr``; the library's own rule, ``TrainSelection.check_named_roles``), and a
    ``--train-on`` none of whose roles any message has. A role the dataset lacks with no near match
    passes, as in the library: one recipe (``--loss-weight tool=0.2``) serves datasets without tools.
    An empty dataset has nothing to check."""
    from .info import dataset_roles

    train_on = [r.strip() for r in args.train_on.split(",") if r.strip()]
    if args.train_on == "assistant" and not args.loss_weight:  # the defaults are not the user's words
        return
    present = dataset_roles(h)
    if not present:
        return
    has = ", ".join(map(repr, present))
    try:
        selection.check_named_roles(present)
    except ValueError as err:
        flag = "--train-on" if str(err).startswith("train_on") else "--loss-weight"
        raise CLIError(f"{flag}: {err} (the roles of {where}: {has})", code=2) from None
    if args.train_on != "assistant" and not any(r in present for r in train_on):
        raise CLIError(f"--train-on: no message of {where} has any of the roles {', '.join(map(repr, train_on))}, "
                       f"so nothing would be trained (its roles: {has})", code=2)
