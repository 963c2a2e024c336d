"""The rows of ``bench/ingest.py`` for ``airflow-stream serve``: rows/s through TDengine's REST
INSERT, InfluxDB line protocol and IoTDB's insertTablet, in batches of 1,000 and 10,000 rows from 1
and 4 concurrent clients, against ``load`` and a direct kernel write of the same rows in the same
run; and the latency from a REST INSERT to the stream's output row (LOW_LATENCY_CALC on the node).

The server runs as its own process (``airflow-stream serve``), the clients are threads of this one
sending bodies made before the clock starts; the session protocol's clients are ``apache-iotdb``
``Session`` objects (``serve --iotdb-session-port``), one a thread, opened before the clock starts.

Run alone, it compares another checkout with this one, taking turns in one run::

    .venv/bin/python bench/serve_ingest.py --before ../main [--endpoints "TDengine REST INSERT"] [--rounds 2]

Targets on 2 cores: >= 200,000 rows/s through line protocol and insertTablet with 10,000-row
batches; REST INSERT of 1,000-row statements at least 5x today's SQL INSERT (15,300 rows/s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import requests

ROOT = Path(__file__).resolve().parents[1]
TARGET_SCHEMALESS = 200_000
TARGET_REST_INSERT = 5 * 15_300
#: rows per case, split over the clients and batches
ROWS_PER_CASE = 80_000
EPOCH_MS = 1_735_689_600_000  # 2025-01-01
TDENGINE = ("root", "taosdata")
IOTDB = ("root", "root")


class Server:
    """``airflow-stream serve`` in a process of its own, with this checkout (or ``checkout``) on its path."""

    def __init__(self, home: Path, tdengine: int, iotdb: int, session: int = 0, checkout: Path = ROOT) -> None:
        env = os.environ | {"AIRFLOW_STREAM_HOME": str(home),
                            "PYTHONPATH": os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))}
        ports = ["--tdengine-port", str(tdengine), "--iotdb-port", str(iotdb)]
        if session:
            ports += ["--iotdb-session-port", str(session)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "airflow_stream_provider.cli", "serve", *ports], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        for _ in range(2 + bool(session)):  # a line a URL served
            self.process.stdout.readline()
        self.tdengine = f"http://127.0.0.1:{tdengine}"
        self.iotdb = f"http://127.0.0.1:{iotdb}"
        self.session = session

    def sql(self, text: str) -> dict:
        answer = requests.post(f"{self.tdengine}/rest/sql", data=text.encode(), auth=TDENGINE, timeout=600).json()
        if answer.get("code") != 0:
            raise SystemExit(f"{text[:80]}: {answer}")
        return answer

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=120)


def _rest_insert(db: str, client: int, batch: int, rows: int, start_ms: int) -> bytes:
    """One INSERT of ``rows`` rows into 10 subtables of ``db.meters``."""
    per = rows // 10
    parts = []
    for sub in range(10):
        values = " ".join(f"({start_ms + i}, {10 + (i % 7) * 0.5}, {200 + i % 40}, 0.5)" for i in range(per))
        parts.append(f"{db}.c{client}_{sub} USING {db}.meters TAGS ('City{sub}', {sub}) VALUES {values}")
    return ("INSERT INTO " + " ".join(parts)).encode()


def _lines(client: int, rows: int, start_ms: int) -> bytes:
    """``rows`` lines over 10 tag sets, nanosecond times."""
    return "\n".join(f"meters,location=c{client}_{i % 10},groupid={i % 10} current={10 + (i % 7) * 0.5},"
                     f"voltage={200 + i % 40}i,phase=0.5 {(start_ms + i // 10) * 1_000_000}"
                     for i in range(rows)).encode()


def _tablet(client: int, rows: int, start_ms: int) -> dict:
    return {"timestamps": [start_ms + i for i in range(rows)], "measurements": ["current", "voltage", "phase"],
            "data_types": ["FLOAT", "INT32", "FLOAT"],
            "values": [[10 + (i % 7) * 0.5 for i in range(rows)], [200 + i % 40 for i in range(rows)],
                       [0.5] * rows], "is_aligned": False, "device": f"root.sv.c{client}"}


def _iotdb_client() -> None:
    """Make ``import iotdb`` find the ``apache-iotdb`` package, not ``bench/iotdb.py`` beside this file."""
    here = Path(__file__).resolve().parent
    found = sys.modules.get("iotdb")
    if found is not None and not hasattr(found, "__path__"):
        del sys.modules["iotdb"]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here] + [str(here)]


def _session_tablet(client: int, rows: int, start_ms: int) -> object:
    """The same rows as :func:`_tablet`, as the ``apache-iotdb`` ``Session`` sends a tablet."""
    _iotdb_client()
    from iotdb.utils.IoTDBConstants import TSDataType
    from iotdb.utils.Tablet import Tablet

    return Tablet(f"root.svs.c{client}", ["current", "voltage", "phase"],
                  [TSDataType.FLOAT, TSDataType.INT32, TSDataType.FLOAT],
                  [[10 + (i % 7) * 0.5, 200 + i % 40, 0.5] for i in range(rows)],
                  [start_ms + i for i in range(rows)])


class _SessionClient:
    """An ``apache-iotdb`` ``Session`` for one client thread (a session is not shared between threads)."""

    def __init__(self, port: int) -> None:
        _iotdb_client()
        from iotdb.Session import Session

        self.session = Session("127.0.0.1", port, *IOTDB)
        self.session.open(False)

    def __enter__(self) -> _SessionClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.session.close()


def _timed(sends: list[list[Callable]], session_port: int = 0) -> float:
    """Seconds for every client (a thread each) to send its requests one after the other; each
    client has an HTTP session, or with ``session_port`` an IoTDB ``Session`` opened before the clock."""
    errors: list[BaseException] = []
    opened = [_SessionClient(session_port) if session_port else requests.Session() for _ in sends]

    def client(mine: list[Callable], connection: object) -> None:
        with connection:  # type: ignore[attr-defined]
            try:
                for send in mine:
                    send(connection)
            except BaseException as err:  # reported below, after every client ends
                errors.append(err)

    threads = [threading.Thread(target=client, args=(mine, connection)) for mine, connection in zip(sends, opened)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _post(url: str, body: bytes | dict, auth: tuple[str, str], expect: int) -> Callable[[requests.Session], None]:
    def send(session: requests.Session) -> None:
        answer = (session.post(url, json=body, auth=auth, timeout=600) if isinstance(body, dict)
                  else session.post(url, data=body, auth=auth, timeout=600))
        if answer.status_code != expect or (expect == 200 and answer.json().get("code") not in (0, 200)):
            raise SystemExit(f"{url}: {answer.status_code} {answer.text[:300]}")
    return send


def _session_send(tablet: object) -> Callable[[_SessionClient], None]:
    def send(client: _SessionClient) -> None:
        client.session.insert_tablet(tablet)
    return send


ENDPOINTS = ("TDengine REST INSERT", "line protocol", "IoTDB insertTablet", "IoTDB session insertTablet")


def throughput(home: Path, tdengine: int, iotdb: int, session: int = 0, *, endpoints: tuple[str, ...] = ENDPOINTS,
               checkout: Path = ROOT) -> list[tuple[str, int, float]]:
    """Rows/s of each endpoint (the session's when ``session`` is a port), by batch size and clients."""
    server = Server(home, tdengine, iotdb, session, checkout)
    results = []
    try:
        server.sql("CREATE DATABASE IF NOT EXISTS sv_rest PRECISION 'ms'")
        server.sql("CREATE STABLE IF NOT EXISTS sv_rest.meters (ts TIMESTAMP, current FLOAT, voltage INT, "
                   "phase FLOAT) TAGS (location VARCHAR(64), groupid INT)")
        server.sql("CREATE DATABASE IF NOT EXISTS sv_lp PRECISION 'ms'")
        case = 0
        for endpoint in endpoints:
            if endpoint.startswith("IoTDB session") and not session:
                continue
            for batch in (1_000, 10_000):
                for clients in (1, 4):
                    case += 1
                    requests_each = max(1, ROWS_PER_CASE // batch // clients)
                    sends = []
                    for c in range(clients):
                        mine = []
                        for r in range(requests_each):
                            start = EPOCH_MS + ((case * 16 + c) * 1000 + r) * 100_000_000 // 1000
                            if endpoint == "TDengine REST INSERT":
                                mine.append(_post(f"{server.tdengine}/rest/sql",
                                                  _rest_insert("sv_rest", c, batch, batch, start), TDENGINE, 200))
                            elif endpoint == "line protocol":
                                mine.append(_post(f"{server.tdengine}/influxdb/v1/write?db=sv_lp&precision=ns",
                                                  _lines(c, batch, start), TDENGINE, 204))
                            elif endpoint == "IoTDB insertTablet":
                                mine.append(_post(f"{server.iotdb}/rest/v2/insertTablet", _tablet(c, batch, start),
                                                  IOTDB, 200))
                            else:
                                mine.append(_session_send(_session_tablet(c, batch, start)))
                        sends.append(mine)
                    seconds = _timed(sends, session if endpoint.startswith("IoTDB session") else 0)
                    rows = requests_each * batch * clients
                    results.append((f"{endpoint}, {batch:,}-row batches, {clients} client{'s' * (clients > 1)}",
                                    rows, seconds))
                    print(f"{results[-1][0]}: {rows / seconds:,.0f} rows/s", file=sys.stderr)
    finally:
        server.stop()
    return results


def baselines(home: Path, data: pa.Table, parquet: Path) -> list[tuple[str, int, float]]:
    """``load`` of the same number of rows, and a direct kernel write (delta-rs append) of them."""
    from deltalake import write_deltalake

    from airflow_stream_provider import statements
    from airflow_stream_provider.model import TableName
    from airflow_stream_provider.warehouse import Warehouse
    from airflow_stream_provider.warehouse.load import load

    rows = data.slice(0, ROWS_PER_CASE)
    part = parquet.with_name("serve-rows.parquet")
    import pyarrow.parquet as pq

    pq.write_table(rows, part)
    warehouse = Warehouse()
    list(statements.run(warehouse, "CREATE DATABASE sv_load PRECISION 'ms'; CREATE STABLE sv_load.meters "
                        "(ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) TAGS (location VARCHAR(64), "
                        "groupid INT)"))
    report = load(warehouse, part, TableName("meters", "sv_load"))
    started = time.perf_counter()
    write_deltalake(str(home / "kernel-direct"), rows, mode="append")
    direct = time.perf_counter() - started
    return [(f"load Parquet, {report.rows:,} rows", report.rows, report.seconds),
            (f"direct kernel write (delta-rs append), {rows.num_rows:,} rows", rows.num_rows, direct)]


def latency(home: Path, tdengine: int, windows: int) -> list[float]:
    """Seconds from sending a REST INSERT that closes a window to the commit of its output row, on
    a LOW_LATENCY_CALC stream hosted by the stream node."""
    import pyarrow.compute as pc
    from latency import commit_ms, first_version_with  # bench/latency.py

    from airflow_stream_provider.node import server as node
    from airflow_stream_provider.processes import free_port

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    node.start(free_port())
    server = Server(home, tdengine, 0)
    samples = []
    try:
        server.sql("CREATE DATABASE lat")
        server.sql("CREATE TABLE lat.m (ts TIMESTAMP, v DOUBLE)")
        server.sql("CREATE STREAM lat.s INTERVAL(1m) SLIDING(1m) FROM lat.m STREAM_OPTIONS(LOW_LATENCY_CALC) "
                   "INTO lat.s_out AS SELECT _twstart ts, sum(v) total FROM %%trows")
        time.sleep(5)  # the node starts the detector
        out = home / "warehouse" / "lat" / "s_out"
        server.sql(f"INSERT INTO lat.m VALUES ('{(t0 + timedelta(seconds=5)).isoformat()}', 0)")
        for i in range(1, windows + 1):
            start = t0 + timedelta(minutes=i - 1)
            sent = time.time()
            server.sql(f"INSERT INTO lat.m VALUES ('{(t0 + timedelta(minutes=i, seconds=5)).isoformat()}', {i})")

            def done(arrow: pa.Table, start: datetime = start) -> bool:
                return arrow.num_rows > 0 and pc.any(pc.equal(arrow.column("ts"), start)).as_py()

            deadline, version = time.monotonic() + 60, None
            while version is None and time.monotonic() < deadline:
                time.sleep(0.05)
                version = first_version_with(out, done)
            if version is None:
                raise SystemExit(f"window {i} produced no output in 60 s")
            samples.append(commit_ms(out, version) / 1000 - sent)
            print(f"REST INSERT to output row: window {i}: {samples[-1]:.2f} s", file=sys.stderr)
    finally:
        server.stop()
        node.stop()
    return samples


def compare(before: Path, endpoints: tuple[str, ...], rounds: int) -> list[tuple[str, float, float]]:
    """(case, rows/s of the ``before`` checkout, rows/s of this one), the best of ``rounds`` runs
    each, the two taking turns in one run of this program, each on a home of its own."""
    import tempfile

    from airflow_stream_provider.processes import free_port

    best: dict[str, list[float]] = {}
    for turn in range(rounds):
        for side, checkout in enumerate((before, ROOT)):
            with tempfile.TemporaryDirectory(prefix="serve-bench-") as home:
                print(f"round {turn + 1}: {'before' if side == 0 else 'after'} ({checkout})", file=sys.stderr)
                found = throughput(Path(home), free_port(), free_port(), free_port(), endpoints=endpoints,
                                   checkout=checkout)
            for label, rows, seconds in found:
                rates = best.setdefault(label, [0.0, 0.0])
                rates[side] = max(rates[side], rows / seconds)
    return [(label, rates[0], rates[1]) for label, rates in best.items()]


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout to measure against this one")
    parser.add_argument("--endpoints", default="TDengine REST INSERT,IoTDB session insertTablet",
                        help=f"comma-separated, of: {', '.join(ENDPOINTS)}")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    endpoints = tuple(e.strip() for e in args.endpoints.split(","))
    unknown = set(endpoints) - set(ENDPOINTS)
    if unknown:
        parser.error(f"unknown endpoints: {', '.join(sorted(unknown))}")
    print("\n| case (rows/s) | before | after |\n|---|---:|---:|")
    for label, old, new in compare(args.before, endpoints, args.rounds):
        print(f"| {label} | {old:,.0f} | {new:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
