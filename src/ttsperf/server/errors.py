"""Every error the server answers is one JSON shape: `{"error": {"type", "message", "field"}}`.

`field` names the request field at fault (dotted for nested ones) or is null when the fault is not
one field's (a full queue, a bad JSON document). The message says what was expected and, where it
helps, what was found. Client input must never produce a 500: the catch-all handler exists for
server bugs, and the tests fuzz the bodies to keep it unused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("ttsperf.server")

# OpenAI's error type names where it has one, so OpenAI clients classify them.
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "method_not_allowed_error",
    408: "request_timeout_error",
    413: "request_too_large_error",
    499: "client_closed_request",
    500: "internal_error",
    503: "unavailable_error",
    504: "timeout_error",
}


class ApiError(Exception):
    """Raised anywhere in a handler; turned into the JSON error response by `install`."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        *,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, object] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field
        self.type = type or TYPES.get(status, "error")
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # machine-readable details, e.g. the token limit of a 413

    def body(self) -> dict:
        return {"type": self.type, "message": self.message, "field": self.field, **self.extra}

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.body()}, status_code=self.status, headers=self.headers)


def error_response(status: int, message: str, field: str | None = None, **kw) -> JSONResponse:
    return ApiError(status, message, field, **kw).response()


def describe_value(value: object) -> str:
    """What the client sent, in JSON's words and short (bodies can be large)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expected(msg: str) -> str:
    """pydantic's "Input should be a valid integer" -> "expected a valid integer"."""
    for prefix in ("Input should be ", "Input should "):
        if msg.startswith(prefix):
            return "expected " + msg[len(prefix) :]
    return msg[0].lower() + msg[1:]


def from_validation(exc: ValidationError) -> ApiError:
    """The first problem pydantic found, as a 400 naming its field."""
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err["loc"]) or None
    msg = err["msg"].removeprefix("Value error, ")
    kind = err["type"]
    if kind == "missing":
        message = f"{field}: required field is missing"
    elif kind == "extra_forbidden":
        message = f"{field}: unknown field"
    elif kind == "value_error":
        message = f"{field}: {msg}"
    else:  # type and range errors: pydantic says what was expected, we add what was found
        message = f"{field}: {_expected(msg)}, found {describe_value(err.get('input'))}"
    if kind == "model_type" or field is None:
        field, message = None, f"body: {_expected(msg)}, found {describe_value(err.get('input'))}"
    return ApiError(400, message, field)


def install(app: FastAPI) -> None:
    """Route every failure through the one JSON error shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = {
            404: f"no such endpoint: {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Bodies are parsed by hand (server/app.py), so this only sees query/header problems.
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"][1:]) or None
        return error_response(400, f"{field}: {err['msg']}", field)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error ({type(exc).__name__}); this is a server bug")
