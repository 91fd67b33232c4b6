"""Fast paths: what makes reading and writing records cheap, kept out of the facts' way.

Readers that build records from decoded JSON without cattrs' generic path (:mod:`.readers`),
attrs ``__init__`` without its validators for trusted construction (:mod:`.fastinit`), and
records prepared once for the store (:mod:`.prepared`). Each has a property test that it
agrees with the plain path it stands in for.
"""
