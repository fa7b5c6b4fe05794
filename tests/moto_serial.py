"""moto's server with requests applied one at a time, and (optionally) their signatures checked.

Real DynamoDB applies each conditional write atomically; the ledger's claims and the rate gate's
counters rely on that. moto's server is threaded and its DynamoDB backend takes no lock, so two
concurrent conditional writes can both pass their condition (a lost update). Serialising requests
restores the behaviour the tests are about. Arguments are moto_server's (-H HOST -p PORT).

moto does not check SigV4 signatures; AWS does. With MOTO_SIGV4_SECRET set (the secret access key
the tests sign with), every signed request is re-signed here with botocore's own SigV4 code and
refused with 403 InvalidSignatureException when the signatures differ, so a request the sender
signs itself (its lean client) is held to what AWS would accept, and the SDK's requests show that
this check agrees with AWS's signer.
"""

import hmac
import io
import os
import sys
import threading

import werkzeug.serving
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import moto.server as server

_run_simple = werkzeug.serving.run_simple
_lock = threading.Lock()
_secret = os.environ.get("MOTO_SIGV4_SECRET")


def _signature_problem(environ, body):
    """None when the request is unsigned or its signature is what botocore computes, else why."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return None
    fields = dict(
        part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(",") if "=" in part
    )
    try:
        key_id, date, region, service, _ = fields["Credential"].split("/")
        signed = fields["SignedHeaders"].split(";")
        given = fields["Signature"]
    except (KeyError, ValueError):
        return f"malformed Authorization header: {auth!r}"
    headers = {}
    for name in signed:
        if name == "content-type":
            value = environ.get("CONTENT_TYPE")
        elif name == "content-length":
            value = environ.get("CONTENT_LENGTH")
        else:
            value = environ.get("HTTP_" + name.upper().replace("-", "_"))
        if value is None:
            return f"signed header {name!r} is missing"
        headers[name] = value
    amz_date = headers.get("x-amz-date") or environ.get("HTTP_X_AMZ_DATE", "")
    if amz_date[:8] != date:
        return f"x-amz-date {amz_date!r} does not match the credential scope date {date!r}"
    query = environ.get("QUERY_STRING", "")
    url = "http://" + headers.get("host", environ.get("HTTP_HOST", "")) + environ.get("PATH_INFO", "/")
    if query:
        url += "?" + query
    request = AWSRequest(method=environ["REQUEST_METHOD"], url=url, headers=headers, data=body)
    request.context["timestamp"] = amz_date
    token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
    signer = SigV4Auth(Credentials(key_id, _secret, token), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, given):
        return f"signature mismatch for {service} {environ['REQUEST_METHOD']} {url}; canonical request:\n{canonical}"
    return None


def _run_serialised(host, port, app, **kwargs):
    def serialised(environ, start_response):
        if _secret is not None:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            problem = _signature_problem(environ, body)
            if problem:
                print("SIGV4 REFUSED: " + problem, file=sys.stderr, flush=True)
                start_response(
                    "403 Forbidden",
                    [("Content-Type", "application/x-amz-json-1.0"), ("x-amzn-ErrorType", "InvalidSignatureException")],
                )
                return [b'{"__type":"InvalidSignatureException","message":"signature mismatch (moto_serial.py)"}']
        with _lock:
            # Drain the response inside the lock: the backend's work may happen while iterating.
            return list(app(environ, start_response))

    return _run_simple(host, port, serialised, **kwargs)


server.run_simple = _run_serialised

if __name__ == "__main__":
    server.main()
