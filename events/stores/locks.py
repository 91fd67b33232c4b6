"""File locks for the JSONL store: who owns a session, and waiting for the file's lock
without stopping the event loop.

**Owning a session.** A session is claimed with an exclusive ``flock`` on a small lock file of
its own, ``<log>.owners/<sha256 of the session id>.lock``, taken with ``LOCK_NB``: a claim
never waits, it either holds the lock or raises :class:`~events.errors.SessionInUse` naming the
process that does (its pid is written in the file). ``flock`` belongs to one open file
description, so a second claim in the same process is refused too, and the kernel drops the
lock when its holder dies, however it dies: a killed process never leaves a session locked.
The file (and the folder, once empty) is removed when the claim ends; a claimer that locked a
file removed meanwhile (the file's inode is no longer the path's) lets it go and tries again,
so two claimers can never hold two different files under one name.

**Waiting for the log's lock.** An append or a read first tries the lock without waiting. Only
when another process holds it does the caller wait, in a worker thread
(:func:`trio.to_thread.run_sync`), so the event loop's other tasks keep running. The waiting
thread locks a descriptor of its own (a new open of the same file): a wait that is cancelled
is abandoned, and the thread, once it gets the lock, releases it at once by itself. The store's
own descriptor is only ever locked by code that does not await, so two of the loop's tasks
never share a lock by accident (``flock`` on one descriptor is one lock, not two).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from collections.abc import AsyncIterator

import trio

from ..errors import SessionInUse
from .base import Claim

__all__ = ["claim_file", "locked_elsewhere", "try_lock"]


def try_lock(fd: int, operation: int) -> bool:
    """``flock(fd, operation)`` if it can be had now; ``False`` if another holder has it."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # some systems say EACCES for a held lock
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


@contextlib.asynccontextmanager
async def locked_elsewhere(path: str, fd: int, operation: int) -> AsyncIterator[None]:
    """Hold ``operation`` (``LOCK_SH`` or ``LOCK_EX``) on the file open as ``fd`` at ``path``
    through a descriptor of its own, so that the lock may be held across awaits. If another
    process holds it, the wait happens in a worker thread and is cancellable."""
    own = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        mine, theirs = os.fstat(own), os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            raise OSError(f"{path} is no longer the file this store opened (replaced or moved "
                          f"away?): open a new store")
        locked = try_lock(own, operation)
    except BaseException:
        os.close(own)
        raise
    if not locked:
        await _wait_lock(own, operation)  # on cancellation it disposes of ``own`` itself
    try:
        yield
    finally:
        fcntl.flock(own, fcntl.LOCK_UN)
        os.close(own)


async def _wait_lock(fd: int, operation: int) -> None:
    """Wait in a worker thread until ``flock(fd, operation)`` is held. If the wait fails or is
    cancelled, ``fd`` is closed: at once if the thread is done, else by the abandoned thread
    as soon as its ``flock`` returns (letting the lock go at once)."""
    guard = threading.Lock()
    state = {"abandoned": False, "done": ""}

    def wait() -> None:
        try:
            fcntl.flock(fd, operation)
        except BaseException:
            done = "failed"
            raise
        else:
            done = "locked"
        finally:
            with guard:
                state["done"] = done
                if state["abandoned"]:
                    _dispose(fd, locked=done == "locked")

    try:
        await trio.to_thread.run_sync(wait, abandon_on_cancel=True)
    except BaseException:
        with guard:
            state["abandoned"] = True
            if state["done"]:  # the thread is done (failed, or locked as the cancel won)
                _dispose(fd, locked=state["done"] == "locked")
        raise


def _dispose(fd: int, *, locked: bool) -> None:
    if locked:
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def claim_file(path: str, session_id: str) -> Claim:
    """Claim ``session_id`` of the log at ``path`` (see the module's docstring); raises
    :class:`~events.errors.SessionInUse` if another open file description holds it."""
    folder = f"{path}.owners"
    name = os.path.join(folder, hashlib.sha256(session_id.encode("utf-8", "surrogatepass"))
                        .hexdigest()[:32] + ".lock")
    while True:
        os.makedirs(folder, exist_ok=True)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # the last owner removed the empty folder just now
            continue
        try:
            if not try_lock(fd, fcntl.LOCK_EX):
                raise SessionInUse(session_id, _holder(fd))
            try:
                same = os.stat(name).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n{session_id!r}\n".encode("utf-8", "replace"), 0)
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # we locked a file its last owner removed: take the new one

    def release() -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)  # while still locked: a waiting claimer then sees a stale inode
        os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only if no other session is claimed: nothing is left behind

    return Claim(release)


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).split(b"\n", 1)[0].decode("ascii")
    except (OSError, UnicodeDecodeError):
        return ""
    if not pid.isdigit():
        return ""
    return "held by this process" if int(pid) == os.getpid() else f"held by process {pid}"
