"""Values a log asks for: a line nested as deep as it likes, and a failure detail naming any path
with any index. A command reading the log names the bad line or replays what it can; it never
crashes, and never allocates what a number in the log asks for.

- ``toolledger verify`` (with and without ``--session``) on a log whose last line nests lists
  and objects to a depth Hypothesis picks (up to far past the interpreter's stack) exits 0 or 1,
  never with an exception, and a line it cannot read is named by number;
- :func:`engine.replay.stubs.not_json_value` for a failure detail at a path Hypothesis draws
  (keys, indices up to 10**12, any number of steps) either rebuilds a value the engine refuses
  with exactly that detail (and those words), or, past
  :data:`~engine.replay.stubs.MAX_REBUILT_ITEMS` or deeper than a JSON value may be, gives an
  arbitrary non-JSON value; either way its memory stays within the bound.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.core.jsonvalues import MAX_DEPTH, NotJson, ensure_json
from engine.replay.stubs import MAX_REBUILT_ITEMS, not_json_value
from events import JsonlStore, Record
from events.types import FailureDetail, UserMessage


@st.composite
def nestings(draw: st.DrawFn) -> str:
    """JSON text nesting arrays and objects ``depth`` levels deep, Hypothesis's choice of each."""
    depth = draw(st.one_of(st.integers(0, 1_200), st.integers(1_200, 200_000)))
    kinds = draw(st.lists(st.sampled_from(["[", '{"k":']), min_size=1, max_size=4))
    opening = "".join(kinds[i % len(kinds)] for i in range(depth))
    closing = "".join("]" if kinds[i % len(kinds)] == "[" else "}" for i in reversed(range(depth)))
    return opening + draw(st.sampled_from(["1", "null", '"x"', "[]"])) + closing


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=nestings(), where=st.sampled_from(["arguments", "data", "envelope"]),
       session=st.booleans())
def test_verify_never_crashes_on_a_deep_line(
    tmp_path_factory: pytest.TempPathFactory, value: str, where: str, session: bool
) -> None:
    log = tmp_path_factory.mktemp("deep") / "log.jsonl"

    async def write() -> None:
        with JsonlStore(log) as store:
            await store.append("s", [Record(session_id="s", seq=1, time=0.0,
                                            event=UserMessage(text="hi"))], 0)

    trio.run(write)
    data = (f'{{"call_id":"1.0","name":"x","arguments":{value},"origin":"model",'
            f'"parent_id":null,"model_call_id":null}}')
    if where == "data":
        data = value
    line = (f'{{"v":2,"session_id":"s","seq":2,"time":0.0,"type":"tool_call_requested",'
            f'"data":{data}}}')
    if where == "envelope":
        line = f'{{"v":2,"session_id":"s","seq":2,"deep":{value}}}'
    with log.open("a") as file:
        file.write(line + "\n")
    argv = ["verify", str(log), "--json"] + (["--session", "s"] if session else [])
    assert main(argv) in (0, 1)


STEPS: st.SearchStrategy[str | int] = st.one_of(
    st.integers(0, 10**12),
    st.integers(0, 50),
    st.text("abcxyz_", min_size=1, max_size=4),
)
PROBLEMS = {  # a failure's detail at a path, and the engine's words for it there
    "type": (FailureDetail(problem="type", type="set"), "a set is not a JSON value"),
    "number": (FailureDetail(problem="number", value="inf"), "inf is not a JSON number"),
    "key": (FailureDetail(problem="key", value="1"), "object key 1 is not a string"),
}


@settings(max_examples=60)
@given(steps=st.one_of(st.lists(STEPS, max_size=8), st.lists(STEPS, min_size=400, max_size=700)),
       kind=st.sampled_from(sorted(PROBLEMS)))
def test_a_recorded_path_is_rebuilt_exactly_or_not_at_all_within_the_bound(
    steps: list[str | int], kind: str
) -> None:
    template, words = PROBLEMS[kind]
    detail = attrs.evolve(template, path=tuple(steps))
    tracemalloc.start()
    try:
        value = not_json_value(detail)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MAX_REBUILT_ITEMS + (1 << 20)
    indices = sum(step for step in steps if isinstance(step, int))
    with pytest.raises(NotJson) as refused:
        ensure_json(value)
    if indices <= MAX_REBUILT_ITEMS and len(steps) < MAX_DEPTH:
        assert refused.value.detail == detail
        where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)
        assert str(refused.value) == f"${where}: {words}"
