"""The shared catalog: Spark's Hive support with its metastore in a real PostgreSQL (a local process,
with a password), shared by the stream node, the CLI and a team's own Spark job that imports
nothing of the project (``metastore_job.py``, configured the way docs/catalog.md shows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_stream_provider import config
from airflow_stream_provider.local_servers import Postgres
from airflow_stream_provider.processes import free_port
from airflow_stream_provider.spark import metastore
from airflow_stream_provider.spark.metastore import Metastore, MetastoreError
from airflow_stream_provider.spark.session import catalog_conf, spark_conf
from tests import process_tree
from tests.spark_node.test_node import SCRIPT

PASSWORD = "mst-pw-5e1b9"
JOB = Path(__file__).with_name("metastore_job.py")


# --- settings, no JVM ------------------------------------------------------------------------------

def test_nothing_configured_keeps_the_in_memory_catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    for name in ("URL", "USER", "PASSWORD", "WAREHOUSE", "REGISTER_OUTPUTS"):
        monkeypatch.delenv(f"AIRFLOW_STREAM_CATALOG_{name}", raising=False)
    assert metastore.configured() is None and catalog_conf() == {} and not metastore.register_outputs()
    conf = spark_conf()
    assert conf["spark.sql.catalogImplementation"] == "in-memory"
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "spark" / "spark-warehouse")
    assert not any("javax.jdo" in key for key in conf)


def test_the_catalog_section_and_its_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    (tmp_path / "airflow-stream.toml").write_text(
        '[catalog]\nurl = "jdbc:postgresql://db.example:5433/metastore"\nuser = "hive"\npassword = "from-toml"\n'
        'warehouse = "/shared/warehouse"\nregister_outputs = true\n')
    monkeypatch.delenv("AIRFLOW_STREAM_CATALOG_PASSWORD", raising=False)
    found = metastore.configured()
    assert found == Metastore("jdbc:postgresql://db.example:5433/metastore", "hive", "from-toml",
                              "/shared/warehouse", True)
    assert "from-toml" not in repr(found)
    monkeypatch.setenv("AIRFLOW_STREAM_CATALOG_PASSWORD", "from-env")
    monkeypatch.setenv("AIRFLOW_STREAM_CATALOG_REGISTER_OUTPUTS", "false")
    found = metastore.configured()
    assert found is not None and found.password == "from-env" and not found.register_outputs
    monkeypatch.setenv("AIRFLOW_STREAM_METASTORE_JARS", str(config.PROJECT_ROOT / "jars" / "metastore"))
    conf = spark_conf()
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == found.url
    assert conf["spark.sql.warehouse.dir"] == "/shared/warehouse"
    assert "postgresql-42.7.14.jar" in conf["spark.driver.extraClassPath"]
    # the password goes into the running session's Hadoop configuration, never into a setting of the
    # builder, which pyspark puts on the JVM's command line
    assert not any("from-env" in value for value in conf.values())
    assert metastore.hadoop_secrets(found) == {metastore.PASSWORD_KEY: "from-env"}


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://h:5432/m", "write jdbc:postgresql://host:port/database"),
    ("jdbc:mysql://h:3306/m", "write jdbc:postgresql://host:port/database"),
    ("jdbc:postgresql://h:5432/", "write jdbc:postgresql://host:port/database"),
    ("jdbc:postgresql://u:secret@h:5432/m", "the password does not go into the URL"),
    ("jdbc:postgresql://h:5432/m?user=u&password=secret", "the password does not go into the URL"),
])
def test_a_bad_url_is_refused_without_showing_a_password(url, message):
    with pytest.raises(MetastoreError, match=message) as caught:
        Metastore(url)
    assert "secret" not in str(caught.value)


def test_an_unreachable_metastore_is_named_without_its_password():
    closed = Metastore(f"jdbc:postgresql://127.0.0.1:{free_port()}/metastore", "hive", "hidden-pw")
    started = time.monotonic()
    with pytest.raises(MetastoreError, match=r"metastore at jdbc:postgresql://127\.0\.0\.1:\d+/metastore cannot be "
                                             "reached") as caught:
        metastore.check_reachable(closed)
    assert "hidden-pw" not in str(caught.value) and time.monotonic() - started < 5


# --- the shared catalog, end to end ----------------------------------------------------------------

@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    server = Postgres(tmp_path_factory.mktemp("metastore"), password=PASSWORD).start()
    try:
        yield server
    finally:
        server.stop()


def spark_defaults(folder: Path, postgres: Postgres, warehouse: Path) -> Path:
    """The team's job's ``$SPARK_CONF_DIR``: docs/catalog.md's spark-defaults.conf, readable by its owner only."""
    delta = ",".join(str(p) for p in sorted(config.jars_dir().glob("*.jar")))
    driver = ":".join(str(p) for p in sorted((config.PROJECT_ROOT / "jars" / "metastore").glob("*.jar")))
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "spark-defaults.conf"
    conf.write_text("\n".join([
        f"spark.jars {delta}",
        f"spark.driver.extraClassPath {driver}",
        "spark.sql.extensions io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation hive",
        f"spark.sql.warehouse.dir {warehouse}",
        f"spark.hadoop.javax.jdo.option.ConnectionURL {postgres.jdbc_url}",
        "spark.hadoop.javax.jdo.option.ConnectionDriverName org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName airflow",
        f"spark.hadoop.javax.jdo.option.ConnectionPassword {PASSWORD}",
        "spark.hadoop.datanucleus.schema.autoCreateAll false",
        "spark.hadoop.hive.metastore.schema.verification false",
        "spark.ui.enabled false",
        "spark.sql.session.timeZone UTC", ""]))
    conf.chmod(0o600)
    return folder


def team_job(conf_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_STREAM_") and k != "PYTHONPATH"}
    env |= {"SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, str(JOB), *args], env=env, capture_output=True, text=True, timeout=300,
                          cwd=conf_dir)


def cli(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.spark
def test_the_node_the_cli_and_a_team_job_share_the_catalog(postgres, tmp_path):
    home, shared = tmp_path / "home", tmp_path / "shared-warehouse"
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home), "AIRFLOW_STREAM_CATALOG_URL": postgres.jdbc_url,
                        "AIRFLOW_STREAM_CATALOG_USER": "airflow", "AIRFLOW_STREAM_CATALOG_PASSWORD": PASSWORD,
                        "AIRFLOW_STREAM_CATALOG_WAREHOUSE": str(shared),
                        "AIRFLOW_STREAM_CATALOG_REGISTER_OUTPUTS": "true"}
    conf_dir = spark_defaults(tmp_path / "team-conf", postgres, shared)
    started = cli(env, "node", "start", "--port", str(free_port()))  # its session creates the metastore's schema
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        node = json.loads((home / "node" / "node.json").read_text())
        assert process_tree.holding(process_tree.tree(node["pid"]), PASSWORD) == []
        wrote = team_job(conf_dir, "write")
        assert wrote.returncode == 0, wrote.stdout + wrote.stderr[-3000:]

        # (a) the team's table, found by name and read
        shown = cli(env, "catalog", "iot.readings", "--json", "--rows", "10")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        described, *rows = shown.stdout.strip().splitlines()
        found = json.loads(described)
        assert found["location"] == str(shared / "iot.db" / "readings")
        assert [(f["name"], f["type"]) for f in found["schema"]["fields"]] == [
            ("event_time", "timestamp"), ("device_id", "string"), ("site", "string"), ("voltage", "integer"),
            ("current", "double")]
        assert sorted(rows[1:]) == ["2025-01-01T00:00:01.000+00:00,d1,north,220,1.5",
                                    "2025-01-01T00:00:02.000+00:00,d2,south,230,2.5"]

        # (c) an unknown table or database, with the nearest names; a table that is not Delta
        for name, message in [("iot.reading", "table iot.reading does not exist in the catalog at "
                                              f"{postgres.jdbc_url} (did you mean readings?)"),
                              ("iots.readings", f"database iots does not exist in the catalog at {postgres.jdbc_url} "
                                                "(did you mean iot?)"),
                              ("iot.plain", "iot.plain in the catalog is a parquet table, not a Delta table")]:
            refused = cli(env, "catalog", name)
            assert refused.returncode == 2 and message in refused.stderr, refused.stderr

        # the team's table attached by its name in the catalog, read under the model's names
        attached = cli(env, "sql", "CREATE DATABASE iotm; CREATE STABLE iotm.meters FROM CATALOG iot.readings MAP "
                                   "(TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), "
                                   "COLUMNS (voltage, current))")
        assert attached.returncode == 0, attached.stdout + attached.stderr
        assert f"from iot.readings of the catalog, at {shared / 'iot.db' / 'readings'}" in attached.stdout
        read = cli(env, "sql", "--format", "csv", "SELECT tbname, location, voltage FROM iotm.meters ORDER BY tbname")
        assert read.returncode == 0, read.stdout + read.stderr
        assert read.stdout.strip().splitlines() == ["tbname,location,voltage", "d1,north,220", "d2,south,230"]
        unknown = cli(env, "sql", "CREATE STABLE iotm.other FROM CATALOG iot.reading MAP (TIMESTAMP event_time, "
                                  "TBNAME device_id)")
        assert unknown.returncode != 0 and "did you mean readings?" in unknown.stderr, unknown.stderr

        # (b) a stream's output registered by name; the team's job reads it with spark.table
        made = cli(env, "sql", """
            CREATE DATABASE power; USE power;
            CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
            CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname INTO avg_out
              AS SELECT _twstart ts, avg(v) a, count(*) n FROM %%trows;
            INSERT INTO m1 USING meters TAGS ('north') VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)
              ('2025-01-01 00:01:30', 8);""")
        assert made.returncode == 0, made.stdout + made.stderr
        assert "output power.avg_out (registered in the catalog)" in made.stdout
        deadline, got = time.monotonic() + 180, []
        while got != [("00:00", 2.0, 2)] and time.monotonic() < deadline:
            ran = cli(env, "run", "power.avg1m", "--until-idle")
            assert ran.returncode == 0, ran.stdout + ran.stderr
            out = cli(env, "sql", "--format", "csv", "SELECT ts, a, n FROM power.avg_out ORDER BY ts")
            got = [(f[0][11:16], float(f[1]), int(f[2])) for f in
                   (line.split(",") for line in out.stdout.strip().splitlines()[1:])]
        assert got == [("00:00", 2.0, 2)]
        read = team_job(conf_dir, "read", "power.avg_out")
        assert read.returncode == 0, read.stdout + read.stderr[-3000:]
        assert [(r["ts"][11:16], r["a"], r["n"], r["tag_tbname"]) for r in map(json.loads, read.stdout.splitlines())] \
            == [("00:00", 2.0, 2, "m1")]

        # registration is idempotent, and a node started afresh finds the same catalog
        again = cli(env, "sql", "DROP STREAM power.avg1m; CREATE STREAM power.avg1m INTERVAL(1m) SLIDING(1m) FROM "
                                "power.meters PARTITION BY tbname INTO power.avg_out AS SELECT _twstart ts, avg(v) a, "
                                "count(*) n FROM %%trows")
        assert again.returncode == 0 and "(registered in the catalog)" in again.stdout, again.stdout + again.stderr
        assert cli(env, "node", "stop", timeout=120).returncode == 0
        assert cli(env, "node", "start", "--port", str(free_port())).returncode == 0
        shown = cli(env, "catalog", "power.avg_out", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["location"] == str(home / "warehouse" / "power" / "avg_out")
    finally:
        cli(env, "node", "stop", timeout=120)

    # (c) an unreachable metastore: the local session refuses it at once, naming the URL without the password
    closed = f"jdbc:postgresql://127.0.0.1:{free_port()}/airflow"
    refused = cli(env | {"AIRFLOW_STREAM_CATALOG_URL": closed}, "catalog", "iot.readings", timeout=120)
    assert refused.returncode != 0
    assert f"the catalog's metastore at {closed} cannot be reached" in refused.stderr, refused.stderr[-2000:]
    assert PASSWORD not in refused.stderr + refused.stdout
