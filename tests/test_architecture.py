"""The house's rules, checked on the source (docs/architecture.md): no import circles in chatdata/,
and every import points down the floors (and, inside td/, down the rooms).

An import is every ``import`` / ``from ... import`` statement at any depth of a module (inside
functions, classes, ``if TYPE_CHECKING:`` blocks, ``try``), relative ones resolved against the
module's package. ``from pkg import name`` is an arrow to the module ``pkg.name`` when that is a
module, else to ``pkg`` itself (a package's face, its ``__init__``). The implicit import of a
module's parent packages is not an arrow: Python starts those before the module anyway.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "chatdata"
DOC = ROOT / "docs" / "architecture.md"


# -- the import graph ------------------------------------------------------------------------
def find_modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module and package under ``package_dir``."""
    top = package_dir.name
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = (top,) + path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict) -> str | None:
    """The longest prefix of ``name`` that is a module of ours (None: not ours)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, modules: dict) -> list[tuple[str, int, str]]:
    """``(imported module, line, module named by the statement)`` for every import of one of
    ``modules`` in the module ``name`` (the last two differ for ``from pkg import submodule``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top package")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name:
                named = _known(source, modules) if isinstance(node, ast.ImportFrom) else known
                out.append((known, node.lineno, named or known))
    return out


def import_graph(package_dir: Path) -> tuple[dict, dict]:
    """``(modules, arrows)``: arrows maps a module to ``{imported module: (first line, module
    named by that statement)}``."""
    modules = find_modules(package_dir)
    arrows: dict[str, dict[str, tuple[int, str]]] = {m: {} for m in modules}
    for name, path in modules.items():
        for target, line, named in imports_of(name, path, modules):
            arrows[name].setdefault(target, (line, named))
    return modules, arrows


def import_circles(arrows: dict) -> list[tuple[list[str], list[str]]]:
    """One ``(closed path [a, b, ..., a], every module of its group)`` per group of modules that
    import each other round (a strongly connected group of more than one module)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    counter = [0]

    def visit(start):  # Tarjan's algorithm, iterative (no recursion limit on deep chains)
        work = [(start, iter(sorted(arrows[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(arrows[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        group.append(m)
                        if m == node:
                            break
                    groups.append(set(group))

    for m in sorted(arrows):
        if m not in index:
            visit(m)
    circles = []
    for group in groups:
        if len(group) == 1 and next(iter(group)) not in arrows[next(iter(group))]:
            continue
        first = min(group)  # a shortest way back to `first`, inside the group
        paths, seen = [[first]], {first}
        while paths:
            path = paths.pop(0)
            if first in arrows[path[-1]] and (len(path) > 1 or path[-1] == first):
                circles.append((path + [first], sorted(group)))
                break
            for nxt in sorted(arrows[path[-1]]):
                if nxt in group and nxt not in seen:
                    seen.add(nxt)
                    paths.append(path + [nxt])
    return circles


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def describe_circle(circle: tuple[list[str], list[str]], modules: dict, arrows: dict) -> str:
    circle, group = circle
    lines = [f"a circle of {len(group)} modules: {', '.join(group)}; for example " + " -> ".join(circle)]
    for a, b in zip(circle, circle[1:]):
        lines.append(f"    {_shown(modules[a])}:{arrows[a][b][0]} imports {b}")
    return "\n".join(lines)


# -- the order of docs/architecture.md ------------------------------------------------------
def read_order(doc: Path = DOC) -> tuple[list[list[tuple[str, str]]], list[list[tuple[str, str]]]]:
    """The floors and the rooms of td/, lowest first: lists of ``(name, mark)`` (mark: "",
    "face" or "planned"), from the ``text`` block after "## The order, as the tests read it"."""
    text = doc.read_text(encoding="utf-8")
    block = re.search(r"## The order, as the tests read it\s+```text\n(.*?)```", text, re.S)
    assert block, f"{doc}: no ```text block under '## The order, as the tests read it'"
    floors, rooms, current = [], [], None
    for line in block.group(1).splitlines():
        if line.startswith("floors"):
            current = floors
        elif line.startswith("rooms of chatdata.td"):
            current = rooms
        elif line.strip():
            number, _, rest = line.strip().partition(" ")
            assert current is not None and number == str(len(current) + 1), f"{doc}: bad order line {line!r}"
            current.append([(m.group(1), m.group(2) or "") for m in
                            re.finditer(r"(chatdata[\w.]*)(?:\s+\((face|planned)\))?", rest)])
    assert floors and rooms, f"{doc}: the order block needs both floors and rooms"
    return floors, rooms


def place(module: str, levels: list) -> tuple[int, str] | None:
    """``(level, name)`` of the entry that holds ``module``: a face entry holds its module only,
    another entry its package and everything in it (the longest such name wins)."""
    best = None
    for level, entries in enumerate(levels):
        for name, mark in entries:
            if module == name or (mark != "face" and module.startswith(name + ".")):
                if best is None or len(name) > len(best[1]):
                    best = (level, name)
    return best


def upward_arrows(modules: dict, arrows: dict, floors: list, rooms: list) -> list[str]:
    """Every import that does not point down: to a higher floor or room, or to a peer package
    on the same floor (or room); and, from outside td/, to a module inside a room of td/."""
    bad = []
    td_faces = {"chatdata.td"} | {name for entries in rooms for name, mark in entries if mark != "face"}
    for a in sorted(arrows):
        for b, (line, named) in sorted(arrows[a].items()):
            where = f"{_shown(modules[a])}:{line}: {a} imports {b}"
            fa, fb = place(a, floors), place(b, floors)
            if fa[1] != fb[1]:
                if fb[0] > fa[0]:
                    bad.append(f"{where}, on floor {fb[0] + 1} ({fb[1]}), above floor {fa[0] + 1} ({fa[1]})")
                elif fb[0] == fa[0]:
                    bad.append(f"{where}: {fa[1]} and {fb[1]} share floor {fa[0] + 1}, and peers never import each other")
                elif fb[1] == "chatdata.td" and named not in td_faces:
                    bad.append(f"{where}: outside td/, import td/ through chatdata.td or a room's face, "
                               f"not a module inside a room")
                continue
            ra, rb = place(a, rooms), place(b, rooms)
            if ra is None or rb is None or ra[1] == rb[1]:
                continue
            if rb[0] > ra[0]:
                bad.append(f"{where}, in room {rb[1]}, above room {ra[1]}")
            elif rb[0] == ra[0]:
                bad.append(f"{where}: rooms {ra[1]} and {rb[1]} share a level")
    return bad


# -- the tests -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _chatdata_graph():
    return import_graph(PACKAGE)


def test_chatdata_has_no_import_circles():
    modules, arrows = _chatdata_graph()
    assert len(modules) > 100 and sum(len(v) for v in arrows.values()) > 300  # the whole package was read
    circles = import_circles(arrows)
    assert not circles, "import circles in chatdata/ (a lower module must not import back; see " \
                        "docs/architecture.md):\n" + "\n".join(describe_circle(c, modules, arrows) for c in circles)


def test_every_import_points_down_the_floors_and_rooms():
    modules, arrows = _chatdata_graph()
    floors, rooms = read_order()
    unplaced = sorted(m for m in modules if place(m, floors) is None)
    assert not unplaced, f"modules on no floor of docs/architecture.md (add their package to the order block): {unplaced}"
    td = sorted(m for m in modules if m.startswith("chatdata.td.") and place(m, rooms) is None)
    assert not td, f"modules of td/ in no room (every module of td/ belongs to one of its rooms): {td}"
    bad = upward_arrows(modules, arrows, floors, rooms)
    assert not bad, "imports that do not point down (docs/architecture.md):\n" + "\n".join(bad)


def test_the_order_names_what_exists():
    modules = find_modules(PACKAGE)
    floors, rooms = read_order()
    top_level = {".".join(m.split(".")[:2]) for m in modules}
    named = {name for level in floors + rooms for name, _ in level}
    for level in floors + rooms:
        for name, mark in level:
            assert name in modules or mark == "planned", f"docs/architecture.md names {name}, which does not exist"
    assert top_level <= named, f"packages on no floor of docs/architecture.md: {sorted(top_level - named)}"
    rooms_now = {m for m in modules if m.count(".") == 2 and m.startswith("chatdata.td.")
                 and modules[m].name == "__init__.py"}
    assert rooms_now == {name for level in rooms for name, mark in level if mark != "face"}


def test_every_package_and_room_is_described():
    """Each package of the order block has a row in the floors table, on its floor, and each room
    of td/ a row in the rooms table: the order alone says where, not what it holds."""
    text = DOC.read_text(encoding="utf-8")
    rows = {name: int(floor) for floor, name in re.findall(r"^\| (\d+) \| `(chatdata[\w.]*)`(?: \(face\))? \|", text, re.M)}
    room_rows = set(re.findall(r"^\| `(chatdata\.td\.\w+)` \|", text, re.M))
    floors, rooms = read_order()
    for level, entries in enumerate(floors, 1):
        for name, mark in entries:
            if name == "chatdata.__main__":
                continue  # `python -m chatdata`: the face's command, nothing to hold
            assert rows.get(name) == level, f"docs/architecture.md: {name} has no row on floor {level} of the floors table"
    assert room_rows == {name for level in rooms for name, mark in level if mark != "face"}


def test_every_path_the_architecture_doc_names_exists():
    text = DOC.read_text(encoding="utf-8")
    planned = set(re.findall(r"(chatdata[\w.]*)`?\s+\(planned\)", text))
    modules = find_modules(PACKAGE)
    dotted = set(re.findall(r"\bchatdata(?:\.[a-z_][a-z0-9_]*)+", text))
    missing = sorted(d for d in dotted if d not in modules and d not in planned)
    files = set(re.findall(r"\b((?:chatdata|docs|tests|benchmarks)/[\w./-]*\w)", text))
    missing += sorted(f for f in files if not (ROOT / f).exists() and f.rstrip("/").replace("/", ".") not in planned)
    assert len(dotted) > 20 and len(files) > 5
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


# -- the checkers find what they must find (on small packages written here) -----------------
def _write_package(root: Path, files: dict) -> Path:
    for rel, src in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(src)
    return root / "chatdata"


def test_a_circle_through_a_function_level_relative_import_is_found(tmp_path):
    pkg = _write_package(tmp_path, {
        "chatdata/__init__.py": "",
        "chatdata/td/__init__.py": "from .core.a import A\n",
        "chatdata/td/core/__init__.py": "",
        "chatdata/td/core/a.py": "from .b import B\nclass A: pass\n",
        "chatdata/td/core/b.py": "class B:\n    def f(self):\n        if True:\n            from ..core import c\n",
        "chatdata/td/core/c.py": "def g():\n    from . import a\n",
        "chatdata/td/storage/__init__.py": "from ..core.a import A\n",  # down: no circle
    })
    modules, arrows = import_graph(pkg)
    circles = import_circles(arrows)
    a, b, c = "chatdata.td.core.a", "chatdata.td.core.b", "chatdata.td.core.c"
    assert circles == [([a, b, c, a], [a, b, c])]
    text = describe_circle(circles[0], modules, arrows)
    assert text.startswith(f"a circle of 3 modules: {a}, {b}, {c}; for example {a} -> {b} -> {c} -> {a}")
    assert "b.py:4 imports chatdata.td.core.c" in text and "c.py:2 imports chatdata.td.core.a" in text


def test_circles_through_a_face_and_a_type_checking_import_are_found(tmp_path):
    pkg = _write_package(tmp_path, {
        "chatdata/__init__.py": "",
        "chatdata/io/__init__.py": "from .x import X\n",
        "chatdata/io/x.py": "import chatdata.io.y\nX = 1\n",
        "chatdata/io/y.py": "from chatdata.io import X\n",  # the face imports x, which imports y
        "chatdata/io/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .w import W\n",
        "chatdata/io/w.py": "try:\n    from . import z\nexcept ImportError:\n    z = None\n",
    })
    _, arrows = import_graph(pkg)
    found = {tuple(path) for path, _ in import_circles(arrows)}
    assert found == {("chatdata.io", "chatdata.io.x", "chatdata.io.y", "chatdata.io"),
                     ("chatdata.io.w", "chatdata.io.z", "chatdata.io.w")}


def test_upward_and_sideways_arrows_are_named(tmp_path):
    pkg = _write_package(tmp_path, {
        "chatdata/__init__.py": "from .history import H\n",
        "chatdata/td/__init__.py": "from .core import T\n",
        "chatdata/td/nontensor/__init__.py": "def f():\n    from ..core import T\n",  # room upward
        "chatdata/td/core/__init__.py": "from .t import T\n",
        "chatdata/td/core/t.py": "T = 1\n",
        "chatdata/history/__init__.py": "from ..td.core.t import T\nH = 1\n",  # into a room's module
        "chatdata/train/__init__.py": "from ..rollout import R\n",  # a peer on the same floor
        "chatdata/rollout/__init__.py": "R = 1\n",
        "chatdata/templates/__init__.py": "import chatdata.history\n",  # floor upward
    })
    modules, arrows = import_graph(pkg)
    floors, rooms = read_order()
    bad = "\n".join(upward_arrows(modules, arrows, floors, rooms))
    assert "chatdata.td.nontensor imports chatdata.td.core, in room chatdata.td.core, above room " \
           "chatdata.td.nontensor" in bad
    assert "chatdata.history imports chatdata.td.core.t: outside td/" in bad
    assert "chatdata.train and chatdata.rollout share floor 4" in bad
    assert "chatdata.templates imports chatdata.history, on floor 3 (chatdata.history), above floor 1" in bad
    assert len(bad.splitlines()) == 4, bad


@pytest.mark.parametrize("bad_block", ["floors, lowest first:\n2  chatdata.td\n", "rooms of chatdata.td:\n"])
def test_a_broken_order_block_is_reported(tmp_path, bad_block):
    doc = tmp_path / "a.md"
    doc.write_text(f"## The order, as the tests read it\n\n```text\n{bad_block}```\n")
    with pytest.raises(AssertionError, match="a.md"):
        read_order(doc)
