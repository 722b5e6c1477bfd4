// Notices built and signed by the platforms' own SDKs (sdks.mjs), for sdk_notices_pgtest.cpp
// to post to a real `payledger serve`.
//
//   node sign_notices.mjs INPUT.json
//
// INPUT: {"now": unix seconds, "wechat_v2": {appid, mch_id, api_key}, "wechat_v3": {appid,
// mchid, api_v3_key, serial, private_key_pem}, "alipay": {app_id, private_key_pem,
// public_key_pem}, "notices": [{name, kind, out_trade_no, amount, order_amount,
// transaction_id, payment_transaction_id, sign_type, declare_sign_type, charset}]}.
// Prints one JSON line per notice, in the order given: {name, target, headers, body,
// tampered_body} with the bodies in base64 (a GBK form is not UTF-8). The tampered body is the
// notice changed after signing: its amount (WeChat v2 payment, Alipay), the first block of its
// req_info ciphertext (WeChat v2 refund), its envelope's summary (WeChat v3, which only the
// Wechatpay-Signature covers).
//
// Kinds: wechat_v2_payment (sign_type MD5 or HMAC-SHA256, declared in the notice or not),
// wechat_v2_refund, wechat_v3_payment, wechat_v3_refund, alipay_payment (charset utf-8 or
// gbk), alipay_refund, and alipay_request_rule_payment: a payment notice signed by alipay-sdk's
// request signer, whose signature also covers sign_type (what Alipay's notices never do).
// Exits 1 when the input is not such a file, and when an SDK refuses its own notice.

import { readFileSync } from "node:fs";

import {
  AlipayVerifier, Aes, EncodeFormBytes, EncodeGbk, Formatter, Hash, Rsa, Transformer,
  alipaySign, alipaySignatureV3,
} from "./sdks.mjs";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const SHANGHAI_OFFSET_SECONDS = 8 * 3600;
const AES_BLOCK_BYTES = 16;

// "yyyy-MM-dd HH:mm:ss" in Asia/Shanghai.
function ShanghaiDashed(unixSeconds) {
  return new Date((unixSeconds + SHANGHAI_OFFSET_SECONDS) * 1000).toISOString()
    .slice(0, 19).replace("T", " ");
}
const ShanghaiCompact = (unixSeconds) => ShanghaiDashed(unixSeconds).replace(/[- :]/g, "");
const ShanghaiRfc3339 = (unixSeconds) =>
  ShanghaiDashed(unixSeconds).replace(" ", "T") + "+08:00";

// Integer fen as Alipay's yuan string.
function Yuan(fen) {
  return `${Math.floor(fen / 100)}.${String(fen % 100).padStart(2, "0")}`;
}

const base64 = (bytes) => Buffer.from(bytes).toString("base64");

// ---- WeChat Pay APIv2 ----

function WechatV2Payment(spec) {
  const v2 = input.wechat_v2;
  const fields = {
    appid: v2.appid, mch_id: v2.mch_id, nonce_str: Formatter.nonce(32),
    return_code: "SUCCESS", result_code: "SUCCESS", openid: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o",
    is_subscribe: "Y", trade_type: "JSAPI", bank_type: "CMC", attach: "支付测试",
    total_fee: String(spec.amount), cash_fee: String(spec.amount), fee_type: "CNY",
    transaction_id: spec.transaction_id, out_trade_no: spec.out_trade_no,
    time_end: ShanghaiCompact(input.now),
  };
  if (spec.declare_sign_type) fields.sign_type = spec.sign_type;
  const signed = { ...fields, sign: Hash.sign(spec.sign_type, fields, v2.api_key) };
  const tampered = { ...signed, total_fee: String(spec.amount + 1) };
  return { target: "/v1/callbacks/wechat/v2", headers: { "Content-Type": "text/xml" },
           body: Transformer.toXml(signed), tampered_body: Transformer.toXml(tampered) };
}

// The refund's <root> plaintext as WeChat documents it, every value in CDATA.
function RefundRootXml(fields) {
  return "<root>" + Object.entries(fields)
    .map(([name, value]) => `<${name}><![CDATA[${value}]]></${name}>`).join("") + "</root>";
}

function WechatV2Refund(spec) {
  const v2 = input.wechat_v2;
  const refund = {
    out_refund_no: "R" + spec.out_trade_no, out_trade_no: spec.out_trade_no,
    refund_account: "REFUND_SOURCE_RECHARGE_FUNDS", refund_fee: String(spec.amount),
    refund_id: spec.transaction_id, refund_recv_accout: "支付用户的零钱",
    refund_request_source: "API", refund_status: "SUCCESS",
    settlement_refund_fee: String(spec.amount), settlement_total_fee: String(spec.order_amount),
    success_time: ShanghaiDashed(input.now), total_fee: String(spec.order_amount),
    transaction_id: spec.payment_transaction_id,
  };
  // The SDK's PKCS#7 pads only a plaintext that does not fill its last block (Aes.pkcs7,
  // `optional`), where WeChat, and PKCS#7, add a whole block: such a plaintext is lengthened.
  while (Buffer.byteLength(RefundRootXml(refund)) % AES_BLOCK_BYTES === 0) {
    refund.out_refund_no += "X";
  }
  const reqInfo = Aes.AesEcb.encrypt(RefundRootXml(refund), Hash.md5(v2.api_key));
  const sealed = Buffer.from(reqInfo, "base64");
  sealed[0] ^= 0xff;  // The first block: it no longer decrypts to "<root>".
  const outer = (info) => Transformer.toXml({
    return_code: "SUCCESS", appid: v2.appid, mch_id: v2.mch_id, nonce_str: Formatter.nonce(32),
    req_info: info,
  });
  return { target: "/v1/callbacks/wechat/v2", headers: { "Content-Type": "text/xml" },
           body: outer(reqInfo), tampered_body: outer(base64(sealed)) };
}

// ---- WeChat Pay APIv3 ----

function WechatV3Resource(spec, refund) {
  const v3 = input.wechat_v3;
  const successTime = ShanghaiRfc3339(input.now);
  if (refund) {
    return {
      mchid: v3.mchid, out_trade_no: spec.out_trade_no,
      transaction_id: spec.payment_transaction_id, out_refund_no: "R" + spec.out_trade_no,
      refund_id: spec.transaction_id, refund_status: "SUCCESS", success_time: successTime,
      user_received_account: "支付用户零钱",
      amount: { total: spec.order_amount, refund: spec.amount, payer_total: spec.order_amount,
                payer_refund: spec.amount },
    };
  }
  return {
    mchid: v3.mchid, appid: v3.appid, out_trade_no: spec.out_trade_no,
    transaction_id: spec.transaction_id, trade_type: "JSAPI", trade_state: "SUCCESS",
    trade_state_desc: "支付成功", bank_type: "CMC", attach: "", success_time: successTime,
    payer: { openid: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o" },
    amount: { total: spec.amount, payer_total: spec.amount, currency: "CNY",
              payer_currency: "CNY" },
  };
}

function WechatV3(spec, refund) {
  const v3 = input.wechat_v3;
  const aad = refund ? "refund" : "transaction";
  const nonce = Formatter.nonce(12);
  const envelope = (summary) => JSON.stringify({
    id: "EV-" + Formatter.nonce(16), create_time: ShanghaiRfc3339(input.now),
    resource_type: "encrypt-resource", event_type: refund ? "REFUND.SUCCESS" : "TRANSACTION.SUCCESS",
    summary,
    resource: {
      original_type: aad, algorithm: "AEAD_AES_256_GCM",
      ciphertext: Aes.AesGcm.encrypt(JSON.stringify(WechatV3Resource(spec, refund)),
                                     v3.api_v3_key, nonce, aad),
      associated_data: aad, nonce,
    },
  });
  const summary = refund ? "退款成功" : "支付成功";
  const body = envelope(summary);
  const timestamp = String(input.now);
  const headerNonce = Formatter.nonce(32);
  const signature = Rsa.sign(Formatter.response(timestamp, headerNonce, body), v3.private_key_pem);
  // The same bytes with another summary: the resource still decrypts, the signature does not
  // hold.
  const tampered = body.replace(JSON.stringify(summary), JSON.stringify(summary + "!"));
  if (tampered === body) throw new Error("the v3 tamper changed nothing");
  return {
    target: "/v1/callbacks/wechat/v3",
    headers: { "Content-Type": "application/json", "Wechatpay-Serial": v3.serial,
               "Wechatpay-Timestamp": timestamp, "Wechatpay-Nonce": headerNonce,
               "Wechatpay-Signature-Type": "WECHATPAY2-SHA256-RSA2048",
               "Wechatpay-Signature": signature },
    body, tampered_body: tampered,
  };
}

// ---- Alipay ----

function AlipayFields(spec, refund) {
  const alipay = input.alipay;
  const now = ShanghaiDashed(input.now);
  const fields = {
    app_id: alipay.app_id, auth_app_id: alipay.app_id, charset: spec.charset ?? "utf-8",
    version: "1.0", notify_type: "trade_status_sync", notify_id: Formatter.nonce(32),
    notify_time: now, out_trade_no: spec.out_trade_no,
    trade_no: refund ? spec.payment_transaction_id : spec.transaction_id,
    subject: "支付宝测试订单：年货礼盒", body: "两盒装，顺丰包邮",
    buyer_id: "2088102177846875", buyer_logon_id: "sim***@example.com",
    seller_id: "2088102176044281", seller_email: "shop@example.com",
    total_amount: Yuan(refund ? spec.order_amount : spec.amount), gmt_create: now,
    gmt_payment: now, trade_status: "TRADE_SUCCESS",
  };
  if (refund) {
    Object.assign(fields, { refund_fee: Yuan(spec.amount), out_biz_no: spec.transaction_id,
                            gmt_refund: now + ".123" });
  } else {
    Object.assign(fields, {
      receipt_amount: Yuan(spec.amount), buyer_pay_amount: Yuan(spec.amount),
      invoice_amount: Yuan(spec.amount), point_amount: "0.00",
      fund_bill_list: JSON.stringify([{ amount: Yuan(spec.amount), fundChannel: "ALIPAYACCOUNT" }]),
    });
  }
  return fields;
}

// The bytes Alipay signs a notice over: every field but sign and sign_type, none empty, sorted
// by name, "name=value" joined by "&", the values in the notice's charset (Alipay's
// AlipaySignature.getSignCheckContentV1).
function AlipaySignContent(fields, encode) {
  const parts = Object.keys(fields).sort()
    .filter((name) => name !== "sign" && name !== "sign_type" && fields[name] !== "")
    .map((name) => Buffer.concat([Buffer.from(name + "="), encode(fields[name])]));
  const joined = [];
  parts.forEach((part, index) => joined.push(...(index ? [Buffer.from("&")] : []), part));
  return Buffer.concat(joined);
}

function AlipayVerifies(fields) {
  const alipay = input.alipay;
  const verifier = AlipayVerifier(alipay.app_id, alipay.public_key_pem, alipay.private_key_pem);
  return verifier.checkNotifySign({ ...fields }) && verifier.checkNotifySignV2({ ...fields });
}

function AlipayNotice(fields, encode, tamperField, tamperedValue) {
  const pairs = (of) => Object.entries(of).map(([name, value]) => [name, encode(value)]);
  const charset = fields.charset;
  return {
    target: "/v1/callbacks/alipay",
    headers: { "Content-Type": `application/x-www-form-urlencoded; charset=${charset}` },
    body: EncodeFormBytes(pairs(fields)),
    tampered_body: EncodeFormBytes(pairs({ ...fields, [tamperField]: tamperedValue })),
  };
}

function Alipay(spec, refund) {
  const gbk = (spec.charset ?? "utf-8") === "gbk";
  const encode = gbk ? EncodeGbk : (text) => Buffer.from(text, "utf8");
  const fields = AlipayFields(spec, refund);
  // signatureV3 hands its message to node:crypto's Sign#update, which signs a Buffer's bytes
  // as they are: the GBK bytes of a GBK notice, as Alipay signs them.
  fields.sign = alipaySignatureV3(AlipaySignContent(fields, encode), input.alipay.private_key_pem);
  fields.sign_type = "RSA2";
  // alipay-sdk verifies over UTF-8 only (createVerify().update(text, "utf-8")), so a GBK
  // notice is beyond it; a UTF-8 one must pass its checks before payledger sees it.
  if (!gbk && !AlipayVerifies(fields)) throw new Error("alipay-sdk refuses its own notice");
  const field = refund ? "refund_fee" : "total_amount";
  return AlipayNotice(fields, encode, field, Yuan(spec.amount + 1));
}

// alipay-sdk's request signer (util.js `sign`, every OpenAPI call) adds method, app_id,
// charset, version, sign_type and timestamp, and signs them all, sign_type included.
function AlipayRequestRule(spec) {
  const alipay = input.alipay;
  const sdk = AlipayVerifier(alipay.app_id, alipay.public_key_pem, alipay.private_key_pem);
  const fields = AlipayFields(spec, false);
  delete fields.app_id;
  delete fields.charset;
  delete fields.version;
  const signed = alipaySign("alipay.trade.page.pay", fields, sdk.config);
  if (!AlipayVerifies(signed)) throw new Error("alipay-sdk refuses its own request signature");
  return AlipayNotice(signed, (text) => Buffer.from(text, "utf8"), "total_amount",
                      Yuan(spec.amount + 1));
}

const builders = {
  wechat_v2_payment: WechatV2Payment,
  wechat_v2_refund: WechatV2Refund,
  wechat_v3_payment: (spec) => WechatV3(spec, false),
  wechat_v3_refund: (spec) => WechatV3(spec, true),
  alipay_payment: (spec) => Alipay(spec, false),
  alipay_refund: (spec) => Alipay(spec, true),
  alipay_request_rule_payment: AlipayRequestRule,
};

for (const spec of input.notices) {
  const build = builders[spec.kind];
  if (!build) throw new Error(`unknown kind ${spec.kind}`);
  const notice = build(spec);
  console.log(JSON.stringify({
    name: spec.name, target: notice.target, headers: notice.headers,
    body: base64(Buffer.from(notice.body)), tampered_body: base64(Buffer.from(notice.tampered_body)),
  }));
}
