"""Group commit: concurrent INSERTs into one table share a Delta commit, each all or nothing.

The first commit is held until the other writers have joined the queue behind it (the real
commit, only started later), so the rounds are known: one commit of the first request, then one
shared by every request that joined. Row counts, versions and sums are worked out by hand from
the rows each request sends.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from deltalake import DeltaTable

from airflow_stream_provider import statements
from airflow_stream_provider.warehouse import Warehouse, group_commit, listeners, writer
from airflow_stream_provider.warehouse.catalog import WarehouseError

BASE_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
ROWS = 50  # rows per request, 5 subtables of 10 rows


@pytest.fixture
def power(tmp_path) -> Warehouse:
    warehouse = Warehouse(tmp_path / "wh")
    list(statements.run(warehouse, "CREATE DATABASE power PRECISION 'ms'; CREATE STABLE power.meters "
                        "(ts TIMESTAMP, v BIGINT) TAGS (site INT)"))
    return warehouse


def _insert(request: int, bad: bool = False) -> str:
    """Request ``request``'s rows: 10 rows a subtable s<request>_<k>, times 1 ms apart, v = request."""
    parts = []
    for k in range(5):
        values = " ".join(f"({BASE_MS + request * 1000 + i}, {99999999999999999999 if bad and i == 7 else request})"
                          for i in range(10))
        parts.append(f"power.s{request}_{k} USING power.meters TAGS ({k}) VALUES {values}")
    return "INSERT INTO " + " ".join(parts)


def _path(warehouse: Warehouse) -> str:
    return str(warehouse.catalog.table_path("power", "meters"))


@contextlib.contextmanager
def first_commit_held(path: str, joiners: int, fail_second: bool = False) -> Iterator[None]:
    """The first commit to ``path`` starts once ``joiners`` writes wait behind it; with
    ``fail_second`` the next commit fails as a full disk would make it."""
    real = writer.upsert
    calls: list[int] = []

    def upsert(at, rows, keys, pieces=()):
        calls.append(rows.num_rows)
        if len(calls) == 1:
            deadline = time.monotonic() + 30
            while group_commit.waiting(at) < joiners and time.monotonic() < deadline:
                time.sleep(0.005)
        elif fail_second and len(calls) == 2:
            raise OSError("disk full")
        return real(at, rows, keys, pieces)

    writer.upsert = upsert
    try:
        yield
    finally:
        writer.upsert = real


def _concurrently(warehouse: Warehouse, texts: list[str]) -> list[BaseException | None]:
    """Run each INSERT on a thread of its own, the first one first; what each raised."""
    outcomes: list[BaseException | None] = [None] * len(texts)

    def run(i: int) -> None:
        try:
            list(statements.run(Warehouse(warehouse.catalog.root), texts[i]))
        except BaseException as err:  # reported to the test
            outcomes[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(texts))]
    threads[0].start()
    time.sleep(0.05)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def _data_commits(path: str, after: int) -> list[str]:
    return [h["operation"] for h in DeltaTable(path).history() if h["version"] > after
            and h["operation"] != "OPTIMIZE"]


def test_concurrent_inserts_share_one_commit_and_every_row_lands(power):
    path = _path(power)
    start = DeltaTable(path).version()
    seen: list[int] = []

    class Counter:  # an insert trigger's view: the rows of each request, after its commit
        def active(self) -> bool:
            return True

        def before(self, writes):
            return []

        def after(self, writes):
            seen.append(sum(w.rows for w in writes))
            return []

    counter = Counter()
    listeners.register(counter)
    try:
        with first_commit_held(path, joiners=4):
            outcomes = _concurrently(power, [_insert(r) for r in range(1, 6)])
    finally:
        listeners.unregister(counter)
    assert outcomes == [None] * 5
    table = DeltaTable(path)
    # 5 requests, 2 commits: the first alone, the 4 that joined behind it together
    assert _data_commits(path, start) == ["WRITE", "WRITE"]
    rows = table.to_pyarrow_table().to_pylist()
    assert len(rows) == 5 * ROWS
    assert sorted({(r["tbname"], r["v"]) for r in rows}) == sorted(
        (f"s{r}_{k}", r) for r in range(1, 6) for k in range(5))
    assert sorted(seen) == [ROWS] * 5  # each request's listener call, with its own rows once
    # the change feed (what streams read) holds each row once: 250 inserts, nothing else
    changes = table.load_cdf(starting_version=start + 1).read_all()
    assert changes.num_rows == 5 * ROWS
    assert set(changes["_change_type"].to_pylist()) == {"insert"}


def test_a_bad_request_is_refused_alone_and_writes_nothing(power):
    path = _path(power)
    start = DeltaTable(path).version()
    texts = [_insert(1), _insert(2), _insert(3, bad=True), _insert(4)]
    with first_commit_held(path, joiners=2):
        outcomes = _concurrently(power, texts)
    assert [o is None for o in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2], WarehouseError)
    assert "power.s3_0: column v (BIGINT): 99999999999999999999 is out of range" in str(outcomes[2])
    assert _data_commits(path, start) == ["WRITE", "WRITE"]
    rows = DeltaTable(path).to_pyarrow_table()
    assert sorted(set(rows["v"].to_pylist())) == [1, 2, 4]
    assert rows.num_rows == 3 * ROWS
    # the refused request registered no subtable either
    assert power.catalog.lookup(statements.parse("DROP TABLE power.s3_0")[0].names[0], "power") is None


def test_a_failed_shared_commit_fails_every_request_that_joined_it(power):
    path = _path(power)
    start = DeltaTable(path).version()
    with first_commit_held(path, joiners=3, fail_second=True):
        outcomes = _concurrently(power, [_insert(r) for r in range(1, 5)])
    assert outcomes[0] is None
    for failed in outcomes[1:]:
        assert isinstance(failed, WarehouseError)
        assert ("the commit shared with 2 concurrent writes failed (OSError: disk full); none of their rows "
                "were written") in str(failed)
    assert DeltaTable(path).version() == start + 1
    assert set(DeltaTable(path).to_pyarrow_table()["v"].to_pylist()) == {1}


def test_a_request_sent_twice_at_once_and_again_writes_its_rows_once(power):
    path = _path(power)
    start = DeltaTable(path).version()
    with first_commit_held(path, joiners=2):  # the retries join one commit together
        outcomes = _concurrently(power, [_insert(1), _insert(2), _insert(2)])
    assert outcomes == [None] * 3
    assert _data_commits(path, start) == ["WRITE", "WRITE"]
    list(statements.run(power, _insert(2)))  # a retry after a timeout: the same keys overwrite
    rows = DeltaTable(path).to_pyarrow_table()
    assert rows.num_rows == 2 * ROWS
    assert sum(rows["v"].to_pylist()) == ROWS * 1 + ROWS * 2


@pytest.mark.spark
def test_a_stream_over_a_shared_commit_counts_each_row_once(wh):
    from airflow_stream_provider.streams.run import run
    from airflow_stream_provider.streams.run_request import RunRequest
    from tests.conftest import sql

    sql(wh, "CREATE DATABASE power PRECISION 'ms'; CREATE STABLE power.meters (ts TIMESTAMP, v BIGINT) "
            "TAGS (site INT); CREATE STREAM power.w INTERVAL(10s) SLIDING(10s) FROM power.meters "
            "INTO power.wout AS SELECT _twstart ts, count(*) n, sum(v) total FROM %%trows")
    path = _path(wh)
    start = DeltaTable(path).version()
    with first_commit_held(path, joiners=3):
        assert _concurrently(wh, [_insert(r) for r in range(1, 5)]) == [None] * 4
    assert len(_data_commits(path, start)) == 2
    sql(wh, f"INSERT INTO power.s1_0 VALUES ({BASE_MS + 15_000}, 0)")  # closes the window [0 s, 10 s)
    run(wh, "power", "w", RunRequest.everything())
    (out,) = sql(wh, "SELECT n, total FROM power.wout ORDER BY ts LIMIT 1")
    # 4 requests of 50 rows in the first window, v = 1, 2, 3, 4: 200 rows, 50 * 10 = 500
    assert out.table.to_pylist() == [{"n": 200, "total": 500}]
