"""Who may read what a store writes: the modes of the files it creates.

A log holds everything an agent saw and did (prompts, tool arguments and results, approvals),
so a store creates it **owner-only**: mode ``0600``, exactly, whatever the process's umask (a
umask can only take bits away, and one that took the owner's would leave a log its writer
cannot open again). A file that is already there keeps its mode: its owner chose it, and a
store never changes it.

What a store makes beside a log takes the log's own mode: SQLite does so for its ``-wal``
and ``-shm`` files, and :func:`events.stores.locks.claim_file` for a claim's lock file and its
folder (:func:`beside`, :func:`make_folder`). So a log the store created keeps everything
about it owner-only, and a log its owner opened to a group stays usable by that group.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["OWNER_ONLY", "beside", "make_folder", "open_creating"]

#: The mode of a log a store creates: read and write for its owner, nothing for anyone else.
OWNER_ONLY = 0o600


def open_creating(path: str, flags: int, mode: int = OWNER_ONLY) -> int:
    """``os.open(path, flags)``, creating the file if it is missing with exactly ``mode``,
    whatever the umask; a file that is there keeps its mode. The descriptor is
    close-on-exec."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        # There (or a symbolic link, which O_EXCL never follows): open it as it is. A link to
        # nothing, or a file removed since, is created through the umask: never wider.
        return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have taken some of its bits
    except BaseException:
        os.close(fd)
        raise
    return fd


def beside(log: str) -> int:
    """The mode of a file made beside the log at ``log``: the log's own read and write
    bits."""
    return stat.S_IMODE(os.stat(log).st_mode) & 0o666


def make_folder(path: str, mode: int) -> None:
    """Make the folder ``path`` for files of ``mode`` (each read bit gets its search bit),
    exactly so whatever the umask; a folder that is there is left as it is."""
    folder_mode = mode | (mode & 0o444) >> 2
    try:
        os.mkdir(path, folder_mode)
    except FileExistsError:
        return
    with contextlib.suppress(FileNotFoundError):  # its last user removed it: made again then
        os.chmod(path, folder_mode)
