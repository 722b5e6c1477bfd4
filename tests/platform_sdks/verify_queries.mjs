// The order queries and closes payledger signs (api/query/platform_protocol.cpp), checked by the
// platforms' own SDKs (sdks.mjs): sdk_queries_test.cpp builds them with payledger's request
// functions and test keys, and writes one JSON line per request.
//
//   node verify_queries.mjs REQUESTS.jsonl
//
// Lines, by `channel` (every line also has `name`, which each failure names):
//   wechat_v3: {action, method, url, target, headers, body, timestamp, nonce, message, mchid,
//     serial, public_key_pem, private_key_pem}; `message` is payledger's WechatV3RequestMessage.
//     wechatpay-axios-plugin: Formatter.request(method, target, timestamp, nonce, body) is
//     `message`; the Authorization header has the scheme and exactly the fields
//     Formatter.authorization writes, with these values (its field order differs, which WeChat
//     Pay does not read); Rsa.verify accepts its signature with the merchant's public key, and
//     Rsa.sign with the private key makes the same signature (PKCS#1 v1.5 is deterministic, so
//     the signed bytes are the same bytes); the plugin's own request signer
//     (Decorator.requestInterceptor, what its APIv3 axios instance runs), given the same URL,
//     method and body, signs the same path, query and body.
//   wechat_v3_example: {method, target, timestamp, nonce, body, message}: WeChat Pay's signing
//     example; Formatter.request gives payledger's `message`.
//   wechat_v2: {action, url, body, appid, mch_id, out_trade_no, nonce, sign_type, api_key}:
//     the XML as Transformer.toObject reads it has exactly the fields payledger sends, and
//     sign_type as configured (absent for MD5); Hash.sign over them with the API key is `sign`;
//     the plugin's own request signer (Transformer#signer, what its APIv2 axios instance runs)
//     on the same fields without `sign` makes the same `sign`.
//   alipay: {action, url, body, app_id, out_trade_no, sign_content, public_key_pem,
//     private_key_pem}; `sign_content` is payledger's AlipayRequestSignContent. The form is read
//     as a gateway decodes it (URLSearchParams, no field twice). alipay-sdk's request signer
//     (util.js `sign`, what AlipaySdk#exec runs), given the same method, timestamp, format and
//     biz_content, produces the same fields; the content it hands to node:crypto to sign is
//     `sign_content`; its signature is payledger's `sign`; payledger's `sign` verifies over that
//     content with createVerify("RSA-SHA256") and the app's public key; and AlipaySdk's
//     #checkNotifySignV2 accepts the form (it tries every field but sign, then without
//     sign_type as well: that payledger signs sign_type too is pinned by the content above).
// Negative cases, in every request: its signature with one byte changed is refused by the same
// SDK check (Rsa.verify, Hash.sign, createVerify and checkNotifySignV2), and so is the signature
// over a message that names another order. sdk_queries_test.cpp also runs this script on
// requests whose signature it changed, which must fail it.
// Exits 0 when every check held, 1 otherwise, 77 (ctest: skipped) when the SDKs are missing
// outside CI.

import crypto from "node:crypto";
import { syncBuiltinESMExports } from "node:module";

import { ChangeOneByteOfBase64, ChangeOneHexDigit, Checks, ReadLines } from "./checks.mjs";
import {
  AlipayVerifier, Decorator, Formatter, Hash, Rsa, Transformer, alipaySign,
} from "./sdks.mjs";

const lines = ReadLines("node verify_queries.mjs REQUESTS.jsonl");
const checks = new Checks();
const check = checks.check.bind(checks);

// "WECHATPAY2-SHA256-RSA2048 k="v",k="v"" as {scheme, fields}; null when it is not that form.
function ParseAuthorization(header) {
  const match = /^(\S+) (.*)$/.exec(header ?? "");
  if (!match) return null;
  const fields = {};
  const pairs = match[2].split(",");
  for (const pair of pairs) {
    const field = /^([a-z_]+)="([^"]*)"$/.exec(pair);
    if (!field || field[1] in fields) return null;
    fields[field[1]] = field[2];
  }
  return { scheme: match[1], fields };
}

function SameEntries(a, b) {
  const keys = Object.keys(a).sort();
  return JSON.stringify(keys) === JSON.stringify(Object.keys(b).sort()) &&
    keys.every((key) => a[key] === b[key]);
}

// ---- WeChat Pay APIv3 ----

function CheckWechatV3(line) {
  const what = line.name;
  const message = Formatter.request(line.method, line.target, line.timestamp, line.nonce,
                                    line.body);
  check(`${what}: Formatter.request is payledger's signed message`, message === line.message,
        JSON.stringify(message));
  const header = ParseAuthorization(line.headers.Authorization);
  check(`${what}: Authorization is k="v" pairs`, header !== null, line.headers.Authorization);
  const fields = header?.fields ?? {};
  const expected = ParseAuthorization(Formatter.authorization(
    line.mchid, line.nonce, fields.signature, line.timestamp, line.serial));
  check(`${what}: Authorization as Formatter.authorization writes it`,
        header?.scheme === expected.scheme && SameEntries(fields, expected.fields),
        line.headers.Authorization);
  check(`${what}: Rsa.verify accepts the signature`,
        Rsa.verify(message, fields.signature ?? "", line.public_key_pem));
  check(`${what}: Rsa.sign with the merchant key makes the same signature`,
        Rsa.sign(message, line.private_key_pem) === fields.signature);
  // The plugin's signer on the same request: it signs `${url.pathname}${url.search}` of the URL
  // and JSON.stringify of the body (nothing for a GET), with a timestamp and nonce of its own.
  const signer = Decorator.requestInterceptor();
  const config = signer({
    method: line.method.toLowerCase(), url: line.url, headers: {},
    data: line.body === "" ? undefined : JSON.parse(line.body),
    mchid: line.mchid, serial: line.serial, privateKey: line.private_key_pem,
  });
  const own = ParseAuthorization(config.headers.get("Authorization"))?.fields ?? {};
  const ownMessage = Formatter.request(line.method, line.target, own.timestamp, own.nonce_str,
                                       line.body);
  check(`${what}: the plugin's own signer signs the same path, query and body`,
        Rsa.verify(ownMessage, own.signature ?? "", line.public_key_pem),
        config.headers.get("Authorization"));
  // Negative cases.
  check(`${what}: a signature with one byte changed is refused`,
        !Rsa.verify(message, ChangeOneByteOfBase64(fields.signature ?? ""), line.public_key_pem));
  const otherTarget = line.target.replace("/out-trade-no/", "/out-trade-no/X");
  const other = Formatter.request(line.method, otherTarget, line.timestamp, line.nonce, line.body);
  check(`${what}: the signature does not hold for another order`,
        !Rsa.verify(other, fields.signature ?? "", line.public_key_pem));
}

function CheckWechatV3Example(line) {
  check(`${line.name}: Formatter.request is payledger's message`,
        Formatter.request(line.method, line.target, line.timestamp, line.nonce, line.body) ===
          line.message, JSON.stringify(line.message));
}

// ---- WeChat Pay APIv2 ----

function CheckWechatV2(line) {
  const what = line.name;
  const data = Transformer.toObject(line.body) ?? {};
  const sent = { appid: line.appid, mch_id: line.mch_id, out_trade_no: line.out_trade_no,
                 nonce_str: line.nonce, sign: data.sign };
  if (line.sign_type !== "MD5") sent.sign_type = line.sign_type;
  check(`${what}: the XML as Transformer reads it`, SameEntries(data, sent), JSON.stringify(data));
  const type = data.sign_type ?? Hash.ALGO_MD5;
  check(`${what}: Hash.sign is the sign`, Hash.equals(Hash.sign(type, data, line.api_key),
                                                      data.sign), data.sign);
  // The plugin's signer: the sign of the same fields, MD5 unless sign_type says otherwise.
  const { sign, ...unsigned } = data;
  let own = {};
  checks.attempt(`${what}: Transformer#signer signs the fields`, () => {
    own = new Transformer(line.mch_id, line.api_key).signer.call(
      { method: "post", url: line.url }, { ...unsigned });
  });
  check(`${what}: Transformer#signer makes the same sign`, own.sign === sign, own.sign);
  // Negative cases.
  check(`${what}: a sign with one character changed is refused`,
        !Hash.equals(Hash.sign(type, data, line.api_key), ChangeOneHexDigit(sign ?? "")));
  check(`${what}: the sign does not hold for another order`,
        !Hash.equals(Hash.sign(type, { ...data, out_trade_no: "X" + data.out_trade_no },
                               line.api_key), sign));
}

// ---- Alipay ----

// Runs alipay-sdk's `sign` and returns what it returned and the text it handed to node:crypto's
// Sign#update: util.js imports createSign from node:crypto, whose ES module bindings follow the
// CommonJS module's once syncBuiltinESMExports() is called; restored afterwards.
function SdkSigned(method, params, config) {
  const original = crypto.createSign;
  const contents = [];
  crypto.createSign = (...args) => {
    const signer = original(...args);
    const update = signer.update.bind(signer);
    signer.update = (data, encoding) => {
      contents.push(String(data));
      return update(data, encoding);
    };
    return signer;
  };
  syncBuiltinESMExports();
  try {
    return { signed: alipaySign(method, params, config), contents };
  } finally {
    crypto.createSign = original;
    syncBuiltinESMExports();
  }
}

function CheckAlipay(line) {
  const what = line.name;
  const params = new URLSearchParams(line.body);
  const form = Object.fromEntries(params);
  check(`${what}: no field twice`, [...params.keys()].length === Object.keys(form).length);
  const sdk = AlipayVerifier(line.app_id, line.public_key_pem, line.private_key_pem);
  // What a merchant passes to the SDK for this call. The SDK stamps the machine's clock, which
  // is given payledger's instead, and adds `format` only when passed (Alipay's optional public
  // parameter, which payledger sends).
  let sdkSigned = { signed: {}, contents: [] };
  checks.attempt(`${what}: alipay-sdk signs the request`, () => {
    sdkSigned = SdkSigned(form.method, {
      timestamp: form.timestamp, format: form.format,
      biz_content: JSON.parse(form.biz_content ?? "null"),
    }, sdk.config);
  });
  const { signed, contents } = sdkSigned;
  const { sign: sdkSign, ...sdkFields } = signed;
  const { sign, ...fields } = form;
  check(`${what}: alipay-sdk signs the same fields`, SameEntries(fields, sdkFields),
        `${JSON.stringify(fields)} against ${JSON.stringify(sdkFields)}`);
  check(`${what}: alipay-sdk's sign content is payledger's`,
        contents.length === 1 && contents[0] === line.sign_content, JSON.stringify(contents));
  check(`${what}: alipay-sdk's signature is payledger's sign`, sdkSign === sign);
  const verifies = (content, signature) => crypto.createVerify("RSA-SHA256")
    .update(content ?? "", "utf8").verify(line.public_key_pem, signature ?? "", "base64");
  check(`${what}: the sign verifies over alipay-sdk's content`, verifies(contents[0], sign));
  check(`${what}: AlipaySdk#checkNotifySignV2 accepts the form`,
        sdk.checkNotifySignV2({ ...form }));
  // Negative cases.
  const changed = ChangeOneByteOfBase64(sign ?? "");
  check(`${what}: a sign with one byte changed is refused`,
        !verifies(contents[0], changed) && !sdk.checkNotifySignV2({ ...form, sign: changed }));
  const otherOrder = JSON.stringify({ out_trade_no: "X" + line.out_trade_no });
  check(`${what}: the sign does not hold for another order`,
        !sdk.checkNotifySignV2({ ...form, biz_content: otherOrder }));
}

const kinds = {
  wechat_v3: { run: CheckWechatV3, checks: 8 },
  wechat_v3_example: { run: CheckWechatV3Example, checks: 1 },
  wechat_v2: { run: CheckWechatV2, checks: 6 },
  alipay: { run: CheckAlipay, checks: 9 },
};

checks.runLines(lines, kinds, "requests");
