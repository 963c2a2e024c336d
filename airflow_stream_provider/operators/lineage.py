"""What a stream's tasks report to OpenLineage (through ``apache-airflow-providers-openlineage``,
which calls :meth:`StreamLineage.get_openlineage_facets_on_complete` when a task ends): the tables
the stream reads, the table it writes with its schema, and the column lineage of its projection
(:func:`airflow_stream_provider.plan.lineage.lineage_of`)."""

from __future__ import annotations

import json
from typing import Any

from airflow_stream_provider.operators.base import StreamTask


class StreamLineage(StreamTask):
    """A stream task that reads and writes the stream's tables (compute, recalculate)."""

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset
        from openlineage.client.facet_v2 import column_lineage_dataset as cl
        from openlineage.client.facet_v2 import schema_dataset as sd

        from airflow_stream_provider.plan.lineage import lineage_of

        store = self.stream_store()
        db, name = self.stream_names()
        stored, state = store.get(db, name), store.load_state(db, name)
        fields = [f for f in (json.loads(state.result_schema)["fields"] if state.result_schema else [])
                  if not f["name"].startswith("__")]  # (the compute's own trigger index)
        ts_column = (state.trigger_table or {}).get("ts_column")
        lineage = lineage_of(stored.statement, db, output_columns=[f["name"] for f in fields] or None,
                             ts_column=ts_column)
        outputs = []
        if lineage.output is not None:
            facets: dict[str, Any] = {"columnLineage": cl.ColumnLineageDatasetFacet(fields={
                c.column: cl.Fields(inputFields=[cl.InputField(namespace=t.namespace, name=t.name, field=column)
                                                 for t, column in c.sources])
                for c in lineage.columns if c.sources})}
            if fields:
                facets["schema"] = sd.SchemaDatasetFacet(fields=[
                    sd.SchemaDatasetFacetFields(name=f["name"], type=str(f["type"]), ordinal_position=i + 1)
                    for i, f in enumerate(fields)])
            outputs.append(Dataset(namespace=lineage.output.namespace, name=lineage.output.name, facets=facets))
        return OperatorLineage(inputs=[Dataset(namespace=t.namespace, name=t.name) for t in lineage.inputs],
                               outputs=outputs)
