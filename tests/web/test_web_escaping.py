"""Nothing a log holds runs in the console's pages: hostile text (markup, script tags, ESC and
C1 controls, lone surrogates, a 10 MB value) in ids, arguments, results, messages and
questions shows as text on every page, and a page stays bounded."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.core.visible import visible
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.web.markup import LIMIT, clip, tag
from events import MemoryStore
from tests.strategies import PROPERTY
from tests.web.webconsole import Console, later

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</textarea></pre><script>steal()</script>",
    "\x1b]52;c;aGk=\x07\x1b[2J\x1b]0;title\x07",
    "\x9b31m\x85\x8d C1",
    "lone \ud800 and \udfff surrogates",
    "\u202eevil\u202c bidi",
    "javascript:alert(1)",
]
BIG = "A" * 10_000_000
#: the tags the console writes; any other tag in a page came from a log
OURS = {"html", "head", "meta", "title", "link", "script", "body", "nav", "a", "span", "main",
        "h1", "h2", "h3", "p", "table", "tr", "th", "td", "div", "section", "pre", "details",
        "summary", "code", "b", "form", "input", "button", "label", "textarea", "select",
        "option", "small"}
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e]")


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.data: list[str] = []

    def handle_starttag(self, name: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((name, attrs))

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def check(page: str) -> None:
    """Nothing in ``page`` runs or hides: only the console's own tags, attributes and one
    script, no control character, valid UTF-8, bounded."""
    page.encode("utf-8")  # a lone surrogate would raise here
    assert not CONTROLS.search(page)
    assert len(page) < 1_000_000
    parser = Tags()
    parser.feed(page)
    names = [name for name, _ in parser.tags]
    assert set(names) <= OURS, set(names) - OURS
    assert names.count("script") == 1
    for name, attrs in parser.tags:
        for key, value in attrs:
            assert not key.startswith("on"), (name, key)
            if key in ("href", "src", "action", "data-events"):
                assert value is not None and value[:1] in ("/", "#"), (name, key, value)
    for hostile in HOSTILE:
        if "<" in hostile or ">" in hostile:
            assert hostile not in page


async def hostile_log() -> tuple[MemoryStore, list[str]]:
    """Sessions whose ids, messages, arguments, results and questions are hostile."""
    store = MemoryStore()

    @tool(annotations=Annotations(read_only=True, open_world=False))
    async def echo(call: Any, ctx: Any) -> ToolResult:
        """Echo."""
        value = call.arguments
        return ToolResult(content=[text(" ".join(HOSTILE) + BIG[:50])],
                          structured_content={h: h for h in HOSTILE} | {"big": BIG})

    @tool(annotations=Annotations(destructive=True))
    async def remove(call: Any, ctx: Any) -> ToolResult:
        """Remove."""
        return ToolResult(content=[text("removed")])

    @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
    async def ask(call: Any, ctx: Any) -> ToolResult:
        """Ask."""
        await ctx.ask(HOSTILE[0] + HOSTILE[3], {"type": "object", "properties": {
            "choice": {"type": "string", "title": HOSTILE[1], "description": HOSTILE[2],
                       "enum": HOSTILE[:3]}}})
        return ToolResult(content=[text("asked")])

    ids = []
    for n, hostile in enumerate(HOSTILE):
        sid = f"{hostile}#{n}"
        ids.append(sid)
        arguments = {h: h for h in HOSTILE} | {hostile: BIG}
        model = FauxModel([[faux_text(hostile), faux_tool_call("echo", arguments),
                            faux_tool_call("remove", {"why": hostile}),
                            faux_tool_call("ask", {})], faux_text(hostile + BIG[:10])])
        async with Session.open(store, model=model, tools=[echo, remove, ask],
                                approver=later, asker=later, session_id=sid,
                                create=True) as session:
            await session.prompt(hostile + " " + BIG[:1000])
    return store, ids


async def test_hostile_text_in_a_log_shows_as_text_on_every_page() -> None:
    store, ids = await hostile_log()
    async with Console(store) as console:
        pages = [await console.page("/"), await console.page("/pending")]
        for state in ("paused", "closed"):
            pages.append(await console.page("/", state=state))
        for sid in ids:
            pages.append(await console.page("/session", id=sid))
            refused = await console.answer(session_id=sid, call="1.1", kind="approval",
                                           do="edit", arguments=HOSTILE[2] + BIG[:100])
            assert refused.status_code == 400
            pages.append(refused.text)
            denied = await console.answer(session_id=sid, call="1.1", kind="approval",
                                          do="deny", reason=HOSTILE[0] + HOSTILE[4])
            assert denied.status_code == 303
            pages.append(await console.page("/session", id=sid))
    for page in pages:
        check(page)
    # the text is there, as text: what a person can read, escaped
    assert html.escape(visible(HOSTILE[0])) in pages[-1]


async def test_the_session_ids_in_links_lead_back_to_their_sessions() -> None:
    store, ids = await hostile_log()
    async with Console(store) as console:
        listed = await console.page("/")
        links = re.findall(r'href="(/session\?id=[^"]+)"', listed)
        assert len(links) == len(ids)
        for link in links:
            response = await console.client.get(html.unescape(link))
            assert response.status_code == 200


@PROPERTY
@given(st.text(alphabet=st.characters(codec=None), max_size=60)
       | st.text(max_size=LIMIT + 50))
def test_what_tag_is_given_comes_back_as_its_visible_text(value: str) -> None:
    parser = Tags()
    parser.feed(tag("p", {"title": value}, value))
    [(name, attrs)] = parser.tags
    assert name == "p" and attrs == [("title", visible(clip(value)))]
    assert "".join(parser.data) == visible(clip(value))
