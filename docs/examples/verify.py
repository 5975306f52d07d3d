"""A webhook receiver that checks every delivery's signature before it
trusts the body. Standard library only (Python 3.8+):

    PARLEY_WEBHOOK_SECRET=whsec_... python3 verify.py

It listens on 127.0.0.1:$PORT (9000 when PORT is unset; 0 picks a free
port) and prints the address it took, then one line per delivery.
"""
import hashlib
import hmac
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# How far X-Service-Timestamp may be from this machine's clock, either way,
# before a delivery is refused as a possible replay.
REPLAY_WINDOW_SECONDS = 300


def verify_signature(secret, timestamp, signature, body, now):
    """Return None when the delivery is genuine and fresh, else the reason.

    The signature is "sha256=" and the hex HMAC-SHA256 of
    "<timestamp>.<body>" keyed with the webhook's secret; body is the raw
    bytes as received, never re-encoded JSON.
    """
    expected = "sha256=" + hmac.new(
        secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(signature.encode(), expected.encode()):  # constant time
        return "bad signature"
    try:
        sent_at = int(timestamp)
    except ValueError:
        return "bad timestamp"
    if abs(now - sent_at) > REPLAY_WINDOW_SECONDS:
        return "stale timestamp"
    return None


SECRET = os.environ.get("PARLEY_WEBHOOK_SECRET", "")
seen = set()  # delivery ids already handled; keep them in your database
seen_lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        # The signature covers the bytes as sent: read them before any parsing.
        length = int(self.headers.get("Content-Length", "0"))
        if length > 1 << 20:
            self.send_error(413, "body too large")
            return
        body = self.rfile.read(length)
        problem = verify_signature(
            SECRET,
            self.headers.get("X-Service-Timestamp", ""),
            self.headers.get("X-Service-Signature", ""),
            body,
            time.time(),
        )
        if problem:
            print("refused: " + problem, file=sys.stderr, flush=True)
            self.send_response(401)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(problem.encode())
            return
        # Retries and replays carry the same X-Service-Delivery: answer 2xx
        # every time, act once.
        delivery = self.headers.get("X-Service-Delivery", "")
        with seen_lock:
            first = delivery not in seen
            seen.add(delivery)
        if first:
            event = self.headers.get("X-Service-Event", "")
            print("accepted %s %s %s" % (event, delivery, body.decode()), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):  # one line per delivery is printed above
        pass


if __name__ == "__main__":
    if not SECRET:
        sys.exit("set PARLEY_WEBHOOK_SECRET to the secret PUT /v1/webhook returned")
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), Receiver)
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()
