"""``toolledger verify``: check a log's hash chain and name the first broken link.

Exit status: 0 when every chained record verifies (and every anchor matches), 1 when a link is
broken (or, with ``--strict``, when some records are not chained), 2 when the log could not be
checked at all (a missing file or key, an unknown session, a bad option). A key implies
``--strict``: a keyed log has no unchained records, so one is a broken link, named like any.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from contextlib import closing

import trio
from rich.console import Console
from rich.text import Text

from events.codec import loads_strict
from events.errors import DatabaseSchemaError
from events.integrity import Anchor, Break, SessionChain, VerifyReport
from events.stores.jsonl import verify_jsonl
from events.stores.urls import parse_store_url

from ..core.visible import visible, visible_json
from ._common import (
    LOG_HELP,
    UsageError,
    choose_session,
    counted,
    error_line,
    load_key,
    open_log,
)

__all__ = ["add_parser", "run"]

OK, BROKEN, UNUSABLE = 0, 1, 2
_HEX = re.compile(r"[0-9a-f]{64}")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    verify = commands.add_parser(
        "verify",
        help="check a log's hash chain and name the first broken link",
        description=(
            "Check that no record of a log was changed, removed, inserted or reordered "
            "since it was written: each record's hash must follow from the previous record of "
            "its session. Prints the first broken link (file, line, session, seq, what) or, "
            "when all is well, each session's head hash: keep it elsewhere, since the chain "
            "alone cannot tell that records were cut off the end. Exit status: 0 verified, "
            "1 a broken link, 2 the log could not be checked. The log is only read."
        ),
    )
    verify.add_argument("log", metavar="LOG", help=LOG_HELP)
    key = verify.add_mutually_exclusive_group()
    key.add_argument(
        "--key-file",
        metavar="PATH",
        help="the HMAC key the log was written with: the file's exact bytes",
    )
    key.add_argument(
        "--key-env",
        metavar="VAR",
        help="the HMAC key the log was written with: the value of environment variable VAR",
    )
    verify.add_argument(
        "--session",
        metavar="ID",
        help="check only this session (its full id, or a prefix that names one session)",
    )
    verify.add_argument(
        "--anchor",
        metavar="ID:SEQ:HASH",
        action="append",
        default=[],
        help=(
            "a head hash kept elsewhere: record SEQ of session ID must carry HASH (catches "
            "records cut off the end); may be given several times"
        ),
    )
    verify.add_argument(
        "--strict",
        action="store_true",
        help=(
            "fail if any record is not chained (version 1 records, written before the chain); "
            "implied by a key, with which an unchained record is a broken link"
        ),
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Verify the log and print the report; see the module docstring for the exit status."""
    path: str = args.log
    try:
        key = load_key(args.key_file, args.key_env)
        anchors = [_anchor(text) for text in args.anchor]
        report = _verify(path, key, args.session, anchors)
    except (UsageError, DatabaseSchemaError) as exc:
        return _unusable(str(exc))
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _unusable(f"{exc.strerror or exc}{where}")
    strict = args.strict or key is not None
    failed = not report.ok or (strict and report.unchained > 0)
    if args.json:
        data = {"path": path, "strict": strict, **report.to_json()}
        data["ok"] = not failed
        console.file.write(visible_json(data, indent=2) + "\n")
    else:
        _print(visible(path, newlines=False), report, strict, console)
    return BROKEN if failed else OK


def _print(path: str, report: VerifyReport, strict: bool, console: Console) -> None:
    chain = "HMAC-SHA256 chain (keyed)" if report.keyed else "SHA-256 chain (no key)"
    if report.broken is not None:
        _print_break(path, report.broken, console)
        if report.records:
            console.print(
                Text(f"the {report.records} records before it verified", style="dim"),
                soft_wrap=True,
            )
        return
    sessions = len(report.sessions)
    summary = Text.assemble(
        ("verified", "bold green"),
        f"  {path}: {counted(report.records, 'record')} in {counted(sessions, 'session')}, "
        f"{chain}",
    )
    if strict and report.unchained:
        summary = Text.assemble(
            ("not verified", "bold red"),
            f"  {path}: --strict, and {report.unchained} records are not chained",
        )
    elif report.unchained and not report.chained:
        summary = Text.assemble(
            ("not chained", "bold yellow"),
            f"  {path}: {counted(report.records, 'record')} in {counted(sessions, 'session')}, "
            f"none of them chained",
        )
    console.print(summary, soft_wrap=True)
    if report.anchors:
        console.print(f"{report.anchors} anchor(s) matched", soft_wrap=True)
    for session in report.sessions:
        console.print(_session_line(session), soft_wrap=True)
    if report.unchained:
        console.print(
            Text(
                f"{report.unchained} records are version 1 (written before the hash chain): "
                f"not chained, so the chain proves nothing about them",
                style="yellow",
            ),
            soft_wrap=True,
        )


def _print_break(path: str, broken: Break, console: Console) -> None:
    where = f"{path}:{broken.line}" if broken.line is not None else path
    about = []
    if broken.session_id is not None:
        about.append(f"session {visible(broken.session_id, newlines=False)}")
    if broken.seq is not None:
        about.append(f"seq {broken.seq}")
    console.print(
        Text.assemble(("BROKEN", "bold red"), f"  {where}: {', '.join(about) or 'unreadable'}"),
        soft_wrap=True,
    )
    console.print(f"  {broken.problem}", soft_wrap=True, markup=False)
    if broken.hint:
        console.print(Text(f"  hint: {broken.hint}", style="yellow"), soft_wrap=True)


def _session_line(session: SessionChain) -> Text:
    counts = f"{session.records} records"
    if session.unchained:
        counts += f" ({session.chained} chained, {session.unchained} not chained: version 1)"
    head = session.head or "none (no chained record)"
    return Text.assemble(
        "  session ", (visible(session.session_id, newlines=False), "bold"), f"  {counts}  seq 1-{session.last_seq}  ",
        "head ", (head, "cyan"),
    )


def _anchor(text: str) -> Anchor:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not _HEX.fullmatch(parts[2].lower()):
        raise UsageError(f"--anchor {text!r} is not ID:SEQ:HASH (HASH: 64 hex digits)")
    return Anchor(session_id=parts[0], seq=int(parts[1]), hash=parts[2].lower())


def _verify(
    log: str, key: bytes | None, wanted: str | None, anchors: Sequence[Anchor]
) -> VerifyReport:
    """The report on the log's chains (of the session ``wanted`` names, if given). A JSONL
    file is streamed, not opened as a store (a store refuses a corrupt file; this reports
    it); a database is checked by its store's ``verify``."""
    try:
        where = parse_store_url(log)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if where.kind == "jsonl":
        session = choose_session(log, _session_ids(where.target), wanted) if wanted else None
        return verify_jsonl(where.target, key, session=session, anchors=anchors)

    async def check() -> VerifyReport:
        with closing(open_log(log, key=key)) as store:
            verify = getattr(store, "verify", None)
            if verify is None:
                raise UsageError(f"{log}: a {type(store).__name__} keeps no hash chain")
            session = choose_session(log, await store.sessions(), wanted) if wanted else None
            report: VerifyReport = await verify(session=session, anchors=anchors)
            return report

    return trio.run(check)


def _session_ids(path: str) -> Sequence[str]:
    """The session ids the lines name, in order (lines that cannot be read, a line nested too
    deeply to parse among them, are skipped: the verification that follows names them)."""
    ids: dict[str, None] = {}
    with open(path, "rb") as file:
        for raw in file:
            try:
                session = loads_strict(raw).get("session_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(session, str):
                ids.setdefault(session)
    return list(ids)


def _unusable(message: str) -> int:
    print(error_line(message), file=sys.stderr)
    return UNUSABLE
