"""The gRPC channel to a Spark Connect server that checks a pre-shared token (the stream node).

pyspark sends a token only over TLS, or over gRPC's local credentials when the host is spelled
``localhost``. The node serves plain gRPC (on 127.0.0.1, or on a private network such as the compose
network), so a URL with a token and without ``use_ssl=true`` gets a plain channel here, the token
going as the ``authorization: Bearer`` header that Spark's ``PreSharedKeyAuthenticationInterceptor``
checks. ``use_ssl=true`` keeps pyspark's TLS channel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql.connect.client.core import DefaultChannelBuilder


class TokenChannelBuilder(DefaultChannelBuilder):
    """pyspark's channel builder, sending the URL's token in a header over a plain channel."""

    @property
    def _plain_with_token(self) -> bool:
        return self.token is not None and not self.use_ssl

    def toChannel(self) -> Any:  # a grpc.Channel (grpc has no type stubs here)
        if self._plain_with_token:
            return self._insecure_channel(self.endpoint)
        return super().toChannel()

    def metadata(self) -> Iterable[tuple[str, str]]:
        headers = list(super().metadata())
        if self._plain_with_token:
            headers.append(("authorization", f"Bearer {self.token}"))
        return headers
