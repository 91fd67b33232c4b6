"""The runtime: trio drives the pure core, records every step and runs the tool bodies.

:class:`~engine.runtime.session.Session` is the front door; a prompt becomes a batch of calls
(:mod:`.batch`), each through the gate (:mod:`.gate`) and its body (:mod:`.calls`), with every
fact appended by the recorder (:mod:`.recorder`). Only this layer (and the hosts built on it)
imports trio.
"""
