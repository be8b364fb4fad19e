"""Error bodies of the job-local API become exceptions as the C++ clients decode them
(common/http/status_http.cc, StatusFromResponse)."""

from __future__ import annotations

import json
import unittest

import support  # noqa: F401 (puts the SDK on sys.path)

import embody
from embody._errors import error_from_response


def body(code: str, message: str, field: str = "") -> bytes:
    e = {"code": code, "message": message}
    if field:
        e["field"] = field
    return json.dumps({"error": e}).encode()


class ErrorFromResponseTest(unittest.TestCase):
    def test_a_refusal(self) -> None:
        e = error_from_response(400, body("invalid_argument", "events[0]: bad", "events[0].x"))
        self.assertIsInstance(e, embody.EventRefusedError)
        self.assertEqual((e.status, e.code, e.message, e.field),
                         (400, "invalid_argument", "events[0]: bad", "events[0].x"))
        self.assertEqual(str(e), "events[0]: bad (field events[0].x)")

    def test_not_in_job(self) -> None:
        self.assertIsInstance(error_from_response(401, body("unauthenticated", "m")),
                              embody.NotInJobError)
        self.assertIsInstance(error_from_response(404, body("not_found", "m")),
                              embody.NotInJobError)

    def test_busy(self) -> None:
        e = error_from_response(429, body("resource_exhausted", "full"))
        self.assertIsInstance(e, embody.AgentBusyError)
        self.assertEqual(e.code, "resource_exhausted")

    def test_a_code_the_status_does_not_give_is_not_believed(self) -> None:
        # A proxy's 503 in front of a stale body: the status decides.
        e = error_from_response(503, body("invalid_argument", "stale"))
        self.assertEqual(e.code, "unavailable")
        self.assertEqual(e.message, "stale")
        self.assertEqual(error_from_response(400, body("ok", "x")).code, "invalid_argument")

    def test_a_body_that_is_not_the_servers(self) -> None:
        e = error_from_response(502, b"<html>bad gateway</html>")
        self.assertEqual(e.code, "unavailable")
        self.assertEqual(e.message, "HTTP 502: <html>bad gateway</html>")
        self.assertEqual(error_from_response(413, b"").message, "HTTP 413")
        self.assertEqual(error_from_response(413, b"").code, "invalid_argument")
        self.assertEqual(error_from_response(400, b'{"error":{}}').message, "HTTP 400")
