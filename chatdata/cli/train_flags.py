"""The flags that choose what is trained, shared by ``tokenize``, ``show`` and ``templates check``:
``--train-on``, ``--last-turn-only``, ``--final-answer-only``, ``--loss-weight ROLE=W`` and
``--message-weights`` (see ``chatdata.templates.TrainSelection``). Not a subcommand."""
from __future__ import annotations

from .common import CLIError

__all__ = ["add_selection_flags", "selection_from_args", "check_roles_named"]


def add_selection_flags(parser) -> None:
    g = parser.add_argument_group("what is trained (default: every assistant turn, weight 1)")
    g.add_argument("--train-on", metavar="ROLES", default="assistant",
                   help="comma-separated roles whose turns are trained, e.g. assistant,tool (default: assistant); "
                        "their content as the template renders it and the end of their turn, never a role header; "
                        "tokenize refuses a role that no message of the dataset has (a typo)")
    g.add_argument("--last-turn-only", action="store_true",
                   help="train only the last trained turn of each conversation")
    g.add_argument("--final-answer-only", action="store_true",
                   help="train only the final answer: the last message, when it is an assistant message without "
                        "tool calls")
    g.add_argument("--loss-weight", action="append", default=[], metavar="ROLE=W",
                   help="loss weight of a role's tokens (repeatable), e.g. --loss-weight tool=0.2; a role given "
                        "here is trained; writes a float loss_weights column; a message's own \"weight\" key wins")
    g.add_argument("--message-weights", action="store_true",
                   help="use each message's own \"weight\" key (a number >= 0) as its loss weight; writes a "
                        "float loss_weights column")


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


def check_roles_named(args, h, where) -> None:
    """Refuse a role given to ``--train-on`` or ``--loss-weight`` that no message of the dataset
    ``h`` has (named ``where``): a typo (``--train-on assistent``) would train nothing of it, and
    the run would end as if it had done what was asked. An empty dataset has nothing to check.
    Costs one role count (``chatdata info``'s, ~5 s per 700k messages on a loaded 2-core VM): only
    tokenize calls it, where it is a few % of the run; show prints each trained role's tokens."""
    from .info import dataset_roles

    named = {"--loss-weight": list(_role_weights(args.loss_weight))}
    if args.train_on != "assistant":  # the default is not the user's word: a dataset may have no assistant
        named["--train-on"] = [r.strip() for r in args.train_on.split(",") if r.strip()]
    if not any(named.values()):
        return
    present = dataset_roles(h)
    for flag in ("--train-on", "--loss-weight"):
        for role in named.get(flag, ()):
            if present and role not in present:
                raise CLIError(f"{flag}: no message of {where} has the role {role!r} (its roles: "
                               f"{', '.join(present)}); check the spelling", code=2)
