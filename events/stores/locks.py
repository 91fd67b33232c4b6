"""File locks for the JSONL store: who owns a session, and waiting for the file's lock
without stopping the event loop.

**Owning a session, on Linux.** A session of a log is claimed with an exclusive lock on one
byte of the log itself, far past its end: an open-file-description lock (``F_OFD_SETLK``),
taken on the store's own descriptor, so it belongs to that store object and not to the
process (a lock of the process would be dropped by any ``close`` of the file in it). The byte
is ``2**62`` plus a 62-bit digest of the session id (BLAKE2b), the same in every process. A
claim never waits: it locks the byte or raises :class:`~events.errors.SessionInUse`. Every
claim of the session, in this process or another, meets the same byte; the release unlocks
it, and the kernel drops every claim of a store when its descriptor closes: when the store
closes, or when its process dies, however it dies. Nothing is written and no file is made: a
claim costs one ``fcntl`` and its release another, where a lock file costs a folder, a file, a
write and two removals. Two ids whose digests agree share a byte, so one of them is
refused while the other is held though it is free (never two owners of one session); with
``n`` sessions held on one log at once the chance that any two share a byte is about
``n**2 / 2**63``. An OFD lock has no owning process (``F_OFD_GETLK`` reports pid ``-1``), and
one store's own claims never conflict in the kernel (they share a description), so the
process keeps its claims by byte, per file, and refuses a claim of a byte one of them holds
itself, naming this process; a byte held elsewhere is "another process". The byte locks and
the file's ``flock`` never meet on a local filesystem; on NFS, where Linux emulates ``flock``
with byte-range locks over the whole file, they would, so a store asks when it opens the file
(:func:`byte_claims_hold`) and claims by lock files where they meet.

**Owning a session, elsewhere** (no ``F_OFD_SETLK``; and :class:`~events.SqliteStore`, whose
database file SQLite locks with POSIX locks that any ``close`` of the file in the process would
drop). A session is claimed with an exclusive ``flock`` on a small lock file of
its own, ``<log>.owners/<sha256 of the session id>.lock``, taken with ``LOCK_NB``: a claim
never waits, it either holds the lock or raises :class:`~events.errors.SessionInUse` naming the
process that does (its pid is written in the file). ``flock`` belongs to one open file
description, so a second claim in the same process is refused too, and the kernel drops the
lock when its holder dies, however it dies: a killed process never leaves a session locked.
The file and the folder take the log's mode (:mod:`events.stores.modes`: owner-only beside a
log the store created). The file (and the folder, once empty) is removed when the claim ends;
a claimer that locked a file removed meanwhile (the file's inode is no longer the path's) lets
it go and tries again, so two claimers can never hold two different files under one name.

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
import struct
import threading
from collections.abc import AsyncIterator, Callable

import trio

from ..errors import SessionInUse
from .base import Claim
from .modes import beside, make_folder, open_creating

__all__ = ["BYTE_CLAIMS", "byte_claims_hold", "claim_byte", "claim_file", "locked_elsewhere",
           "open_for_claims", "try_lock"]

#: Whether this system has open-file-description locks: then a log's sessions are claimed by
#: a byte of the log, else by lock files (see the module's docstring).
BYTE_CLAIMS = hasattr(fcntl, "F_OFD_SETLK")

_FIRST_CLAIM_BYTE = 1 << 62
# ``struct flock`` (the layout of Linux, whose C compiler aligns it as ``struct`` does):
# l_type, l_whence, l_start, l_len, l_pid (0, as OFD locks require).
_FLOCK = struct.Struct("hhqqi")
# The byte claims this process holds: (device, inode, byte) -> the session id.
_held_bytes: dict[tuple[int, int, int], str] = {}


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


def byte_claims_hold(path: str) -> bool:
    """Whether the sessions of the log at ``path`` may be claimed by a byte of it: the system
    has OFD locks, and a ``flock`` of the file does not meet byte-range locks (on NFS, Linux
    emulates ``flock`` with a byte-range lock over the whole file, which would meet every
    claim: an append would wait for them forever). The caller holds a ``flock`` of the file;
    this asks (``F_OFD_GETLK``, which takes nothing) through a descriptor of its own whether a
    lock on a byte just below the claims' would be refused. Every process sees the same
    answer for one file, so all of them claim its sessions the same way."""
    if not BYTE_CLAIMS:
        return False
    probe = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        asked = fcntl.fcntl(probe, fcntl.F_OFD_GETLK,
                            _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _FIRST_CLAIM_BYTE - 1, 1, 0))
    finally:
        os.close(probe)
    return bool(_FLOCK.unpack(asked)[0] == fcntl.F_UNLCK)


def claim_byte_offset(session_id: str) -> int:
    """The byte of a log whose lock is the claim of ``session_id``: past ``2**62``, where no
    log reaches, by a 62-bit digest of the id."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return _FIRST_CLAIM_BYTE + (int.from_bytes(digest.digest(), "big") >> 2)


def open_for_claims(path: str, file: tuple[int, int]) -> int:
    """A descriptor open for writing on ``path``, for byte claims only (an exclusive lock needs
    one; nothing is written through it), checked to be ``file`` (device and inode): the file a
    store opened, not one that replaced it since."""
    own = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        stat = os.fstat(own)
        if (stat.st_dev, stat.st_ino) != file:
            raise OSError(f"{path} is no longer the file this store opened (replaced or moved "
                          f"away?): open a new store")
    except BaseException:
        os.close(own)
        raise
    return own


def claim_byte(fd: int, file: tuple[int, int], session_id: str,
               still_open: Callable[[], bool]) -> Claim:
    """Claim ``session_id`` of the log open as ``fd`` (the store's own descriptor; ``file`` is
    its device and inode) by an OFD lock on its byte (see the module's docstring); raises
    :class:`~events.errors.SessionInUse` if it is held. ``still_open`` says whether ``fd`` is
    still the store's: the release unlocks the byte only then (a closed store's claims went
    with its descriptor, and the number may name another file since)."""
    byte = claim_byte_offset(session_id)
    key = (*file, byte)
    holder = _held_bytes.get(key)
    if holder is not None:
        raise SessionInUse(session_id, "held by this process" if holder == session_id else
                           f"its lock byte is held by session {holder!r} of this process, "
                           f"whose id's digest is the same")
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise SessionInUse(session_id, "held by another process") from None
        raise
    _held_bytes[key] = session_id

    def release() -> None:
        del _held_bytes[key]
        if still_open():
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                        _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, byte, 1, 0))

    return Claim(release)


def claim_file(path: str, session_id: str) -> Claim:
    """Claim ``session_id`` of the log at ``path`` (see the module's docstring); raises
    :class:`~events.errors.SessionInUse` if another open file description holds it."""
    folder = f"{path}.owners"
    name = os.path.join(folder, hashlib.sha256(session_id.encode("utf-8", "surrogatepass"))
                        .hexdigest()[:32] + ".lock")
    mode = beside(path)  # who may read the log may read who holds its sessions
    while True:
        make_folder(folder, mode)
        try:
            fd = open_creating(name, os.O_RDWR, mode)
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
