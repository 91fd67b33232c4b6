"""The terminal asker: a form at the keyboard, one field at a time, checked, with decline and
cancel; what the question quotes is shown as visible escapes."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from engine import Answer, Question, terminal_asker
from engine.core.forms import content_problem

FORM = {
    "type": "object",
    "properties": {
        "branch": {"type": "string", "title": "Branch", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 5},
        "force": {"type": "boolean", "default": False},
        "env": {"type": "string", "oneOf": [{"const": "prod", "title": "Production"},
                                            {"const": "dev", "title": "Development"}]},
        "when": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
                 "maxItems": 2},
    },
    "required": ["branch", "count", "env"],
}


def question(message: str = "Deploy what?") -> Question:
    return Question(question_id="1.0#1", call_id="1.0", name="deploy", message=message,
                    schema=FORM, origin="model", parent_id=None)


class Keyboard:
    """Types the given lines, and keeps every prompt it was shown."""

    def __init__(self, lines: list[str]) -> None:
        self._lines: Iterator[str] = iter(lines)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return next(self._lines)


async def test_the_form_asks_each_field_again_until_it_fits() -> None:
    keys = Keyboard(["a",
                     "", "main",           # branch: required, then given
                     "nine", "9", "3",     # count: not an integer, over the maximum, then 3
                     "",                   # force: its default
                     "2",                  # env: the second choice
                     "2025-13-40", "",     # when: not a date, then left out (optional)
                     "1,3, c"])            # tags: a choice named twice, asked again...
    keys._lines = iter([*keys._lines, "1,3"])  # ... then two
    answer = await terminal_asker(keys)(question())
    assert answer == Answer(action="accept", content={
        "branch": "main", "count": 3, "force": False, "env": "dev", "tags": ["a", "c"]})
    shown = "".join(keys.prompts)
    assert "(required)" in shown and "is not an integer" in shown
    assert "is more than the maximum 5" in shown and "is not a date" in shown
    assert "1) Production; 2) Development" in shown
    assert "names a choice twice" in shown


async def test_decline_and_cancel_at_the_start_or_at_any_field() -> None:
    assert (await terminal_asker(Keyboard(["d"]))(question())).action == "decline"
    assert (await terminal_asker(Keyboard(["c"]))(question())).action == "cancel"
    assert (await terminal_asker(Keyboard(["a", "main", "!cancel"]))(question())).action == (
        "cancel")
    assert (await terminal_asker(Keyboard(["", "!decline"]))(question())).action == "decline"


async def test_what_the_question_quotes_cannot_steer_the_terminal() -> None:
    keys = Keyboard(["d"])
    await terminal_asker(keys)(question("Deploy?\x1b[2J\u202e now\nfake line"))
    assert "\x1b" not in keys.prompts[0] and "\u202e" not in keys.prompts[0]
    assert "\\x1b[2J" in keys.prompts[0] and keys.prompts[0].count("\n") == 2


@given(lines=st.lists(st.sampled_from(["", "x", "1", "2", "9", "y", "n", "1,2",
                                       "2025-01-02", "main"]), max_size=40))
async def test_an_accepted_form_always_fits_whatever_is_typed(lines: list[str]) -> None:
    keys = Keyboard(["a", *lines, *(["!cancel"] * 10)])
    answer = await terminal_asker(keys)(question())
    if answer.accepted:
        assert content_problem(FORM, dict(answer.content or {})) is None
