"""The forms a person answers with, and reading what they post.

An approval's form grants once or for the session, refuses with a reason, or grants with
edited arguments (a JSON object, checked against the tool's schema before anything is
recorded; the log then shows the edit as a diff). A question's form is built from its schema,
one input per field (:mod:`engine.core.forms`). Every form carries the console's CSRF token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.approvals import ApprovalAnswer, ApprovalRequest
from ..core.forms import choices, field_kind
from ..core.questions import Answer, Question
from .answers import Refused
from .markup import Safe, tag

__all__ = ["approval_answer", "approval_form", "question_answer", "question_form"]

#: How much edited JSON a form takes (its characters): more is refused, not parsed.
MAX_EDIT = 1_000_000


def _hidden(fields: Mapping[str, str]) -> list[Safe]:
    return [tag("input", {"type": "hidden", "name": name, "value": value})
            for name, value in fields.items()]


def approval_form(action: str, csrf: str, session_id: str, request: ApprovalRequest) -> Safe:
    """The form that answers ``request``."""
    hidden = _hidden({"csrf": csrf, "session": session_id, "call": request.call_id,
                      "kind": "approval"})
    arguments = json.dumps(request.arguments, indent=2, ensure_ascii=False)
    return tag("form", {"method": "post", "action": action, "class": "answer"}, hidden,
               tag("button", {"name": "do", "value": "once"}, "Approve once"),
               tag("button", {"name": "do", "value": "session"}, "Approve for the session"),
               tag("label", None, "Reason (for a denial) ",
                   tag("input", {"name": "reason", "type": "text", "maxlength": 2000})),
               tag("button", {"name": "do", "value": "deny", "class": "deny"},
                   "Deny with this reason"),
               tag("details", {"class": "edit"}, tag("summary", None, "Edit the arguments"),
                   tag("textarea", {"name": "arguments", "rows": 6, "cols": 60,
                                    "spellcheck": "false"}, arguments),
                   tag("button", {"name": "do", "value": "edit"},
                       "Approve with these arguments")))


def _field(name: str, field: Mapping[str, Any], required: bool) -> Safe:
    kind = field_kind(field)
    label = str(field.get("title") or name) + (" *" if required else "")
    default = field.get("default")
    if kind == "boolean":
        control = tag("input", {"type": "checkbox", "name": f"f.{name}", "value": "true",
                                "checked": default is True})
    elif kind in ("number", "integer"):
        control = tag("input", {"type": "number", "name": f"f.{name}",
                                "step": "1" if kind == "integer" else "any",
                                "value": None if default is None else str(default)})
    elif kind == "enum":
        control = tag("select", {"name": f"f.{name}"},
                      [tag("option", {"value": value, "selected": value == default}, label_)
                       for value, label_ in choices(field)])
    elif kind == "multi":
        picked = default if isinstance(default, list) else []
        control = tag("span", None, [
            tag("label", None, tag("input", {"type": "checkbox", "name": f"f.{name}",
                                             "value": value, "checked": value in picked}),
                " ", label_) for value, label_ in choices(field)])
    else:
        control = tag("input", {"type": "text", "name": f"f.{name}",
                                "value": None if default is None else str(default)})
    return tag("label", {"class": "field"}, label, " ", control,
               tag("small", None, field["description"]) if "description" in field else None)


def question_form(action: str, csrf: str, session_id: str, question: Question) -> Safe:
    """The form that answers ``question``: one input per field of its schema."""
    schema = question.schema
    required = set(schema.get("required", ()))
    hidden = _hidden({"csrf": csrf, "session": session_id, "question": question.question_id,
                      "kind": "question"})
    fields = [_field(name, field, name in required)
              for name, field in schema.get("properties", {}).items()]
    return tag("form", {"method": "post", "action": action, "class": "answer"}, hidden, fields,
               tag("button", {"name": "do", "value": "accept"}, "Answer"),
               tag("button", {"name": "do", "value": "decline"}, "Decline"),
               tag("button", {"name": "do", "value": "cancel"}, "Cancel"))


def _one(form: Mapping[str, Sequence[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


def approval_answer(form: Mapping[str, Sequence[str]]) -> ApprovalAnswer:
    """The answer a posted approval form gives; :class:`Refused` if it is not one."""
    do = _one(form, "do")
    reason = _one(form, "reason").strip() or None
    if do in ("once", "session"):
        return ApprovalAnswer(granted=True, scope="once" if do == "once" else "session")
    if do == "deny":
        return ApprovalAnswer(granted=False, reason=reason or "denied from the web console")
    if do == "edit":
        text = _one(form, "arguments")
        if len(text) > MAX_EDIT:
            raise Refused(f"the edited arguments take {len(text)} characters, over "
                          f"{MAX_EDIT}: edit a smaller value")
        try:
            arguments = json.loads(text)
        except ValueError as exc:
            raise Refused(f"the edited arguments are not JSON ({exc}): write a JSON object, "
                          f"e.g. {{\"path\": \"notes.md\"}}") from None
        return ApprovalAnswer(granted=True, arguments=arguments)
    raise Refused("the form said neither approve nor deny: press one of its buttons")


def question_answer(schema: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Answer:
    """The answer a posted question form gives, its fields as the schema's kinds of value."""
    do = _one(form, "do")
    if do == "decline":
        return Answer(action="decline", reason="declined from the web console")
    if do == "cancel":
        return Answer(action="cancel", reason="cancelled from the web console")
    if do != "accept":
        raise Refused("the form said neither answer, decline nor cancel: press one of its "
                      "buttons")
    content: dict[str, Any] = {}
    for name, field in schema.get("properties", {}).items():
        kind = field_kind(field)
        values = form.get(f"f.{name}", [])
        if kind == "boolean":
            content[name] = "true" in values
        elif kind == "multi":
            if values:
                content[name] = list(values)
        elif values and values[0] != "":
            content[name] = _typed(name, kind, values[0])
    return Answer(action="accept", content=content)


def _typed(name: str, kind: str, value: str) -> Any:
    if kind not in ("number", "integer"):
        return value
    try:
        return int(value) if kind == "integer" else float(value)
    except ValueError:
        raise Refused(f"the field {name!r} takes {'an integer' if kind == 'integer' else 'a number'}"
                      f", not {value!r}") from None
