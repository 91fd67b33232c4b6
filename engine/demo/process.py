"""A subprocess of the demo's tools, its output streamed as progress while it runs.

:func:`run_streamed` runs a command in the workspace and reads its stdout and stderr as the
process writes them (trio's process API). Each line is reported as soon as it is complete,
as a progress update of the running call (``ctx.report_progress``): its ``content`` the
line as the command wrote it; a line of stderr says so in its ``data``
(``{"stream": "stderr"}``), a line of stdout has none. So a host, ``toolledger tail -f`` or
the demo's terminal shows the output as it comes; the tool's result, built from the whole output once the process has exited, is what the model
reads. Up to :data:`MAX_OUTPUT` characters of each stream are streamed, as many as the
result keeps: past them one update says the rest is not streamed, and the result says how
much was left out.

Every subprocess runs with the interpreter's directory first on ``PATH`` (so ``python`` is
the Python running toolledger) and ``PYTHONDONTWRITEBYTECODE=1``: the demo works wherever
toolledger is installed and leaves no ``__pycache__`` behind.
"""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio

from events.results import text

from ..core.toolcontext import ToolContext

__all__ = ["MAX_OUTPUT", "Lines", "decoded", "run_streamed"]

#: Characters of a command's stdout or stderr kept in its result, and streamed as it runs.
MAX_OUTPUT = 20_000
#: Characters of a line held back waiting for its end: a longer one is streamed as it is.
LONGEST_LINE = 4_096


class Lines:
    """The bytes of one stream as they come, handed out as text, a line at a time.

    :meth:`feed` takes the bytes read and returns the lines they complete, each with its
    newline (a line of :data:`LONGEST_LINE` characters or more is handed out in pieces of
    that many, without waiting for its end); :meth:`end` returns what is left. The pieces
    depend only on the stream, never on how its bytes were split into reads, so a command
    that writes the same output streams the same updates (a replay with live tools compares
    them). Bytes that are not UTF-8 read as U+FFFD, as :func:`decoded` reads them: the
    pieces, joined, are the stream decoded whole."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, data: bytes | bytearray) -> list[str]:
        """The lines (or pieces of a long line) that ``data`` completes, in order."""
        pending = self._pending + self._decoder.decode(data)
        pieces, start = [], 0
        while True:
            end = pending.find("\n", start, start + LONGEST_LINE) + 1
            if end == 0:
                if len(pending) - start < LONGEST_LINE:
                    break
                end = start + LONGEST_LINE
            pieces.append(pending[start:end])
            start = end
        self._pending = pending[start:]
        return pieces

    def end(self) -> list[str]:
        """What is left once the stream has ended: its last line, if it had no newline."""
        pieces = self.feed(b"")
        rest = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return [*pieces, rest] if rest else pieces


def decoded(data: bytes) -> str:
    """A stream's whole output as its result keeps it: UTF-8 text, cut after
    :data:`MAX_OUTPUT` characters with a note of how many more there were."""
    value = data.decode("utf-8", errors="replace")
    if len(value) > MAX_OUTPUT:
        value = value[:MAX_OUTPUT] + f"\n… ({len(value) - MAX_OUTPUT} more characters)"
    return value


async def run_streamed(argv: list[str], cwd: Path,
                       ctx: ToolContext) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` (no shell) in ``cwd`` and return its exit code and whole output, streaming
    the output as progress of ``ctx``'s call while it runs (the module docstring). The call's
    timeout or cancellation kills the process, as :func:`trio.run_process` does."""
    # the interpreter's own bin directory first, as in an activated virtual environment:
    # "python" in a command is the Python running toolledger, and a recorded command means
    # the same thing on every machine (so the demo's log replays anywhere)
    bindir = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in (bindir, os.environ.get("PATH", "")) if p)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PATH": path}
    output = {"stdout": bytearray(), "stderr": bytearray()}
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(partial(
            trio.run_process, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            check=False, cwd=cwd, env=env))
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
            assert stream is not None
            nursery.start_soon(_stream, stream, name, output[name], ctx)
    assert process.returncode is not None
    return subprocess.CompletedProcess(argv, process.returncode, bytes(output["stdout"]),
                                       bytes(output["stderr"]))


async def _stream(stream: trio.abc.ReceiveStream, name: str, kept: bytearray,
                  ctx: ToolContext) -> None:
    """Read ``stream`` to its end into ``kept``, reporting its lines as they complete."""
    lines, budget = Lines(), MAX_OUTPUT
    data = {"stream": name} if name == "stderr" else None

    def report(piece: str) -> None:
        nonlocal budget
        if not piece or budget <= 0:
            return
        ctx.report_progress(data=data, content=[text(piece[:budget])])
        budget -= len(piece)
        if budget <= 0:
            ctx.report_progress(f"{name}: more than {MAX_OUTPUT} characters; the rest is "
                                f"not streamed", data)

    async with stream:
        async for chunk in stream:
            kept += chunk
            for piece in lines.feed(chunk):
                report(piece)
    for piece in lines.end():
        report(piece)
