"""TEST ONLY: fault injection for smoke-train (`--fault`), to exercise the non-finite paths.

Real data never needs it; tests, bench/probe_recall.py and scripts/gpu_smoke.sh use it to make
chosen micro-batches non-finite and check that the loop drops them and the probe finds them.
A Fault gets the ids of a micro-batch; a truthy result makes its backward NaN, the string
"forward" makes its loss NaN instead. The summary records the spec whenever one is set.

Spec (rules joined by ';'):
    pair:A,B      backward NaN when A and B share a micro-batch (any number of ids: all of them)
    item:A        backward NaN when A is in the micro-batch
    forward:A     loss NaN when A is in the micro-batch
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.errors import UsageError

Fault = Callable[[list[str]], bool | str]

KINDS = ("pair", "item", "forward")


def parse_fault(spec: str) -> Fault:
    """A Fault from a spec; a UsageError (exit 2) naming the accepted forms if it does not parse."""
    rules: list[tuple[str, frozenset[str]]] = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        kind, _, ids = part.partition(":")
        members = frozenset(i.strip() for i in ids.split(",") if i.strip())
        if kind not in KINDS or not members or (kind != "pair" and len(members) != 1):
            raise UsageError(
                f"--fault {part!r}: expected pair:ID,ID | item:ID | forward:ID (joined by ';')"
            )
        rules.append((kind, members))
    if not rules:
        raise UsageError("--fault: empty spec")

    def fault(ids: list[str]) -> bool | str:
        present = set(ids)
        hit: bool | str = False
        for kind, members in rules:
            if members <= present:
                if kind == "forward":
                    return "forward"
                hit = True
        return hit

    return fault
