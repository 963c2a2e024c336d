"""What fired for schedule triggers: the due PERIOD instants (wall clock), and the SLIDING
instants that each group's event time passed, live or over a range of event time (recalculation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.plan.schedule import Schedule, schedule_of
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.streams.fired import TROWS_FROM, TROWS_TO, Fired
from airflow_stream_provider.streams.probes import version_at
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, group_id, nanos
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.warehouse.catalog import TBNAME
from airflow_stream_provider.windows import rollup


def sliding_instants(schedule: Schedule, after: datetime, until: datetime,
                     first_prev: datetime) -> list[tuple[datetime, datetime, datetime]]:
    """(previous, instant, next) of each SLIDING instant in (after, until]; the first instant's
    previous is ``first_prev`` when the schedule has none before it. Live runs and recalculation
    both take their instants from here."""
    return [(schedule.previous(t) or first_prev, t, schedule.next_after(t)) for t in schedule.instants(after, until)]


def period_triggers(runtime: StreamRuntime, schedule: Schedule, state: StreamState, now: datetime, report: RunReport, *,
                     at: datetime | None = None) -> tuple[list[Fired], dict]:
    """The due instants (all since the last one fired, or the one instant ``at`` of an Airflow run).
    %%trows of an instant is what was written since the previous instant, or since the last
    instant fired when runs were missed (a stop); START ... IGNORE UNTREATED moves that mark on."""
    created = schedule.created
    path = str(runtime.info.path) if runtime.info else None
    if at is not None:
        due = [at]
        prev = schedule.previous(at)
        since0 = version_at(path, prev) if path and prev is not None and prev > created else \
            state.created_version
        if state.last_version is not None and since0 is not None:
            since0 = min(since0, state.last_version)
        if state.untreated_version is not None and since0 is not None:
            since0 = max(since0, state.untreated_version)
        return fire_instants(runtime, schedule, due, since0, report)
    due = list(schedule.instants(state.last_fired or created, now))
    if not due:
        return [], {}
    since0 = state.last_version if state.last_version is not None else state.created_version
    return fire_instants(runtime, schedule, due, since0, report)


def fire_instants(runtime: StreamRuntime, schedule: Schedule, due: list[datetime], since0: int | None,
                  report: RunReport) -> tuple[list[Fired], dict]:
    """The triggers of the PERIOD instants ``due`` (each group's), %%trows of the first the rows
    written after version ``since0``; and the progress they make."""
    path = str(runtime.info.path) if runtime.info else None
    current = runtime.table_version()
    versions = [(version_at(path, t) if path else None) for t in due]
    groups = _groups(runtime, current)
    nodata = runtime.stmt.options.ignore_nodata_trigger and path is not None
    changed = _changed_groups(runtime, since0, versions[-1]) if nodata else {}
    fired: list[Fired] = []
    since = since0
    for t, version in zip(due, versions):
        prev = schedule.previous(t)
        nxt = schedule.next_after(t)
        for group in groups:
            if nodata and not any((since is None or v > since) and v <= (version or -1)
                                  for v in changed.get(group, [])):
                report.skipped += 1
                continue
            gid = group_id(runtime, group)
            values = {"_tlocaltime": nanos(t), "_tprev_localtime": nanos(prev) if prev else None,
                      "_tnext_localtime": nanos(nxt), "_tgrpid": int(gid), **runtime.group_values(group)}
            fired.append(Fired(len(fired), values, version=version, since_version=since, group=group, group_id=gid,
                               trigger_id=f"{gid}:{epoch_micros(t)}"))
        since = version if version is not None else since
    return fired, {"last_fired": due[-1].isoformat(), "last_version": since}


def _groups(runtime: StreamRuntime, version: int | None) -> list[tuple]:
    """The groups of the trigger table: the distinct PARTITION BY values (one group without)."""
    if not runtime.group_columns or runtime.info is None:
        return [()]
    reader = runtime.warehouse.spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(str(runtime.info.path)).transform(mapping.renamer(str(runtime.info.path)))
    if runtime.source and runtime.source.subtable:
        df = df.where(F.col(TBNAME) == runtime.source.subtable)
    df = _by_group(runtime, df)
    rows = df.select(*[F.col(f"`{c.name}`") for c in runtime.group_columns]).distinct().collect()
    return sorted((tuple(r) for r in rows), key=lambda t: tuple(str(v) for v in t))


def _by_group(runtime: StreamRuntime, df: DataFrame) -> DataFrame:
    """The trigger table's rows as its groups read them: ROLLUP BY's once per rollup group, the tag
    naming the group (its paths checked first: an invalid one fails the stream)."""
    if runtime.stmt.rollup_by is None:
        return df
    runtime.rollup_counts()
    return rollup.spark_expand(df, runtime.group_columns[0].name)


def _changed_groups(runtime: StreamRuntime, since: int | None, until: int | None) -> dict[tuple, list[int]]:
    """group -> the versions in (since, until] that wrote rows of it (inserts and updates)."""
    if runtime.info is None or until is None or (since is not None and since >= until):
        return {}
    df = (runtime.warehouse.spark.read.format("delta").option("readChangeFeed", "true")
          .option("startingVersion", (since if since is not None else -1) + 1).option("endingVersion", until)
          .load(str(runtime.info.path)).transform(mapping.renamer(str(runtime.info.path)))
          .where(F.col("_change_type").isin("insert", "update_postimage")))
    if runtime.source and runtime.source.pre_filter:
        df = df.where(F.expr(runtime.source.pre_filter))
    df = _by_group(runtime, df)
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    out: dict[tuple, list[int]] = {}
    for row in df.select(*keys, "_commit_version").distinct().collect():
        out.setdefault(tuple(row[:-1]), []).append(row[-1])
    return out


def sliding_triggers(runtime: StreamRuntime, state: StreamState, report: RunReport) -> tuple[list[Fired], dict]:
    trig = runtime.stmt.trigger
    assert isinstance(trig, m.SlidingTrigger) and runtime.info is not None
    opts = runtime.stmt.options
    version = runtime.table_version()
    spark = runtime.warehouse.spark
    path = str(runtime.info.path)
    ts = runtime.info.timestamp_column
    created_version = state.created_version
    if opts.fill_history is not None or created_version is None:
        df = spark.read.format("delta").option("versionAsOf", version).load(path).transform(mapping.renamer(path))
    elif version is None or created_version >= version:
        return [], {}
    else:
        df = (spark.read.format("delta").option("readChangeFeed", "true")
              .option("startingVersion", created_version + 1).option("endingVersion", version).load(path)
              .transform(mapping.renamer(path))
              .where(F.col("_change_type").isin("insert", "update_postimage")))
    if runtime.source and runtime.source.subtable:
        df = df.where(F.col(TBNAME) == runtime.source.subtable)
    if runtime.source and runtime.source.pre_filter:
        df = df.where(F.expr(runtime.source.pre_filter))
    df = _by_group(runtime, df)
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    spans = df.groupBy(*keys).agg(F.min(F.col(f"`{ts}`")).alias("lo"), F.max(F.col(f"`{ts}`")).alias("hi")).collect()
    watermark = opts.watermark.to_timedelta() if opts.watermark else timedelta(0)
    groups_state: dict = dict(state.sliding)
    candidates: list[tuple] = []
    for row in spans:
        group = tuple(row[:-2])
        gid = group_id(runtime, group)
        lo, hi = row[-2].replace(tzinfo=UTC) if row[-2].tzinfo is None else row[-2], row[-1]
        hi = hi.replace(tzinfo=UTC) if hi.tzinfo is None else hi
        entry = groups_state.get(gid) or {"origin": (lo - timedelta(microseconds=1)).isoformat()}
        origin = datetime.fromisoformat(entry["origin"])
        schedule = schedule_of(runtime.stmt, origin, config.timezone())
        assert isinstance(schedule, Schedule)
        last = datetime.fromisoformat(entry["last"]) if entry.get("last") else origin
        due = sliding_instants(schedule, last, hi - watermark, origin)
        candidates.extend((group, gid, prev, t, nxt) for prev, t, nxt in due)
        if due:
            entry = {**entry, "last": due[-1][1].isoformat()}
        groups_state[gid] = entry
    if opts.ignore_nodata_trigger and candidates:
        candidates, skipped = _with_rows(runtime, df, candidates)
        report.skipped += skipped
    fired = [sliding_fired(runtime, i, group, gid, prev, t, nxt, version)
             for i, (group, gid, prev, t, nxt) in enumerate(candidates)]
    return fired, {"sliding": groups_state}


def sliding_fired(runtime: StreamRuntime, idx: int, group: tuple, gid: str, prev: datetime, t: datetime,
                  nxt: datetime, version: int | None) -> Fired:
    """The SLIDING trigger of ``group`` at instant ``t``; %%trows holds its rows in [prev, t)."""
    values = {"_tprev_ts": prev, "_tcurrent_ts": t, "_tnext_ts": nxt, "_tgrpid": int(gid),
              "_tlocaltime": nanos(t), TROWS_FROM: prev, TROWS_TO: t, **runtime.group_values(group)}
    return Fired(idx, values, version=version, group=group, group_id=gid, trigger_id=f"{gid}:{epoch_micros(t)}")


def _with_rows(runtime: StreamRuntime, df: DataFrame, candidates: list[tuple]) -> tuple[list[tuple], int]:
    """IGNORE_NODATA_TRIGGER: keep the candidates whose [previous, current) holds rows."""
    spark = runtime.warehouse.spark
    cols = runtime.group_columns
    assert runtime.info is not None  # sliding_triggers, the caller, asserts it
    ts = runtime.info.timestamp_column
    schema = T.StructType([T.StructField("__i", T.LongType()), T.StructField("__from", T.TimestampType()),
                           T.StructField("__to", T.TimestampType())]
                          + [T.StructField(f"__g{j}", T.StringType()) for j in range(len(cols))])
    rows = [(i, c[2], c[3], *[None if v is None else str(v) for v in c[0]]) for i, c in enumerate(candidates)]
    cand = spark.createDataFrame(rows, schema)
    cond = (F.col(f"`{ts}`") >= F.col("__from")) & (F.col(f"`{ts}`") < F.col("__to"))
    for j, c in enumerate(cols):
        cond = cond & (F.col(f"`{c.name}`").cast("string").eqNullSafe(F.col(f"__g{j}")))
    hits = {r[0] for r in cand.join(df, cond, "inner").select("__i").distinct().collect()}
    kept = [c for i, c in enumerate(candidates) if i in hits]
    return kept, len(candidates) - len(kept)


def sliding_in_range(runtime: StreamRuntime, rows: DataFrame, start: datetime, end: datetime,
                      version: int | None) -> list[Fired]:
    """The SLIDING instants in (start, end] that each group's event time (minus WATERMARK) passed."""
    trig = runtime.stmt.trigger
    assert isinstance(trig, m.SlidingTrigger) and runtime.info is not None
    opts = runtime.stmt.options
    if runtime.source and runtime.source.subtable:
        rows = rows.where(F.col(TBNAME) == runtime.source.subtable)
    if runtime.source and runtime.source.pre_filter:
        rows = rows.where(F.expr(runtime.source.pre_filter))
    rows = _by_group(runtime, rows)
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    spans = rows.groupBy(*keys).agg(F.max(F.col(f"`{runtime.info.timestamp_column}`")).alias("hi")).collect()
    watermark = opts.watermark.to_timedelta() if opts.watermark else timedelta(0)
    before = start - timedelta(microseconds=1)
    schedule = schedule_of(runtime.stmt, before, config.timezone())
    assert isinstance(schedule, Schedule)
    fired: list[Fired] = []
    for row in spans:
        group = tuple(row[:-1])
        hi = row[-1] if row[-1].tzinfo else row[-1].replace(tzinfo=UTC)
        gid = group_id(runtime, group)
        for prev, t, nxt in sliding_instants(schedule, before, min(end, hi - watermark), start):
            fired.append(sliding_fired(runtime, len(fired), group, gid, prev, t, nxt, version))
    return fired
