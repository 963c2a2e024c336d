"""Credentials of the served protocols: HTTP Basic authentication, TDengine's token login, and the
rule that the originals' shipped defaults (TDengine ``root``/``taosdata``, IoTDB ``root``/``root``)
are accepted only on a loopback address with nothing configured.

A token of ``/rest/login`` is the user and an HMAC of the user and password under a secret made
when the server starts: it needs no state, and a restart of the server ends it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import os
import socket
from dataclasses import dataclass

DEFAULTS = {"tdengine": ("root", "taosdata"), "iotdb": ("root", "root")}


class AuthError(ValueError):
    """A request without usable credentials; ``kind`` says which (``missing``, ``type``, ``basic``,
    ``token``, ``wrong``)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str

    def accepts(self, user: str, password: str) -> bool:
        same_user = hmac.compare_digest(user.encode(), self.user.encode())
        return hmac.compare_digest(password.encode(), self.password.encode()) and same_user


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is only reachable from this machine."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
        except OSError:
            return False


def credentials(protocol: str, configured: dict, host: str) -> Credentials:
    """The credentials of ``protocol`` (``tdengine`` or ``iotdb``) from its ``[serve.<protocol>]``
    settings; the shipped defaults on loopback when none are set; an error elsewhere."""
    user, password = configured.get("user"), configured.get("password")
    if user and password:
        return Credentials(str(user), str(password))
    if user or password:
        raise ValueError(f"[serve.{protocol}] sets {'user' if user else 'password'} without "
                         f"{'password' if user else 'user'} in airflow-stream.toml")
    if not is_loopback(host):
        raise ValueError(f"serving {protocol} on {host}, which is not a loopback address, needs credentials: set "
                         f"user and password in [serve.{protocol}] of airflow-stream.toml")
    return Credentials(*DEFAULTS[protocol])


def basic(header: str) -> tuple[str, str]:
    """The user and password of an ``Authorization: Basic ...`` header's value (without ``Basic``)."""
    try:
        text = base64.b64decode(header.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise AuthError("basic", "invalid basic Authorization") from None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise AuthError("basic", "invalid basic Authorization")
    return user, password


class Tokens:
    """TDengine login tokens, signed with a secret of this server's lifetime."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or os.urandom(32)

    def _sign(self, user: str, password: str) -> str:
        return hmac.new(self._secret, f"{user}\0{password}".encode(), hashlib.sha256).hexdigest()

    def issue(self, credentials: Credentials) -> str:
        user = base64.urlsafe_b64encode(credentials.user.encode()).decode().rstrip("=")
        return f"{user}.{self._sign(credentials.user, credentials.password)}"

    def valid(self, token: str, credentials: Credentials) -> bool:
        return hmac.compare_digest(token.encode(), self.issue(credentials).encode())
