"""The pure core: what a call is and what the log means, with no trio, I/O, clock or randomness.

The lifecycle table, the reducers and the projection they fold into, the approval policy, tool
specs and the registry, nested-call matching, limits, JSON values, schemas. Everything here is a
function of its arguments, which is what lets a session replay from its log and lets Hypothesis
test the invariants of docs/architecture.md. The runtime (:mod:`engine.runtime`) drives it.
"""
