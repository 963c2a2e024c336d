"""A writer of the team's own, for the soak: it uses delta-rs (the ``deltalake`` package) and imports
nothing of this project. It creates the Delta table at argv[1] with its change data feed on, says
``ok``, then reads one JSON list of steps a line from stdin and answers ``ok <version>`` once they
are committed:

- ``{"append": [[ms, device, site, v, st], ...]}``: an append;
- ``{"merge": [...]}``: the same rows MERGEd on (device, time): an update where the row exists, an
  insert where it does not;
- ``{"delete": "<predicate>"}``: a delete.

It stops at the end of its input."""

import json
import sys

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

SCHEMA = pa.schema([("event_time", pa.timestamp("us", tz="UTC")), ("device_id", pa.string()), ("site", pa.string()),
                    ("v", pa.float64()), ("st", pa.int32())])
MERGE_ON = "t.device_id = s.device_id AND t.event_time = s.event_time"


def rows(values: list[list]) -> pa.Table:
    columns = list(zip(*[(t * 1000, d, site, float(v), st) for t, d, site, v, st in values], strict=True))
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)


def main() -> None:
    path = sys.argv[1]
    table = DeltaTable.create(path, SCHEMA, configuration={"delta.enableChangeDataFeed": "true"})
    print("ok", table.version(), flush=True)
    for line in sys.stdin:
        for step in json.loads(line):
            if "append" in step:
                write_deltalake(path, rows(step["append"]), mode="append")
            elif "merge" in step:
                (DeltaTable(path).merge(rows(step["merge"]), MERGE_ON, source_alias="s", target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().execute())
            elif "delete" in step:
                DeltaTable(path).delete(step["delete"])
            else:
                raise SystemExit(f"unknown step {step}")
        print("ok", DeltaTable(path).version(), flush=True)


if __name__ == "__main__":
    main()
