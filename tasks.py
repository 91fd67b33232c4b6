#!/usr/bin/env python3
"""Project tasks that work on a fresh clone with only Python 3.11+ present.

    python3 tasks.py demo [ARGS...]   run the demo session (creates .venv on first use)
    python3 tasks.py test [ARGS...]   type-check, then run the whole test suite (in parallel)
    python3 tasks.py screenshots [DIR]  write screenshots of the web console's main pages
                                        (default docs/screenshots; see docs/web.md)

The first run creates a virtual environment in ``.venv`` and installs toolledger into it with
its test extra; later runs reuse it (and reinstall when pyproject.toml changes). ``test`` and
``screenshots`` need Chromium (Debian's ``chromium`` and ``chromium-driver``): run as root on a
machine with apt-get, they install it when it is missing; elsewhere the browser tests skip and
say why.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".toolledger-installed"


def ensure_venv() -> None:
    """Create .venv and install the project (editable, with tests) unless it is current."""
    if sys.version_info < (3, 11):
        sys.exit(f"toolledger needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if PYTHON.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PYTHON.exists():
        print("creating .venv ...", flush=True)
        venv.create(VENV, with_pip=True)
    print("installing toolledger and its test dependencies into .venv ...", flush=True)
    subprocess.run(
        [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-e", f"{ROOT}[test]"],
        check=True,
    )
    STAMP.write_text(wanted)


def ensure_browser() -> None:
    """Install Debian's Chromium and its driver when missing and this can (root, apt-get)."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("no chromium/chromedriver here and no way to install them (needs root and "
              "apt-get): the browser tests will skip", file=sys.stderr, flush=True)
        return
    print("installing chromium and chromium-driver (apt-get) ...", flush=True)

    def apt(*args: str) -> int:
        return subprocess.run(["apt-get", *args], stdout=subprocess.DEVNULL,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}).returncode

    install = ("install", "-y", "-q", "--no-install-recommends", "chromium", "chromium-driver",
               "fonts-liberation")
    if apt(*install) != 0 and (apt("update", "-q") != 0 or apt(*install) != 0):
        print("apt-get could not install chromium: the browser tests will skip",
              file=sys.stderr, flush=True)


def run(*args: str) -> int:
    return subprocess.run([str(PYTHON), *args], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "screenshots"):
        print(__doc__)
        return 2
    ensure_venv()
    task, rest = argv[0], argv[1:]
    if task == "demo":
        return run("-m", "engine.cli", "demo", *rest)
    ensure_browser()
    if task == "screenshots":
        return run("-m", "tests.web.screenshots", *(rest or ["docs/screenshots"]))
    status = run("-m", "mypy")
    if status != 0:
        print("mypy failed: fix the type errors above", file=sys.stderr)
        return status
    # one worker per core; arguments given after `test` come later, so `-n 0` wins
    return run("-m", "pytest", "-n", "auto", *rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
