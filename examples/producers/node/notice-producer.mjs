#!/usr/bin/env node
// A reference producer for notice-ledger: billing facts in, reminder jobs (and withdraws) out.
// The same rules, input and output as ../python/notice_producer.py; docs/job.md, "The producer
// contract", says why each rule exists.
//
// - `period_start` is the first day of the billing period the charge pays for, in the billing
//   system's own terms: the date the billing system states, or an instant it states plus the time
//   zone it defines its days in (`period_start_at` + `billing_time_zone`). Never the producer's
//   local clock, never the charge date because it happens to be at hand.
// - `revision` comes from the facts (the producer's record of the terms it announced), never from a
//   per-attempt counter. It defaults to 0.
// - Nothing about the delivery (webhook event id, attempt, timestamp, host) enters the message:
//   the body is built from the named fields only, so a retried webhook builds the same body.
//
// Every line is validated before anything is sent: one bad line and nothing goes out (exit 1, the
// line and the field named). The notice key is computed locally (the contract's HMAC-SHA256) when
// NOTICE_KEY_SECRET is set, so it can be logged beside the SQS message id.
//
// Usage:
//   node notice-producer.mjs send FACTS.jsonl [--queue-url URL] [--dry-run]
//   node notice-producer.mjs key --subscription-id S --period-start YYYY-MM-DD --kind K [--revision N]
//
// FACTS.jsonl may be `-` (standard input). The queue URL defaults to REMINDER_QUEUE_URL; AWS
// settings come from the standard variables (AWS_REGION, AWS_ENDPOINT_URL, ...). `--dry-run`
// prints the message bodies only (one per line, ready for `noticectl validate -`) and sends
// nothing. Exit codes: 0 all sent; 1 an invalid line (nothing sent); 2 usage, configuration or SQS
// unreachable (the message says how many were sent before it stopped).
//
// Node.js's standard library only, except @aws-sdk/client-sqs for sending (pinned in
// package.json / package-lock.json: `npm ci` in this directory).

import { createHmac } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname } from "node:path";

// The contract's limits (docs/job.md, "The reminder job").
export const MAX_SUBSCRIPTION_ID_BYTES = 256;
export const MAX_REVISION = Number.MAX_SAFE_INTEGER; // 2^53 - 1: exact in every JSON parser
export const MAX_REASON_CHARS = 500;
export const MIN_SECRET_BYTES = 16; // what the sender accepts from configuration

const KIND_RE = /^[a-z0-9_]{1,64}$/;
const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339_RE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
// Unicode category Cc, as Rust's char::is_control.
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const JURISDICTION_RE = /^[A-Za-z]{2}(?:-[A-Za-z0-9]{1,3})?$/;
const IANA_ZONE_RE = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;
const CURRENCY_RE = /^[A-Z]{3}$/;

/** A fact that cannot become a message; names the field, as the sender's errors do. */
export class InvalidFacts extends Error {
  constructor(field, reason) {
    super(`field \`${field}\` ${reason}`);
    this.field = field;
    this.reason = reason;
  }
}

/** Usage, configuration or a dependency: exit 2. */
export class ConfigError extends Error {}

// ------------------------------------------------------------------------------------ the key

/** The notice key exactly as the contract defines it (UTF-8, revision in decimal). */
export function noticeKey(secret, subscriptionId, periodStart, kind, revision) {
  const material = `${subscriptionId}|${periodStart}|${kind}|${revision.toString(10)}`;
  return createHmac("sha256", secret).update(material, "utf8").digest("hex");
}

/**
 * NOTICE_KEY_SECRET as the sender reads it (a Buffer), or null when unset. Refused as the sender
 * refuses it: empty, blank, or shorter than 16 bytes (keys made with it would match nothing).
 */
export function secretFromEnv(env = process.env) {
  const value = env.NOTICE_KEY_SECRET;
  if (value === undefined) return null;
  const raw = Buffer.from(value, "utf8");
  if (value.trim() === "") throw new ConfigError("NOTICE_KEY_SECRET is empty or blank");
  if (raw.length < MIN_SECRET_BYTES) {
    throw new ConfigError(`NOTICE_KEY_SECRET is ${raw.length} bytes; at least ${MIN_SECRET_BYTES} are required`);
  }
  return raw;
}

// ------------------------------------------------------------------------------ validation

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isInt = (v) => typeof v === "number" && Number.isInteger(v);

function identityText(field, value, maxBytes) {
  if (typeof value !== "string") throw new InvalidFacts(field, "is required and must be a string");
  if (value === "") throw new InvalidFacts(field, "must not be empty");
  if (!value.isWellFormed()) throw new InvalidFacts(field, "is not valid Unicode (a lone surrogate)");
  if (Buffer.byteLength(value, "utf8") > maxBytes) throw new InvalidFacts(field, `must be at most ${maxBytes} bytes`);
  if (value.includes("|")) throw new InvalidFacts(field, "must not contain '|'");
  if (CONTROL_RE.test(value)) throw new InvalidFacts(field, "must not contain control characters");
  return value;
}

function daysInMonth(year, month) {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

function realDate(field, year, month, day) {
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) {
    throw new InvalidFacts(field, "is not a real calendar date");
  }
}

/** `YYYY-MM-DD` and nothing else: no time, no offset, a real calendar day. */
export function checkPeriodStart(value) {
  if (typeof value !== "string") throw new InvalidFacts("period_start", "must be a date string in YYYY-MM-DD form");
  const m = DATE_RE.exec(value);
  if (!m) {
    const hint = value.includes("T") ? " (a timestamp: take the date the billing system states for the period)" : "";
    throw new InvalidFacts("period_start", `must be a date in YYYY-MM-DD form, got ${JSON.stringify(value)}${hint}`);
  }
  realDate("period_start", Number(m[1]), Number(m[2]), Number(m[3]));
  return value;
}

/**
 * An RFC 3339 timestamp with an explicit offset (`Z` or `±hh:mm`) → a Date. A time without one is
 * a time on somebody's local clock.
 */
export function parseRfc3339(field, value) {
  if (typeof value !== "string") throw new InvalidFacts(field, "must be an RFC 3339 timestamp string");
  const m = RFC3339_RE.exec(value);
  if (!m) {
    throw new InvalidFacts(field, `must be an RFC 3339 timestamp with an offset (Z or +hh:mm), got ${JSON.stringify(value)}`);
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const [fraction, zulu, sign, offH, offM] = m.slice(7);
  realDate(field, year, month, day);
  if (hour > 23 || minute > 59 || second > 59) throw new InvalidFacts(field, "is not a real time of day");
  let offsetMinutes = 0;
  if (!zulu) {
    if (Number(offH) > 23 || Number(offM) > 59) throw new InvalidFacts(field, "has an impossible UTC offset");
    offsetMinutes = (Number(offH) * 60 + Number(offM)) * (sign === "+" ? 1 : -1);
  }
  const millis = fraction ? Number((fraction.slice(1) + "000").slice(0, 3)) : 0;
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, millis);
  return new Date(at.getTime() - offsetMinutes * 60_000);
}

/**
 * The calendar day an instant falls on in the zone the billing system defines its days in — the
 * producer's own zone plays no part.
 */
export function periodStartInZone(instant, billingTimeZone) {
  const at = parseRfc3339("period_start_at", instant);
  if (typeof billingTimeZone !== "string" || !IANA_ZONE_RE.test(billingTimeZone)) {
    throw new InvalidFacts("billing_time_zone", "must be an IANA time-zone name such as Europe/Berlin or UTC");
  }
  let parts;
  try {
    parts = new Intl.DateTimeFormat("en-US", {
      timeZone: billingTimeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      era: "short",
    }).formatToParts(at);
  } catch {
    throw new InvalidFacts("billing_time_zone", `is not a known IANA time zone: ${JSON.stringify(billingTimeZone)}`);
  }
  const get = (type) => parts.find((p) => p.type === type)?.value;
  if (get("era") !== "AD") throw new InvalidFacts("period_start_at", "is before year 1");
  return `${get("year").padStart(4, "0")}-${get("month")}-${get("day")}`;
}

function revisionOf(value) {
  if (value === undefined || value === null) return 0;
  if (!isInt(value)) {
    throw new InvalidFacts("revision", "must be an integer >= 0 (from the announced terms, never an attempt counter)");
  }
  // JSON numbers are doubles here: anything past 2^53 - 1 was already rounded, so refuse it.
  if (value < 0 || !Number.isSafeInteger(value)) throw new InvalidFacts("revision", `must be an integer in 0..=${MAX_REVISION}`);
  return value;
}

function periodStartOf(facts) {
  const given = facts.period_start ?? null;
  const at = facts.period_start_at ?? null;
  if (given !== null && at !== null) throw new InvalidFacts("period_start", "is given twice (with `period_start_at`): give one");
  if (at !== null) {
    const zone = facts.billing_time_zone ?? null;
    if (zone === null) {
      throw new InvalidFacts(
        "billing_time_zone",
        "is required with `period_start_at`: the billing system's zone, never the producer's local one",
      );
    }
    return periodStartInZone(at, zone);
  }
  if (given === null) throw new InvalidFacts("period_start", "is required (or `period_start_at` with `billing_time_zone`)");
  return checkPeriodStart(given);
}

function emailOf(value) {
  if (typeof value !== "string" || value === "") throw new InvalidFacts("email", "is required and must be a string");
  const at = value.lastIndexOf("@");
  const local = value.slice(0, Math.max(at, 0));
  const domain = value.slice(at + 1);
  if (at < 0 || local === "" || domain === "" || local.includes("@") || /\s/.test(value)) {
    throw new InvalidFacts("email", "must be one plain address (local@domain)");
  }
  if (CONTROL_RE.test(value) || value.includes(",") || value.includes("<")) {
    throw new InvalidFacts("email", "must be one plain address (local@domain)");
  }
  return value;
}

function optionalString(facts, field, pattern, what) {
  const value = facts[field];
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || (pattern && !pattern.test(value))) throw new InvalidFacts(field, `must be ${what}`);
  return value;
}

function templateDataOf(facts) {
  const extra = facts.template_data;
  let data;
  if (extra === undefined || extra === null) data = {};
  else if (isObject(extra)) data = { ...extra };
  else throw new InvalidFacts("template_data", "must be a JSON object");
  const plan = facts.plan_name;
  if (plan !== undefined && plan !== null) {
    if (typeof plan !== "string" || plan === "") throw new InvalidFacts("plan_name", "must be a non-empty string");
    data.plan_name = plan;
  }
  const amount = facts.amount;
  if (amount !== undefined && amount !== null) {
    const keys = isObject(amount) ? Object.keys(amount).sort().join(",") : "";
    if (keys !== "currency,minor") throw new InvalidFacts("amount", 'must be {"minor": <integer>, "currency": "<ISO 4217>"}');
    if (!isInt(amount.minor) || amount.minor < 0 || !Number.isSafeInteger(amount.minor)) {
      throw new InvalidFacts("amount", "`minor` must be an integer >= 0 in the currency's minor units");
    }
    if (typeof amount.currency !== "string" || !CURRENCY_RE.test(amount.currency)) {
      throw new InvalidFacts("amount", "`currency` must be an upper-case ISO 4217 code");
    }
    data.amount = { minor: amount.minor, currency: amount.currency };
  }
  return data;
}

// -------------------------------------------------------------------------------- building

/**
 * Billing facts → { body, identity }: a job, or a withdraw when `facts.action === "withdraw"`.
 * Only the named fields are read: anything else the facts carry (webhook ids, attempts,
 * timestamps) is ignored and never reaches the message.
 */
export function buildMessage(facts) {
  if (!isObject(facts)) throw new InvalidFacts("body", "must be a JSON object");
  const action = facts.action ?? "send";
  if (action !== "send" && action !== "withdraw") throw new InvalidFacts("action", "must be `send` or `withdraw`");
  const subscriptionId = identityText("subscription_id", facts.subscription_id, MAX_SUBSCRIPTION_ID_BYTES);
  const periodStart = periodStartOf(facts);
  if (typeof facts.kind !== "string" || !KIND_RE.test(facts.kind)) {
    throw new InvalidFacts("kind", "is required: 1 to 64 characters of [a-z0-9_]");
  }
  const kind = facts.kind;
  const revision = revisionOf(facts.revision);
  const identity = { subscription_id: subscriptionId, period_start: periodStart, kind, revision };

  if (action === "withdraw") {
    const body = { action: "withdraw", ...identity };
    const reason = facts.reason;
    if (reason !== undefined && reason !== null) {
      if (typeof reason !== "string" || [...reason].length > MAX_REASON_CHARS || CONTROL_RE.test(reason)) {
        throw new InvalidFacts("reason", `must be one line of at most ${MAX_REASON_CHARS} characters`);
      }
      body.reason = reason;
    }
    return { action, body, identity };
  }

  const body = { ...identity };
  body.email = emailOf(facts.email);
  if (facts.charge_at === undefined || facts.charge_at === null) {
    throw new InvalidFacts("charge_at", "is required (RFC 3339, when the card is charged)");
  }
  parseRfc3339("charge_at", facts.charge_at);
  body.charge_at = facts.charge_at;
  const jurisdiction = optionalString(facts, "jurisdiction", JURISDICTION_RE, "an ISO 3166 code such as DE or US-CA");
  if (jurisdiction !== null) body.jurisdiction = jurisdiction.toUpperCase();
  const locale = optionalString(facts, "locale", null, "a BCP 47 language tag such as en-US");
  if (locale !== null) body.locale = locale;
  const timeZone = optionalString(facts, "time_zone", IANA_ZONE_RE, "an IANA time-zone name such as Europe/Berlin");
  if (timeZone !== null) body.time_zone = timeZone;
  body.template_data = templateDataOf(facts);
  return { action, body, identity };
}

/** The key of a built message. */
export function keyOf(message, secret) {
  const { subscription_id, period_start, kind, revision } = message.identity;
  return noticeKey(secret, subscription_id, period_start, kind, revision);
}

/** Every non-blank line built, or every error with its line number. */
export function readFacts(text) {
  const messages = [];
  const errors = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const number = i + 1;
    if (line.trim() === "") return;
    let facts;
    try {
      facts = JSON.parse(line);
    } catch (e) {
      errors.push(`line ${number}: invalid: field \`body\` is not valid JSON: ${e.message}`);
      return;
    }
    try {
      // JSON.parse reads `1.0` and `1e0` as the integer 1; the sender (and Python) refuse them.
      for (const [name, field] of [["revision", "revision"], ["minor", "amount"]]) {
        const literal = new RegExp(`"${name}"\\s*:\\s*(-?[\\d.eE+-]+)`).exec(line)?.[1];
        if (literal !== undefined && !/^-?\d+$/.test(literal)) {
          throw new InvalidFacts(field, `must be an integer, not ${literal}`);
        }
      }
      messages.push({ line: number, ...buildMessage(facts) });
    } catch (e) {
      if (!(e instanceof InvalidFacts)) throw e;
      errors.push(`line ${number}: invalid: ${e.message}`);
    }
  });
  return { messages, errors };
}

// --------------------------------------------------------------------------------- sending

async function sqsModule() {
  try {
    return await import("@aws-sdk/client-sqs");
  } catch {
    const here = dirname(fileURLToPath(import.meta.url));
    throw new ConfigError(`@aws-sdk/client-sqs is not installed: run \`npm ci\` in ${here}`);
  }
}

/**
 * One SendMessage per message, in input order. A standard queue: no MessageGroupId, no
 * deduplication id, no attributes (the ledger deduplicates on the body's identity). The SDK's own
 * retries may enqueue a copy twice: harmless, both copies carry one key.
 */
export async function send(messages, queueUrl, secret, write = (s) => process.stdout.write(s)) {
  const { SQSClient, SendMessageCommand } = await sqsModule();
  const client = new SQSClient({}); // region, endpoint and credentials from the standard AWS variables
  let sent = 0;
  try {
    for (const message of messages) {
      let reply;
      try {
        reply = await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(message.body) }));
      } catch (e) {
        throw new ConfigError(
          `line ${message.line}: SQS refused or could not be reached (${e.name}: ${e.message}); ` +
            `${sent} of ${messages.length} sent before it stopped — sending the same file again is safe`,
        );
      }
      sent += 1;
      const record = {
        line: message.line,
        action: message.action,
        notice_key: secret ? keyOf(message, secret) : null,
        message_id: reply.MessageId ?? null,
        body: message.body,
      };
      write(JSON.stringify(record) + "\n");
    }
  } finally {
    client.destroy();
  }
  return sent;
}

// ------------------------------------------------------------------------------------- CLI

function parseArgs(argv) {
  const [command, ...rest] = argv;
  const flags = {};
  const positional = [];
  for (let i = 0; i < rest.length; i += 1) {
    const arg = rest[i];
    if (arg === "--dry-run") flags.dryRun = true;
    else if (arg.startsWith("--") && arg.length > 2) {
      const [name, inline] = arg.slice(2).split(/=(.*)/s, 2);
      const value = inline ?? rest[(i += 1)];
      if (value === undefined) throw new ConfigError(`${arg} needs a value`);
      flags[name] = value;
    } else positional.push(arg);
  }
  return { command, flags, positional };
}

const USAGE =
  "usage: notice-producer.mjs send FACTS.jsonl [--queue-url URL] [--dry-run]\n" +
  "       notice-producer.mjs key --subscription-id S --period-start YYYY-MM-DD --kind K [--revision N]";

export async function main(argv = process.argv.slice(2)) {
  try {
    const { command, flags, positional } = parseArgs(argv);
    const secret = secretFromEnv();
    if (command === "key") {
      if (!secret) throw new ConfigError("NOTICE_KEY_SECRET is not set");
      for (const f of ["subscription-id", "period-start", "kind"]) {
        if (flags[f] === undefined) throw new ConfigError(`--${f} is required\n${USAGE}`);
      }
      const raw = flags.revision;
      // Digits become a number (refused past 2^53 - 1); anything else is refused as it is.
      const revision = raw === undefined ? 0 : /^\d+$/.test(raw) ? Number(raw) : raw;
      const message = buildMessage({
        action: "withdraw",
        subscription_id: flags["subscription-id"],
        period_start: flags["period-start"],
        kind: flags.kind,
        revision,
      });
      process.stdout.write(keyOf(message, secret) + "\n");
      return 0;
    }
    if (command !== "send" || positional.length !== 1) throw new ConfigError(USAGE);

    const source = positional[0];
    let text;
    try {
      text = readFileSync(source === "-" ? 0 : source, "utf8");
    } catch (e) {
      throw new ConfigError(`cannot read ${source}: ${e.message}`);
    }
    const { messages, errors } = readFacts(text);
    if (errors.length > 0) {
      for (const line of errors) console.error(`notice-producer: ${line}`);
      console.error(`notice-producer: ${errors.length} invalid line(s): nothing sent`);
      return 1;
    }
    if (flags.dryRun) {
      for (const message of messages) {
        process.stdout.write(JSON.stringify(message.body) + "\n");
        if (secret) console.error(`line ${message.line}: ${message.action} notice_key=${keyOf(message, secret)}`);
      }
      return 0;
    }
    const queueUrl = flags["queue-url"] ?? process.env.REMINDER_QUEUE_URL;
    if (!queueUrl) throw new ConfigError("no queue: pass --queue-url or set REMINDER_QUEUE_URL");
    const sent = await send(messages, queueUrl, secret);
    const withdraws = messages.filter((m) => m.action === "withdraw").length;
    console.error(`notice-producer: sent ${sent} message(s) (${sent - withdraws} jobs, ${withdraws} withdraws)`);
    return 0;
  } catch (e) {
    if (e instanceof InvalidFacts) {
      console.error(`notice-producer: invalid: ${e.message}`);
      return 1;
    }
    if (e instanceof ConfigError) {
      console.error(`notice-producer: ${e.message}`);
      return 2;
    }
    throw e;
  }
}

const invokedDirectly = (() => {
  try {
    return Boolean(process.argv[1]) && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();
if (invokedDirectly) {
  process.exitCode = await main();
}
