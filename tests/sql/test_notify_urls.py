"""NOTIFY URLs carry no credentials: a user or password in one is refused where it stands, and the
error names the place credentials belong without echoing them."""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

W = "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM meters\n  NOTIFY('ws://ok:1/a', "


@pytest.mark.parametrize("url", ["ws://admin:s3cret@h:1/?token=abc", "wss://admin@h:1/n", "ws://:s3cret@h:1/"])
def test_userinfo_in_a_notify_url_is_refused_with_its_position(url):
    text = W + f"'{url}') ON (WINDOW_CLOSE)"
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    err = info.value
    assert err.clause == "NOTIFY" and (err.line, err.column) == (2, 25)
    assert "stream_ws connection" in str(err)
    assert "s3cret" not in str(err) and "admin" not in str(err) and "token" not in str(err)


def test_a_url_without_userinfo_still_passes():
    parse(W + "'wss://h:1/n?k=v') ON (WINDOW_CLOSE)")
