"""A JSONL log's artifacts: one file each, in a folder beside the log.

The whole of a result too large for the log (:mod:`events.artifacts`) is kept in
``<log>.artifacts/<session>/<call>-<sha256>.json``: its bytes, compact JSON, readable with
``jq``; the record that names it carries the hash. A file is written whole or not at all (a
temporary file, synced when the store is durable, then renamed into place), so a crash never
leaves half an artifact under its name; it takes the log's own mode, as everything a store
makes beside its log does (:mod:`events.stores.modes`). Nothing is ever changed or removed.
"""

from __future__ import annotations

import os
import secrets

from ..artifacts import artifact_name
from .base import check_artifact
from .modes import beside, make_folder, open_creating

__all__ = ["ArtifactFiles"]


class ArtifactFiles:
    """The artifacts of the log at ``log``, in the folder ``<log>.artifacts``."""

    def __init__(self, log: str, *, durable: bool = False) -> None:
        self.log = log
        self.folder = f"{log}.artifacts"
        self.durable = durable

    def path(self, session_id: str, call_id: str, sha256: str) -> str:
        """Where the artifact of that name is, or would be."""
        return os.path.join(self.folder, artifact_name(session_id, call_id, sha256))

    def put(self, session_id: str, call_id: str, sha256: str, data: bytes) -> None:
        """Write the artifact, whole, unless a file of its name is there already (the same
        bytes: the name holds their hash; ``verify`` finds one that was changed since)."""
        check_artifact(sha256, data)
        path = self.path(session_id, call_id, sha256)
        if os.path.exists(path):
            return
        mode = beside(self.log)
        make_folder(self.folder, mode)
        make_folder(os.path.dirname(path), mode)
        temporary = f"{path}.{secrets.token_hex(8)}.tmp"
        fd = open_creating(temporary, os.O_WRONLY, mode)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
            raise
        if self.durable:
            folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def get(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The artifact's bytes as the file holds them now; ``None`` if there is none."""
        try:
            with open(self.path(session_id, call_id, sha256), "rb") as file:
                return file.read()
        except FileNotFoundError:
            return None
