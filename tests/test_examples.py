"""The examples under ``examples/``, which the documentation includes by their START/END markers: every
SQL file parses statement by statement in its language, the ones that need tables run on a warehouse
(their results checked against values worked out by hand from the example's rows), every Python file
imports, and every ``literalinclude`` of ``docs/`` names a file and markers that exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from airflow_stream_provider.sql import parse
from tests.conftest import sql

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"

#: folder of examples/ -> the language its SQL is written in (a key of airflow_stream_provider.sql.LANGUAGES)
LANGUAGE = {"tdengine": "tdengine-3.3.7", "legacy": "tdengine", "iotdb": "iotdb", "dags": "auto"}

SQL_FILES = sorted(EXAMPLES.rglob("*.sql"))
PY_FILES = sorted(EXAMPLES.rglob("*.py"))
SH_FILES = sorted(EXAMPLES.rglob("*.sh"))
MARKER = re.compile(r"^\s*(?:--|#) \[(START|END) ([\w-]+)\]\s*$")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def section(path: Path, name: str) -> str:
    """The lines between ``[START name]`` and ``[END name]`` of an example file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if (m := MARKER.match(line)) and m.groups() == ("START", name)]
    ends = [i for i, line in enumerate(lines) if (m := MARKER.match(line)) and m.groups() == ("END", name)]
    assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], f"{rel(path)}: markers of {name!r}"
    return "\n".join(lines[starts[0] + 1:ends[0]]) + "\n"


def statements(text: str) -> list[str]:
    """``text`` cut at each ``;`` outside quotes and ``--`` comments: one string per statement."""
    out, current, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            current.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            out.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    out.append("".join(current).strip())
    return [s for s in out if s]


def language_of(path: Path) -> str:
    return LANGUAGE[path.relative_to(EXAMPLES).parts[0]]


# --- every file, without Spark ----------------------------------------------------------------------------


def test_every_sql_example_is_in_a_language_folder():
    assert SQL_FILES
    assert all(path.relative_to(EXAMPLES).parts[0] in LANGUAGE for path in SQL_FILES), SQL_FILES


@pytest.mark.parametrize("path", SQL_FILES, ids=rel)
def test_a_sql_example_parses_statement_by_statement(path):
    text = path.read_text(encoding="utf-8")
    language = language_of(path)
    pieces = statements(text)
    for piece in pieces:
        parsed = parse(piece, language=language)
        assert len(parsed) == 1, (piece, parsed)
    # the whole file reads as the same statements, also in the language the CLI reads by default
    assert [s.kind for s in parse(text, language=language)] == [parse(p, language=language)[0].kind for p in pieces]
    assert len(parse(text)) == len(pieces)


def test_legacy_examples_are_legacy_streams():
    from airflow_stream_provider import model as m

    for path in (EXAMPLES / "legacy").glob("*.sql"):
        streams = [s for s in parse(path.read_text(), language="tdengine") if isinstance(s, m.CreateStream)]
        assert streams and all(s.legacy is not None for s in streams), rel(path)
        with pytest.raises(Exception):  # noqa: B017 - any refusal: 3.3.7 alone does not read the syntax before it
            parse(path.read_text(), language="tdengine-3.3.7")


@pytest.mark.parametrize("path", [*SQL_FILES, *PY_FILES, *SH_FILES], ids=rel)
def test_markers_pair_up(path):
    names: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := MARKER.match(line):
            names.setdefault(m.group(2), []).append(m.group(1))
    for name, kinds in names.items():
        assert kinds == ["START", "END"], f"{rel(path)}: {name} {kinds}"
        section(path, name)


@pytest.mark.parametrize("path", SH_FILES, ids=rel)
def test_a_shell_example_is_bash(path):
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.mark.parametrize("path", sorted((EXAMPLES / "triggers").glob("*.py")), ids=rel)
def test_a_trigger_example_defines_insert_triggers(path):
    from airflow_stream_provider import InsertTrigger

    module = load(path)
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and v.__module__ == module.__name__]
    assert classes and all(issubclass(c, InsertTrigger) for c in classes), classes


@pytest.mark.parametrize("path", sorted((EXAMPLES / "dags").glob("*.py")), ids=rel)
def test_a_dag_example_defines_its_dags(path):
    from airflow.sdk import DAG

    module = load(path)
    dags = {v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)}
    assert dags, rel(path)
    assert all(dag.task_ids for dag in dags.values())


def test_the_dag_example_waits_with_the_checkpoint_sensor():
    from airflow_stream_provider import StreamCheckpointSensor, WebSocketNotifier

    module = load(EXAMPLES / "dags" / "stream_report.py")
    sensor = module.report_dag.get_task("wait_for_windows")
    assert isinstance(sensor, StreamCheckpointSensor) and sensor.stream == "power.avg_10s"
    assert module.report_dag.get_task("report").upstream_task_ids == {"wait_for_windows"}
    callback = module.notifier_dag.on_failure_callback
    callback = callback[0] if isinstance(callback, list) else callback
    assert isinstance(callback, WebSocketNotifier) and callback.urls == ["ws://127.0.0.1:8765/notify"]


def test_the_high_temperature_trigger_refuses_values_above_its_limit():
    from airflow_stream_provider import FailureStrategy, Measurement, Tablet, TriggerAttributes

    module = load(EXAMPLES / "triggers" / "high_temperature.py")
    trigger = module.HighTemperature()
    attributes = TriggerAttributes({"limit": "100"})
    trigger.validate(attributes)
    trigger.on_create(attributes)
    assert trigger.failure_strategy() is FailureStrategy.PESSIMISTIC
    from airflow_stream_provider.model.series import SeriesType

    schema = (Measurement("temperature", SeriesType.FLOAT),)
    assert trigger.fire(Tablet("root.ln.wf01.wt01", schema, (1, 2), ((20.5, None),))) is True
    assert trigger.fire(Tablet("root.ln.wf01.wt01", schema, (1, 2), ((20.5, 100.5),))) is False
    with pytest.raises(Exception):  # noqa: B017 - the attribute "limit" is missing: CREATE fails
        trigger.validate(TriggerAttributes({}))


# --- the documentation's includes, and the README's SQL ---------------------------------------------------

INCLUDE = re.compile(r"^```\{literalinclude\}\s+(\S+)\s*\n(.*?)^```", re.M | re.S)


def includes() -> list[tuple[Path, Path, dict[str, str]]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts:
            continue
        for m in INCLUDE.finditer(page.read_text(encoding="utf-8")):
            options = {k: v.strip("\"'") for k, v in re.findall(r"^:([\w-]+):\s*(.*?)\s*$", m.group(2), re.M)}
            target = (DOCS / m.group(1).lstrip("/")) if m.group(1).startswith("/") else (page.parent / m.group(1))
            found.append((page, target.resolve(), options))
    return found


def test_the_docs_include_examples():
    pages = {page for page, _, _ in includes()}
    assert len(includes()) > 40 and len(pages) > 10


def test_every_literalinclude_names_a_file_and_markers_it_holds():
    for page, target, options in includes():
        where = f"{page.relative_to(ROOT)} includes {target}"
        assert target.is_file(), where
        text = target.read_text(encoding="utf-8")
        start, end = options.get("start-after"), options.get("end-before")
        if target.is_relative_to(EXAMPLES) and target.suffix in (".sql", ".py", ".sh"):
            assert start and end, f"{where}: an example is included by its markers"
        if start:
            assert start in text, f"{where}: no {start!r}"
        if end:
            assert end in text[text.index(start) if start else 0:], f"{where}: no {end!r} after the start"


def test_the_docs_include_every_sql_and_python_example():
    included = {target for _, target, _ in includes()}
    for path in [*SQL_FILES, *PY_FILES]:
        assert path.resolve() in included, f"{rel(path)} is on no page"


def squash(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_sql_comes_from_the_examples():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sql\n(.*?)^```", readme, re.M | re.S)
    assert blocks
    examples = "\n".join(squash(path.read_text(encoding="utf-8")) for path in SQL_FILES)
    for block in blocks:
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("--"):
                assert squash(line) in examples, f"README line not in examples/: {line!r}"


def test_the_readme_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "dev/setup && .venv/bin/airflow-stream demo\n" in readme
    assert "\ndev/test\n" in readme
    assert "dev/test" in (ROOT / ".ci" / "run").read_text()


# --- run on a warehouse -------------------------------------------------------------------------------------


def rows(result) -> list[tuple]:
    return [tuple(row.values()) for row in result.table.to_pylist()]


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def power(wh):
    """The warehouse with the tables and rows of examples/tdengine/tables.sql."""
    sql(wh, (EXAMPLES / "tdengine" / "tables.sql").read_text())
    return wh


@pytest.mark.spark
def test_tables_example(wh):
    results = sql(wh, (EXAMPLES / "tdengine" / "tables.sql").read_text())
    listing, summary = results[-2], results[-1]
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows(listing)] == [
        ("d1001", "California.SanFrancisco", 2, ts("2025-01-01 00:00:00"), 219),
        ("d1001", "California.SanFrancisco", 2, ts("2025-01-01 00:00:10"), 226),  # the update replaced 218
        ("d1002", "California.LosAngeles", 3, ts("2025-01-01 00:00:00"), 220),
        ("d1002", "California.LosAngeles", 3, ts("2025-01-01 00:00:10"), 231),
    ]
    assert [r[4] for r in rows(listing)] == pytest.approx([10.3, 12.9, 10.2, 11.8], rel=1e-6)
    (d1001, d1002) = rows(summary)
    assert d1001[:2] == ("d1001", 2) and d1001[2] == pytest.approx((10.3 + 12.9) / 2, rel=1e-6)
    assert d1001[3] == 226 - 219
    assert d1002[:2] == ("d1002", 2) and d1002[2] == pytest.approx((10.2 + 11.8) / 2, rel=1e-6)
    assert d1002[3] == 231 - 220


@pytest.mark.spark
def test_queries_example(power):
    path = EXAMPLES / "tdengine" / "queries.sql"
    (over,) = sql(power, "USE power;" + section(path, "select"))[1:]
    assert [(r[0], r[2], r[3]) for r in rows(over)] == [
        ("d1001", ts("2025-01-01 00:00:10"), 226), ("d1002", ts("2025-01-01 00:00:10"), 231)]
    (windows,) = sql(power, "USE power;" + section(path, "window_clause"))[1:]
    # both rows of each meter (00:00:00 and 00:00:10) lie in the 1-minute windows starting 30 s apart at
    # -00:00:30 and 00:00:00; no window between them is empty, so FILL(PREV) adds none
    got = sorted(rows(windows), key=lambda r: (r[0], r[1]))
    assert [(r[0], r[1], r[2]) for r in got] == [
        (meter, ts(start), 60_000) for meter in ("d1001", "d1002")
        for start in ("2024-12-31 23:59:30", "2025-01-01 00:00:00")]
    assert [r[3] for r in got] == pytest.approx([11.6, 11.6, 11.0, 11.0], rel=1e-6)
    sql(power, "USE power;" + section(path, "delete"))
    (left,) = sql(power, "SELECT tbname, voltage FROM power.meters WHERE tbname = 'd1002'")
    assert rows(left) == [("d1002", 220)]  # 231 was the one reading above 230


@pytest.mark.spark
def test_stream_example(power):
    from airflow_stream_provider.streams.run import run

    path = EXAMPLES / "tdengine" / "stream.sql"
    sql(power, section(path, "stream"))
    report = run(power, "power", "avg_10s")
    # FILL_HISTORY_FIRST: the rows already written count. Each meter's window [00:00:00, 00:00:10) closes
    # at its 00:00:10 row; the window of that row stays open
    assert report.triggers == 2
    (out,) = sql(power, section(path, "output"))
    got = rows(out)
    # one output subtable per meter, its tag tag_tbname the meter
    assert [(r[0], r[1], r[3]) for r in got] == [
        ("d1001", ts("2025-01-01 00:00:00"), 219), ("d1002", ts("2025-01-01 00:00:00"), 220)]
    assert [r[2] for r in got] == pytest.approx([10.3, 10.2], rel=1e-6)


@pytest.mark.spark
def test_power_and_watch_examples(wh):
    sql(wh, (EXAMPLES / "tdengine" / "power.sql").read_text())
    path = EXAMPLES / "tdengine" / "watch.sql"
    shown, listed = sql(wh, section(path, "show"))
    names = ["avg_current", "every_ten", "hourly_rows", "modes", "overvoltage"]
    assert sorted(row["stream_name"] for row in shown.table.to_pylist()) == names
    assert [r[0] for r in rows(listed)] == names
    assert {r[1] for r in rows(listed)} <= {"running", "history"}
    assert {r[0]: r[2] for r in rows(listed)}["hourly_rows"].startswith("PERIOD(1h")
    assert {r[0]: r[2] for r in rows(listed)}["modes"].startswith(
        "STATE_WINDOW(voltage > 220, phase > 0.3) EXTEND(1) ZEROTH_STATE(FALSE, NO_ZEROTH)")
    like, created = sql(wh, section(path, "find"))
    assert like.table.column("stream_name").to_pylist() == ["modes"]
    text = (EXAMPLES / "tdengine" / "power.sql").read_text()
    written = text[text.index("CREATE STREAM IF NOT EXISTS power.modes"):text.index("-- [END state_keys]")]
    # the zone is the home's (the tests' AIRFLOW_STREAM_TIMEZONE), the semantics the default, 3.3.7
    assert created.table.to_pylist() == [{"stream_name": "modes", "db_name": "power",
                                          "sql": written.strip().removesuffix(";"),
                                          "timezone": "UTC", "semantics": "3.3.7"}]
    (tasks,) = sql(wh, section(path, "tasks"))
    assert tasks.table.num_rows >= 4
    health, recalcs = sql(wh, section(path, "health"))
    got = {r[0]: r[3:6] for r in rows(health)}
    # nothing run yet: no rows read or written in the last minute, no commit to time (NULL); the
    # PERIOD stream has no detector reading its rows (NULL)
    assert got["avg_current"] == (0.0, 0.0, None) and got["hourly_rows"] == (None, 0.0, None)
    assert recalcs.table.num_rows == 0


@pytest.mark.spark
def test_legacy_custom_tag_example(power):
    from airflow_stream_provider.streams.run import run

    path = EXAMPLES / "legacy" / "custom_tag.sql"
    sql(power, "USE power;" + section(path, "create"))
    sql(power, "USE power;" + section(path, "insert"))
    run(power, "power", "streams2")
    # INTERVAL(10s) per subtable: d1001's rows at 00:01:00 and 00:01:05 share [00:01:00, 00:01:10), so
    # do d1002's one row at 00:01:02; the rows of tables.sql came before the stream and are not its own
    (out,) = sql(power, "USE power;" + section(path, "select"))[1:]
    assert [r[1:] for r in rows(out)] == [(ts("2025-01-01 00:01:00"), 2, "tag-d1001"),
                                          (ts("2025-01-01 00:01:00"), 1, "tag-d1002")]
    sql(power, "USE power;" + section(path, "rewrite"))
    run(power, "power", "streams2")
    # IGNORE UPDATE 0: the rewrite recounts d1001's window from the table (still two rows); the delete
    # empties d1002's window, whose result goes
    (out,) = sql(power, "USE power;" + section(path, "select"))[1:]
    assert [r[1:] for r in rows(out)] == [(ts("2025-01-01 00:01:00"), 2, "tag-d1001")]


CST = timezone(timedelta(hours=8))


@pytest.mark.spark
def test_iotdb_tour_example(wh):
    path = EXAMPLES / "iotdb" / "tour.sql"
    *_, counts = sql(wh, section(path, "tour"))
    # rows at 22:18:14.598 and 22:18:24 (+08:00): none in [22:18:00, 22:18:10), one in each window after
    assert rows(counts) == [(datetime(2021, 5, 11, 22, 18, s, tzinfo=CST), n) for s, n in ((0, 0), (10, 1), (20, 1))]
    sql(wh, section(path, "series"))
    (devices,) = sql(wh, "SHOW DEVICES root.ln.**")
    assert [r[0] for r in rows(devices)] == ["root.ln.wf01.wt01"]
    (series,) = sql(wh, "SHOW TIMESERIES root.ln.**")
    assert sorted(r[0] for r in rows(series)) == [
        "root.ln.wf01.wt01.humidity", "root.ln.wf01.wt01.status", "root.ln.wf01.wt01.temperature"]


@pytest.mark.spark
def test_iotdb_cq_example(wh):
    from airflow_stream_provider.streams.run import run
    from airflow_stream_provider.streams.run_request import RunRequest
    from airflow_stream_provider.streams.store import StreamStore

    sql(wh, section(EXAMPLES / "iotdb" / "tour.sql", "tour"))
    path = EXAMPLES / "iotdb" / "cq.sql"
    sql(wh, section(path, "cq"))
    created = datetime(2021, 5, 11, 22, 18, 30, tzinfo=CST)
    with StreamStore().updating("root", "cq_max") as saving:  # as if created at 22:18:30
        saving.state = saving.state.replace(created=created)
    (shown,) = sql(wh, section(path, "show"))
    assert [r[0] for r in rows(shown)] == ["cq_max"]
    # EVERY 20s from the epoch: the first instant after 22:18:30 is 22:18:40, over [22:18:20, 22:18:40),
    # GROUP BY(10s): [22:18:20, 22:18:30) holds 21 (at 22:18:24); [22:18:30, 22:18:40) holds nothing
    assert run(wh, "root", "cq_max", RunRequest(now=datetime(2021, 5, 11, 22, 18, 40, tzinfo=CST))).triggers == 1
    (out,) = sql(wh, section(path, "output"))
    got = [(t.astimezone(CST), v) for t, v in rows(out) if v is not None]
    assert got == [(datetime(2021, 5, 11, 22, 18, 20, tzinfo=CST), 21.0)]
    # the one execution computed again gives the same point: nothing to report, nothing to repair
    for checked in sql(wh, section(path, "verify_cq")):
        assert checked.table is not None and checked.table.num_rows == 0 and checked.message.endswith("s")
        assert ": equal in " in checked.message and "1 trigger in" in checked.message
    sql(wh, section(path, "drop"))
    (shown,) = sql(wh, section(path, "show"))
    assert rows(shown) == []


@pytest.mark.spark
def test_iotdb_trigger_example(wh, monkeypatch):
    monkeypatch.chdir(ROOT)  # USING URI names the file from the checkout's top folder
    path = EXAMPLES / "iotdb" / "triggers.sql"
    sql(wh, "CREATE DATABASE root.ln")
    sql(wh, section(path, "high_temperature"))
    (shown,) = sql(wh, section(path, "show"))
    assert shown.table.to_pylist()[0]["TriggerName"] == "high_temperature"
    sql(wh, "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (1, 20.5)")
    # 150 is above the limit of 100: BEFORE and PESSIMISTIC, so nothing of the statement is written
    with pytest.raises(Exception, match="trigger error before the insertion"):
        sql(wh, "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (2, 30.0), (3, 150.0)")
    (stored,) = sql(wh, "SELECT temperature FROM root.ln.wf01.wt01")
    assert [r[1] for r in rows(stored)] == [20.5]
    sql(wh, section(path, "drop"))
    (shown,) = sql(wh, section(path, "show"))
    assert rows(shown) == []
