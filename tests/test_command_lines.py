"""No process the provider starts carries a secret on its command line, which ``ps`` shows every
local user: MinIO, PostgreSQL, Redis, a Spark standalone cluster and Airflow's components with
Celery workers, as the scaled-out topology starts them (the stream node is checked in
tests/spark_node/test_node.py)."""

from __future__ import annotations

import pytest

from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.local_servers import Minio, Postgres, Redis
from airflow_stream_provider.spark import standalone
from tests import process_tree

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_no_started_process_has_a_secret_on_its_command_line(tmp_path):
    minio, postgres, redis = Minio(tmp_path / "minio"), Postgres(tmp_path / "pg"), Redis(tmp_path / "redis")
    cluster = airflow = None
    try:
        for server in (minio, postgres, redis):
            server.start()
        cluster = standalone.start(tmp_path / "cluster", workers=1, memory="512m")
        users = {"admin": ("admin", "admin-pw-7f3a"), "viewer": ("viewer", "v-pw-91c2")}
        airflow = LocalAirflow(tmp_path / "airflow", tmp_path / "home", database=postgres.url, celery=redis.url,
                               workers=1, users=users)
        airflow.start()
        secrets = [minio.secret_key, airflow.env["AIRFLOW__API_AUTH__JWT_SECRET"], *(pw for _, pw in users.values())]
        pids = [p for server in (minio, postgres, redis) if server.process
                for p in process_tree.tree(server.process.pid)]
        pids += [p for process in cluster.processes for p in process_tree.tree(process.pid)]
        pids += [p for name in airflow.processes for p in airflow.tree(name)]
        assert len(pids) >= 3 + 2 + 5
        assert process_tree.holding(pids, *secrets) == []
    finally:
        if airflow is not None:
            airflow.stop()
        if cluster is not None:
            cluster.stop()
        for server in (redis, postgres, minio):
            server.stop()
