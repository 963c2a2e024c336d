"""One HTTP request and its answer, as the protocol modules see them (no sockets)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names in lower case
    body: bytes = b""

    @classmethod
    def of(cls, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> Request:
        path, _, query = target.partition("?")
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        return cls(method, path, params, {k.lower(): v for k, v in headers.items()}, body)


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    #: what the access log says about the request beyond its line (a request id, a row count)
    note: str = ""


def json_response(status: int, payload: object, note: str = "") -> Response:
    return Response(status, json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8"), note=note)
