#!/usr/bin/env node
// Recomputes every published notice-key test vector with Node.js's own HMAC (node:crypto, no
// packages), so a worker written in JavaScript provably derives the same keys as the Rust sender:
//
//   hex(HMAC-SHA256(secret, subscription_id + "|" + period_start + "|" + kind + "|" + revision))
//
// Usage: node scripts/key-vectors.mjs [vectors.json]   (default: shared/core/tests/vectors/notice_keys.json)
// Exits 1 on any mismatch (or a malformed file), 0 when every vector matches.

import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Largest revision the contract accepts: 2^53 - 1, exact in every JSON parser.
const MAX_REVISION = 9007199254740991n;

const path = process.argv[2] ?? fileURLToPath(new URL("../shared/core/tests/vectors/notice_keys.json", import.meta.url));
const text = readFileSync(path, "utf8");

// JSON numbers are doubles in JavaScript: a revision beyond 2^53 - 1 would silently be rounded and
// produce a different key. Quote every revision before parsing so its digits arrive exactly as
// written, read it as a BigInt, and refuse anything beyond the contract's limit.
const quoted = text.replace(/("revision"\s*:\s*)(-?\d[\d.eE+-]*)/g, '$1"$2"');
const { vectors } = JSON.parse(quoted);
if (!Array.isArray(vectors) || vectors.length === 0) {
  console.error(`${path}: no "vectors" array`);
  process.exit(1);
}

/** The notice key, exactly as the contract defines it. */
export function noticeKey(secret, subscriptionId, periodStart, kind, revision) {
  const message = `${subscriptionId}|${periodStart}|${kind}|${revision.toString(10)}`;
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(message, "utf8").digest("hex");
}

let failures = 0;
vectors.forEach((v, i) => {
  const raw = v.revision ?? "0";
  if (!/^\d+$/.test(raw) || BigInt(raw) > MAX_REVISION) {
    console.error(`vector ${i}: revision ${raw} is not an integer in 0..=${MAX_REVISION}`);
    failures += 1;
    return;
  }
  const got = noticeKey(v.secret, v.subscription_id, v.period_start, v.kind, BigInt(raw));
  if (got !== v.key) {
    console.error(
      `vector ${i} MISMATCH (${v.subscription_id}|${v.period_start}|${v.kind}|${raw}):\n  expected ${v.key}\n  computed ${got}`,
    );
    failures += 1;
  }
});

if (failures > 0) {
  console.error(`key vectors: ${failures} of ${vectors.length} FAILED (${path})`);
  process.exit(1);
}
console.log(`key vectors: ${vectors.length}/${vectors.length} match (Node.js ${process.version}, node:crypto)`);
