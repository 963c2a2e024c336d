"""``StreamDeployOperator``: makes a stream what its declaration in the DAG folder says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_stream_provider.operators.base import StreamTask


class StreamDeployOperator(StreamTask, BaseOperator):
    """Creates, keeps, recreates or stops a declared stream
    (:func:`~airflow_stream_provider.streams.declared.deploy`), under the stream's deploy lock.
    A declaration that differs from the running stream without saying ``recreate`` fails the task
    with the diff, without retries; the stream runs on as it was.

    :param stream: the stream, written ``db.name``.
    :param project: the project of declarations the stream belongs to.
    :param text: the declared statement; None: the declaration left the code (the stream is stopped).
    :param source: where it is declared.
    :param recreate: recreate the stream when its definition differs; default False.
    :param recalculate_from: with ``recreate``, recalculate from this ISO instant; default None.
    :param freshness: the declared freshness, as
        :meth:`~airflow_stream_provider.plan.freshness.Freshness.to_json` writes it; default None.
    :param home: the stream home; default None: ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    ui_color = "#f3ecd9"
    template_fields: Sequence[str] = ()

    def __init__(self, *, stream: str, project: str, text: str | None, source: str = "", recreate: bool = False,
                 recalculate_from: str | None = None, freshness: dict | None = None, home: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)
        self.project = project
        self.text = text
        self.source = source
        self.recreate = recreate
        self.recalculate_from = recalculate_from
        self.freshness = freshness

    def execute(self, context: Any) -> str:
        from airflow_stream_provider.plan.declaration import declare
        from airflow_stream_provider.plan.freshness import SILENT_AFTER, Freshness
        from airflow_stream_provider.streams.declared import DeclarationRefused, deploy
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self.stream_store()
        db, name = self.stream_names()
        declaration = None
        if self.text is not None:
            fresh = Freshness.from_json(self.freshness) if self.freshness else None
            declaration = declare(self.text, database=db, source=self.source, recreate=self.recreate,
                                  recalculate_from=self.recalculate_from,
                                  freshness=fresh.bound if fresh is not None else None,
                                  silent_after=fresh.silent_after if fresh is not None else SILENT_AFTER)
        try:
            done = deploy(Warehouse(), db, name, declaration, project=self.project, store=store)
        except DeclarationRefused as err:
            raise AirflowFailException(str(err)) from None
        self.log.info("%s", done)
        return done
