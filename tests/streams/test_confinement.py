"""Stream names never lead the store out of ``streams/`` and ``state/``.

Unchecked, a stream named ``../../../victim`` would remove a folder next to the home, and the
names ``..`` and `` `` (empty) would wipe the state of every stream. The parser
refuses such names; these tests hand them to the store directly, as a stored file, a URL or a
future front-end could, and check that nothing outside the stream's own folders is touched.
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.model.names import InvalidName
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.store import StreamStore

TEXT = "CREATE STREAM s PERIOD(10s) NOTIFY('ws://127.0.0.1:9/')"
BAD = ["", ".", "..", "../..", "../../../victim", "a/b", "a\\b", "a\x00b", "a\x01b", "s" * 193, ".hidden", "a.b"]


@pytest.fixture
def home(tmp_path):
    """A home holding stream power.keep with some state, and a precious folder next to it."""
    home = tmp_path / "home"
    store = StreamStore(home)
    (stmt,) = parse(TEXT.replace(" s ", " keep "))
    store.create("power", stmt, stmt.text, StreamState.from_json({"created": "2025-01-01T00:00:00+00:00"}))
    (store.state_dir("power", "keep") / "checkpoint").mkdir()
    (store.state_dir("power", "keep") / "checkpoint" / "0").write_text("offsets")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    return home


def files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def named(name: str) -> m.CreateStream:
    (stmt,) = parse(TEXT)
    assert isinstance(stmt, m.CreateStream)
    return dataclasses.replace(stmt, name=m.TableName(name))


@pytest.mark.parametrize("name", BAD)
def test_no_store_operation_takes_a_bad_stream_name(home, name):
    before = files(home.parent)
    store = StreamStore(home)
    calls = [
        lambda: store.create("power", named(name), TEXT, StreamState()),
        lambda: store.drop("power", name),
        lambda: store.get("power", name),
        lambda: store.exists("power", name),
        lambda: store.load_state("power", name),
        lambda: store.save_state("power", name, StreamState(created_version=1)),
        lambda: store.state_dir("power", name),
        lambda: store.definition("power", name),
    ]
    for call in calls:
        with pytest.raises(InvalidName):
            call()
    with pytest.raises(InvalidName), store.updating("power", name):
        pass
    assert files(home.parent) == before  # the victim folder, power.keep's state and definition all stay


@pytest.mark.parametrize("db", BAD[:-2] + ["d" * 65])
def test_no_store_operation_takes_a_bad_database_name(home, db):
    before = files(home.parent)
    store = StreamStore(home)
    for call in (lambda: store.create(db, named("s"), TEXT, StreamState()), lambda: store.drop(db, "keep"),
                 lambda: store.names(db), lambda: store.get(db, "keep")):
        with pytest.raises(InvalidName):
            call()
    assert files(home.parent) == before


def test_a_state_folder_linked_outside_the_home_is_not_removed(home, tmp_path):
    """CREATE removes a state folder left by a dropped stream of the same name; a link that leads out
    of ``state/`` is refused instead of followed."""
    store = StreamStore(home)
    (home / "state" / "power" / "s").symlink_to(tmp_path / "victim")
    with pytest.raises(InvalidName):
        store.create("power", named("s"), TEXT, StreamState())
    with pytest.raises(InvalidName):
        store.drop("power", "s")
    assert (tmp_path / "victim" / "keep.txt").read_text() == "precious"


def test_create_and_drop_touch_only_their_own_stream(home):
    store = StreamStore(home)
    (stmt,) = parse(TEXT)
    store.create("power", stmt, stmt.text, StreamState(created_version=0))
    store.drop("power", "s")
    assert not store.exists("power", "s") and not store.state_dir("power", "s").exists()
    assert store.exists("power", "keep")
    assert (store.state_dir("power", "keep") / "checkpoint" / "0").read_text() == "offsets"
    assert (home.parent / "victim" / "keep.txt").read_text() == "precious"


def test_names_with_spaces_and_emoji_are_stored_under_the_home(home):
    store = StreamStore(home)
    for name in ("my stream", "流🙂", "a;b"):
        store.create("power", named(name), TEXT, StreamState())
        assert store.definition("power", name).parent == home / "streams" / "power"
        assert store.get("power", name).name == name
    assert sorted(n for _, n in store.names("power")) == ["a;b", "keep", "my stream", "流🙂"]
