#!/usr/bin/env node
// Recomputes every published manage-link test vector with Node.js's own HMAC (node:crypto, no
// packages), and is the reference for verifying a manage link in a merchant's web app
// (docs/security.md, "Manage links"):
//
//   link_secret = NOTICE_LINK_SECRET, else the UTF-8 bytes of
//                 hex(HMAC-SHA256(key_secret, "notice-ledger/manage-link/v1"))
//   token       = hex(HMAC-SHA256(link_secret, "manage|" + subscription_id + "|" + period_start))[0..32]
//   url         = base + (base has "?" ? "&" : "?") + "s=" + pct(subscription_id)
//                 + "&p=" + period_start + "&t=" + token
//
// Usage: node scripts/link-vectors.mjs [vectors.json]   (default: shared/core/tests/vectors/manage_links.json)
// Exits 1 on any mismatch (or a malformed file), 0 when every vector matches.

import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const LINK_LABEL = "notice-ledger/manage-link/v1";
const TOKEN_HEX_LEN = 32;

const hmacHex = (key, message) => createHmac("sha256", key).update(message, "utf8").digest("hex");

/** The link secret when NOTICE_LINK_SECRET is unset: the hex text itself is the secret. */
export function deriveLinkSecret(keySecret) {
  return Buffer.from(hmacHex(Buffer.from(keySecret, "utf8"), LINK_LABEL), "utf8");
}

export function token(linkSecret, subscriptionId, periodStart) {
  return hmacHex(linkSecret, `manage|${subscriptionId}|${periodStart}`).slice(0, TOKEN_HEX_LEN);
}

/**
 * RFC 3986 unreserved characters kept, every other UTF-8 byte as %XX (upper case), as the sender
 * writes them. encodeURIComponent alone is not that: it leaves ! ' ( ) * unencoded.
 */
export function pct(value) {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function manageUrl(base, linkSecret, subscriptionId, periodStart) {
  const sep = base.includes("?") ? "&" : "?";
  return `${base}${sep}s=${pct(subscriptionId)}&p=${periodStart}&t=${token(linkSecret, subscriptionId, periodStart)}`;
}

function isRealDate(p) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(p)) return false;
  const d = new Date(`${p}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === p;
}

/**
 * { subscriptionId, periodStart } when the link's token verifies under one of `linkSecrets` (the
 * current secret, then the previous one during a rotation), else null. A malformed link (a
 * parameter missing or repeated, a bad date, a token that is not 32 lower-case hex) is null too.
 */
export function verify(url, linkSecrets) {
  let params;
  try {
    params = new URL(url).searchParams;
  } catch {
    return null;
  }
  const one = (name) => {
    const all = params.getAll(name);
    return all.length === 1 ? all[0] : null; // repeated: which one a framework keeps differs
  };
  const [s, p, t] = [one("s"), one("p"), one("t")];
  if (!s || !p || t === null || !/^[0-9a-f]{32}$/.test(t) || !isRealDate(p)) return null;
  const given = Buffer.from(t, "utf8");
  let ok = false;
  for (const secret of linkSecrets) {
    // timingSafeEqual: constant time (equal lengths: both are 32 hex); every secret is tried.
    ok = timingSafeEqual(Buffer.from(token(secret, s, p), "utf8"), given) || ok;
  }
  return ok ? { subscriptionId: s, periodStart: p } : null;
}

function check(v) {
  const problems = [];
  const derived = deriveLinkSecret(v.key_secret);
  if (derived.toString("utf8") !== v.derived_link_secret) {
    problems.push(`derived link secret: expected ${v.derived_link_secret}, computed ${derived.toString("utf8")}`);
  }
  const hasEnv = Object.hasOwn(v, "link_secret_env");
  const secret = hasEnv ? Buffer.from(v.link_secret_env, "utf8") : derived;
  const [s, p] = [v.subscription_id, v.period_start];
  const got = token(secret, s, p);
  if (got !== v.token) problems.push(`token: expected ${v.token}, computed ${got}`);
  const url = manageUrl(v.base_url, secret, s, p);
  if (url !== v.url) problems.push(`url:\n    expected ${v.url}\n    computed ${url}`);
  const verified = verify(v.url, [secret]);
  if (!verified || verified.subscriptionId !== s || verified.periodStart !== p) {
    problems.push("verify: the vector's own URL does not verify");
  }
  // The checks a verifier must also refuse: another secret, a changed token, another period.
  const other = hasEnv ? derived : deriveLinkSecret(`${v.key_secret}x`);
  if (verify(v.url, [other]) !== null) problems.push("verify: the URL verifies under another secret");
  if (verify(v.url, [other, secret]) === null) {
    problems.push("verify: the URL does not verify with its secret as the previous one");
  }
  const flipped = v.url.slice(0, -1) + (v.url.endsWith("0") ? "1" : "0");
  if (verify(flipped, [secret]) !== null) problems.push("verify: a changed token verifies");
  if (verify(v.url.replace(`&p=${p}&`, "&p=1999-01-01&"), [secret]) !== null) {
    problems.push("verify: another period verifies");
  }
  return problems;
}

const path = process.argv[2] ?? fileURLToPath(new URL("../shared/core/tests/vectors/manage_links.json", import.meta.url));
let vectors;
try {
  ({ vectors } = JSON.parse(readFileSync(path, "utf8")));
} catch (e) {
  console.error(`${path}: ${e.message}`);
  process.exit(1);
}
if (!Array.isArray(vectors) || vectors.length === 0) {
  console.error(`${path}: no "vectors" array`);
  process.exit(1);
}

let failures = 0;
vectors.forEach((v, i) => {
  let problems;
  try {
    problems = check(v);
  } catch (e) {
    problems = [`malformed vector: ${e.message}`];
  }
  if (problems.length > 0) {
    failures += 1;
    console.error(`vector ${i} MISMATCH (${JSON.stringify(v?.subscription_id)} ${v?.period_start}):`);
    for (const problem of problems) console.error(`  ${problem}`);
  }
});

if (failures > 0) {
  console.error(`link vectors: ${failures} of ${vectors.length} FAILED (${path})`);
  process.exit(1);
}
console.log(`link vectors: ${vectors.length}/${vectors.length} match (Node.js ${process.version}, node:crypto)`);
