"""``$ref`` in a schema: where a reference may point, and where it may lead.

Two passes over a schema that :mod:`engine.core.schemas.checking` has walked. :func:`check_refs` allows only
local JSON-pointer references to checked subschemas (the engine never fetches a schema).
:func:`check_cycles` refuses references that lead back to where they started without looking
inside the value: the validator would call itself for ever on the same value. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urldefrag

from .dialects import REF_HINT, esc

if TYPE_CHECKING:
    from .walk import Walk

__all__ = ["check_cycles", "check_refs"]

# Keywords whose subschemas apply to the value itself, not to a part of it.
_IN_PLACE: Final = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependencies")


def check_refs(walk: Walk, doc: Any) -> None:
    """Every ``$ref`` must be a local JSON-pointer fragment naming a checked subschema.

    Anything else could reach the network (fastjsonschema resolves remote URIs
    with urllib) or land where the keyword checks never looked.  Refs inside
    data (const/enum/default/examples, unknown keywords) must be local too:
    fastjsonschema resolves those as well, when it builds its error details.
    """
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((f"{path}/{esc(str(k))}", v) for k, v in items)
        ref = value.get("$ref") if isinstance(value, dict) else None
        if not isinstance(ref, str):
            continue
        at, (url, fragment) = f"{path}/$ref", urldefrag(ref)
        if not ref.startswith("#") or url:
            raise walk.fail(at, f"$ref {ref!r} is not local; only same-document refs starting with "
                            "'#' are allowed (the engine never fetches schemas)", "$ref")
        if "#" + fragment != ref:  # URL parsing drops tabs and newlines: the target would shift
            raise walk.fail(at, f"$ref {ref!r} contains characters URL parsing drops", "$ref")
        if at not in walk.refs:
            continue
        if fragment and not fragment.startswith("/"):
            raise walk.fail(at, f"$ref {ref!r} names an anchor; {REF_HINT}", "$ref")
        tokens = unquote(fragment).split("/")[1:]  # decoded as fastjsonschema decodes it
        target = "".join("/" + esc(t.replace("~1", "/").replace("~0", "~")) for t in tokens)
        if target not in walk.visited:
            raise walk.fail(at, f"$ref {ref!r} does not point to a subschema of this schema; {REF_HINT}",
                            "$ref")
        walk.targets[path] = target


def check_cycles(walk: Walk) -> None:
    """Refuse a ``$ref`` that leads back to where it started without stepping into the
    value: the validator would call itself for ever on the same value.

    A subschema applies to the same value through ``$ref``, ``allOf``/``anyOf``/``oneOf``,
    ``not``, ``if``/``then``/``else`` and the schema form of ``dependencies``; every other
    keyword (``properties``, ``items``, …) steps into a part of the value, which is finite.
    A cycle of the first kind (only ``$ref`` can close one) is refused, naming its steps.
    """
    nodes = dict(walk.nodes)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start, _ in walk.nodes:
        if start in state:
            continue
        trail = [start]
        stack = [iter(_in_place(walk, nodes, start))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[trail.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                loop = [*trail[trail.index(step):], step]
                shown = " -> ".join(f"'{p}'" if p else "'#'" for p in loop)
                raise walk.fail(f"{next(p for p in loop if p in walk.targets)}/$ref",
                                f"these references lead back to where they started without "
                                f"stepping into the value ({shown}), so validation never "
                                f"ends; make the cycle pass through a keyword that looks "
                                f"inside the value (\"properties\", \"items\", …)", "$ref")
            elif step not in state:
                state[step] = 1
                trail.append(step)
                stack.append(iter(_in_place(walk, nodes, step)))


def _in_place(walk: Walk, nodes: dict[str, dict[str, Any]], path: str) -> list[str]:
    """The subschemas that apply to the same value as the one at ``path``."""
    node = nodes.get(path)
    if node is None:
        return []
    steps = [walk.targets[path]] if path in walk.targets else []
    for kw in _IN_PLACE:
        value = node.get(kw)
        if isinstance(value, list):
            steps.extend(f"{path}/{kw}/{i}" for i in range(len(value)))
        elif kw == "dependencies" and isinstance(value, dict):
            steps.extend(f"{path}/{kw}/{esc(name)}" for name in value)
        elif kw in node:
            steps.append(f"{path}/{kw}")
    return [step for step in steps if step in walk.visited]  # subschemas only
