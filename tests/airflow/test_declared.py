"""Streams declared in the DAG folder, on real Spark, Delta and Airflow objects: the DAG file through
Airflow's DagBag (parsing changes nothing), the deploy task run as the worker runs it, a change refused
with its diff until the declaration says ``recreate``, a declaration gone from the code stopping its
stream, and a stream created with ``airflow-stream sql`` adopted with the same DAGs.

Expected windows are worked by hand from the rows written: d.t1 = {00:00 → 1, 00:01 → 3, 00:06 → 10,
00:11 → 5}; INTERVAL(5m) closes [00:00, 00:05) (2 rows: max 3, min 1) and [00:05, 00:10) (1 row: 10).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.plan.declaration import declare, read_folder
from airflow_stream_provider.streams.declared import deploy as deploy_stream
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dags"

MAX = """CREATE STREAM s5 INTERVAL(5m) SLIDING(5m) FROM t1 INTO s5_out
    AS SELECT _twstart ts, max(col1) AS v FROM %%trows;
"""
MIN = MAX.replace("max(col1)", "min(col1)")  # (the same type: the output table is kept)


def test_a_folder_of_declarations_is_read_with_its_directives(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.sql").write_text("-- on change: recreate\n" + MAX)
    (tmp_path / "b.sql").write_text("-- on change: recreate and recalculate from 2025-01-01 00:00:00\n"
                                    + MAX.replace("s5", "e.s6"))
    (tmp_path / "broken.sql").write_text("CREATE STREAM d.x INTERVAL(5m) FROM t1 INTO o AS SELECT")
    (tmp_path / "nodb.sql").write_text(MAX.replace("s5 ", "s7 "))
    found, broken = read_folder(tmp_path)
    by_name = {d.qualified: d for d in found}
    assert set(by_name) == {"d.s5", "e.s6"}
    assert by_name["d.s5"].recreate and by_name["d.s5"].recalculate_from is None
    assert by_name["e.s6"].change == "recreate and recalculate from 2025-01-01T00:00:00+00:00"
    assert set(broken) == {str(tmp_path / "broken.sql"), str(tmp_path / "nodb.sql")}
    assert "names no database" in broken[str(tmp_path / "nodb.sql")]
    (tmp_path / "d" / "again.sql").write_text(MAX)
    with pytest.raises(StreamDefinitionError, match="both declare stream d.s5"):
        read_folder(tmp_path)
    (tmp_path / "d" / "again.sql").write_text("-- on change: drop it\n" + MAX)
    assert "line 1" in read_folder(tmp_path)[1][str(tmp_path / "d" / "again.sql")]


@pytest.fixture
def home(wh, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # nothing listens: Airflow is away
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    sql(wh, """CREATE DATABASE d; USE d; CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
               CREATE TABLE t1 USING stb1 TAGS ('a');""")
    folder = tmp_path / "dags"
    (folder / "streams" / "d").mkdir(parents=True)
    (folder / "project.py").write_text(
        "from pathlib import Path\nfrom airflow_stream_provider import StreamProject\n"
        "globals().update(StreamProject(Path(__file__).parent / 'streams', name='demo').dags())\n")
    return folder


def parsed(folder: Path):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    return bag


def deploy(folder: Path, task: str = "deploy__d__s5") -> str:
    """The deploy task of the parsed DAG file, run as a worker runs it."""
    return parsed(folder).dags["streams__demo__deploy"].get_task(task).execute({})


def outputs(wh) -> list[tuple]:
    return [(r["ts"].strftime("%H:%M"), r["v"]) for r in
            sql(wh, "SELECT ts, v FROM d.s5_out ORDER BY ts")[-1].table.to_pylist()]


@pytest.mark.spark
@pytest.mark.airflow
def test_a_declared_stream_is_deployed_changed_only_when_told_and_stopped_when_removed(wh, home, tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_stream_provider.streams.run import run as run_stream

    store = StreamStore(tmp_path)
    declared = home / "streams" / "d" / "s5.sql"
    declared.write_text(MAX)
    # parsing changes nothing: a deploy DAG, no stream yet
    bag = parsed(home)
    assert set(bag.dag_ids) == {"streams__demo__deploy"} and not store.exists("d", "s5")
    assert bag.dags["streams__demo__deploy"].task_ids == ["deploy__d__s5"]
    assert "created stream d.s5" in deploy(home)
    assert store.load_state("d", "s5").declared_by == "demo"
    bag = parsed(home)
    assert set(bag.dag_ids) == {"stream__d__s5", "stream__d__s5__recalc"}  # deployed: nothing to deploy
    assert [t.task_id for t in bag.dags["stream__d__s5"].topological_sort()] == ["compute", "commit"]
    sql(wh, """INSERT INTO d.t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3)
                                       ('2025-01-01 00:06:00', 10) ('2025-01-01 00:11:00', 5)""")
    assert run_stream(wh, "d", "s5").triggers == 2
    assert outputs(wh) == [("00:00", 3), ("00:05", 10)]
    # a second deploy changes nothing
    before = (tmp_path / "state" / "d" / "s5" / "stream.json").read_text()
    assert deploy_stream(wh, "d", "s5", declare(MAX, database="d"), project="demo", store=store) == \
        "stream d.s5 is as declared"
    assert (tmp_path / "state" / "d" / "s5" / "stream.json").read_text() == before

    # a change without a directive is refused with the diff; the stream runs on as it was
    declared.write_text(MIN)
    with pytest.raises(AirflowFailException) as refused:
        deploy(home)
    assert "-    AS SELECT _twstart ts, max(col1) AS v FROM %%trows" in str(refused.value)
    assert "+    AS SELECT _twstart ts, min(col1) AS v FROM %%trows" in str(refused.value)
    assert "max(col1)" in store.get("d", "s5").text
    bag = parsed(home)  # refused once: no deploy task until the declaration changes again
    assert "streams__demo__deploy" not in bag.dag_ids
    assert "min(col1)" in bag.dags["stream__d__s5"].doc_md and "refused" in bag.dags["stream__d__s5"].doc_md

    # recreate, then recalculate from 00:00: the output table is kept and its windows rewritten
    declared.write_text("-- on change: recreate and recalculate from 2025-01-01T00:00:00Z\n" + MIN)
    done = deploy(home)
    assert "recreated" in done and "recalculated here" in done
    assert "min(col1)" in store.get("d", "s5").text
    assert outputs(wh) == [("00:00", 1), ("00:05", 10)]
    assert "streams__demo__deploy" not in parsed(home).dag_ids

    # gone from the code: stopped, never dropped; declared again: started
    declared.unlink()
    assert "streams__demo__deploy" in parsed(home).dag_ids
    assert "left the code" in deploy(home)
    state = store.load_state("d", "s5")
    assert state.stopped and state.paused_by_code and store.exists("d", "s5")
    bag = parsed(home)
    assert "streams__demo__deploy" not in bag.dag_ids and bag.dags["stream__d__s5"].is_paused_upon_creation
    assert outputs(wh) == [("00:00", 1), ("00:05", 10)]
    declared.write_text(MIN)
    assert "started stream d.s5" in deploy(home)
    assert not store.load_state("d", "s5").stopped


@pytest.mark.spark
@pytest.mark.airflow
def test_a_stream_created_with_sql_keeps_its_dags_and_is_adopted_by_its_declaration(wh, home, tmp_path):
    provider = tmp_path / "provider"
    shutil.copytree(ROOT / "airflow_stream_provider" / "dags", provider,
                    ignore=shutil.ignore_patterns("__pycache__"))
    sql(wh, MAX)
    cli = parsed(provider)
    assert set(cli.dag_ids) == {"stream__d__s5", "stream__d__s5__recalc"}
    # the project renders the streams no project declares, as the provider's file does
    assert set(parsed(home).dag_ids) == set(cli.dag_ids)
    (home / "streams" / "d" / "s5.sql").write_text(MAX)
    assert parsed(home).dags["streams__demo__deploy"].task_ids == ["deploy__d__s5"]
    assert deploy(home) == "stream d.s5 is as declared"
    adopted = parsed(home)
    assert set(adopted.dag_ids) == set(cli.dag_ids)
    for dag_id in cli.dag_ids:
        assert adopted.dags[dag_id].task_ids == cli.dags[dag_id].task_ids
        mine, theirs = adopted.dags[dag_id].timetable, cli.dags[dag_id].timetable
        assert type(mine) is type(theirs) and getattr(mine, "summary", "") == getattr(theirs, "summary", "")
    assert parsed(provider).dag_ids == []  # the provider's file leaves a declared stream to its project


def test_the_example_project_declares_a_stream_and_a_continuous_query(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    bag = parsed(EXAMPLE)
    deploy_dag = bag.dags["streams__power__deploy"]
    assert deploy_dag.task_ids == ["deploy__power__max_voltage_1m", "deploy__root__voltage_max"]
    first = deploy_dag.get_task("deploy__power__max_voltage_1m")
    assert first.recreate and first.recalculate_from == "2025-01-01T00:00:00+00:00"
    assert first.freshness == {"bound_s": 300.0, "silent_after": 3}  # -- freshness: 5m, silent after 3 periods
    assert first.text.startswith("CREATE STREAM max_voltage_1m")
    assert not list(tmp_path.glob("streams/*/*.sql"))  # parsing created nothing
