"""The web console: watch sessions live, answer their approvals and questions, read any log.

:func:`console_app` is the console as an ASGI app, for ``toolledger web STORE_URL`` or for a
host to mount in its own app; :class:`WebDesk` runs a host's sessions so that the console's
answers reach them at once; :func:`lifespan` runs the console's lifespan (its background
folds and checks) for a host that mounts it. Needs the ``web`` extra (Starlette, and Hypercorn to serve it
under trio). docs/web.md tells how to run it, mount it and answer from it, and its security
model.
"""

from __future__ import annotations

from .app import console_app
from .desk import WebDesk
from .lifespan import lifespan

__all__ = ["WebDesk", "console_app", "lifespan"]
