"""The engine's errors about a session and its calls (docs/errors.md).

Each is a :class:`~events.errors.ToolledgerError` and keeps the built-in base the engine
raised before these classes existed, so ``except RuntimeError`` or ``except ValueError``
still catches it. The messages say what was wrong and what to do.
"""

from __future__ import annotations

from events.errors import SessionError, ToolledgerError

__all__ = [
    "AlreadyRunning",
    "ApprovalNotPending",
    "CallError",
    "CallNotFound",
    "CodeModeUnavailable",
    "InvalidAnswer",
    "NoModel",
    "ProgramStateRefused",
    "QuestionNotPending",
    "SessionBroken",
    "SessionClosed",
    "SessionPaused",
    "ToolSignatureError",
]


class SessionPaused(SessionError, RuntimeError):
    """A prompt while the session is paused: its last batch waits for approvals, or has not
    been finished since it paused. Answer the pending approvals
    (``Session.resolve_approval``), call ``Session.resume()``, then prompt."""


class SessionClosed(SessionError, RuntimeError):
    """The session's ``Session.open`` block has ended (or is ending), or it closed while a
    prompt or a host call ran: nothing more is recorded through this object. Open the session
    again; ``resume()`` / ``resume_call()`` go on from what the log holds."""


class SessionBroken(SessionError, RuntimeError):
    """The store refused a write, so the session's state is ahead of its log: stop using it,
    reopen the session from the store."""


class AlreadyRunning(SessionError, RuntimeError):
    """A second prompt (or ``resume()``) while one runs in the same session, or a host call
    resumed while this process already carries it: await the one that runs."""


class NoModel(SessionError, RuntimeError):
    """A prompt (or ``resume()``) in a session opened without a model: it serves its tools or
    takes host calls only. Open it with ``model=`` to prompt it."""


class CallError(ToolledgerError):
    """Base class of the errors about one call, named by its engine call id."""


class CallNotFound(CallError, ValueError):
    """No call of this session has this id (or, for ``resume_call``, no host call): check the
    id against ``session.pending_approvals()`` or ``state.live_calls``."""


class ApprovalNotPending(CallError, ValueError):
    """An answer to a call that is not waiting for one: it was answered already, it has
    ended, it never asked, or its approver is still deciding. Answer only the requests in
    ``session.pending_approvals()``."""


class QuestionNotPending(CallError, ValueError):
    """An answer to a question that is not waiting for one: no call asked it, it was answered
    already, its call has ended, or its asker is still deciding. Answer only the questions in
    ``session.pending_questions()``."""


class InvalidAnswer(CallError, ValueError):
    """An accepting answer whose content does not fit the question's form (a missing required
    field, a value of the wrong kind or out of range, a field the form does not have): the
    message names the field. Nothing is recorded; answer again, or decline or cancel."""


class ToolSignatureError(ToolledgerError, TypeError):
    """``@tool`` on a function it cannot make a tool of: a parameter without a type, a type
    JSON cannot carry (a set, a bare ``object``, a callable), ``*args`` or ``**kwargs``, a
    context parameter on a sync function, … Raised where the function is decorated; the
    message names the tool and the parameter, and says what to write instead
    (docs/tools.md, "When @tool refuses a function")."""


class CodeModeUnavailable(ToolledgerError, ImportError):
    """Code mode used where its sandbox is not installed: ``code_tool()`` without the
    ``codemode`` extra. Install it (``pip install 'toolledger[codemode]'``), which pins the
    Monty releases code mode is tested with (docs/codemode.md)."""


class ProgramStateRefused(ToolledgerError):
    """A code tool's program cannot go on from its recorded state: the dump's bytes do not
    match the hash its ``program_suspended`` record names (changed or cut short), or they
    were made by another release of the sandbox. Nothing of the program runs: its call ends
    as an error result naming this, and the model may run the program again
    (docs/codemode.md, "Pause and resume")."""
