"""A paused program's state, as the log keeps it: the sandbox's dump in a ``program_suspended``
record, and the checks that refuse a state that is not the one recorded.

The dump is kept inline, base64 in the record (a few KB for a small program), so the hash
chain and the store's HMAC cover it as they cover every record: a changed state is refused
where the store reads the log, as a changed grant is. The record also names the SHA-256 of the
dump's bytes and the sandbox release that made it; :func:`state_bytes` checks both before any
byte reaches the sandbox, which does not authenticate what it loads. Pure but for reading the
installed release.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from types import ModuleType

from events.types import ProgramSuspended

from ..core.errors import ProgramStateRefused

__all__ = ["program_state", "sandbox_version", "state_bytes"]


def sandbox_version(module: ModuleType) -> str:
    """The sandbox release a dump is made by, as a record names it: ``"pydantic-monty X.Y.Z"``."""
    return f"pydantic-monty {getattr(module, '__version__', 'unknown')}"


def program_state(call_id: str, calls: Sequence[tuple[int, str]], data: bytes, *,
                  release: str, printed: str, printed_cut: int) -> ProgramSuspended:
    """The record of a program stopped with ``calls`` unanswered (each as the sandbox's id and
    the engine's) and dumped as ``data``."""
    return ProgramSuspended(
        call_id=call_id, waits_for=tuple(c for _, c in calls),
        program_calls=tuple(s for s, _ in calls),
        state=base64.b64encode(data).decode("ascii"), sha256=hashlib.sha256(data).hexdigest(),
        sandbox=release, printed=printed, printed_cut=printed_cut)


def state_bytes(event: ProgramSuspended, release: str) -> bytes:
    """The dump a record keeps, checked: :class:`~engine.core.errors.ProgramStateRefused` if
    it is not base64, its bytes do not match the recorded hash, or another sandbox release
    made it. Nothing is loaded then."""
    where = f"the recorded state of the program of call {event.call_id}"
    try:
        data = base64.b64decode(event.state.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ProgramStateRefused(f"{where} is not base64 ({exc}): it was changed, so it is "
                                  f"not loaded; nothing of the program ran") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != event.sha256:
        raise ProgramStateRefused(
            f"{where} does not match its recorded hash (SHA-256 {digest[:16]}…, recorded "
            f"{event.sha256[:16]}…): it was changed or cut short, so it is not loaded; nothing "
            f"of the program ran. Run the program again")
    if event.sandbox != release:
        raise ProgramStateRefused(
            f"{where} was made by {event.sandbox}, and this process has {release}: a state "
            f"loads only in the sandbox release that made it. Resume with that release "
            f"(pip install 'toolledger[codemode]' pins it), or run the program again")
    return data
