// What verify_queries.mjs and verify_answers.mjs share: reading the JSON lines a C++ test wrote,
// running and counting each line's checks, and changing one byte of a signature for their
// negative cases.

import { readFileSync } from "node:fs";

// Every JSON line of the file named by the script's first argument; exits 1 without one.
export function ReadLines(usage) {
  const file = process.argv[2];
  if (!file) {
    console.error(`usage: ${usage}`);
    process.exit(1);
  }
  return readFileSync(file, "utf8").split("\n").filter((line) => line !== "")
    .map((line) => JSON.parse(line));
}

// Checks counted and failures printed one a line, "FAIL <what>: <detail>", so that the C++
// test can show them and name the ones it expects.
export class Checks {
  constructor() {
    this.checks = 0;
    this.failures = 0;
  }

  check(what, condition, detail = "") {
    this.checks += 1;
    if (condition) return;
    this.failures += 1;
    console.error(`FAIL ${what}${detail ? ": " + detail : ""}`);
  }

  // A check that `run` neither throws nor returns false.
  attempt(what, run) {
    let result;
    try {
      result = run();
    } catch (error) {
      this.check(what, false, error.message);
      return;
    }
    this.check(what, result !== false);
  }

  // Runs each line's checks by its `channel` (`kinds`: {channel: {run, checks}}, `checks` how many
  // a line of it makes), then finish(): an empty file, a line of a channel not in `kinds`, and a
  // run that throws each fail.
  runLines(lines, kinds, noun) {
    this.check(`the file holds ${noun}`, lines.length > 0);
    let expected = 1;
    for (const line of lines) {
      const kind = kinds[line.channel];
      if (!kind) {
        this.check(`${line.name}: a channel this script knows`, false, line.channel);
        continue;
      }
      expected += kind.checks;
      try {
        kind.run(line);
      } catch (error) {
        this.check(`${line.name}: the SDKs ran`, false, error.stack ?? String(error));
      }
    }
    this.finish(expected);
  }

  // Prints the tally and exits: 0 when every check held and at least `expected` ran (fewer means
  // a case was skipped), 1 otherwise.
  finish(expected) {
    this.check("every check ran", this.checks >= expected, `${this.checks} of ${expected}`);
    console.log(`${this.checks - this.failures} of ${this.checks} checks passed`);
    process.exit(this.failures === 0 ? 0 : 1);
  }
}

// A base64 signature with its first byte changed (the lowest bit flipped), still base64 of the
// same length: what a verifier must refuse.
export function ChangeOneByteOfBase64(signature) {
  const bytes = Buffer.from(signature, "base64");
  bytes[0] ^= 0x01;
  return bytes.toString("base64");
}

// A hexadecimal sign (WeChat Pay APIv2) with its first character changed to another hex digit.
export function ChangeOneHexDigit(sign) {
  const first = sign[0] === "0" ? "1" : "0";
  return first + sign.slice(1);
}
