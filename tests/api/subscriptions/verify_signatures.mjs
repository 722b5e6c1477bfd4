// Verifies webhook requests signed by payledger with the Standard Webhooks reference library
// (npm `standardwebhooks`, pinned in package.json beside this file; scripts/test installs it
// with `npm ci --prefix tests/api/subscriptions`).
//
//   webhook_sign_requests | node verify_signatures.mjs [file]
//
// Reads JSON lines from the file, or from standard input: {"what", "id", "timestamp",
// "body", "signature", "secrets": [...], "valid"}. A line with "valid": true must verify with
// every one of its secrets (a rotation signs with each); one with "valid": false with none.
// Exits 1 on any failure, on a line that is not such JSON, and when the input lacks valid or
// invalid lines (an empty input proves nothing). Exits 77 (ctest: skipped) when the library
// is not installed, except under CI, where that is a failure too.

import { readFileSync } from "node:fs";

let Webhook;
try {
  ({ Webhook } = (await import("standardwebhooks")).default);
} catch (error) {
  console.error("standardwebhooks is not installed (npm ci --prefix tests/api/subscriptions): " +
                error.message);
  process.exit(process.env.CI ? 1 : 77);
}

const input = readFileSync(process.argv[2] ?? 0, "utf8");
const lines = input.split("\n").filter((line) => line.trim() !== "");
let passed = 0;
let failed = 0;
let validLines = 0;
let invalidLines = 0;

function verifies(secret, request) {
  try {
    new Webhook(secret).verify(request.body, {
      "webhook-id": request.id,
      "webhook-timestamp": String(request.timestamp),
      "webhook-signature": request.signature,
    }, { jsonParse: false });
    return true;
  } catch (error) {
    return false;
  }
}

for (const [index, line] of lines.entries()) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (error) {
    console.error(`line ${index + 1}: not JSON: ${error.message}`);
    failed += 1;
    continue;
  }
  if (typeof request.valid !== "boolean" || !Array.isArray(request.secrets) ||
      request.secrets.length === 0 || typeof request.body !== "string") {
    console.error(`line ${index + 1}: not a signed request`);
    failed += 1;
    continue;
  }
  if (request.valid) validLines += 1; else invalidLines += 1;
  for (const secret of request.secrets) {
    const ok = verifies(secret, request);
    if (ok === request.valid) {
      passed += 1;
    } else {
      failed += 1;
      const which = `secret ${request.secrets.indexOf(secret) + 1} of ${request.secrets.length}`;
      const how = request.valid ? "does not verify" : "verifies";
      console.error(`FAILED: ${request.what}: ${how} with ${which}`);
    }
  }
}
if (validLines === 0 || invalidLines === 0) {
  console.error(`the input has ${validLines} valid and ${invalidLines} invalid requests: ` +
                "both are needed");
  failed += 1;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
