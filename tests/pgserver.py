"""A throwaway PostgreSQL server for the tests and the benchmarks.

:func:`start` makes a cluster with ``initdb`` in a new temporary folder and starts it with
``pg_ctl``, listening on 127.0.0.1 only (no Unix socket), on a free port; :meth:`Server.stop`
stops it and removes the folder. The binaries come from ``$TOOLLEDGER_PG_BIN``, else the
newest ``/usr/lib/postgresql/*/bin``, else the ``PATH``. PostgreSQL refuses to run as root, so
as root the cluster belongs to the ``postgres`` user and every command runs through
``runuser -u postgres --``.

The tests' server trades durability for speed (``fsync=off``): nothing here survives a crash of
the machine, and nothing needs to. The benchmarks ask for the server's defaults instead.

    python -m tests.pgserver      # start one, print its URL and the time it took, stop it
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["URL_VARIABLE", "Server", "ServerUnavailable", "start"]

#: the environment variable through which the tests' server's URL reaches the tests, and the
#: processes they start (set by the ``postgres_server`` fixture of tests/conftest.py)
URL_VARIABLE = "TOOLLEDGER_TEST_POSTGRES_URL"


class ServerUnavailable(Exception):
    """No PostgreSQL could be started here; the message says why."""


def _bindir() -> Path:
    if configured := os.environ.get("TOOLLEDGER_PG_BIN"):
        return Path(configured)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise ServerUnavailable("no PostgreSQL binaries: initdb is not in /usr/lib/postgresql/*/bin "
                                "nor on the PATH (set TOOLLEDGER_PG_BIN to their folder)")
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A running server: :attr:`url` names its ``postgres`` database as user ``postgres``."""

    def __init__(self, bindir: Path, root: Path, port: int, as_user: list[str]) -> None:
        self.bindir = bindir
        self.root = root
        self.port = port
        self._as_user = as_user
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def url_of(self, database: str) -> str:
        """The URL of another database on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run one of the server's binaries as the cluster's owner; raise on failure."""
        done = subprocess.run([*self._as_user, str(self.bindir / tool), *args],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ServerUnavailable(f"{tool} {' '.join(args)} failed ({done.returncode}):\n"
                                    f"{done.stdout}{done.stderr}")
        return done

    def stop(self) -> None:
        """Stop the server at once and remove its folder (its data with it)."""
        try:
            self.run("pg_ctl", "stop", "-D", str(self.root / "data"), "-m", "immediate", "-w")
        except (ServerUnavailable, OSError, subprocess.TimeoutExpired):
            pass
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start(*, fast: bool = True) -> Server:
    """Make and start a server; :class:`ServerUnavailable` if it cannot be done here.

    ``fast`` turns off ``fsync`` and ``full_page_writes`` (for the tests); without it the
    server keeps PostgreSQL's defaults (for the benchmarks)."""
    bindir = _bindir()
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="toolledger-pg-"))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            shutil.rmtree(root)
            raise ServerUnavailable("running as root without runuser: PostgreSQL will not run "
                                    "as root")
        shutil.chown(root, user="postgres", group="postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    options = ["-c listen_addresses=127.0.0.1", "-c unix_socket_directories=''",
               "-c max_connections=200", "-c shared_buffers=64MB"]
    if fast:
        options += ["-c fsync=off", "-c full_page_writes=off", "-c synchronous_commit=off"]
    for attempt in range(3):
        server = Server(bindir, root, _free_port(), as_user)
        try:
            if attempt == 0:
                server.run("initdb", "-D", str(data), "-U", "postgres", "-A", "trust",
                           "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
            server.run("pg_ctl", "start", "-D", str(data), "-w", "-t", "60",
                       "-l", str(root / "log"),
                       "-o", " ".join([f"-p {server.port}", *options]))
            return server
        except ServerUnavailable as exc:
            log = root / "log"
            said = log.read_text(errors="replace") if log.exists() else ""
            if attempt < 2 and "could not bind" in said:
                continue  # someone took the port between our look and the server's bind
            shutil.rmtree(root, ignore_errors=True)
            raise ServerUnavailable(f"{exc}\n{said}") from None
        except OSError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise ServerUnavailable(f"cannot run the PostgreSQL binaries: {exc}") from None
    raise AssertionError("unreachable")


if __name__ == "__main__":
    began = time.perf_counter()
    made = start(fast="--slow" not in sys.argv)
    print(f"{made.url} up in {time.perf_counter() - began:.2f} s")
    began = time.perf_counter()
    made.stop()
    print(f"stopped and removed in {time.perf_counter() - began:.2f} s")
