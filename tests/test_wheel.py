"""The wheel of this checkout works on its own: built with pip, installed with its runtime
dependencies only into a fresh virtual environment, it holds every module and data file of the
package, and from that environment Airflow finds the provider and its plugin and
``airflow-stream check`` parses a stream.

The commands run with a private ``AIRFLOW_HOME`` and from a folder outside the checkout, with no
``PYTHONPATH``, so that only the installed copy can be imported. Building and installing take a
few minutes: the dependencies (Airflow, PySpark) come from the package index or pip's cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_stream_provider.get_provider_info import get_provider_info

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_stream_provider"

#: the data files the package reads at run time, by package and name
PACKAGE_DATA = [
    (PACKAGE, "py.typed"),
    (f"{PACKAGE}.notify", "message.schema.json"),
    (f"{PACKAGE}.notify", "message-3.3.6.schema.json"),
    (f"{PACKAGE}.spark", "log4j2.properties"),
    (f"{PACKAGE}.ui.static", "streams.html"),
    (f"{PACKAGE}.ui.static", "streams.css"),
    (f"{PACKAGE}.ui.static", "streams.js"),
]

STATEMENTS = """\
CREATE DATABASE power;
CREATE STABLE power.meters (ts TIMESTAMP, current FLOAT) TAGS (location VARCHAR(24));
CREATE STREAM power.avg_current INTERVAL(1m) SLIDING(1m) FROM power.meters PARTITION BY tbname
  INTO power.avg_out AS SELECT _twstart, avg(current) FROM %%tbname;
"""

#: reads the package data through importlib.resources in the fresh environment; prints JSON
READ_RESOURCES = """
import hashlib, importlib.resources, json, sys, sysconfig
import airflow_stream_provider
found = {f"{package}/{name}": hashlib.sha256(importlib.resources.files(package).joinpath(name).read_bytes()).hexdigest()
         for package, name in json.loads(sys.argv[1])}
print(json.dumps({"file": airflow_stream_provider.__file__, "purelib": sysconfig.get_paths()["purelib"],
                  "version": airflow_stream_provider.__version__, "data": found}))
"""


@dataclass
class Installed:
    wheel: Path
    venv: Path
    cwd: Path
    env: dict[str, str]
    airflow_home: Path

    def run(self, command: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv / "bin" / command), *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


def source_files() -> list[str]:
    """The package's files in the checkout as git sees them (tracked, or new and not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    return sorted(path for path in listed if path and (ROOT / path).is_file())


def build_wheel(out: Path) -> Path:
    """The checkout's wheel, built from a copy of its files: a build in place would write build/ and
    .egg-info into the checkout, and setuptools would package what a stale build/ still holds."""
    src = out / "src"
    for path in source_files():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, src / path)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out / "dist"),
                            str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "absent from the packages configuration" not in built.stdout + built.stderr
    (wheel,) = (out / "dist").glob("*.whl")
    return wheel


def isolated_env(venv: Path, home: Path) -> dict[str, str]:
    """This process's environment without what would lead the fresh one back to the checkout or to
    another Airflow: no PYTHONPATH, no virtualenv, no Airflow or stream settings."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not key.startswith("AIRFLOW")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", AIRFLOW_HOME=str(home / "airflow"),
               AIRFLOW_STREAM_HOME=str(home / "stream"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root / "build")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    cwd = root / "work"
    cwd.mkdir()
    env = isolated_env(venv, root)
    # the runtime dependencies only (no test extra); pip's cache keeps a second run short
    # (without byte-compiling Airflow's and PySpark's thousands of modules, which the tests never need)
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)]
    done = subprocess.run(install, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    return Installed(wheel, venv, cwd, env, root / "airflow")


def test_the_wheel_holds_every_module_and_data_file_of_the_package(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    package = {name for name in names if name.startswith(f"{PACKAGE}/")}
    for package_name, name in PACKAGE_DATA:
        assert f"{package_name.replace('.', '/')}/{name}" in package
    assert {name for name in package if name.startswith(f"{PACKAGE}/ui/static/")} >= {
        f"{PACKAGE}/ui/static/{name}" for name in ("streams.html", "streams.css", "streams.js")}
    assert {name for name in package if name.startswith(f"{PACKAGE}/notify/") and name.endswith(".schema.json")}
    assert package == {path for path in source_files() if path.startswith(f"{PACKAGE}/")}
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert not any(name.startswith(("tests/", "dags/", "bench/", "dev/")) for name in names)


def test_the_fresh_environment_imports_the_installed_package_and_reads_its_data(installed):
    result = installed.run("python", "-c", READ_RESOURCES, json.dumps(PACKAGE_DATA))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    purelib = Path(found["purelib"]).resolve()
    assert Path(found["file"]).resolve().is_relative_to(purelib), found["file"]
    assert purelib.is_relative_to(installed.venv.resolve())
    assert found["version"] == get_provider_info()["versions"][0]
    for package_name, name in PACKAGE_DATA:
        source = ROOT / package_name.replace(".", "/") / name
        assert found["data"][f"{package_name}/{name}"] == hashlib.sha256(source.read_bytes()).hexdigest(), name


def test_airflow_lists_the_provider(installed):
    result = installed.run("airflow", "providers", "list", "--output", "json")
    assert result.returncode == 0, result.stderr
    listed = {p["package_name"]: p for p in json.loads(result.stdout)}
    info = get_provider_info()
    assert listed[info["package-name"]]["version"] == info["versions"][0]
    assert (installed.airflow_home / "airflow.cfg").is_file()  # the private home, not ~/airflow


def test_airflow_lists_the_plugin_its_timetables_and_its_page(installed):
    from airflow_stream_provider.timetables import TIMETABLES

    result = installed.run("airflow", "plugins", "--output", "json")
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    (declared,) = get_provider_info()["plugins"]
    plugin = plugins[declared["name"]]
    assert set(plugin["timetables"]) == {f"{cls.__module__}.{cls.__name__}" for cls in TIMETABLES}
    assert [(app["name"], app["url_prefix"]) for app in plugin["fastapi_apps"]] == [("Streams", "/streams")]
    assert [(view["name"], view["href"]) for view in plugin["external_views"]] == [("Streams", "streams/")]
    assert "airflow-stream-provider==" in plugin["source"]


def test_airflow_stream_check_parses_a_stream(installed):
    path = installed.cwd / "streams.sql"
    path.write_text(STATEMENTS)
    result = installed.run("airflow-stream", "check", "-f", str(path), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok: CREATE DATABASE power",
        "ok: CREATE STABLE power.meters",
        "ok: CREATE STREAM power.avg_current",
    ]
