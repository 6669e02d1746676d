"""NaN and infinities in message values are refused at the door, naming the message and key path.

Before, ``History.from_chats`` (and the constructor, the setters, append / extend, item assignment,
``History.from_arrow``) kept ``float("nan")`` / ``inf`` inside tool-call arguments, tool responses,
content parts and extra keys; a save then wrote ``NaN`` / ``Infinity`` into the JSON columns, and
``chatdata export`` / ``to_arrow(json="text")`` into JSON text, which is not JSON: other tools
(``JSON.parse``, serde, jq, Arrow's JSON reader) cannot read it."""
import json
import math

import pytest

from chatdata import History

NAN, INF = float("nan"), float("inf")
OK = [{"role": "user", "content": "fine"}]


@pytest.mark.parametrize("msg, named", [
    ({"role": "user", "content": "x", "weight": NAN}, r"'weight' is nan"),
    ({"role": "user", "content": "x", "meta": {"scores": [0.5, -INF]}}, r"'meta'\['scores'\]\[1\] is -inf"),
    ({"role": "assistant", "content": None,
      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": INF}}}]},
     r"'tool_calls'\[0\]\['function'\]\['arguments'\]\['x'\] is inf"),
    ({"role": "tool", "content": "r", "tool_responses": [1.0, NAN]}, r"'tool_responses'\[1\] is nan"),
    ({"role": "user", "content": [{"type": "text", "text": "a", "score": NAN}]}, r"'content'\[0\]\['score'\] is nan"),
], ids=["extra", "nested extra", "tool call arguments", "tool responses", "content part"])
def test_from_chats_refuses_nan_and_inf_naming_chat_message_and_key(msg, named):
    with pytest.raises(ValueError, match=r"^chat 1, message 0: " + named + r", which JSON cannot hold .*use None or a finite"):
        History.from_chats([OK, [msg]])
    with pytest.raises(ValueError, match=r"^message 1: " + named):
        History.from_chats([*OK, msg])


def test_the_constructor_and_setters_refuse_them_and_leave_the_history_unchanged():
    with pytest.raises(ValueError, match=r"'extra'\['w'\] is nan"):
        History(role="user", content="a", extra={"w": NAN})
    with pytest.raises(ValueError, match=r"'tool_calls'\[0\]\['a'\] is inf"):
        History(role="assistant", content="a", tool_calls=[{"a": INF}])
    h = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b", "w": 1.5}]])
    before = h.to_chats()
    with pytest.raises(ValueError, match=r"message 1: 'extra'\['w'\] is -inf"):
        h.extra = [[None], [{"w": -INF}]]
    with pytest.raises(ValueError, match=r"message 0: 'tool_responses'\[0\] is nan"):
        h.set("tool_responses", [[[NAN]], [None]])
    assert h.to_chats() == before


def test_append_extend_and_item_assignment_refuse_them_unchanged():
    h = History.from_chats([[{"role": "user", "content": "a"}]])
    conv = History.from_chats([{"role": "user", "content": "a"}])
    bad = {"role": "user", "content": "q", "w": NAN}
    with pytest.raises(ValueError, match=r"'w' is nan"):
        h.extend([[bad]])
    with pytest.raises(ValueError, match=r"'w' is nan"):
        conv.append(bad)
    with pytest.raises(ValueError, match=r"'w' is nan"):
        conv[0] = bad
    assert h.to_chats() == [[{"role": "user", "content": "a"}]]
    assert conv.to_chats() == [{"role": "user", "content": "a"}]


def test_from_arrow_of_a_float_field_holding_nan_names_the_row():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"messages": [[{"role": "user", "content": "a", "w": 1.0}],
                                   [{"role": "user", "content": "b", "w": math.nan}]]})
    with pytest.raises(ValueError, match=r"row 1, message 0: 'w' is nan"):
        History.from_arrow(table)


def test_finite_floats_still_save_as_standard_json(tmp_path):
    # the largest finite floats, whose sum overflows to inf, are fine: only the values themselves count
    chats = [[{"role": "user", "content": "x", "w": [1.7e308, 1.7e308, -0.0, 5e-324]},
              {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1e308}}}]}]]
    h = History.from_chats(chats)
    h.memmap(tmp_path / "h")
    out = History.load_memmap(tmp_path / "h")
    assert out.to_chats() == chats
    table = out.to_arrow(json="text")
    for text in table.column("messages").combine_chunks().flatten().field("tool_calls").to_pylist():
        if text is not None:
            json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
