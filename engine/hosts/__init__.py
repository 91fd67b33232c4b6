"""Hosts: a session carried into other worlds, built on the runtime's public surface.

asyncio (:mod:`.aio`), trio's guest mode inside another event loop (:mod:`.guest`),
OpenTelemetry spans from a session's records (:mod:`.otel`, by the GenAI conventions), and
Temporal activities (:mod:`.temporal`, the ``temporal`` extra).
"""
