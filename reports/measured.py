"""Which calls the run measured and what it learned from the others: the lines every output heads its figures with.

A run holds out the first calls of the trace to train the dictionaries (rpcbench/training.py); every figure is
over the other calls. A schema inferred for the typed codecs comes from every call (rpcbench/inference.py).
Said once here, so the page, report.md and the terminal give the same counts.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from rpcbench.inference import TYPED
from rpcbench.results import Suite


def calls_line(suite: Suite) -> str:
    """``2,675 of the trace's 3,343 calls measured; the first 20% (668 calls) trained ...``, or the plain count."""
    measured = int(suite.trace.get("calls") or 0)
    training: Dict[str, Any] = suite.trace.get("training") or {}
    held = int(training.get("held_out_calls") or 0)
    if not held:
        return f"{measured:,} recorded RPC calls measured"
    schema = training.get("schema") or {}  # an older run's schema (no "why") came from the held-out calls
    purposes = ["train the dictionaries"] * _dictionaries(suite) + ["infer the typed codecs' schema"] * bool(
        schema and "why" not in schema)
    return (f"{measured:,} of the trace's {measured + held:,} recorded RPC calls measured; "
            f"{training.get('source', f'{held:,} calls')} held out to {' and '.join(purposes) or 'train'}")


def schema_line(suite: Suite) -> Optional[str]:
    """Where the typed codecs' schema came from, when the run inferred it (None otherwise)."""
    schema = ((suite.trace.get("training") or {}).get("schema")) or {}
    if not schema:
        return None
    users = [r.codec for r in suite.results if r.codec.split("+")[0] in TYPED]
    why = schema.get("why", "no --proto given, and the bundled schemas lack the trace's methods")  # an older run
    return (f"schema inferred from {schema['inferred_from']}: {schema['messages']:,} messages; written to "
            f"{schema['file']} beside results.json; used by {', '.join(users) or 'the typed codecs'} ({why}). "
            "A call it cannot carry (its guess: comments say which) fails to encode, declared.")


def _dictionaries(suite: Suite) -> bool:
    """Whether a codec of the run used a trained dictionary."""
    return any(r.dictionary for r in suite.results)
