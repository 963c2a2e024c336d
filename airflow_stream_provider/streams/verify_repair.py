"""VERIFY ... REPAIR through Airflow: the windows that differ are recalculated by a run of the
stream's recalculation DAG (``stream__<db>__<name>__recalc``), and VERIFY waits for it.

The run is a manual run of that DAG named ``repair__<recalc_id>``, without a logical date; its
``conf`` names the request and the windows, exactly: ``{"repair": {"recalc_id": ..., "from": ...,
"to": ..., "windows": [[group id, trigger id], ...]}}``. Its task finds the triggers of VERIFY's range
``[from, to)`` again as VERIFY does and recalculates only those (:func:`.verify.repair_windows`), so
a window that was right is not rewritten, and marks the request of
``information_schema.ins_stream_recalculates`` (reason ``REPAIR``) as it goes. The rows no trigger
gives (``extra``) are deleted by VERIFY itself: nothing is recalculated for them.

The windows are recalculated here instead, as before Airflow ran, when Airflow's API cannot be
reached, when the stream has no recalculation DAG (PERIOD streams, TDengine's syntax before 3.3.7)
and when that DAG is paused (the stream is stopped: its run would wait for START). VERIFY waits
for the run at most ``[verify] repair_timeout`` (default 600 s), saying where it is, and fails
clearly when it failed or did not end in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from airflow_stream_provider import config
from airflow_stream_provider.airflow_api import AirflowApi, AirflowApiError
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.streams import recalculations
from airflow_stream_provider.streams.runtime import RunReport
from airflow_stream_provider.streams.store import StoredStream

#: how often VERIFY asks Airflow how its repair run is doing (seconds) ...
POLL_S = 2.0
#: ... and how often it says so while the run's state stays the same
SAY_EVERY_S = 30.0
#: the key of a recalculation DAG run's ``conf`` that makes it a repair
CONF_KEY = "repair"


def recalculation_dag(stored: StoredStream, api: AirflowApi, say: Callable[[str], None]) -> str | None:
    """The recalculation DAG a repair of ``stored`` runs through, or None (saying why) when its
    windows are recalculated here. StreamError when Airflow refuses or does not know the DAG."""
    dag_id = plan_stream(stored.statement, stored.db, StreamState()).recalc_dag_id
    what = f"VERIFY STREAM {stored.qualified} REPAIR"
    if dag_id is None:
        say(f"{stored.qualified} has no recalculation DAG (PERIOD, or TDengine's syntax before 3.3.7): "
            "recalculating here")
        return None
    try:
        dag = api.dag(dag_id)
    except AirflowApiError as err:
        if err.status is None:
            say(f"recalculating here, Airflow not being reachable ({err})")
            return None
        raise StreamError(f"{what}: Airflow refused to describe {dag_id}: {err}") from None
    if dag is None:
        raise StreamError(f"{what}: Airflow at {api.url} does not know the DAG {dag_id} (its DAG file not parsed "
                          "yet, or Airflow serves another stream home); run it again once the DAG is listed")
    if dag.get("is_paused"):
        say(f"recalculating here: {dag_id} is paused (the stream is stopped), so its run would wait for START")
        return None
    return dag_id


def through_airflow(stored: StoredStream, api: AirflowApi, dag_id: str, start: datetime, end: datetime,
                    wanted: set[tuple[str, str]], say: Callable[[str], None],
                    timeout_s: float | None = None) -> RunReport:
    """Recalculate the windows ``wanted`` (group id, trigger id) of VERIFY's range ``[start, end)``
    by a run of ``dag_id``, and wait for it to end. StreamError when it fails or outlasts the timeout."""
    what = f"VERIFY STREAM {stored.qualified} REPAIR"
    made = recalculations.request(stored, recalculations.REPAIR, start, end)
    run_id = f"repair__{made.recalc_id}"
    conf = {CONF_KEY: {"recalc_id": made.recalc_id, "from": start.isoformat(), "to": end.isoformat(),
                       "windows": sorted([group, trigger] for group, trigger in wanted)}}
    try:
        api.trigger_dag_run(dag_id, run_id, conf, note=f"{what}: {len(wanted)} window(s) that differ")
    except AirflowApiError as err:
        recalculations.failed(stored, made.recalc_id, str(err))
        raise StreamError(f"{what}: Airflow refused the run of {dag_id}: {err}") from None
    say(f"recalculating {len(wanted)} window(s) that differ through run {run_id} of {dag_id} "
        f"(recalc_id {made.recalc_id})")
    timeout_s = config.verify_repair_timeout().total_seconds() if timeout_s is None else timeout_s
    state = _wait(api, dag_id, run_id, timeout_s, say)
    if state != "success":
        record = next((r for r in recalculations.records(stored) if r.recalc_id == made.recalc_id), None)
        if state is None:
            raise StreamError(f"{what}: run {run_id} of {dag_id} did not end within {timeout_s:g} s "
                              f"([verify] repair_timeout); its windows are recalculated when it runs: VERIFY again "
                              f"once it ended (recalc_id {made.recalc_id} in "
                              "information_schema.ins_stream_recalculates)")
        if record is not None and record.status not in recalculations.ENDED:
            recalculations.failed(stored, made.recalc_id, f"run {run_id} ended {state}")
        reason = record.message if record is not None and record.message else f"the run ended {state}"
        raise StreamError(f"{what}: run {run_id} of {dag_id} failed: {reason}; see its task log")
    return RunReport(stored.qualified, triggers=len(wanted))


def _wait(api: AirflowApi, dag_id: str, run_id: str, timeout_s: float, say: Callable[[str], None]) -> str | None:
    """The state run ``run_id`` ended in (success, failed), or None when it still runs after ``timeout_s``."""
    began = time.monotonic()
    said, said_at = None, began
    while True:
        try:
            state = api.dag_run(dag_id, run_id).get("state")
        except AirflowApiError as err:  # (a busy api-server now and then: asked again)
            if err.status is not None and err.status != 503:
                raise StreamError(f"VERIFY ... REPAIR: Airflow refused to describe run {run_id}: {err}") from None
            state = said
        now = time.monotonic()
        if state in ("success", "failed"):
            say(f"run {run_id}: {state} after {now - began:.0f}s")
            return state
        if state != said or now - said_at >= SAY_EVERY_S:
            say(f"run {run_id}: {state} ({now - began:.0f}s)")
            said, said_at = state, now
        if now - began >= timeout_s:
            return None
        time.sleep(POLL_S)


def repair_conf(conf: dict | None) -> tuple[str, datetime, datetime, set[tuple[str, str]]] | None:
    """A repair run's request id, VERIFY's range and the windows, from its ``conf`` (None: not a repair)."""
    spec = (conf or {}).get(CONF_KEY)
    if not spec:
        return None
    return (str(spec["recalc_id"]), datetime.fromisoformat(spec["from"]), datetime.fromisoformat(spec["to"]),
            {(str(group), str(trigger)) for group, trigger in spec["windows"]})
