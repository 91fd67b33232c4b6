"""How a line is sealed into its session's hash chain: the one format every store writes.

Each line a store writes carries one envelope field more than the record needs, ``"hash"``,
appended last. It is the hex SHA-256 (with a key: HMAC-SHA256) of the previous record's hash
*in the same session* (:data:`GENESIS` for a session's first chained record) followed by this
line's *canonical bytes*: the exact UTF-8 bytes of the line as written without the hash field.
The line is then the canonical bytes with their closing brace replaced by
``,"hash":"<64 hex>"}``, so a verifier gets the canonical bytes back by cutting that fixed-size
suffix off and putting the brace back (:func:`unseal`): nothing is re-serialised, and a
verifier in any language (or ``sha256sum``) computes the same digest from the bytes on disk.
Checking a chain is :mod:`events.integrity`.

Pure functions and values only: no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import re

__all__ = ["GENESIS", "HASH_FIELD", "SEALED_TAIL", "link", "seal", "seal_bytes", "sealed_hash",
           "unseal"]

#: The "previous hash" of a session's first chained record.
GENESIS = "0" * 64
#: The envelope field that holds a line's link in the chain.
HASH_FIELD = "hash"

_PREFIX = b',"hash":"'
_SUFFIX_LEN = len(_PREFIX) + 64 + len(b'"}')
#: How many bytes at the end of a sealed line hold its hash (:func:`sealed_hash`).
SEALED_TAIL = _SUFFIX_LEN
_HEX = re.compile(rb"[0-9a-f]{64}")


def link(prev: str, body: bytes, key: bytes | None = None) -> str:
    """The hash of a line whose canonical bytes are ``body``, following hash ``prev``."""
    data = prev.encode("ascii") + body
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def seal_bytes(
    body: bytes, prev: str, key: bytes | None = None, end: bytes = b""
) -> tuple[bytes, str]:
    """The sealed line for canonical bytes ``body`` after ``prev``, followed by ``end`` (a
    newline, for a file; nothing by default), and its hash.

    ``body`` must be a JSON object with at least one field and no ``"hash"`` of its own.
    """
    if len(body) < 3 or body[:1] != b"{" or body[-1:] != b"}":
        raise ValueError("only a JSON object with at least one field can be sealed")
    digest = link(prev, body, key)
    return b"".join((body[:-1], _PREFIX, digest.encode("ascii"), b'"}', end)), digest


def seal(body: str, prev: str, key: bytes | None = None) -> tuple[str, str]:
    """:func:`seal_bytes` for text: the sealed line and its hash."""
    line, digest = seal_bytes(body.encode("utf-8"), prev, key)
    return line.decode("utf-8"), digest


def unseal(line: bytes) -> tuple[bytes, str] | None:
    """The canonical bytes and hash of a sealed line (without its newline); ``None`` if the
    line does not end the way :func:`seal_bytes` writes it."""
    cut = len(line) - _SUFFIX_LEN
    digest = sealed_hash(line)
    if cut < 2 or digest is None:
        return None
    return line[:cut] + b"}", digest


def sealed_hash(line: bytes) -> str | None:
    """The hash a sealed line (without its newline) ends with, read from its last
    :data:`SEALED_TAIL` bytes (all a caller needs to hand over); ``None`` if it does not end
    the way :func:`seal_bytes` writes it. Only reads it: :func:`check_link` checks it."""
    tail = line[-_SUFFIX_LEN:]
    if len(tail) < _SUFFIX_LEN or not tail.startswith(_PREFIX) or not tail.endswith(b'"}'):
        return None
    digest = tail[len(_PREFIX) : -2]
    return digest.decode("ascii") if _HEX.fullmatch(digest) else None
