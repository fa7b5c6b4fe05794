"""moto's server with requests applied one at a time.

Real DynamoDB applies each conditional write atomically; the ledger's claims and the rate gate's
counters rely on that. moto's server is threaded and its DynamoDB backend takes no lock, so two
concurrent conditional writes can both pass their condition (a lost update). Serialising requests
restores the behaviour the tests are about. Arguments are moto_server's (-H HOST -p PORT).
"""

import threading

import werkzeug.serving

import moto.server as server

_run_simple = werkzeug.serving.run_simple
_lock = threading.Lock()


def _run_serialised(host, port, app, **kwargs):
    def serialised(environ, start_response):
        with _lock:
            # Drain the response inside the lock: the backend's work may happen while iterating.
            return list(app(environ, start_response))

    return _run_simple(host, port, serialised, **kwargs)


server.run_simple = _run_serialised

if __name__ == "__main__":
    server.main()
