"""The approval policy: the annotation rule over every combination, and the rules' precedence.

The expected answers are worked out here from DESIGN's wording, independently of
``engine.core.policy``: an explicit ``destructive=True`` always asks; otherwise a tool that says
``read_only=True`` is let through; otherwise an undeclared hint takes MCP's default
(destructive true, open-world true) and the tool asks if it is destructive or open-world.
"""

from __future__ import annotations

import itertools

import attrs
import pytest

from engine.core.policy import PolicyDecision, PolicyRules, decide, needs_approval
from events.types import Annotations, ApprovalResolved

HINTS = (None, True, False)
COMBINATIONS = list(itertools.product(HINTS, HINTS, HINTS))


def expected_to_ask(read_only: bool | None, destructive: bool | None,
                    open_world: bool | None) -> bool:
    """DESIGN's rule, spelled out case by case."""
    if destructive is True:  # an explicit destructive hint asks whatever else is claimed
        return True
    if read_only is True:  # a read-only tool (that is not explicitly destructive) never asks
        return False
    # not read-only (declared false or undeclared): undeclared hints are MCP's dangerous defaults
    is_destructive = True if destructive is None else destructive
    is_open_world = True if open_world is None else open_world
    return is_destructive or is_open_world


def test_the_table_covers_all_27_combinations() -> None:
    assert len(set(COMBINATIONS)) == 27


@pytest.mark.parametrize(("read_only", "destructive", "open_world"), COMBINATIONS)
def test_needs_approval_matches_the_rule(
    read_only: bool | None, destructive: bool | None, open_world: bool | None
) -> None:
    annotations = Annotations(read_only=read_only, destructive=destructive, open_world=open_world)
    assert needs_approval(annotations) is expected_to_ask(read_only, destructive, open_world)


@pytest.mark.parametrize(("read_only", "destructive", "open_world"), COMBINATIONS)
def test_decide_without_rules_follows_the_annotations(
    read_only: bool | None, destructive: bool | None, open_world: bool | None
) -> None:
    annotations = Annotations(read_only=read_only, destructive=destructive, open_world=open_world)
    decision = decide("some_tool", annotations)
    assert isinstance(decision, PolicyDecision)
    wanted = "ask" if expected_to_ask(read_only, destructive, open_world) else "allow"
    assert decision.decision == wanted
    assert "some_tool" in decision.reason


@pytest.mark.parametrize(("read_only", "destructive", "open_world"), COMBINATIONS)
def test_idempotent_and_title_do_not_change_the_answer(
    read_only: bool | None, destructive: bool | None, open_world: bool | None
) -> None:
    plain = Annotations(read_only=read_only, destructive=destructive, open_world=open_world)
    for idempotent in HINTS:
        decorated = Annotations(title="A title", idempotent=idempotent, read_only=read_only,
                                destructive=destructive, open_world=open_world)
        assert needs_approval(decorated) is needs_approval(plain)


def test_an_unannotated_tool_asks() -> None:
    assert needs_approval(Annotations()) is True
    decision = decide("mystery", Annotations())
    assert decision.decision == "ask"
    assert "mystery" in decision.reason


def test_explicit_destructive_asks_even_when_read_only() -> None:
    annotations = Annotations(read_only=True, destructive=True, open_world=False)
    assert needs_approval(annotations) is True
    assert decide("rm", annotations).decision == "ask"


def test_read_only_alone_is_allowed() -> None:
    # read_only=True with the other hints undeclared: the default destructive=True is not an
    # *explicit* destructive, so the read-only claim wins
    assert decide("cat", Annotations(read_only=True)).decision == "allow"


def test_closed_world_non_destructive_tool_is_allowed() -> None:
    annotations = Annotations(read_only=False, destructive=False, open_world=False)
    assert decide("touch", annotations).decision == "allow"


# -- rules ----------------------------------------------------------------------------------

SAFE = Annotations(read_only=True, open_world=False)
DANGEROUS = Annotations()


def test_deny_rule_beats_session_grant_and_allow_rule() -> None:
    rules = PolicyRules(allow=["rm_rf"], deny=["rm_*"])
    decision = decide("rm_rf", SAFE, rules=rules, session_grants={"rm_rf": True})
    assert decision.decision == "deny"
    assert "rm_*" in decision.reason


def test_deny_rule_beats_an_ask_rule() -> None:
    rules = PolicyRules(deny=["x"], ask=["x"])
    assert decide("x", SAFE, rules=rules).decision == "deny"


def test_allow_rule_beats_the_annotations() -> None:
    rules = PolicyRules(allow=["deploy"])
    decision = decide("deploy", DANGEROUS, rules=rules)
    assert decision.decision == "allow"
    assert "deploy" in decision.reason
    explicit = Annotations(read_only=True, destructive=True)
    assert decide("deploy", explicit, rules=rules).decision == "allow"


def test_allow_rule_beats_an_ask_rule() -> None:
    rules = PolicyRules(allow=["deploy"], ask=["deploy"])
    assert decide("deploy", DANGEROUS, rules=rules).decision == "allow"


def test_session_refusal_denies_even_a_read_only_tool() -> None:
    decision = decide("cat", SAFE, session_grants={"cat": False})
    assert decision.decision == "deny"
    assert "cat" in decision.reason


def test_session_refusal_beats_an_allow_rule() -> None:
    # policy.py's documented precedence: deny rule, session refusal, allow rule, ...
    rules = PolicyRules(allow=["cat"])
    assert decide("cat", SAFE, rules=rules, session_grants={"cat": False}).decision == "deny"


def test_session_grant_allows_a_dangerous_tool() -> None:
    decision = decide("deploy", DANGEROUS, session_grants={"deploy": True})
    assert decision.decision == "allow"
    assert "session" in decision.reason


def test_session_grant_beats_an_ask_rule() -> None:
    rules = PolicyRules(ask=["deploy"])
    assert decide("deploy", SAFE, rules=rules, session_grants={"deploy": True}).decision == "allow"


def test_session_memory_is_per_tool_name() -> None:
    grants = {"other": True, "third": False}
    assert decide("deploy", DANGEROUS, session_grants=grants).decision == "ask"
    assert decide("cat", SAFE, session_grants=grants).decision == "allow"


def test_ask_rule_asks_for_a_read_only_tool() -> None:
    rules = PolicyRules(ask=["cat"])
    decision = decide("cat", SAFE, rules=rules)
    assert decision.decision == "ask"
    assert "cat" in decision.reason


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("rm_*", "rm_rf", True),
        ("rm_*", "rm_", True),
        ("rm_*", "rmdir", False),
        ("rm_*", "xrm_rf", False),
        ("read_?", "read_a", True),
        ("read_?", "read_ab", False),
        ("[ab]_tool", "a_tool", True),
        ("[ab]_tool", "c_tool", False),
        ("[!a]_tool", "c_tool", True),
        ("*", "anything.at-all", True),
        ("fs.*", "fs.read", True),
        ("fs.*", "fsXread", False),
        ("Read_*", "read_file", False),  # case-sensitive on every platform
        ("exact", "exact", True),
        ("exact", "exactly", False),
    ],
)
def test_rules_match_fnmatch_patterns(pattern: str, name: str, matches: bool) -> None:
    denied = decide(name, SAFE, rules=PolicyRules(deny=[pattern]))
    assert (denied.decision == "deny") is matches
    allowed = decide(name, DANGEROUS, rules=PolicyRules(allow=[pattern]))
    assert (allowed.decision == "allow") is matches
    asked = decide(name, SAFE, rules=PolicyRules(ask=[pattern]))
    assert (asked.decision == "ask") is matches


def test_a_single_string_is_one_pattern() -> None:
    rules = PolicyRules(deny="rm_*", allow="cat", ask="ls")
    assert rules.deny == ("rm_*",)
    assert decide("rm_rf", SAFE, rules=rules).decision == "deny"
    assert decide("cat", DANGEROUS, rules=rules).decision == "allow"
    assert decide("ls", SAFE, rules=rules).decision == "ask"


def test_the_first_matching_pattern_is_named() -> None:
    rules = PolicyRules(deny=["nothing_*", "rm_*", "*"])
    assert "'rm_*'" in decide("rm_rf", SAFE, rules=rules).reason


def test_the_rule_does_not_depend_on_the_arguments_or_other_names() -> None:
    rules = PolicyRules(deny=["rm_*"], allow=["cat"])
    for name in ("ls", "cat2", "xrm_", "RM_rf"):
        assert decide(name, SAFE, rules=rules).decision == "allow"
        assert decide(name, DANGEROUS, rules=rules).decision == "ask"


def test_a_session_refusal_quotes_the_reason_its_recorded_answer_gave() -> None:
    refused = ApprovalResolved(call_id="1.0", granted=False, scope="session",
                               reason="never in production")
    decision = decide("cat", SAFE, session_grants={"cat": refused})
    assert (decision.decision, decision.rule) == ("deny", None)
    assert decision.reason == "cat was refused for this session: never in production"
    # without a reason, or given only as a bool, it says what it always said
    silent = attrs.evolve(refused, reason=None)
    assert decide("cat", SAFE, session_grants={"cat": silent}).reason == (
        "cat was refused for this session")
    assert decide("cat", SAFE, session_grants={"cat": False}).reason == (
        "cat was refused for this session")
    # a recorded grant allows, as True does
    granted = attrs.evolve(refused, granted=True, reason=None)
    assert decide("deploy", DANGEROUS, session_grants={"deploy": granted}).decision == "allow"
