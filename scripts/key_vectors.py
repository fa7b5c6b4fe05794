#!/usr/bin/env python3
"""Recomputes every published notice-key test vector with Python's standard library, so a worker
written in Python provably derives the same keys as the Rust sender:

    hex(HMAC-SHA256(secret, subscription_id + "|" + period_start + "|" + kind + "|" + revision))

Usage: python3 scripts/key_vectors.py [vectors.json]  (default: shared/core/tests/vectors/notice_keys.json)
Exits 1 on any mismatch (or a malformed file), 0 when every vector matches.
"""

import hashlib
import hmac
import json
import pathlib
import sys

MAX_REVISION = 2**53 - 1  # the contract's limit: exact in every JSON parser


def notice_key(secret: str, subscription_id: str, period_start: str, kind: str, revision: int) -> str:
    """The notice key, exactly as the contract defines it (UTF-8, revision in decimal)."""
    message = f"{subscription_id}|{period_start}|{kind}|{revision}"
    return hmac.new(secret.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def main() -> int:
    default = pathlib.Path(__file__).resolve().parent.parent / "shared/core/tests/vectors/notice_keys.json"
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    # Python's json reads integers exactly.
    vectors = json.loads(path.read_text(encoding="utf-8")).get("vectors") or []
    if not vectors:
        print(f"{path}: no \"vectors\" array", file=sys.stderr)
        return 1
    failures = 0
    for i, v in enumerate(vectors):
        revision = v.get("revision", 0)
        if not isinstance(revision, int) or isinstance(revision, bool) or not 0 <= revision <= MAX_REVISION:
            print(f"vector {i}: revision {revision!r} is not an integer in 0..={MAX_REVISION}", file=sys.stderr)
            failures += 1
            continue
        got = notice_key(v["secret"], v["subscription_id"], v["period_start"], v["kind"], revision)
        if got != v["key"]:
            print(
                f"vector {i} MISMATCH ({v['subscription_id']}|{v['period_start']}|{v['kind']}|{revision}):\n"
                f"  expected {v['key']}\n  computed {got}",
                file=sys.stderr,
            )
            failures += 1
    if failures:
        print(f"key vectors: {failures} of {len(vectors)} FAILED ({path})", file=sys.stderr)
        return 1
    print(f"key vectors: {len(vectors)}/{len(vectors)} match (Python {sys.version.split()[0]}, hmac)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
