"""moto's DynamoDB, one request at a time, for idem-guard's DynamoDB tests.

`moto_server` serves requests on threads and evaluates a conditional write as a read, then a
check, then a write, with no lock between them: two concurrent `PutItem ... attribute_not_exists`
of one key can both succeed (seen: 301 winners for 300 keys, 16 writers each). DynamoDB makes
each conditional write atomic, and that is what the guard's tests rely on, so this wraps moto's
WSGI application in one lock: connections are still accepted on threads, requests are handled
one after another. It serves DynamoDB alone (moto's per-request lookup of the service
among all of its backends took a third of each request's time).

usage: python3 moto_serial.py [-H HOST] [-p PORT]
"""

import argparse
import logging
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import create_backend_app
from werkzeug.serving import run_simple


def serialized(app):
    lock = threading.Lock()

    def handle(environ, start_response):
        with lock:
            # The body is read out under the lock too: moto builds it while handling.
            return list(app(environ, start_response))

    return handle


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5124)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # One log line per request would be most of the log; errors still show.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = create_backend_app("dynamodb")
    run_simple(args.host, args.port, serialized(app), threaded=True)


if __name__ == "__main__":
    main()
