// The answers `payledger simulate-platform` gave payledger's queries and closes, checked by the
// platforms' own SDKs (sdks.mjs) the way a merchant's code checks the real platforms' answers:
// sdk_answers_pgtest.cpp asks and writes one JSON line per answer.
//
//   node verify_answers.mjs ANSWERS.jsonl
//
// Lines: {name, channel, action, target, status, headers (names in lower case), body (base64)},
// and by `channel`:
//   wechat_v3: {platform_public_keys: {serial: PEM}}. wechatpay-axios-plugin's answer verifier
//     (Decorator.responseVerifier, the first response transform of its APIv3 axios instance:
//     the four Wechatpay headers present, the timestamp within 300 s, the serial a known key, and
//     Rsa.verify over Formatter.response(timestamp, nonce, body)) returns the body as it came.
//     Its axios instance runs it only on a status its validateStatus accepts (2xx); it is called
//     here without one, so that the 400 and 404 answers, which payledger verifies too, are
//     checked as well. Also Rsa.verify over Formatter.response directly.
//   wechat_v2: {mch_id, api_key, sign_type}. The XML as Transformer.toObject reads it carries
//     sign_type only when it is not MD5, and then the configured one; Hash.sign(sign_type, fields,
//     api_key) is its `sign`; the plugin's answer verifier (Transformer#verifier, which picks
//     the algorithm by the sign's length) returns the fields of a result_code SUCCESS answer,
//     and for a business failure (ORDERNOTEXIST, ORDERPAID, ORDERCLOSED) reports result_code,
//     which it reads before any sign.
//   alipay: {app_id, method, alipay_public_key_pem, app_private_key_pem, signed_text}. The
//     member AlipaySdk#exec reads (the method's name, dots as underscores, and "_response") is
//     there; AlipaySdk#checkResponseSign, which exec calls with validateSign, accepts the raw
//     text with the answer's `sign`; and the text it verifies (AlipaySdk#getSignStr) is
//     `signed_text`, the member payledger verifies (RawJsonMember).
// Negative cases, in every answer: its signature with one byte changed is refused by the same
// SDK check, and so is the answer with its signed content changed (a space added to the v3 body
// or the Alipay member, another nonce_str in v2). sdk_answers_pgtest.cpp also runs this script on
// answers whose signature it changed, which must fail it.
// Exits 0 when every check held, 1 otherwise, 77 (ctest: skipped) when the SDKs are missing
// outside CI.

import { ChangeOneByteOfBase64, ChangeOneHexDigit, Checks, ReadLines } from "./checks.mjs";
import { AlipayVerifier, Decorator, Formatter, Hash, Rsa, Transformer } from "./sdks.mjs";

const lines = ReadLines("node verify_answers.mjs ANSWERS.jsonl");
const checks = new Checks();
const check = checks.check.bind(checks);

const Text = (line) => Buffer.from(line.body, "base64").toString("utf8");

// ---- WeChat Pay APIv3 ----

function CheckWechatV3(line) {
  const what = line.name;
  const body = Text(line);
  const keys = Object.fromEntries(Object.entries(line.platform_public_keys)
    .map(([serial, pem]) => [serial, Rsa.from(pem, Rsa.KEY_TYPE_PUBLIC)]));
  const verifier = Decorator.responseVerifier(keys);
  const verify = (headers, data) => verifier.call({ url: line.target }, data, headers, line.status);
  const verified = verify(line.headers, body);
  check(`${what}: the plugin's answer verifier accepts it`, verified === body,
        verified?.message ?? String(verified));
  const header = (name) => line.headers[name] ?? "";
  const key = keys[header("wechatpay-serial")];
  check(`${what}: Rsa.verify over Formatter.response`, key !== undefined && Rsa.verify(
    Formatter.response(header("wechatpay-timestamp"), header("wechatpay-nonce"), body),
    header("wechatpay-signature"), key));
  // Negative cases.
  const changed = { ...line.headers,
                    "wechatpay-signature": ChangeOneByteOfBase64(header("wechatpay-signature")) };
  const refused = verify(changed, body);
  check(`${what}: a signature with one byte changed is refused`,
        refused instanceof Error && refused.code === "EV3_RES_HEADER_SIGNATURE_DIGEST",
        refused?.code);
  const otherBody = verify(line.headers, body + " ");
  check(`${what}: a changed body is refused`,
        otherBody instanceof Error && otherBody.code === "EV3_RES_HEADER_SIGNATURE_DIGEST",
        otherBody?.code);
}

// ---- WeChat Pay APIv2 ----

function CheckWechatV2(line) {
  const what = line.name;
  const data = Transformer.toObject(Text(line)) ?? {};
  check(`${what}: sign_type is the configured one`,
        line.sign_type === "MD5" ? data.sign_type === undefined
                                 : data.sign_type === line.sign_type, data.sign_type);
  check(`${what}: Hash.sign is the sign`,
        Hash.equals(Hash.sign(line.sign_type, data, line.api_key), data.sign), data.sign);
  const verifier = new Transformer(line.mch_id, line.api_key).verifier;
  const verify = (fields) => verifier.call({ url: line.target }, fields, line.headers, line.status);
  const verified = verify(data);
  const success = data.result_code === "SUCCESS";
  check(`${what}: Transformer#verifier accepts it (a business failure: reports result_code)`,
        success ? verified === data
                : verified instanceof Error && verified.code === "EV2_RES_STATUS_CODE_NOT_SUCESS",
        verified?.message ?? String(verified));
  // Negative cases.
  const changed = { ...data, sign: ChangeOneHexDigit(data.sign ?? "") };
  const refused = verify(changed);
  check(`${what}: a sign with one character changed is refused`,
        !Hash.equals(Hash.sign(line.sign_type, changed, line.api_key), changed.sign) &&
          (!success ||
           (refused instanceof Error && refused.code === "EV2_RES_SIGNATURE_NOT_EQUAL")),
        refused?.code);
  check(`${what}: another nonce_str does not match the sign`,
        !Hash.equals(Hash.sign(line.sign_type, { ...data, nonce_str: "X" + data.nonce_str },
                               line.api_key), data.sign));
}

// ---- Alipay ----

function CheckAlipay(line) {
  const what = line.name;
  const raw = Text(line);
  const sdk = AlipayVerifier(line.app_id, line.alipay_public_key_pem, line.app_private_key_pem);
  // What #formatExecHttpResponse does before it verifies (it is private: the same steps here).
  const responseKey = `${line.method.replaceAll(".", "_")}_response`;
  const answer = JSON.parse(raw);
  check(`${what}: ${responseKey} is there`, typeof answer[responseKey] === "object", raw);
  checks.attempt(`${what}: checkResponseSign accepts it`,
                 () => sdk.checkResponseSign(raw, responseKey, answer.sign, "sdk-answers"));
  check(`${what}: the text alipay-sdk verifies is the member payledger verifies`,
        sdk.getSignStr(raw, responseKey) === line.signed_text, sdk.getSignStr(raw, responseKey));
  // Negative cases.
  const refuses = (text, sign) => {
    try {
      sdk.checkResponseSign(text, responseKey, sign, "sdk-answers");
      return false;
    } catch (error) {
      return error.name === "AlipayRequestError";
    }
  };
  check(`${what}: a sign with one byte changed is refused`,
        refuses(raw, ChangeOneByteOfBase64(answer.sign ?? "")));
  const member = `"${responseKey}":{`;
  check(`${what}: a space added inside the signed member is refused`,
        raw.includes(member) && refuses(raw.replace(member, member + " "), answer.sign));
}

const kinds = {
  wechat_v3: { run: CheckWechatV3, checks: 4 },
  wechat_v2: { run: CheckWechatV2, checks: 5 },
  alipay: { run: CheckAlipay, checks: 5 },
};

checks.runLines(lines, kinds, "answers");
