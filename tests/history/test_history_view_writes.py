"""Messages written through views of a History (``h[i]``, ``h[a:b]``, views of views, several alive at
once) reach the History whole -- content, ``is_complete``, ``tool_calls`` and extra keys -- and a
loaded History's folder never changes.

Before: the first write through a view copied the parent's constant and file-backed columns and
re-pointed that view only. A sibling taken earlier (``a, b = h[0], h[1]``, ``list(h)``) kept the old
columns: its write changed the ``_flags`` file of the loaded folder and lost ``is_complete`` in memory
while the content went through; a slice (``h[0:2]``) was no view at all for the copy, so the content
reached ``h`` without the flags. A History taken by a list, a tensor or a mask is a copy (as torch's
advanced indexing gives), whose writes never reach ``h``."""
import hashlib
import pathlib
import tempfile

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chatdata import History

CALLS = [{"type": "function", "function": {"name": "f", "arguments": {}}}]
CHATS = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
         [{"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}],
         [{"role": "user", "content": "e"}, {"role": "assistant", "content": "f"}]]
MESSAGES = [
    {"role": "assistant", "content": "X", "is_complete": False},
    {"role": "user", "content": "Y", "is_complete": True},
    {"role": "assistant", "content": "Z", "tool_calls": CALLS},
    {"role": "user", "content": "N", "name": "bob"},
    {"role": "system", "content": "S"},
    {"role": "assistant", "content": "T", "is_complete": False, "tool_calls": None, "name": "x"},
]


def _files(path):
    return {p.relative_to(path): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()}


def _build(kind, chats, folders):
    """A History of ``chats`` (dense: stacked conversations of one length), in memory or loaded."""
    h = torch.stack([History.from_chats(c) for c in chats]) if kind.startswith("dense") else History.from_chats(chats)
    if kind.endswith("loaded"):
        path = pathlib.Path(tempfile.mkdtemp()) / "h"
        h.memmap(path)
        folders.append((path, _files(path), chats))
        h = History.load_memmap(path)
    return h


def _check_folders(folders):
    for path, before, chats in folders:
        assert _files(path) == before, "a write through a view changed the folder of a loaded History"
        assert History.load_memmap(path).to_chats() == chats


def _model(views, roots, v):
    """What view ``v`` reads in the model: its addresses looked up in its root's chats."""
    obj, root, addr = views[v]
    chats = roots[root]

    def look(a):
        return [look(x) for x in a] if isinstance(a, list) else (chats[a[0]][a[1]] if a[0] is not None else chats[a[1]])
    return look(addr)


def _copied(items):
    return [list(map(dict, x)) if isinstance(x, list) else dict(x) for x in items]


def _addresses(chats):
    return [[(k, j) for j in range(len(x))] if isinstance(x, list) else (None, k) for k, x in enumerate(chats)]


STEP = st.tuples(st.sampled_from(["view", "slice", "pair", "copy", "write"]), st.integers(0, 50), st.integers(0, 50),
                 st.integers(0, 50), st.sampled_from(range(len(MESSAGES))))


@pytest.mark.parametrize("kind", ["ragged memory", "ragged loaded", "conversation memory", "conversation loaded",
                                  "dense memory", "dense loaded"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=12))
@example(steps=[("view", 0, 0, 0, 0), ("view", 0, 1, 0, 0), ("write", 1, 1, 0, 0), ("write", 2, 1, 0, 0)])  # a, b = h
@example(steps=[("slice", 0, 0, 1, 0), ("write", 1, 1, 0, 0)])  # s = h[0:2]; s[1] = message
def test_writes_through_views_match_the_same_writes_on_lists_of_chats(kind, steps):
    """Random views (int, slice with steps, ``[i, a:]``, of views) and copies (a list or tensor index, a
    step slice of conversations of different lengths), and writes into any
    of them, checked after each step against plain lists of chats where a view is a list of addresses
    into its root and a copy a root of its own."""
    folders = []
    chats = [list(map(dict, c)) for c in CHATS] if kind[0] in "rd" else [dict(m) for m in CHATS[0]]
    h = _build(kind, chats, folders)
    roots = [[list(map(dict, c)) for c in chats] if kind[0] in "rd" else [dict(m) for m in chats]]
    # each view: (History, root number, addresses): (conv, message) pairs, (None, message) in a conversation root
    addr = [[(i, j) for j in range(len(c))] for i, c in enumerate(chats)] if kind[0] in "rd" \
        else [(None, j) for j in range(len(chats))]
    views = [(h, 0, addr)]
    for what, a, b, c, m in steps:
        src = a % len(views)
        obj, root, addr = views[src]
        n = len(addr)
        if what == "view" and n and isinstance(addr[0], list):  # a conversation of a batch
            i = b % n
            views.append((obj[i], root, addr[i]))
        elif what == "slice" and n:
            sl = slice(b % n, b % n + 1 + c % n, 1 + c % 2)
            if kind.startswith("ragged") and isinstance(addr[0], list) and sl.step > 1:
                # conversations of different lengths gathered (h[::2]): a copy, as h[[0, 2]]
                roots.append(_copied(_model(views, roots, src)[sl]))
                views.append((obj[sl], len(roots) - 1, _addresses(roots[-1])))
            else:
                views.append((obj[sl], root, addr[sl]))
        elif what == "pair" and n and isinstance(addr[0], list) and addr[b % n]:  # h[i, a:b]
            i = b % n
            sl = slice(c % len(addr[i]), None)
            views.append((obj[i, sl], root, addr[i][sl]))
        elif what == "copy" and n:
            ids = [b % n, c % n]
            copy = obj[ids if c % 2 else torch.tensor(ids)]
            roots.append(_copied([_model(views, roots, src)[k] for k in ids]))
            views.append((copy, len(roots) - 1, _addresses(roots[-1])))
        elif what == "write" and n and not isinstance(addr[0], list):  # a message into a conversation
            k = b % n
            obj[k] = dict(MESSAGES[m])
            ci, j = addr[k]
            if ci is None:
                roots[root][j] = dict(MESSAGES[m])
            else:
                roots[root][ci][j] = dict(MESSAGES[m])
        for v, (o, _, _) in enumerate(views):
            assert o.to_chats() == _model(views, roots, v), f"view {v} after {what}"
    _check_folders(folders)


def test_two_views_of_a_loaded_batch_taken_before_either_writes(tmp_path):
    """The reviewer's probe: the second view's write kept is_complete and the folder unchanged."""
    folders = []
    h = _build("ragged loaded", [c[:] for c in CHATS], folders)
    convs = list(h)
    for c in convs:
        c[1] = {"role": "assistant", "content": "X", "is_complete": False}
    assert h.is_complete == [[True, False]] * 3
    assert [c.is_complete for c in convs] == [[True, False]] * 3
    _check_folders(folders)


@pytest.mark.parametrize("kind", ["conversation memory", "conversation loaded"])
def test_a_slice_of_a_conversation_writes_its_flags_into_it(kind):
    folders = []
    h = _build(kind, [dict(m) for m in CHATS[0]], folders)
    s = h[0:2]
    s[1] = {"role": "assistant", "content": "B", "is_complete": False, "tool_calls": CALLS}
    assert h.to_chats()[1] == {"role": "assistant", "content": "B", "is_complete": False, "tool_calls": CALLS}
    _check_folders(folders)


def test_a_view_whose_own_fields_were_replaced_is_refused_and_nothing_changes():
    h = History.from_chats([c[:] for c in CHATS])
    v = h[0]
    v.role = ["system", "user"]  # v's own role column: a write would reach h's content, not its role
    with pytest.raises(RuntimeError, match="its own fields or length were replaced"):
        v[0] = {"role": "user", "content": "Q", "is_complete": False}
    assert h.to_chats() == CHATS


def test_a_view_of_a_history_that_grew_there_is_refused():
    h = History.from_chats([c[:] for c in CHATS])
    v = h[0]
    h.append(History(role=["user"] * 3, content=["g"] * 3, batch_size=(3,)))  # every conversation grew
    with pytest.raises(RuntimeError, match="now has batch size"):
        v[0] = {"role": "user", "content": "Q"}
    assert h.to_chats() == [c + [{"role": "user", "content": "g"}] for c in CHATS]


def test_a_view_taken_before_a_field_set_writes_into_the_new_columns():
    h = History.from_chats([c[:] for c in CHATS])
    v = h[1]
    h.role = [["system", "user"]] * 3  # h's role column replaced: v is re-taken, the write reaches h whole
    assert v.role == ["system", "user"]
    v[1] = {"role": "tool", "content": "D"}
    assert h.to_chats()[1] == [{"role": "system", "content": "c"}, {"role": "tool", "content": "D"}]
    assert v.to_chats() == h.to_chats()[1]
