"""The ``typed`` field of a JSON string column (chatdata.td.storage.typed_copies): what the reader
and ``verify`` accept, and the clear errors for what they do not."""
import json

import pytest

from chatdata import History, load_memmap
from chatdata.td.storage import FormatError, verify

CHATS = [[{"role": "user", "content": "Zürich?"},
          {"role": "assistant", "content": "", "tool_calls": [
              {"type": "function", "function": {"name": "weather", "arguments": {"city": "Zürich", "day": "2024-05-01"}}}]}]]


@pytest.fixture
def saved(tmp_path):
    History.from_chats(CHATS * 3).memmap(tmp_path / "h")
    return tmp_path / "h"


def _edit(path, change):
    meta_path = path / "_storage" / "_values" / "meta.json"
    meta = json.loads(meta_path.read_text())
    change(meta["entries"]["tool_calls"])
    meta_path.write_text(json.dumps(meta))


def test_a_saved_json_column_names_its_copy(saved):
    entry = json.loads((saved / "_storage" / "_values" / "meta.json").read_text())["entries"]["tool_calls"]
    assert entry["encoding"] == "json" and entry["typed"] == {"format": "arrow-ipc", "file": "tool_calls.typed.arrow"}
    assert (saved / "_storage" / "_values" / "tool_calls.typed.arrow").is_file()
    content = json.loads((saved / "_storage" / "_values" / "meta.json").read_text())["entries"]["content"]
    assert "typed" not in content  # strings need no copy


@pytest.mark.parametrize("typed, match", [
    ("tool_calls.typed.arrow", r"'typed' must be an object with a 'format' and a 'file'"),
    ({"file": "tool_calls.typed.arrow"}, r"'typed' must be an object with a 'format'"),
    ({"format": "arrow-ipc", "file": "../../meta.json"}, r"file name '\.\./\.\./meta\.json' is not a plain name"),
    ({"format": "arrow-ipc", "file": "gone.arrow"}, r"typed copy .*gone\.arrow is missing"),
], ids=["not-an-object", "no-format", "outside-the-folder", "missing"])
def test_a_bad_typed_field_is_a_clear_format_error(saved, typed, match):
    _edit(saved, lambda e: e.update(typed=typed))
    with pytest.raises(FormatError, match=match):
        load_memmap(saved)
    assert not verify(saved, checksums=False).ok


def test_a_copy_in_a_format_nobody_registered_is_ignored(saved):
    _edit(saved, lambda e: e["typed"].update(format="some-future-format"))
    loaded = load_memmap(saved)
    assert History.from_arrow(loaded.to_arrow()).to_chats() == CHATS * 3  # parsed from the column
    report = verify(saved)
    assert report.ok and any("some-future-format" in u for u in report.unchecked)
