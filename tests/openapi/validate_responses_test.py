#!/usr/bin/python3
"""Tests of validate_responses.py on handmade recordings, against api/openapi.yaml.

    validate_responses_test.py DESCRIPTION   (ctest OpenApiValidatorSelfTest)
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import validate_responses  # noqa: E402

DESCRIPTION_PATH = os.path.join(HERE, "..", "..", "api", "openapi.yaml")

ERROR = json.dumps({"code": "FAIL", "outcome": "malformed", "message": "no such endpoint"})
EVENT = {"seq": 2, "out_trade_no": "T-1", "event_type": "PAYMENT_SUCCEEDED",
         "source": "generic", "account_id": "shop-1", "amount": 12800, "currency": "CNY",
         "transaction_id": "4200", "occurred_at": "2026-12-04T08:30:00Z",
         "recorded_at": "2026-12-04T08:30:01.123456Z", "receipt_id": 7, "data": {}}
READ_FROM = {"payledger-read-from": "primary"}


def exchange(method, path, status, body="", content_type="application/json", headers=None):
    return {"test": "Handmade.Line", "method": method, "path": path, "status": status,
            "content_type": content_type, "headers": headers or {}, "body": body}


class ValidateResponsesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.description = validate_responses.load(DESCRIPTION_PATH)

    def problems(self, recorded):
        return validate_responses.check_exchange(self.description, recorded)

    def assertHolds(self, recorded):
        self.assertEqual(self.problems(recorded), [])

    def assertFails(self, recorded, fragment):
        problems = self.problems(recorded)
        self.assertTrue(any(fragment in problem for problem in problems),
                        f"expected a problem with {fragment!r}, got {problems}")

    def test_a_declared_answer_holds(self):
        self.assertHolds(exchange("GET", "/healthz", 200, '{"status":"ok"}'))
        self.assertHolds(exchange("GET", "/v1/events", 200,
                                  json.dumps({"events": [EVENT], "next_after": 2}),
                                  headers=READ_FROM))
        self.assertHolds(exchange("GET", "/v1/orders/T-1/events", 200,
                                  json.dumps({"events": [EVENT]}), headers=READ_FROM))

    def test_an_undeclared_status_fails(self):
        self.assertFails(exchange("GET", "/healthz", 418, '{"status":"ok"}'),
                         "status 418 is not declared for GET /healthz")

    def test_a_schema_violation_fails(self):
        self.assertFails(exchange("GET", "/healthz", 200, '{"status":"fine"}'), "'ok' was expected")
        extra = dict(EVENT, surprise=1)
        self.assertFails(exchange("GET", "/v1/events", 200,
                                  json.dumps({"events": [extra], "next_after": 2}),
                                  headers=READ_FROM),
                         "'surprise' was unexpected")
        decimal_money = dict(EVENT, amount=128.5)
        self.assertFails(exchange("GET", "/v1/events", 200,
                                  json.dumps({"events": [decimal_money], "next_after": 2}),
                                  headers=READ_FROM),
                         "is not of type 'integer', 'null'")
        self.assertFails(exchange("GET", "/v1/events", 200, "{not json", headers=READ_FROM),
                         "not JSON")

    def test_a_missing_required_header_fails(self):
        self.assertFails(exchange("GET", "/v1/events", 200,
                                  json.dumps({"events": [], "next_after": 0})),
                         "the header Payledger-Read-From is missing")
        self.assertFails(exchange("GET", "/v1/events", 200,
                                  json.dumps({"events": [], "next_after": 0}),
                                  headers={"payledger-read-from": "replica"}),
                         "the header Payledger-Read-From")

    def test_an_undeclared_content_type_fails(self):
        self.assertFails(exchange("GET", "/healthz", 200, "ok", content_type="text/plain"),
                         "content type 'text/plain' is not declared")
        self.assertFails(exchange("POST", "/v1/callbacks/wechat/v3", 204, "{}"),
                         "where the description declares none")

    def test_unrouted_answers(self):
        self.assertHolds(exchange("GET", "/v2/nothing", 404, ERROR))
        self.assertFails(exchange("GET", "/v2/nothing", 200, ERROR), "no path template matches")
        self.assertHolds(exchange("GET", "/console/a/b.js", 404, "No such file in the console.\n",
                                  content_type="text/plain; charset=utf-8",
                                  headers={"content-security-policy": "default-src 'none'"}))
        self.assertHolds(exchange("PUT", "/v1/orders", 405, ERROR, headers={"allow": "POST"}))
        self.assertFails(exchange("PUT", "/v1/orders", 405, ERROR, headers={"allow": "GET"}),
                         "Allow: GET names a method")
        self.assertFails(exchange("PUT", "/v1/orders", 200, ERROR, headers={"allow": "POST"}),
                         "PUT is not declared for /v1/orders")
        self.assertFails(exchange("PUT", "/v1/orders", 405, ERROR), "the header Allow is missing")
        forbidden = json.dumps({"code": "FAIL", "outcome": "bad_signature", "message": "no"})
        self.assertHolds(exchange("GET", "/v1/admin/subscriptions/a/rewind", 403, forbidden))

    def test_platform_formats(self):
        success = ("<xml><return_code><![CDATA[SUCCESS]]></return_code>"
                   "<return_msg><![CDATA[OK]]></return_msg></xml>")
        self.assertHolds(exchange("POST", "/v1/callbacks/wechat/v2", 200, success,
                                  content_type="application/xml"))
        self.assertFails(exchange("POST", "/v1/callbacks/wechat/v2", 200,
                                  "<xml><return_code>MAYBE</return_code>"
                                  "<return_msg>OK</return_msg></xml>",
                                  content_type="application/xml"),
                         "is not one of")
        self.assertHolds(exchange("POST", "/v1/callbacks/alipay", 200, "success",
                                  content_type="text/plain"))
        self.assertFails(exchange("POST", "/v1/callbacks/alipay", 200, "ok",
                                  content_type="text/plain"),
                         "'success' was expected")
        self.assertHolds(exchange("POST", "/v1/callbacks/wechat/v3", 204, "", content_type=""))

    def test_a_body_recorded_without_its_bytes_is_checked_but_for_them(self):
        unrecorded = exchange("GET", "/v1/events", 200, headers=READ_FROM)
        del unrecorded["body"]
        unrecorded.update(body_size=9000000, body_recorded=False)
        self.assertHolds(unrecorded)
        self.assertFails(dict(unrecorded, headers={}), "the header Payledger-Read-From is missing")
        self.assertFails(dict(unrecorded, status=299), "status 299 is not declared")

    def test_ndjson_lines(self):
        self.assertHolds(exchange("GET", "/v1/events", 200, json.dumps(EVENT) + "\n",
                                  content_type="application/x-ndjson", headers=READ_FROM))
        self.assertFails(exchange("GET", "/v1/events", 200,
                                  json.dumps(dict(EVENT, seq="2")) + "\n",
                                  content_type="application/x-ndjson", headers=READ_FROM),
                         "NDJSON line 1")

    def test_the_command_lists_failures_with_their_line_and_exits_1(self):
        lines = [exchange("GET", "/healthz", 200, '{"status":"ok"}'),
                 exchange("GET", "/healthz", 418, '{"status":"ok"}'),
                 exchange("GET", "/healthz", 200, '{"status":"fine"}')]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as recording:
            recording.write("".join(json.dumps(line) + "\n" for line in lines))
        try:
            run = subprocess.run([sys.executable, os.path.join(HERE, "validate_responses.py"),
                                  DESCRIPTION_PATH, recording.name],
                                 capture_output=True, text=True, check=False)
        finally:
            os.unlink(recording.name)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("3 exchanges", run.stdout)
        self.assertIn(f"{recording.name}:2: Handmade.Line: GET /healthz -> 418", run.stdout)
        self.assertIn(f"{recording.name}:3: Handmade.Line: GET /healthz -> 200", run.stdout)
        self.assertNotIn(f"{recording.name}:1:", run.stdout)

    def test_the_command_skips_when_nothing_was_recorded(self):
        run = subprocess.run([sys.executable, os.path.join(HERE, "validate_responses.py"),
                              DESCRIPTION_PATH, "/nonexistent/recording.jsonl"],
                             capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, validate_responses.EXIT_SKIPPED, run.stdout)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        DESCRIPTION_PATH = sys.argv.pop(1)
    unittest.main()
