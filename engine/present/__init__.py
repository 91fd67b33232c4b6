"""Presentation: a session for people to read, and as plain JSON for other programs.

The transcript and call tree as rich renderables (:mod:`.render`), a console that prints no
control sequence it did not make itself (:mod:`.console`), JSON exports (:mod:`.export`) and the
terminal approver (:mod:`.terminal`) and asker (:mod:`.terminalform`). Nothing here changes a session.
"""
