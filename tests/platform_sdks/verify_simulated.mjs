// Every notice `payledger simulate` builds, checked by the platforms' own SDKs (sdks.mjs): the
// other direction of sdk_notices_pgtest.cpp. Runs the payledger binary given, as a user does,
// against a small HTTP server of this script that captures the request and answers success,
// with a config of freshly generated keys (no database: simulate never opens one).
//
//   node verify_simulated.mjs PAYLEDGER_BINARY
//
// WeChat Pay v2 payments (config sign_type MD5, then HMAC-SHA256): the SDK's response verifier
// (Transformer#verifier, which picks the algorithm by the sign's length) and Hash.sign agree
// with `sign`; the refund's req_info decrypts with Aes.AesEcb under Hash.md5(api_key). v3: the
// Wechatpay-Signature verifies with Rsa over Formatter.response(timestamp, nonce, body) and the
// resource decrypts with Aes.AesGcm. Alipay payment, refund and close: AlipaySdk's
// checkNotifySign and checkNotifySignV2 accept the form as a Node server decodes it. Every
// decrypted or parsed notice must name the simulated order, amounts and merchant, and every
// check is also made on a copy changed after signing, which the SDK must refuse.
// Exits 0 when every check held, 1 otherwise, 77 (ctest: skipped) when the SDKs are missing
// outside CI.

import { execFile } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { AlipayVerifier, Aes, Formatter, Hash, Rsa, Transformer } from "./sdks.mjs";

const binary = process.argv[2];
if (!binary) {
  console.error("usage: node verify_simulated.mjs PAYLEDGER_BINARY");
  process.exit(1);
}

const V2 = { appid: "wx0000000000000001", mch_id: "1900000001",
             api_key: "192006250b4c09247ec02edce69f6a2d" };
const V3 = { appid: "wx0000000000000002", mchid: "1900000002",
             api_v3_key: "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb",
             serial: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1" };
const ALIPAY_APP_ID = "2021000000000001";
const PAYMENT_FEN = 8880;
const REFUND_FEN = 1000;

let failures = 0;
let checks = 0;
function check(what, condition, detail = "") {
  checks += 1;
  if (condition) return;
  failures += 1;
  console.error(`FAIL ${what}${detail ? ": " + detail : ""}`);
}

const Yuan = (fen) => `${Math.floor(fen / 100)}.${String(fen % 100).padStart(2, "0")}`;

function RsaKeys() {
  return generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
}

const dir = mkdtempSync(path.join(process.env.PAYLEDGER_TEST_TMPDIR || tmpdir(), "simulate-sdks-"));
const wechatKeys = RsaKeys();
const alipayKeys = RsaKeys();

function Write(name, text, mode) {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  chmodSync(file, mode);  // payledger refuses secrets others may read, and keys they may write.
  return file;
}

function Config(signType) {
  return Write(`config-${signType}.json`, JSON.stringify({
    listen: "127.0.0.1:1",
    database_url: "postgresql://nobody@127.0.0.1:1/never_opened",
    wechat_v2: { ...V2, sign_type: signType },
    wechat_v3: {
      appid: V3.appid, mchid: V3.mchid, api_v3_key: V3.api_v3_key,
      platform_public_keys: { [V3.serial]: Write("wechatpay.pem", wechatKeys.publicKey, 0o644) },
      simulate_private_key: Write("wechatpay-private.pem", wechatKeys.privateKey, 0o600),
      simulate_serial: V3.serial,
    },
    alipay: {
      app_id: ALIPAY_APP_ID,
      alipay_public_key: Write("alipay.pem", alipayKeys.publicKey, 0o644),
      simulate_private_key: Write("alipay-private.pem", alipayKeys.privateKey, 0o600),
    },
  }), 0o600);
}

// The server `payledger simulate` posts to: it keeps each request and answers as the platforms'
// success answers go (simulate only needs a 2xx).
const captured = [];
const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    captured.push({ url: request.url, headers: request.headers, body: Buffer.concat(chunks) });
    response.writeHead(200, { "Content-Type": "text/plain" });
    response.end("success");
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}`;

// Runs `payledger simulate` and returns the one request it posted.
async function Simulate(config, channel, kind, outTradeNo, amount) {
  captured.length = 0;
  const args = ["simulate", channel, "--config", config, "--out-trade-no", outTradeNo,
                "--kind", kind, "--amount", String(amount), "--url", url];
  if (kind === "refund") args.push("--order-amount", String(PAYMENT_FEN));
  await promisify(execFile)(binary, args);
  if (captured.length !== 1) throw new Error(`simulate posted ${captured.length} requests`);
  return captured[0];
}

// ---- WeChat Pay APIv2 ----

function CheckV2Payment(request, signType, outTradeNo) {
  const what = `wechat_v2 payment (${signType})`;
  check(`${what}: path`, request.url === "/v1/callbacks/wechat/v2", request.url);
  const data = Transformer.toObject(request.body.toString("utf8"));
  // The SDK's own check of a signed APIv2 payload: the algorithm by the sign's length.
  const verifier = new Transformer(V2.mch_id, V2.api_key).verifier;
  const verified = verifier.call({ url: "/pay/orderquery" }, data, {}, 200);
  check(`${what}: Transformer verifier`, verified === data, verified?.message);
  check(`${what}: Hash.sign`, Hash.equals(Hash.sign(signType, data, V2.api_key), data.sign),
        data.sign);
  check(`${what}: sign_type`, (data.sign_type ?? "MD5") === signType, data.sign_type);
  check(`${what}: fields`, data.appid === V2.appid && data.mch_id === V2.mch_id &&
        data.out_trade_no === outTradeNo && data.total_fee === String(PAYMENT_FEN) &&
        data.return_code === "SUCCESS" && data.result_code === "SUCCESS", JSON.stringify(data));
  const tampered = { ...data, total_fee: String(PAYMENT_FEN + 1) };
  check(`${what}: a changed amount is refused`,
        verifier.call({ url: "/pay/orderquery" }, tampered, {}, 200) instanceof Error);
}

function CheckV2Refund(request, outTradeNo) {
  const what = "wechat_v2 refund";
  const data = Transformer.toObject(request.body.toString("utf8"));
  check(`${what}: outer fields`, data.appid === V2.appid && data.mch_id === V2.mch_id &&
        data.return_code === "SUCCESS" && typeof data.req_info === "string", JSON.stringify(data));
  const plaintext = Aes.AesEcb.decrypt(data.req_info, Hash.md5(V2.api_key));
  check(`${what}: req_info is a <root> document`, plaintext.startsWith("<root>") &&
        plaintext.endsWith("</root>"), JSON.stringify(plaintext.slice(0, 120)));
  const refund = Transformer.toObject(plaintext) ?? {};
  check(`${what}: fields`, refund.out_trade_no === outTradeNo &&
        refund.refund_fee === String(REFUND_FEN) && refund.total_fee === String(PAYMENT_FEN) &&
        refund.refund_status === "SUCCESS" && Boolean(refund.refund_id) &&
        Boolean(refund.transaction_id) && Boolean(refund.success_time), JSON.stringify(refund));
  const other = Aes.AesEcb.decrypt(data.req_info, Hash.md5("another-api-key-of-32-characters"));
  check(`${what}: another key does not open it`, !other.startsWith("<root>"));
}

// ---- WeChat Pay APIv3 ----

function CheckV3(request, refund, outTradeNo) {
  const what = `wechat_v3 ${refund ? "refund" : "payment"}`;
  check(`${what}: path`, request.url === "/v1/callbacks/wechat/v3", request.url);
  const header = (name) => request.headers[name.toLowerCase()];
  const body = request.body.toString("utf8");
  const message = Formatter.response(header("Wechatpay-Timestamp"), header("Wechatpay-Nonce"),
                                     body);
  check(`${what}: Wechatpay-Signature`,
        Rsa.verify(message, header("Wechatpay-Signature"), wechatKeys.publicKey));
  check(`${what}: serial and type`, header("Wechatpay-Serial") === V3.serial &&
        header("Wechatpay-Signature-Type") === "WECHATPAY2-SHA256-RSA2048");
  const changed = Formatter.response(header("Wechatpay-Timestamp"), header("Wechatpay-Nonce"),
                                     body.replace(/}$/, ' }'));
  check(`${what}: a changed body is refused`,
        !Rsa.verify(changed, header("Wechatpay-Signature"), wechatKeys.publicKey));
  const envelope = JSON.parse(body);
  const { resource } = envelope;
  check(`${what}: envelope`, envelope.event_type === (refund ? "REFUND.SUCCESS" : "TRANSACTION.SUCCESS") &&
        envelope.resource_type === "encrypt-resource" && resource.algorithm === "AEAD_AES_256_GCM",
        body);
  let decrypted = {};
  try {
    decrypted = JSON.parse(Aes.AesGcm.decrypt(resource.ciphertext, V3.api_v3_key, resource.nonce,
                                              resource.associated_data));
  } catch (error) {
    check(`${what}: the resource decrypts`, false, error.message);
  }
  const amount = decrypted.amount ?? {};
  check(`${what}: resource`, decrypted.mchid === V3.mchid && decrypted.out_trade_no === outTradeNo &&
        (refund
          ? decrypted.refund_status === "SUCCESS" && amount.refund === REFUND_FEN &&
            amount.total === PAYMENT_FEN && Boolean(decrypted.refund_id)
          : decrypted.appid === V3.appid && decrypted.trade_state === "SUCCESS" &&
            amount.total === PAYMENT_FEN && amount.currency === "CNY" &&
            Boolean(decrypted.transaction_id)),
        JSON.stringify(decrypted));
  let opened = true;
  try {
    Aes.AesGcm.decrypt(resource.ciphertext, V3.api_v3_key, resource.nonce, "another");
  } catch {
    opened = false;
  }
  check(`${what}: other associated data does not open it`, !opened);
}

// ---- Alipay ----

function CheckAlipay(request, kind, outTradeNo) {
  const what = `alipay ${kind}`;
  check(`${what}: path`, request.url === "/v1/callbacks/alipay", request.url);
  // As a Node server hands a form to the SDK: decoded once, one value per name.
  const params = new URLSearchParams(request.body.toString("utf8"));
  const form = Object.fromEntries(params);
  check(`${what}: no field twice`, [...params.keys()].length === Object.keys(form).length);
  const sdk = AlipayVerifier(ALIPAY_APP_ID, alipayKeys.publicKey, alipayKeys.privateKey);
  check(`${what}: checkNotifySign`, sdk.checkNotifySign({ ...form }));
  check(`${what}: checkNotifySignV2`, sdk.checkNotifySignV2({ ...form }));
  check(`${what}: sign_type and charset`, form.sign_type === "RSA2" && form.charset === "utf-8");
  const expected = {
    payment: form.trade_status === "TRADE_SUCCESS" && form.total_amount === Yuan(PAYMENT_FEN) &&
      !form.refund_fee,
    refund: form.trade_status === "TRADE_SUCCESS" && form.refund_fee === Yuan(REFUND_FEN) &&
      form.total_amount === Yuan(PAYMENT_FEN) && Boolean(form.out_biz_no),
    close: form.trade_status === "TRADE_CLOSED" && Boolean(form.gmt_close),
  }[kind];
  check(`${what}: fields`, expected && form.app_id === ALIPAY_APP_ID &&
        form.out_trade_no === outTradeNo, JSON.stringify(form));
  const tampered = { ...form, total_amount: Yuan(PAYMENT_FEN + 1) };
  check(`${what}: a changed amount is refused`,
        !sdk.checkNotifySign({ ...tampered }) && !sdk.checkNotifySignV2({ ...tampered }));
}

try {
  const md5 = Config("MD5");
  const hmac = Config("HMAC-SHA256");
  CheckV2Payment(await Simulate(md5, "wechat_v2", "payment", "SIM-V2-MD5", PAYMENT_FEN), "MD5",
                 "SIM-V2-MD5");
  CheckV2Payment(await Simulate(hmac, "wechat_v2", "payment", "SIM-V2-HMAC", PAYMENT_FEN),
                 "HMAC-SHA256", "SIM-V2-HMAC");
  CheckV2Refund(await Simulate(md5, "wechat_v2", "refund", "SIM-V2-REFUND", REFUND_FEN),
                "SIM-V2-REFUND");
  CheckV3(await Simulate(md5, "wechat_v3", "payment", "SIM-V3-PAY", PAYMENT_FEN), false,
          "SIM-V3-PAY");
  CheckV3(await Simulate(md5, "wechat_v3", "refund", "SIM-V3-REFUND", REFUND_FEN), true,
          "SIM-V3-REFUND");
  for (const kind of ["payment", "refund", "close"]) {
    const outTradeNo = `SIM-ALIPAY-${kind.toUpperCase()}`;
    CheckAlipay(await Simulate(md5, "alipay", kind, outTradeNo,
                               kind === "refund" ? REFUND_FEN : PAYMENT_FEN), kind, outTradeNo);
  }
} catch (error) {
  check("simulate and the SDKs ran", false, error.stack ?? String(error));
} finally {
  server.close();
  rmSync(dir, { recursive: true, force: true });
}

// 6 checks per v2 payment, 4 per v2 refund, 7 per v3 notice, 7 per Alipay notice: fewer means a
// case did not run.
const expectedChecks = 2 * 6 + 4 + 2 * 7 + 3 * 7;
check("every check ran", checks >= expectedChecks, `${checks} of ${expectedChecks}`);
console.log(`${checks - failures} of ${checks} checks passed`);
process.exit(failures === 0 ? 0 : 1);
