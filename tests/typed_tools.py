"""Typed tools the tests of the integrations share: their schemas are inferred, so each test
shows an inferred schema travelling as any hand-written one does (registered, exported to the
providers and MCP, shown by the CLI, replayed)."""

from __future__ import annotations

import enum
from typing import Annotated

import attrs

from engine import Annotations, Param, tool

SAFE = Annotations(read_only=True, open_world=False)


class Unit(enum.Enum):
    CM = "cm"
    INCH = "inch"


@attrs.frozen
class Size:
    """A size on the page.

    Attributes:
        width: across
        height: down
    """

    width: Annotated[float, Param(gt=0)]
    height: float = 1.0


@tool(annotations=SAFE)
async def area(size: Size, unit: Unit = Unit.CM) -> float:
    """The area of a size.

    Args:
        size: what to measure
        unit: the unit of both sides
    """
    return size.width * size.height


@tool(annotations=SAFE)
def label(size: Size, words: list[str]) -> Size:
    """A size labelled with words (a sync tool: it runs in a worker thread)."""
    return Size(width=size.width * len(words), height=size.height)


TYPED = [area, label]
