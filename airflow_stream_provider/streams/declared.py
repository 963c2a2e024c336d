"""Deploying a stream declared in code: the one place its declaration changes the home.

:func:`deploy` is the deploy task of a declared stream's DAG, run under the stream's deploy lock
and idempotent (running it twice changes nothing the second time):

- a stream that does not exist yet is created (as ``CREATE STREAM`` through ``airflow-stream sql``
  would), and marked as declared by its project;
- one whose definition is the declared one is left as it is (a stream created with
  ``airflow-stream sql`` is adopted); one the code paused is started again;
- one whose definition differs is refused, with the diff, until the declaration says
  ``recreate`` (drop it, keeping its output tables, and create it anew; when the new definition
  cannot be created, the running one is put back with its recorded progress) or ``recreate and
  recalculate from X`` (and then recalculate its windows from X to now);
- one whose declaration left the code (``declaration=None``) is stopped, never dropped: its
  definition, progress and output tables stay, and declaring it again starts it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from airflow_stream_provider import model as m
from airflow_stream_provider.airflow_api import AirflowApi, AirflowApiError
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.files import hold_lock, make_dirs
from airflow_stream_provider.plan.declaration import StreamDeclaration, definition_diff, same_definition
from airflow_stream_provider.plan.freshness import STATE_KEY as FRESHNESS_KEY
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams import cq, lifecycle
from airflow_stream_provider.streams.recalculate import recalculate
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse


class DeclarationRefused(StreamError):
    """The declared definition differs from the running stream's, and the declaration does not say
    what to do about it."""


@contextmanager
def deploy_lock(store: StreamStore, db: str, name: str) -> Iterator[None]:
    """Held while a stream is deployed: beside its state folder, which a re-creation replaces."""
    folder = make_dirs(store.state_dir(db, name).parent)
    with hold_lock(folder / f".{name}.deploy.lock"):
        yield


def deploy(warehouse: Warehouse, db: str, name: str, declaration: StreamDeclaration | None, *, project: str,
           store: StreamStore | None = None, api: AirflowApi | None = None) -> str:
    """Make stream ``db.name`` what ``declaration`` says (None: its declaration left ``project``'s
    code); what was done. DeclarationRefused when the definitions differ and the declaration does
    not say to recreate it."""
    store = store or StreamStore()
    with deploy_lock(store, db, name):
        if declaration is None:
            return _withdraw(warehouse, db, name, project, store, api)
        if not store.exists(db, name):
            created = _create(warehouse, declaration, store)
            _mark(store, db, name, project, declaration)
            return created
        stored = store.get(db, name)
        owner = store.load_state(db, name).declared_by
        if owner not in (None, project):
            raise DeclarationRefused(f"stream {stored.qualified} is declared by the project {owner!r}, not {project!r}")
        if same_definition(stored.text, declaration.text):
            return _keep(warehouse, db, name, project, store, api, declaration)
        diff = definition_diff(stored.text, declaration.text, stored.qualified)
        if not declaration.recreate:
            with store.updating(db, name) as saving:
                saving.state = saving.state.replace(refused=declaration.fingerprint, refused_diff=diff)
            raise DeclarationRefused(
                f"stream {stored.qualified}: the declaration in {declaration.source} differs from the running "
                "definition; it keeps running as it is until the declaration says what to do: `-- on change: "
                "recreate` (Python: recreate=True), or `-- on change: recreate and recalculate from <instant>`"
                f"\n{diff}")
        before = store.load_state(db, name)
        store.drop(db, name)  # (the output tables stay)
        try:
            done = _create(warehouse, declaration, store) + "; recreated: it differed from the declaration\n" + diff
        except Exception:  # (an output table of another schema, say): the running definition comes back
            store.create(db, stored.statement, stored.text, before)
            raise
        _mark(store, db, name, project, declaration)
        if declaration.recalculate_from is not None:
            done += "\n" + _recalculate(warehouse, store, db, name, declaration.recalculate_from, api)
        return done


def _create(warehouse: Warehouse, declaration: StreamDeclaration, store: StreamStore) -> str:
    (stmt,) = parse(declaration.text)
    assert isinstance(stmt, m.CreateStream)
    before, warehouse.database = warehouse.database, declaration.db  # unqualified names are the declaration's
    try:
        created = cq.create(warehouse, stmt, store) if stmt.series is not None else lifecycle.create(
            warehouse, stmt, store)
    finally:
        warehouse.database = before
    return created.message


def _mark(store: StreamStore, db: str, name: str, project: str, declaration: StreamDeclaration) -> None:
    """Record the stream as the project's, with its declared freshness."""
    fresh = declaration.freshness.to_json() if declaration.freshness is not None else None
    with store.updating(db, name) as saving:
        state = saving.state.replace(declared_by=project, refused=None, refused_diff=None)
        if fresh is not None or FRESHNESS_KEY in state.other:
            other = {k: v for k, v in state.other.items() if k != FRESHNESS_KEY}
            state = dataclasses.replace(state, other={**other, FRESHNESS_KEY: fresh} if fresh else other)
        saving.state = state


def _keep(warehouse: Warehouse, db: str, name: str, project: str, store: StreamStore, api: AirflowApi | None,
          declaration: StreamDeclaration) -> str:
    state = store.load_state(db, name)
    _mark(store, db, name, project, declaration)
    if not state.paused_by_code:
        fresh = declaration.freshness.to_json() if declaration.freshness is not None else None
        changed = "" if state.other.get(FRESHNESS_KEY) == fresh else f" (its freshness now {fresh})"
        return f"stream {db}.{name} is as declared{changed}"
    (start,) = parse(f"START STREAM {db}.{name}")
    assert isinstance(start, m.StartStream)
    started = lifecycle.start(warehouse, start, store, api)
    with store.updating(db, name) as saving:
        saving.state = saving.state.replace(paused_by_code=False)
    return f"{started.message} (declared again)"


def _withdraw(warehouse: Warehouse, db: str, name: str, project: str, store: StreamStore,
              api: AirflowApi | None) -> str:
    if not store.exists(db, name) or store.load_state(db, name).declared_by != project:
        return f"stream {db}.{name} is not one of {project!r}'s: nothing to do"
    if store.load_state(db, name).stopped:
        return f"stream {db}.{name} left the code and is stopped already"
    (stop,) = parse(f"STOP STREAM {db}.{name}")
    assert isinstance(stop, m.StopStream)
    stopped = lifecycle.stop(warehouse, stop, store, api)
    with store.updating(db, name) as saving:
        saving.state = saving.state.replace(paused_by_code=True)
    return f"{stopped.message}: its declaration left the code (its definition, progress and outputs are kept)"


def _recalculate(warehouse: Warehouse, store: StreamStore, db: str, name: str, start: datetime,
                 api: AirflowApi | None) -> str:
    """Recalculate from ``start`` to now: a backfill of the recalculation DAG, or here when Airflow
    cannot be reached."""
    stored, now = store.get(db, name), datetime.now(UTC)
    try:
        return lifecycle.create_recalculation(stored, start, now, api or AirflowApi())
    except AirflowApiError as err:
        if err.status is not None:
            raise StreamError(f"recalculate from {start.isoformat()}: Airflow refused the backfill: {err}") from None
        report = recalculate(warehouse, db, name, start, now, store=store)
        return f"recalculated here, Airflow not being reachable ({err}): {report.summary()}"
