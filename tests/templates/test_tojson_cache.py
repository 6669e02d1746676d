"""The renderer's tool schemas: their ``tojson`` text is made once per option set and is the
same text ``json.dumps`` gives, for every option combination; nothing can change a cached
schema afterwards; and the sandbox's shortcut for ``message.field`` behaves exactly like
jinja2's ImmutableSandboxedEnvironment."""
from __future__ import annotations

import itertools
import json
from collections import OrderedDict

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from chatdata.templates import Renderer, TemplateError

OPTIONS = {
    "ensure_ascii": (False, True),
    "indent": (None, 0, 2, "\t"),
    "separators": (None, (",", ":"), [", ", ": "]),
    "sort_keys": (False, True),
}
COMBOS = [dict(zip(OPTIONS, values)) for values in itertools.product(*OPTIONS.values())]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_data = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)), max_leaves=20)


def filter_call(opts: dict) -> str:
    """``tojson(...)`` with the options as template literals."""
    return "tojson(" + ", ".join(f"{k}={json.dumps(v) if v is not None else 'none'}" for k, v in opts.items()) + ")"


def dumps(value, opts: dict) -> str:
    return json.dumps(value, **opts)


@pytest.fixture(scope="module")
def every_option_template():
    """One template printing the tools and their first element with every option set, twice
    (the second time from the cache)."""
    parts = []
    for opts in COMBOS:
        call = filter_call(opts)
        parts.append("{{ tools | %s }}|{{ tools[0] | %s }}|" % (call, call))
    return "".join(parts) * 2


def expected_text(tools, combos=COMBOS) -> str:
    return "".join(f"{dumps(tools, o)}|{dumps(tools[0], o)}|" for o in combos) * 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5), json_data, max_size=4), min_size=1, max_size=3))
def test_cached_tojson_is_json_dumps_for_every_option(tools):
    template = "".join("{{ tools | %s }}|{{ tools[0] | %s }}|" % (filter_call(o), filter_call(o)) for o in COMBOS) * 2
    r = Renderer(template, tools=tools)
    first = r.render([])
    assert first == expected_text(tools)
    assert r.render([]) == first  # from the cache


def test_real_tool_schemas_every_option(every_option_template):
    from chatdata.data import sample_tools

    tools = sample_tools()
    r = Renderer(every_option_template, tools=tools)
    assert r.render([]) == r.render([]) == expected_text(tools)


def test_a_changed_tool_list_after_the_renderer_is_built_does_not_reach_it():
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}]
    r = Renderer("{{ tools | tojson }}", tools=tools)
    before = r.render([])
    tools[0]["parameters"]["properties"]["b"] = {"type": "integer"}  # the caller changes their own copy
    tools.append({"name": "g"})
    assert r.render([]) == before == json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "string"}}}}])
    assert Renderer("{{ tools | tojson }}", tools=tools).render([]) == json.dumps(tools)  # a new renderer sees them


@pytest.mark.parametrize("mutation", [
    "{{ tools.append(1) }}", "{{ tools[0].update({'x': 1}) }}", "{{ tools[0].pop('name') }}",
    "{{ tools[0]['parameters'].clear() }}", "{{ tools[0].setdefault('x', 1) }}", "{% set _ = tools.sort() %}",
])
def test_a_template_cannot_change_a_cached_schema(mutation):
    tools = [{"name": "f", "parameters": {"a": 1}}]
    r = Renderer("{{ tools | tojson }}" + mutation + "{{ tools | tojson }}", tools=tools)
    with pytest.raises(TemplateError):
        r.render([])
    assert r.variables["tools"] == tools  # unchanged
    assert Renderer("{{ tools | tojson }}", tools=tools).render([]) == json.dumps(tools)


def test_tools_of_other_mapping_and_sequence_types_render_as_json_dumps():
    """Tools are first made plain (an OrderedDict a dict, tuples kept): the cached text is still
    json.dumps's, and a later change to the caller's OrderedDict does not reach the renderer."""
    tool = OrderedDict(name="f", parameters={"enum": ("a", "b"), "nested": [("x", {"y": 1})]})
    r = Renderer("{{ tools | tojson }}|{{ tools[0].parameters | tojson(indent=1) }}", tools=[tool])
    expected = json.dumps([tool]) + "|" + json.dumps(tool["parameters"], indent=1)
    assert r.render([]) == r.render([]) == expected
    tool["description"] = "now documented"
    assert r.render([]) == expected


def test_json_cached_leaves_what_is_not_plain_json_alone():
    from chatdata.templates.jinja_env import JSONCachedDict, json_cached

    odd = [OrderedDict(name="f")]
    assert json_cached(odd) is odd  # a caller's object that could change: never cached
    copy = json_cached({"a": [{"b": 1}], "c": ({"d": [2]},)})
    assert type(copy) is JSONCachedDict and type(copy["c"]) is tuple and type(copy["c"][0]) is JSONCachedDict


def test_bad_tojson_options_still_raise_clearly():
    r = Renderer("{{ tools | tojson(indent=[1]) }}", tools=[{"name": "f"}])
    with pytest.raises((TemplateError, TypeError)):
        r.render([])


# -- the sandbox's attribute shortcut -------------------------------------------------------------
EXPRESSIONS = [
    "m.role", "m.content", "m.missing is defined", "m.missing", "m['role']", "m.get('role')",
    "m.items() | list", "m.keys() | list", "m.values() | list", "m.copy()", "m.update", "m.pop", "m.clear",
    "m.__class__", "m.__init__", "m.__class__.__mro__", "m.__dict__", "m.__len__()", "m.__getitem__('role')",
    "m._json_texts", "m.__module__", "m.__slots__", "m.fromkeys", "m.__doc__ is none", "m.items",
    "m.tool_calls[0].function.name", "m.tool_calls[0].function.arguments.city", "m.tool_calls[0].function.__class__",
    "m.tool_calls.append", "m.tool_calls[0].function.arguments.setdefault", "m.__reduce_ex__(2)",
    "m.tool_calls[0].function.arguments.__dir__()", "t.name", "t._json_texts", "t.__class__", "t.update",
    "t.parameters.properties.city.type",
]


def _outcome(env, expr: str, msg: dict, tool):
    try:
        return "ok", env.from_string("{{ %s }}" % expr).render(m=msg, t=tool)
    except jinja2.exceptions.SecurityError as err:
        return "security", str(err)
    except Exception as err:  # noqa: BLE001 - compared, not hidden
        return type(err).__name__, None


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_attribute_lookup_is_jinja2s_sandbox(expr):
    """The shortcut (a plain dict's item for a name that is no dict attribute) gives what
    ImmutableSandboxedEnvironment gives for plain dicts -- values, undefined, security errors."""
    from chatdata.templates.jinja_env import ENV, json_cached

    msg = {"role": "assistant", "content": "hi", "_json_texts": "an item", "__module__": "another item",
           "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"city": "Oslo"}}}]}
    tool = {"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}}}}
    reference = ImmutableSandboxedEnvironment()
    ours = _outcome(ENV, expr, msg, json_cached(tool))
    theirs = _outcome(reference, expr, msg, tool)
    assert ours == theirs


LOOP_EXPRESSIONS = ["loop.first", "loop.last", "loop.index", "loop.index0", "loop.revindex", "loop.revindex0",
                    "loop.length", "loop.depth", "loop.depth0", "loop.previtem", "loop.nextitem",
                    "loop.previtem is defined", "loop.cycle('a', 'b')", "loop.changed(x)", "loop._after",
                    "loop._iterator", "loop.__class__", "loop.__init__", "loop.missing", "loop.__dict__"]


@pytest.mark.parametrize("expr", LOOP_EXPRESSIONS)
def test_loop_variable_lookup_is_jinja2s_sandbox(expr):
    from chatdata.templates.jinja_env import ENV

    source = "{% for x in items %}[{{ " + expr + " }}]{% endfor %}"
    outcomes = []
    for env in (ENV, ImmutableSandboxedEnvironment()):
        try:
            outcomes.append(("ok", env.from_string(source).render(items=[1, 2, 2, {"a": 1}])))
        except jinja2.exceptions.SecurityError as err:
            outcomes.append(("security", str(err)))
        except Exception as err:  # noqa: BLE001 - compared, not hidden
            outcomes.append((type(err).__name__, None))
    assert outcomes[0] == outcomes[1]


def test_copies_and_pickles_of_cached_schemas_are_plain_data():
    """A deep copy or a pickle of a renderer's tools can be changed freely: it holds no cache."""
    import copy
    import pickle

    r = Renderer("{{ tools | tojson }}", tools=[{"name": "f", "parameters": {"enum": [1]}}])
    before = r.render([])
    for other in (copy.deepcopy(r.variables["tools"]), pickle.loads(pickle.dumps(r.variables["tools"]))):
        assert type(other) is list and type(other[0]) is dict and type(other[0]["parameters"]) is dict
        other[0]["parameters"]["enum"].append(2)
        assert Renderer("{{ tools | tojson }}", tools=other).render([]) == json.dumps(other)
    assert r.render([]) == before


STRING_AND_NAMESPACE_EXPRESSIONS = [
    "s.split(',')", "s.split(',')[-1].lstrip(' ')", "s.startswith('a')", "s.endswith('c')", "s.strip()", "s.upper()",
    "s.replace('a', 'b')", "s.join(['x', 'y'])", "s.encode", "s.missing", "s.missing is defined", "s.__class__",
    "s.__len__()", "s.__mod__", "s.__class__.__mro__", "s.format(1)", "s.format_map", "'{0.__class__}'.format(s)",
    "'{x}'.format_map({'x': 1})", "s.split.__self__", "ns.found", "ns.count", "ns.missing", "ns.missing is defined",
    "ns._Namespace__attrs", "ns.__class__", "ns.__init__", "ns.__attrs", "ns.items", "ns.found.__class__",
    "namespace(f=s.format).f('{0.__class__}')", "namespace(f=s.format_map).f({})", "namespace(f=s.split).f(',')",
    "namespace(f=s.format).f.__self__",
]


@pytest.mark.parametrize("expr", STRING_AND_NAMESPACE_EXPRESSIONS)
def test_string_methods_and_namespace_names_are_jinja2s_sandbox(expr):
    """The shortcuts for a string's public methods (``format`` excepted) and a namespace's
    public names give what ImmutableSandboxedEnvironment gives: values, undefined, refusals."""
    from chatdata.templates.jinja_env import ENV

    source = "{% set ns = namespace(found=false, count=2) %}{{ " + expr + " }}"
    outcomes = []
    for env in (ENV, ImmutableSandboxedEnvironment()):
        try:
            outcomes.append(("ok", env.from_string(source).render(s="a, b, c")))
        except jinja2.exceptions.SecurityError as err:
            outcomes.append(("security", str(err)))
        except Exception as err:  # noqa: BLE001 - compared, not hidden
            outcomes.append((type(err).__name__, None))
    assert outcomes[0] == outcomes[1]
