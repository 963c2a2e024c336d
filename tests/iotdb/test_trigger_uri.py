"""What ``USING URI`` may copy into the home: a bounded amount, no links, never ``/``, the user's
home or the stream home; a download has a size cap and an overall deadline (no JVM: ``install``
is what CREATE TRIGGER runs first)."""

from __future__ import annotations

import http.server
import os
import threading
import time
from pathlib import Path

import pytest

from airflow_stream_provider.streams.insert_triggers import TriggerError, install


@pytest.fixture
def target(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_URI_LIMIT_MB", "1")
    monkeypatch.setenv("AIRFLOW_STREAM_TRIGGER_URI_TIMEOUT", "2")
    return home / "triggers" / "install" / "t-1"


@pytest.mark.parametrize("uri", ["/", "file:///", "~", str(Path.home()), "HOME", "HOME/triggers", "ABOVE"])
def test_the_root_the_users_home_and_the_stream_home_are_refused(target, uri):
    home = Path(os.environ["AIRFLOW_STREAM_HOME"])
    (home / "triggers").mkdir()
    uri = uri.replace("HOME", str(home)).replace("ABOVE", str(home.parent))
    with pytest.raises(TriggerError, match="is not copied"):
        install(uri, target)


def test_a_folder_with_a_link_is_refused(target, tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "t.py").write_text("x = 1\n")
    (folder / "etc").symlink_to("/etc")
    with pytest.raises(TriggerError, match="is a symbolic link"):
        install(str(folder), target)
    link = tmp_path / "t_link.py"
    link.symlink_to(folder / "t.py")
    with pytest.raises(TriggerError, match="is a symbolic link"):
        install(str(link), target.with_name("t-2"))


def test_a_folder_over_the_size_limit_is_refused(target, tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "t.py").write_text("x = 1\n")
    (folder / "data.bin").write_bytes(b"\0" * (1024 * 1024 + 1))
    with pytest.raises(TriggerError, match=r"more than 1 MB \(AIRFLOW_STREAM_TRIGGER_URI_LIMIT_MB\)"):
        install(str(folder), target)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        if self.path.startswith("/big"):
            self.wfile.write(b"#" * (3 * 1024 * 1024))
        else:  # a trickle: a byte a second, each read within the socket timeout
            for _ in range(30):
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(0.5)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_download_over_the_size_limit_is_refused(target, server):
    with pytest.raises(TriggerError, match=r"more than 1 MB"):
        install(f"{server}/big.py", target)


def test_a_download_has_an_overall_deadline(target, server):
    began = time.monotonic()
    with pytest.raises(TriggerError, match=r"not downloaded within 2 s \(AIRFLOW_STREAM_TRIGGER_URI_TIMEOUT\)"):
        install(f"{server}/slow.py", target)
    assert time.monotonic() - began < 6
