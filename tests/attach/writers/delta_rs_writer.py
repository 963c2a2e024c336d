"""A writer of the team's own that uses delta-rs (the ``deltalake`` package) and imports nothing of
this project. It changes the Delta table at argv[1] by the steps of the JSON list in argv[2], as
:mod:`spark_job` does: ``create``, ``append``, ``merge`` (update the same (device, time), insert the
others) and ``delete`` (a delta-rs predicate)."""

import json
import sys
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

T0 = datetime(2025, 3, 1, tzinfo=UTC)
SCHEMA = pa.schema([("event_time", pa.timestamp("us", tz="UTC")), ("device_id", pa.string()), ("site", pa.string()),
                    ("voltage", pa.int32()), ("current", pa.float64())])


def rows(values) -> pa.Table:
    columns = list(zip(*[(T0 + timedelta(seconds=s), d, site, v, c) for s, d, site, v, c in values], strict=True))
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)


def main() -> None:
    path, steps = sys.argv[1], json.loads(sys.argv[2])
    for step in steps:
        if "create" in step:
            DeltaTable.create(path, SCHEMA, configuration=step["create"] or None)
        elif "append" in step:
            write_deltalake(path, rows(step["append"]), mode="append")
        elif "merge" in step:
            (DeltaTable(path).merge(rows(step["merge"]), "t.device_id = s.device_id AND t.event_time = s.event_time",
                                    source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        elif "delete" in step:
            DeltaTable(path).delete(step["delete"])
        else:
            raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    main()
