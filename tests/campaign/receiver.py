"""The subscriptions' receiver: an HTTP server that records every delivery, verifies its
Standard Webhooks signature itself (HMAC-SHA256 over "<id>.<timestamp>.<body>" with each
secret), and answers as told: 200, or down (the port refuses connections), slow (answers after
the sender's timeout), 500, 429 (Retry-After: 1) or 410."""

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def secret_bytes(secret):
    return base64.b64decode(secret[len("whsec_"):])


class Delivery:
    __slots__ = ("at", "name", "webhook_id", "timestamp", "status", "seqs", "events",
                 "signature_ok", "problems", "body_len")

    def __init__(self):
        self.problems = []


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class Receiver:
    def __init__(self, port, subscriptions, log):
        """`subscriptions`: name -> {"path", "secrets": [whsec_…], "timeout": seconds,
        "batch_max": n}."""
        self.port = port
        self.subs = subscriptions
        self.by_path = {s["path"]: name for name, s in subscriptions.items()}
        self.mode = {name: "ok" for name in subscriptions}
        self.lock = threading.Lock()
        self.deliveries = []
        self.log = open(log, "a", buffering=1)
        self.server = None
        self.thread = None
        self.down = False
        self.up()

    # --- control ------------------------------------------------------------------------
    def set_mode(self, name, mode):
        with self.lock:
            self.mode[name] = mode
        self.log.write("%.3f mode %s %s\n" % (time.time(), name, mode))

    def up(self):
        with self.lock:
            if self.server is not None:
                return
            receiver = self

            class Handler(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"

                def log_message(self, *args):
                    pass

                def do_POST(self):
                    receiver._handle(self)

            self.server = _Server(("127.0.0.1", self.port), Handler)
            self.thread = threading.Thread(target=self.server.serve_forever,
                                           kwargs={"poll_interval": 0.1}, daemon=True,
                                           name="receiver")
            self.thread.start()
            self.down = False
        self.log.write("%.3f up\n" % time.time())

    def take_down(self):
        with self.lock:
            server, self.server = self.server, None
            self.down = True
        if server is not None:
            server.shutdown()
            server.server_close()
        self.log.write("%.3f down\n" % time.time())

    def stop(self):
        self.take_down()
        self.log.close()

    def snapshot(self):
        with self.lock:
            return list(self.deliveries)

    # --- a request ------------------------------------------------------------------------
    def _handle(self, handler):
        d = Delivery()
        d.at = time.time()
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        d.body_len = len(body)
        path = handler.path
        name = self.by_path.get(path)
        d.name = name
        d.webhook_id = handler.headers.get("webhook-id")
        d.timestamp = handler.headers.get("webhook-timestamp")
        d.seqs = []
        d.events = []
        d.signature_ok = False
        if name is None:
            d.problems.append("delivery to an unknown path %s" % path)
        else:
            sub = self.subs[name]
            signatures = (handler.headers.get("webhook-signature") or "").split(" ")
            message = ("%s.%s." % (d.webhook_id, d.timestamp)).encode() + body
            expected = set()
            for secret in sub["secrets"]:
                mac = hmac.new(secret_bytes(secret), message, hashlib.sha256).digest()
                expected.add("v1," + base64.b64encode(mac).decode())
            d.signature_ok = any(s in expected for s in signatures)
            if not d.signature_ok:
                d.problems.append("signature does not verify: %r" % signatures)
            elif len([s for s in signatures if s in expected]) != len(sub["secrets"]):
                d.problems.append("not signed with every secret: %d signatures"
                                  % len(signatures))
            if handler.headers.get("content-type", "").split(";")[0] != "application/json":
                d.problems.append("content-type %r" % handler.headers.get("content-type"))
            try:
                doc = json.loads(body)
                if doc.get("type") != "ledger.events":
                    d.problems.append("type %r" % doc.get("type"))
                data = doc["data"]
                if data.get("subscription") != name:
                    d.problems.append("data.subscription %r" % data.get("subscription"))
                d.events = data["events"]
                d.seqs = [e["seq"] for e in d.events]
            except (ValueError, KeyError, TypeError) as error:
                d.problems.append("body: %s" % error)
            if d.seqs:
                if d.webhook_id != "%s:%d-%d" % (name, d.seqs[0], d.seqs[-1]):
                    d.problems.append("webhook-id %r for seqs %d-%d"
                                      % (d.webhook_id, d.seqs[0], d.seqs[-1]))
                if any(b <= a for a, b in zip(d.seqs, d.seqs[1:])):
                    d.problems.append("seqs not ascending in one batch: %s" % d.seqs)
                if len(d.seqs) > sub["batch_max"]:
                    d.problems.append("%d events, batch_max %d" % (len(d.seqs),
                                                                    sub["batch_max"]))
            else:
                d.problems.append("a batch without events")
        with self.lock:
            mode = self.mode.get(name, "ok")
        status = {"ok": 200, "500": 500, "429": 429, "410": 410, "slow": 200}.get(mode, 200)
        if mode == "slow":
            # Past the sender's timeout_seconds: the sender gives up before this answer.
            time.sleep(self.subs[name]["timeout"] + 1.5 if name else 3)
            d.status = "slow"
        else:
            d.status = status
        with self.lock:
            self.deliveries.append(d)
        self.log.write("%.3f %s %s %s n=%d %s%s\n" % (
            d.at, name, d.webhook_id, d.status, len(d.seqs),
            "sig-ok" if d.signature_ok else "SIG-BAD",
            (" " + "; ".join(d.problems)) if d.problems else ""))
        try:
            payload = b"" if status == 200 else b'{"error":"campaign says %d"}' % status
            handler.send_response(status)
            if status == 429:
                handler.send_header("Retry-After", "1")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, socket.error):
            pass  # The sender gave up (its timeout): the delivery is recorded above as it came.
