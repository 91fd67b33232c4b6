"""``python -m engine.cli``: the same as the ``toolledger`` command."""

from . import main

raise SystemExit(main())
