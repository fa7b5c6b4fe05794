#!/usr/bin/env python3
"""Recomputes every published manage-link test vector with Python's standard library, and is the
reference for verifying a manage link in a merchant's web app (docs/security.md, "Manage links"):

    link_secret = NOTICE_LINK_SECRET, else the UTF-8 bytes of
                  hex(HMAC-SHA256(key_secret, "notice-ledger/manage-link/v1"))
    token       = hex(HMAC-SHA256(link_secret, "manage|" + subscription_id + "|" + period_start))[:32]
    url         = base + ("&" if "?" in base else "?") + "s=" + pct(subscription_id)
                  + "&p=" + period_start + "&t=" + token

Usage: python3 scripts/link_vectors.py [vectors.json]  (default: shared/core/tests/vectors/manage_links.json)
Exits 1 on any mismatch (or a malformed file), 0 when every vector matches.
"""

import datetime
import hashlib
import hmac
import json
import pathlib
import re
import sys
import urllib.parse

LINK_LABEL = "notice-ledger/manage-link/v1"
TOKEN_HEX_LEN = 32
TOKEN_RE = re.compile(r"[0-9a-f]{32}")
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _hmac_hex(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def derive_link_secret(key_secret: str) -> bytes:
    """The link secret when NOTICE_LINK_SECRET is unset: the hex text itself is the secret."""
    return _hmac_hex(key_secret.encode("utf-8"), LINK_LABEL).encode("ascii")


def token(link_secret: bytes, subscription_id: str, period_start: str) -> str:
    return _hmac_hex(link_secret, f"manage|{subscription_id}|{period_start}")[:TOKEN_HEX_LEN]


def manage_url(base: str, link_secret: bytes, subscription_id: str, period_start: str) -> str:
    # quote(safe="") keeps exactly the RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) and
    # writes every other UTF-8 byte as %XX in upper case, as the sender does.
    sep = "&" if "?" in base else "?"
    s = urllib.parse.quote(subscription_id, safe="")
    return f"{base}{sep}s={s}&p={period_start}&t={token(link_secret, subscription_id, period_start)}"


def verify(url: str, link_secrets: list) -> tuple:
    """(subscription_id, period_start) when the link's token verifies under one of `link_secrets`
    (the current secret, then the previous one during a rotation), else None. A malformed link
    (a parameter missing or repeated, a bad date, a token that is not 32 lower-case hex) is None
    too: the web app answers both the same way."""
    try:
        pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True,
                                       errors="strict")
    except (ValueError, UnicodeDecodeError):
        return None
    values = {}
    for name, value in pairs:
        if name in ("s", "p", "t"):
            if name in values:
                return None  # repeated: which one a framework keeps differs, so refuse both
            values[name] = value
    s, p, t = values.get("s"), values.get("p"), values.get("t")
    if not s or not p or t is None or not TOKEN_RE.fullmatch(t) or not DATE_RE.fullmatch(p):
        return None
    try:
        datetime.date.fromisoformat(p)
    except ValueError:
        return None
    ok = False
    for secret in link_secrets:
        # compare_digest: constant time, and every secret is tried, so the timing says nothing.
        ok |= hmac.compare_digest(token(secret, s, p), t)
    return (s, p) if ok else None


def check(i: int, v: dict) -> list:
    """The problems of vector `i` (empty when it matches)."""
    problems = []
    derived = derive_link_secret(v["key_secret"])
    if derived.decode("ascii") != v["derived_link_secret"]:
        problems.append(f"derived link secret: expected {v['derived_link_secret']}, computed {derived.decode()}")
    secret = v["link_secret_env"].encode("utf-8") if "link_secret_env" in v else derived
    s, p = v["subscription_id"], v["period_start"]
    got = token(secret, s, p)
    if got != v["token"]:
        problems.append(f"token: expected {v['token']}, computed {got}")
    url = manage_url(v["base_url"], secret, s, p)
    if url != v["url"]:
        problems.append(f"url:\n    expected {v['url']}\n    computed {url}")
    if verify(v["url"], [secret]) != (s, p):
        problems.append("verify: the vector's own URL does not verify")
    # The checks a verifier must also refuse: another secret, a changed token, another period.
    other = derived if "link_secret_env" in v else derive_link_secret(v["key_secret"] + "x")
    if verify(v["url"], [other]) is not None:
        problems.append("verify: the URL verifies under another secret")
    if verify(v["url"], [other, secret]) != (s, p):
        problems.append("verify: the URL does not verify with its secret as the previous one")
    flipped = v["url"][:-1] + ("0" if v["url"][-1] != "0" else "1")
    if verify(flipped, [secret]) is not None:
        problems.append("verify: a changed token verifies")
    if verify(v["url"].replace(f"&p={p}&", "&p=1999-01-01&"), [secret]) is not None:
        problems.append("verify: another period verifies")
    return problems


def main() -> int:
    default = pathlib.Path(__file__).resolve().parent.parent / "shared/core/tests/vectors/manage_links.json"
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    try:
        vectors = json.loads(path.read_text(encoding="utf-8")).get("vectors") or []
    except (OSError, ValueError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    if not vectors:
        print(f"{path}: no \"vectors\" array", file=sys.stderr)
        return 1
    failures = 0
    for i, v in enumerate(vectors):
        try:
            problems = check(i, v)
        except (KeyError, TypeError, AttributeError) as e:
            problems = [f"malformed vector: {e!r}"]
        if problems:
            failures += 1
            print(f"vector {i} MISMATCH ({v.get('subscription_id')!r} {v.get('period_start')}):", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
    if failures:
        print(f"link vectors: {failures} of {len(vectors)} FAILED ({path})", file=sys.stderr)
        return 1
    print(f"link vectors: {len(vectors)}/{len(vectors)} match (Python {sys.version.split()[0]}, hmac)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
