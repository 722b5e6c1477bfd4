"""Signed requests of every channel, built by the campaign itself (not by payledger).

The formats are the platforms' (docs/platforms.md); the keys are the development test keys that
scripts/lib/dev_config.sh writes (the WeChat Pay v3 platform key and the Alipay key, whose
private halves only a simulator holds). `payledger simulate` builds the same notices in C++
(api/cli/simulate_notice.cpp); building them here keeps the campaign's side independent of the
code under test and lets it control every byte it sends.
"""

import base64
import hashlib
import hmac
import json
import os
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SHANGHAI = 8 * 3600


def shanghai(unix, fmt):
    return time.strftime(fmt, time.gmtime(unix + SHANGHAI))


def yuan(fen):
    return "%d.%02d" % (fen // 100, fen % 100)


def rfc3339(unix):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def _cdata(value):
    return "<![CDATA[" + value.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def v2_xml(fields, root="xml"):
    out = "<" + root + ">"
    for name in sorted(fields):
        value = fields[name]
        out += "<%s>%s</%s>" % (name, value if value.isdigit() else _cdata(value), name)
    return out + "</" + root + ">"


def v2_sign(fields, api_key, sign_type):
    text = "&".join("%s=%s" % (k, fields[k]) for k in sorted(fields)
                    if k != "sign" and fields[k] != "")
    text += ("&" if text else "") + "key=" + api_key
    if sign_type == "HMAC-SHA256":
        return hmac.new(api_key.encode(), text.encode(), hashlib.sha256).hexdigest().upper()
    return hashlib.md5(text.encode()).hexdigest().upper()


def _form_encode(text):
    out = []
    for byte in text.encode():
        c = chr(byte)
        if c.isascii() and (c.isalnum() or c in "-._*"):
            out.append(c)
        elif c == " ":
            out.append("+")
        else:
            out.append("%%%02X" % byte)
    return "".join(out)


def form(fields):
    return "&".join(_form_encode(k) + "=" + _form_encode(fields[k]) for k in sorted(fields))


def alipay_sign_content(fields):
    return "&".join("%s=%s" % (k, fields[k]) for k in sorted(fields)
                    if k not in ("sign", "sign_type") and fields[k] != "")


def _aes_ecb(key, plaintext):
    pad = 16 - len(plaintext) % 16
    data = plaintext + bytes([pad]) * pad
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(data) + encryptor.finalize()


def _hex(nbytes):
    return os.urandom(nbytes).hex()


class Request:
    """One HTTP request: path, headers, body bytes."""

    def __init__(self, path, headers, body):
        self.path = path
        self.headers = headers
        self.body = body if isinstance(body, bytes) else body.encode()


class Signer:
    """Builds the signed requests from the campaign's config (the one serve reads)."""

    def __init__(self, config):
        self.config = config
        self.generic_secret = config["generic"]["secret"]
        self.merchant_token = config["tokens"]["merchant"][0]
        self.auditor_token = config["tokens"]["auditor"][0]
        self.admin_token = config["tokens"]["admin"][0]
        self.v2 = config["wechat_v2"]
        self.v3 = config["wechat_v3"]
        self.alipay = config["alipay"]
        with open(self.v3["simulate_private_key"], "rb") as f:
            self.v3_key = serialization.load_pem_private_key(f.read(), None)
        with open(self.alipay["simulate_private_key"], "rb") as f:
            self.alipay_key = serialization.load_pem_private_key(f.read(), None)

    # --- the merchant API ---------------------------------------------------------------
    def order(self, otn, account, amount, currency, channel=None):
        """POST /v1/orders; with `channel`, the serves ask that platform about the order while
        it stays unpaid (docs/query.md)."""
        fields = {"out_trade_no": otn, "account_id": account, "amount": amount,
                  "currency": currency}
        if channel:
            fields["channel"] = channel
        body = json.dumps(fields, separators=(",", ":"))
        return Request("/v1/orders", {"Authorization": "Bearer " + self.merchant_token,
                                      "Content-Type": "application/json"}, body)

    # --- generic ------------------------------------------------------------------------
    def generic_body(self, event_type, otn, txid=None, amount=None, currency=None, at=None):
        body = {"event_type": event_type, "out_trade_no": otn}
        if txid is not None:
            body["transaction_id"] = txid
        if amount is not None:
            body["amount"] = amount
        if currency is not None:
            body["currency"] = currency
        if at is not None:
            body["occurred_at"] = rfc3339(at)
        return json.dumps(body, separators=(",", ":"))

    def generic_raw(self, body, now=None, secret=None):
        t = str(int(now if now is not None else time.time()))
        body_bytes = body if isinstance(body, bytes) else body.encode()
        mac = hmac.new((secret or self.generic_secret).encode(), t.encode() + b"." + body_bytes,
                       hashlib.sha256).hexdigest()
        return Request("/v1/callbacks/generic", {"Content-Type": "application/json",
                                                 "Payledger-Signature": "t=%s,v1=%s" % (t, mac)},
                       body_bytes)

    # --- WeChat Pay v2 --------------------------------------------------------------------
    def v2_payment(self, otn, txid, amount, currency, at, result="SUCCESS", api_key=None,
                   mch_id=None):
        fields = {"appid": self.v2["appid"], "mch_id": mch_id or self.v2["mch_id"],
                  "nonce_str": _hex(16), "return_code": "SUCCESS", "result_code": result,
                  "out_trade_no": otn, "transaction_id": txid, "total_fee": str(amount),
                  "cash_fee": str(amount), "fee_type": currency,
                  "time_end": shanghai(at, "%Y%m%d%H%M%S"), "trade_type": "JSAPI",
                  "bank_type": "OTHERS", "openid": "oCampaignOpenId0000001", "is_subscribe": "N"}
        if result != "SUCCESS":
            fields["err_code"] = "ORDERNOTEXIST"
            fields["err_code_des"] = "campaign: a failed payment"
        sign_type = self.v2.get("sign_type", "MD5")
        if sign_type == "HMAC-SHA256":
            fields["sign_type"] = "HMAC-SHA256"
        fields["sign"] = v2_sign(fields, api_key or self.v2["api_key"], sign_type)
        return Request("/v1/callbacks/wechat/v2", {"Content-Type": "text/xml"}, v2_xml(fields))

    def v2_refund(self, otn, refund_id, payment_txid, order_amount, amount, at):
        refund = {"out_trade_no": otn, "out_refund_no": "R" + otn, "refund_id": refund_id,
                  "transaction_id": payment_txid, "total_fee": str(order_amount),
                  "refund_fee": str(amount), "settlement_refund_fee": str(amount),
                  "refund_status": "SUCCESS",
                  "success_time": shanghai(at, "%Y-%m-%d %H:%M:%S"),
                  "refund_recv_accout": "支付用户的零钱",
                  "refund_account": "REFUND_SOURCE_RECHARGE_FUNDS",
                  "refund_request_source": "API"}
        key = hashlib.md5(self.v2["api_key"].encode()).hexdigest().encode()
        fields = {"appid": self.v2["appid"], "mch_id": self.v2["mch_id"],
                  "nonce_str": _hex(16), "return_code": "SUCCESS",
                  "req_info": base64.b64encode(_aes_ecb(key, v2_xml(refund, "root").encode()))
                  .decode()}
        return Request("/v1/callbacks/wechat/v2", {"Content-Type": "text/xml"}, v2_xml(fields))

    # --- WeChat Pay v3 --------------------------------------------------------------------
    def _v3(self, event_type, aad, resource, now, serial=None):
        nonce = _hex(6)
        sealed = AESGCM(self.v3["api_v3_key"].encode()).encrypt(
            nonce.encode(), json.dumps(resource, ensure_ascii=False).encode(), aad.encode())
        envelope = {"id": "%s-%s-%s-%s-%s" % (_hex(4), _hex(2), _hex(2), _hex(2), _hex(6)),
                    "create_time": shanghai(now, "%Y-%m-%dT%H:%M:%S") + "+08:00",
                    "resource_type": "encrypt-resource", "event_type": event_type,
                    "summary": "campaign",
                    "resource": {"original_type": aad, "algorithm": "AEAD_AES_256_GCM",
                                 "ciphertext": base64.b64encode(sealed).decode(),
                                 "associated_data": aad, "nonce": nonce}}
        body = json.dumps(envelope, ensure_ascii=False).encode()
        timestamp = str(int(now))
        header_nonce = _hex(16)
        message = timestamp.encode() + b"\n" + header_nonce.encode() + b"\n" + body + b"\n"
        signature = self.v3_key.sign(message, padding.PKCS1v15(), hashes.SHA256())
        return Request("/v1/callbacks/wechat/v3", {
            "Content-Type": "application/json",
            "Wechatpay-Serial": serial or self.v3["simulate_serial"],
            "Wechatpay-Timestamp": timestamp, "Wechatpay-Nonce": header_nonce,
            "Wechatpay-Signature-Type": "WECHATPAY2-SHA256-RSA2048",
            "Wechatpay-Signature": base64.b64encode(signature).decode()}, body)

    def v3_payment(self, otn, txid, amount, currency, at, now=None, serial=None):
        resource = {"mchid": self.v3["mchid"], "appid": self.v3["appid"], "out_trade_no": otn,
                    "transaction_id": txid, "trade_type": "JSAPI", "trade_state": "SUCCESS",
                    "trade_state_desc": "支付成功", "bank_type": "OTHERS", "attach": "",
                    "success_time": shanghai(at, "%Y-%m-%dT%H:%M:%S") + "+08:00",
                    "payer": {"openid": "oCampaignOpenId0000001"},
                    "amount": {"total": amount, "payer_total": amount, "currency": currency,
                               "payer_currency": currency}}
        return self._v3("TRANSACTION.SUCCESS", "transaction", resource,
                        now if now is not None else time.time(), serial)

    def v3_refund(self, otn, refund_id, payment_txid, order_amount, amount, at, now=None,
                  status="SUCCESS"):
        resource = {"mchid": self.v3["mchid"], "out_trade_no": otn,
                    "transaction_id": payment_txid, "out_refund_no": "R" + otn,
                    "refund_id": refund_id, "refund_status": status,
                    "success_time": shanghai(at, "%Y-%m-%dT%H:%M:%S") + "+08:00",
                    "user_received_account": "支付用户零钱",
                    "amount": {"total": order_amount, "refund": amount,
                               "payer_total": order_amount, "payer_refund": amount}}
        event = "REFUND.SUCCESS" if status == "SUCCESS" else "REFUND." + status
        return self._v3(event, "refund", resource, now if now is not None else time.time())

    # --- Alipay ---------------------------------------------------------------------------
    def _alipay(self, fields, tamper=False):
        fields["sign_type"] = "RSA2"
        signature = self.alipay_key.sign(alipay_sign_content(fields).encode(),
                                         padding.PKCS1v15(), hashes.SHA256())
        fields["sign"] = base64.b64encode(signature).decode()
        if tamper:
            fields["total_amount"] = fields["total_amount"] + "0"
        return Request("/v1/callbacks/alipay",
                       {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
                       form(fields))

    def _alipay_base(self, otn, trade_no, order_amount, at):
        now = shanghai(at, "%Y-%m-%d %H:%M:%S")
        return {"app_id": self.alipay["app_id"], "auth_app_id": self.alipay["app_id"],
                "charset": "utf-8", "version": "1.0", "notify_type": "trade_status_sync",
                "notify_id": _hex(16), "notify_time": now, "out_trade_no": otn,
                "trade_no": trade_no, "subject": "payledger campaign",
                "buyer_id": "2088102177846875", "buyer_logon_id": "cam***@example.com",
                "seller_id": "2088102176044281", "total_amount": yuan(order_amount),
                "gmt_create": now}

    def alipay_payment(self, otn, trade_no, amount, at, status="TRADE_SUCCESS", tamper=False):
        fields = self._alipay_base(otn, trade_no, amount, at)
        now = fields["notify_time"]
        fields.update({"trade_status": status})
        if status in ("TRADE_SUCCESS", "TRADE_FINISHED"):
            fields.update({"gmt_payment": now, "receipt_amount": yuan(amount),
                           "buyer_pay_amount": yuan(amount)})
        return self._alipay(fields, tamper)

    def alipay_refund(self, otn, payment_trade_no, refund_no, order_amount, amount, at):
        fields = self._alipay_base(otn, payment_trade_no, order_amount, at)
        now = fields["notify_time"]
        fields.update({"trade_status": "TRADE_SUCCESS", "gmt_payment": now,
                       "gmt_refund": now + ".000", "refund_fee": yuan(amount),
                       "out_biz_no": refund_no})
        return self._alipay(fields)

    def alipay_close(self, otn, trade_no, order_amount, at):
        fields = self._alipay_base(otn, trade_no, order_amount, at)
        fields.update({"trade_status": "TRADE_CLOSED", "gmt_close": fields["notify_time"]})
        return self._alipay(fields)


def classify(path, status, body):
    """The contract's answer classes: ok (acknowledged), failed (a definite refusal, 4xx),
    unknown (no answer, 5xx). A 2xx whose body is not the channel's success answer is
    'odd': the platform would retry it, so the campaign treats it as unknown and reports it."""
    if status is None or status >= 500:
        return "unknown"
    if 400 <= status < 500:
        return "failed"
    if not 200 <= status < 300:
        return "odd"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if path.endswith("/wechat/v2"):
        return "ok" if "<return_code><![CDATA[SUCCESS]]></return_code>" in text else "odd"
    if path.endswith("/alipay"):
        return "ok" if text == "success" else "odd"
    if path.endswith("/wechat/v3"):
        return "ok" if status in (200, 204) else "odd"
    if path.endswith("/generic"):
        try:
            return "ok" if json.loads(text).get("code") == "SUCCESS" else "odd"
        except ValueError:
            return "odd"
    return "ok"


def outcome_of(path, status, body):
    """The outcome payledger names in its answer, where the channel's format carries it."""
    try:
        text = body.decode("utf-8", "replace")
        if path.endswith("/generic") or path == "/v1/orders":
            value = json.loads(text)
            if isinstance(value, dict):
                if "outcome" in value:
                    return value["outcome"]
                if status in (200, 201) and path == "/v1/orders":
                    return "appended" if status == 201 else "duplicate"
    except ValueError:
        pass  # Not JSON: the format names no outcome.
    return None
