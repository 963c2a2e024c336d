"""``docker/compose.yaml`` is the scaled-out topology: checked with ``docker-compose config``
(Debian's docker-compose, which validates and resolves the file without a Docker engine)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "docker" / "compose.yaml"
SECRETS = {"AIRFLOW_JWT_SECRET": "jwt", "AIRFLOW_STREAM_NODE_TOKEN": "node-token", "MINIO_ROOT_PASSWORD": "minio-pw"}


def config(tmp_path: Path, secrets: dict[str, str]) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    assert binary, "docker-compose is missing: dev/setup installs Debian's docker-compose"
    env_file = tmp_path / "compose.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in secrets.items()))
    return subprocess.run([binary, "--env-file", str(env_file), "-f", str(COMPOSE), "config"], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_the_compose_file_is_the_scaled_out_topology(tmp_path):
    done = config(tmp_path, SECRETS)
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert {"spark-master", "spark-worker", "minio", "postgres", "redis", "stream-node", "api-server", "scheduler",
            "dag-processor", "triggerer", "worker"} <= set(services)
    assert services["spark-worker"]["deploy"]["replicas"] == 2 and services["worker"]["deploy"]["replicas"] == 2
    node = services["stream-node"]
    assert "spark://spark-master:7077" in node["command"]
    for name in ("stream-node", "worker", "scheduler", "triggerer"):
        env = services[name]["environment"]
        assert env["AIRFLOW_STREAM_WAREHOUSE"] == "s3://warehouse/stream"
        assert env["AWS_SECRET_ACCESS_KEY"] == SECRETS["MINIO_ROOT_PASSWORD"]
        assert env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == SECRETS["AIRFLOW_STREAM_NODE_TOKEN"]
    assert services["worker"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert services["minio"]["environment"]["MINIO_ROOT_PASSWORD"] == SECRETS["MINIO_ROOT_PASSWORD"]
    # only the api-server is published, on the host's loopback
    published = {name: s.get("ports") for name, s in services.items() if s.get("ports")}
    assert list(published) == ["api-server"]


def test_no_service_has_a_secret_on_its_command_line(tmp_path):
    """A container's command line is what ``ps`` shows on the Docker host: secrets go by the environment."""
    done = config(tmp_path, SECRETS)
    assert done.returncode == 0, done.stderr
    for name, service in yaml.safe_load(done.stdout)["services"].items():
        argv = " ".join(str(part) for key in ("command", "entrypoint") for part in service.get(key) or [])
        assert not [s for s in SECRETS.values() if s in argv], name
        assert not any(word in argv.upper() for word in ("PASSWORD", "SECRET", "TOKEN")), f"{name}: {argv}"


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_the_compose_file_refuses_to_start_without_a_secret(tmp_path, missing):
    done = config(tmp_path, {k: v for k, v in SECRETS.items() if k != missing})
    assert done.returncode != 0
    assert f"set {missing}" in done.stderr
