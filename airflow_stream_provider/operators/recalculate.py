"""``StreamRecalculateOperator``: recalculates the windows of a backfill run's slice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_stream_provider.operators.lineage import StreamLineage
from airflow_stream_provider.timetables.time import utc_datetime


class StreamRecalculateOperator(StreamLineage, BaseOperator):
    """Recalculates the windows that start in the run's data interval (a backfill's slice), and
    records it done in the ``RECALCULATE STREAM`` request the slice belongs to
    (``information_schema.ins_stream_recalculates``). A run whose ``conf`` names a repair (made by
    ``VERIFY STREAM ... REPAIR``) recalculates exactly the windows it names instead.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    template_fields: Sequence[str] = ()

    def __init__(self, *, stream: str, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams import recalculations, verify_repair
        from airflow_stream_provider.streams.recalculate import recalculate
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self.stream_store()
        stored = store.get(*self.stream_names())
        dag_run = context.get("dag_run")
        repair = verify_repair.repair_conf(getattr(dag_run, "conf", None))
        if repair is not None:
            return self._repair(context, stored, store, *repair)
        start, end = utc_datetime(context["data_interval_start"]), utc_datetime(context["data_interval_end"])
        # the RECALCULATE STREAM request this backfill run is a part of, whose record follows its runs
        request = recalculations.covering(stored, start)
        if request is not None:
            recalculations.started(stored, request.recalc_id)
        try:
            report = recalculate(Warehouse(), *self.stream_names(), start, end, store=store, progress=self.log.info)
        except Exception as err:
            if request is not None:  # Failed once no try is left; until then it is retried
                last = context["ti"].try_number > (self.retries or 0)
                recalculations.failed(stored, request.recalc_id, f"{type(err).__name__}: {err}", final=last)
            raise
        if request is not None:
            recalculations.part_done(stored, request.recalc_id, start)
        self.log.info("recalculated [%s, %s): %s", start.isoformat(), end.isoformat(), report.summary())
        self.report_trigger_failures(self.log)
        return {"triggers": report.triggers, "written": report.written}

    def _repair(self, context: Any, stored: Any, store: Any, recalc_id: str, start: Any, end: Any,
                wanted: set[tuple[str, str]]) -> dict:
        """Recalculate the windows a ``VERIFY ... REPAIR`` named, following its request."""
        from airflow_stream_provider.streams import recalculations
        from airflow_stream_provider.streams.verify import repair_windows
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        recalculations.started(stored, recalc_id)
        try:
            report = repair_windows(Warehouse(), stored.db, stored.name, start, end, wanted, store=store,
                                    progress=self.log.info)
        except Exception as err:
            last = context["ti"].try_number > (self.retries or 0)
            recalculations.failed(stored, recalc_id, f"{type(err).__name__}: {err}", final=last)
            raise
        recalculations.part_done(stored, recalc_id, start)
        self.log.info("repaired %d window(s) of [%s, %s): %s", len(wanted), start.isoformat(), end.isoformat(),
                      report.summary())
        self.report_trigger_failures(self.log)
        return {"triggers": report.triggers, "written": report.written}
