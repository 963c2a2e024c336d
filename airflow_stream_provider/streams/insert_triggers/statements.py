"""CREATE, DROP and SHOW TRIGGERS: register a trigger once its instance is made, unregister it and
call ``on_drop``, and list the triggers with their fire and failure counts.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_stream_provider import model as m
from airflow_stream_provider.streams.insert_triggers.instance import Instance, install, setup_timeout
from airflow_stream_provider.streams.insert_triggers.listener import LISTENER, TriggerHome
from airflow_stream_provider.streams.insert_triggers.registry import Entry, TriggerError, progress_path

if TYPE_CHECKING:
    import pyarrow as pa


def create(stmt: m.CreateInsertTrigger, since: tuple[tuple[str, str, int], ...] = ()) -> str:
    """Register a trigger: its class is imported and an instance made (``validate``, ``on_create``)
    before anything is kept; a failure registers nothing. ``since``: the attached databases its
    pattern reaches, each with the version of its table now (:attr:`Entry.since`)."""
    home = LISTENER.home()
    with home.registry.locked() as entries:
        if any(e.name == stmt.name for e in entries):
            raise TriggerError(f"Failed to create trigger [{stmt.name}], the same name trigger has been created")
        trigger_id = uuid.uuid4().hex
        install_dir = f"{_folder_name(stmt.name)}-{trigger_id[:8]}" if stmt.uri else None
        entry = Entry(trigger_id, stmt.name, stmt.type, stmt.event, stmt.pattern, stmt.class_name, stmt.uri,
                      install_dir, stmt.attributes, m.FailureStrategy.OPTIMISTIC,
                      datetime.now(UTC).isoformat(timespec="seconds"), since)
        try:
            if stmt.uri and install_dir:
                install(stmt.uri, home.root / "install" / install_dir)
            if entry.stateful:
                entry = _create_in_node(home, entry)
            else:
                instance = Instance.create(entry, home.root)
                entry = _with_strategy(entry, instance.strategy())
                home.instances[entry.id] = instance  # this process's instance: no second on_create
        except BaseException:
            if install_dir:
                shutil.rmtree(home.root / "install" / install_dir, ignore_errors=True)
            raise
        entries.append(entry)
    where = "in the stream node" if entry.stateful else "in each process that writes"
    return (f"trigger {entry.name} created: {entry.type.value} {entry.event.value} on {entry.pattern}, "
            f"{entry.class_name} ({entry.strategy.value}), an instance {where}")


def _folder_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:40] or "trigger"


def _with_strategy(entry: Entry, strategy: m.FailureStrategy) -> Entry:
    return Entry(**{**entry.__dict__, "strategy": strategy})


def _create_in_node(home: TriggerHome, entry: Entry) -> Entry:
    try:
        answer = home.node.call({"op": "create", "entry": entry.to_json()}, setup_timeout() + 30)
    except (ConnectionError, TimeoutError) as err:
        raise TriggerError(f"a STATEFUL trigger lives in the stream node, which cannot be reached ({err}); "
                           "start it with `airflow-stream node start`") from None
    if answer.get("error"):
        raise TriggerError(answer["error"])
    return _with_strategy(entry, m.FailureStrategy(answer["strategy"]))


def drop(stmt: m.DropInsertTrigger) -> tuple[str, list[str]]:
    """Unregister a trigger (firing stops at once) and call ``on_drop`` on the instances this process
    and the node hold; (message, notices of an ``on_drop`` that failed)."""
    home = LISTENER.home()
    with home.registry.locked() as entries:
        entry = next((e for e in entries if e.name == stmt.name), None)
        if entry is None:
            names = sorted(e.name for e in entries)
            raise TriggerError(f"Failed to drop trigger [{stmt.name}], this trigger has not been created"
                               + (f" (triggers: {', '.join(names)}; names are case-sensitive)" if names else ""))
        entries.remove(entry)
    notices = []
    if entry.stateful:
        try:
            answer = home.node.call({"op": "drop", "id": entry.id}, setup_timeout() + 30)
            if answer.get("error"):
                notices.append(f"trigger {entry.name} dropped, but {answer['error']}")
        except (ConnectionError, TimeoutError) as err:
            notices.append(f"trigger {entry.name} dropped, but its on_drop was not called: {err}")
    else:
        instance = home.instances.pop(entry.id, None)
        error = instance.drop() if instance is not None else None
        if error:
            notices.append(f"trigger {entry.name} dropped, but its {error}")
    if entry.install:
        shutil.rmtree(home.root / "install" / entry.install, ignore_errors=True)
    progress_path(home.root, entry.id).unlink(missing_ok=True)
    return f"trigger {entry.name} dropped", notices


SHOW_COLUMNS = ("TriggerName", "Event", "Type", "State", "PathPattern", "ClassName", "NodeId", "Fired", "Failed",
                "LastError")


def show() -> pa.Table:
    """SHOW TRIGGERS: IoTDB's columns, then the fire and failure counts and the last error."""
    import pyarrow as pa

    home = LISTENER.home()
    entries = home.registry.entries()
    stats = home.registry.stats()
    rows: dict[str, list] = {c: [] for c in SHOW_COLUMNS}
    for e in entries:
        s = stats.get(e.id, {})
        for column, value in zip(SHOW_COLUMNS, (
                e.name, e.event.value, e.type.value, "ACTIVE", str(e.pattern), e.class_name,
                "node" if e.stateful else "ALL", s.get("fired", 0), s.get("failed", 0), s.get("last_error")),
                strict=True):
            rows[column].append(value)
    return pa.table({c: pa.array(v, pa.int64() if c in ("Fired", "Failed") else pa.string())
                     for c, v in rows.items()})
