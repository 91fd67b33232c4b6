"""The codec's candidates for encoding a record, measured in one run.

``python -m benchmarks.codec [--records N] [--repeat R]``: for the four records of a call
(requested, policy decided, started, completed), repeated, the time per record of each way to
make a store's line and to know that it reads back, and of each part of it, every figure the
median of ``R`` runs (CPU time, the cyclic collector off), interleaved. orjson and
``cattrs.preconf.orjson`` are measured when orjson is importable (it is not a dependency:
install it in a scratch environment to see them), with whether orjson's bytes equal the
reference's for these records.

Rows for msgspec (a dependency since "A compiled codec") compare decoding a line with its
parser and with the reference's, and what its encoder would cost with the walk that refusing
``NaN`` needs. docs/performance.md ("Encoding a record once", "A compiled codec") has runs of
it and the decisions they led to.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec
from events.codec import converter, decode_line, encode_record, encode_stored
from events.integrity import GENESIS, seal_bytes
from events.jsontext import dumps_compact as _dumps
from events.codec import decode_record
from events.jsontext import loads_reference, loads_strict

from .stores import call_records

US = 1e6
_parse = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
_PLAIN = frozenset({str, int, bool, type(None)})


def _finite(value: Any) -> bool:
    """Whether ``value`` (a JSON-able dict, list or scalar) holds no NaN or infinity: the check
    msgspec's encoder would need, since it writes them as ``null``."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is float:
        return bool(value - value == 0.0)
    if kind is dict:
        return all(_finite(item) for item in value.values())
    return kind is list and all(_finite(item) for item in value)


def candidates(count: int) -> dict[str, Callable[[], object]]:
    """Each candidate: a function that does its work on ``count`` records."""
    records = call_records("bench", count)
    dicts = [encode_record(record) for record in records]
    lines = [_dumps(obj).encode("utf-8") for obj in dicts]
    hooks = {type(r.event): converter.get_unstructure_hook(type(r.event)) for r in records}

    def reference() -> None:  # encode, then decode the line to prove it reads back
        for record in records:
            _, text = encode_stored(record, fast=False)
            assert text is not None
            decode_line(text)

    found: dict[str, Callable[[], object]] = {
        "encode + read back (the reference)": reference,
        "encode, proven by the reader (adopted)":
            lambda: [encode_stored(record) for record in records],
        "  unstructure (converter)": lambda: [converter.unstructure(r.event) for r in records],
        "  unstructure (hooks looked up once)": lambda: [hooks[type(r.event)](r.event)
                                                         for r in records],
        "  json C encoder + UTF-8": lambda: [_dumps(obj).encode("utf-8") for obj in dicts],
        "  loads_strict (the read-back's parse)": lambda: [loads_strict(line) for line in lines],
        "  seal (SHA-256 chain link)": lambda: [seal_bytes(line, GENESIS) for line in lines],
        # a record read back, before and after msgspec's parser (docs/performance.md,
        # "A compiled codec")
        "decode a line, json's scanner (before)":
            lambda: [decode_record(loads_reference(line)) for line in lines],
        "decode a line, msgspec's parser (adopted)": lambda: [decode_line(line) for line in lines],
        "  parse, json's scanner (before)": lambda: [loads_reference(line) for line in lines],
        "  parse, msgspec's parser (adopted)": lambda: [_parse(line) for line in lines],
        "  parse, json.loads": lambda: [json.loads(line) for line in lines],
        # msgspec as the encoder: what it writes in, and what refusing NaN would cost
        "  msgspec encode of the dict (not adopted)": lambda: [_encode(obj) for obj in dicts],
        "  + the walk refusing NaN it needs": lambda: [_finite(obj) for obj in dicts],
    }
    try:
        import orjson
        from cattrs.preconf.orjson import make_converter
    except ImportError:
        return found
    fast_converter = make_converter()
    found["  orjson.dumps"] = lambda: [orjson.dumps(obj) for obj in dicts]
    found["  orjson.loads"] = lambda: [orjson.loads(line) for line in lines]
    found["  cattrs.preconf.orjson dumps(event)"] = lambda: [fast_converter.dumps(r.event)
                                                           for r in records]
    return found


def same_bytes(count: int) -> bool | None:
    """Whether orjson writes the reference's bytes for these records (None: no orjson)."""
    try:
        import orjson
    except ImportError:
        return None
    dicts = [encode_record(record) for record in call_records("bench", count)]
    return all(orjson.dumps(obj) == _dumps(obj).encode("utf-8") for obj in dicts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.codec", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=4_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    found = candidates(args.records)
    samples: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(args.repeat):
        for name, work in found.items():
            # the cyclic collector off while timing: a full collection over the records kept
            # alive otherwise lands on whichever row happens to run then
            gc.collect()
            gc.disable()
            try:
                start = time.process_time()
                work()
                samples[name].append((time.process_time() - start) / args.records * US)
            finally:
                gc.enable()
    print(f"{'candidate':<44} {'µs per record':>14}  (min–max)")
    for name, values in samples.items():
        print(f"{name:<44} {statistics.median(values):>14.2f}  "
              f"({min(values):.2f}–{max(values):.2f})")
    same: Any = same_bytes(args.records)
    if same is not None:
        print(f"orjson's bytes equal the reference's for these records: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
