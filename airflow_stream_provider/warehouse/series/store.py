"""IoTDB's databases and series on Delta tables: one supertable per IoTDB database, a subtable row
set per device, a column per measurement, written column-wise (``shared/reference/iotdb-semantics.md``
section 2).

Layout, beside the TDengine databases of the warehouse root:

- ``<db>/.database.json`` also records the IoTDB path (``"iotdb": "root.ln"``); the folder's name
  is the path below ``root`` in lower case with ``_`` for ``.`` (``root.ln`` -> ``ln``; a path that
  differs only in case, or names one already taken, gets a short hash: ``ln_3f2a9c``);
- ``<db>/devices/``: the Delta table of every device of the database: ``ts``, ``tbname`` (the
  device's full path, case kept), the tag ``device`` (its path below the database), and one
  nullable column per measurement name, added the first time the database sees the name;
- ``<db>/.series.json``: the devices in the order they were created, each with its series
  (measurement, type, encoding, compression, column) in the order they were created: wildcards
  expand in that order. Changed under ``<db>/.series.lock`` and replaced atomically.

A measurement name has one type in a database (its column's); IoTDB lets two devices give one name
two types, which is refused here with the reason. Writes are column-wise: a MERGE on (tbname, ts)
that sets only the measurements written and never writes NULL over a value, so a NULL is "no point".
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import read_json_object
from airflow_stream_provider.files import hold_lock, write_json
from airflow_stream_provider.model.names import CQ_NAMESPACE, TBNAME, shown
from airflow_stream_provider.model.series import device_problem
from airflow_stream_provider.storage import Location
from airflow_stream_provider.warehouse import listeners, mapping, writer
from airflow_stream_provider.warehouse.catalog import Catalog, Column, TableInfo, WarehouseError
from airflow_stream_provider.warehouse.series import attached
from airflow_stream_provider.warehouse.types import arrow_type

DEVICES = "devices"
DEVICE_TAG = "device"
TS = "ts"
PRECISION = "ms"  # IoTDB's default: an epoch number in a statement is milliseconds
_RESERVED = frozenset({TS, TBNAME, DEVICE_TAG})
_TYPES = {
    m.SeriesType.BOOLEAN: m.DataType("BOOL"),
    m.SeriesType.INT32: m.DataType("INT"),
    m.SeriesType.INT64: m.DataType("BIGINT"),
    m.SeriesType.FLOAT: m.DataType("FLOAT"),
    m.SeriesType.DOUBLE: m.DataType("DOUBLE"),
    m.SeriesType.TEXT: m.DataType("VARCHAR", (65517,)),
}
#: the default encoding IoTDB gives each type when CREATE TIMESERIES names none
DEFAULT_ENCODINGS = {m.SeriesType.BOOLEAN: "RLE", m.SeriesType.INT32: "TS_2DIFF", m.SeriesType.INT64: "TS_2DIFF",
                     m.SeriesType.FLOAT: "GORILLA", m.SeriesType.DOUBLE: "GORILLA", m.SeriesType.TEXT: "PLAIN"}
DEFAULT_COMPRESSION = "LZ4"
_INT_RANGES = {m.SeriesType.INT32: (-(2**31), 2**31 - 1), m.SeriesType.INT64: (-(2**63), 2**63 - 1)}


def value_type(value: object) -> m.SeriesType:
    """The type a series gets from its first written value (schema-less writing): booleans are
    BOOLEAN, numbers DOUBLE (IoTDB 2's ``integer_string_infer_type`` and
    ``floating_string_infer_type``), strings TEXT."""
    if isinstance(value, bool):
        return m.SeriesType.BOOLEAN
    if isinstance(value, (int, float)):
        return m.SeriesType.DOUBLE
    return m.SeriesType.TEXT


@dataclass(frozen=True)
class Series:
    """One series: its device, measurement, type and the column holding it."""

    database: SeriesDatabase
    device: m.SeriesPath
    measurement: str
    type: m.SeriesType
    column: str
    encoding: str
    compression: str
    aligned: bool = False

    @property
    def path(self) -> m.SeriesPath:
        return self.device.child(self.measurement)


@dataclass(frozen=True)
class SeriesDatabase:
    path: m.SeriesPath
    name: str  # the warehouse database holding it
    table: Location  # its devices table
    attached: bool = False  # its devices are those of a Delta table the project did not create

    def contains(self, path: m.SeriesPath) -> bool:
        return path.nodes[: len(self.path.nodes)] == self.path.nodes


@dataclass
class SeriesRegistry:
    """``.series.json`` of one database: devices in creation order, each with its series."""

    devices: dict[str, dict] = field(default_factory=dict)  # full path -> {"nodes", "aligned", "series": [...]}
    columns: dict[str, dict] = field(default_factory=dict)  # measurement -> {"column", "type"}

    def to_json(self) -> dict:
        return {"devices": list(self.devices.values()), "columns": self.columns}

    @classmethod
    def from_json(cls, payload: dict) -> SeriesRegistry:
        return cls({str(m.SeriesPath(tuple(d["nodes"]))): d for d in payload.get("devices", [])},
                   dict(payload.get("columns", {})))


class SeriesStore:
    """The IoTDB databases of one warehouse root."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    # --- databases -------------------------------------------------------------------------------

    def databases(self) -> list[SeriesDatabase]:
        out = []
        for name in self.catalog.databases():
            meta = read_json_object(self.catalog.database_path(name) / ".database.json")
            if "iotdb" in meta:
                path = m.SeriesPath(tuple(meta["iotdb"]))
                if "attached" in meta:
                    out.append(SeriesDatabase(path, name, str(meta["attached"]["location"]), attached=True))
                else:
                    out.append(SeriesDatabase(path, name, self.catalog.table_path(name, DEVICES)))
        return sorted(out, key=lambda d: d.path.nodes)

    def database_of(self, path: m.SeriesPath) -> SeriesDatabase | None:
        """The database holding ``path`` (a device or series), or None."""
        return next((db for db in self.databases() if db.contains(path)), None)

    def create_database(self, path: m.SeriesPath) -> SeriesDatabase:
        self._check_free(path)
        name = self._free_name(path)
        self.catalog.create_database(name, PRECISION, if_not_exists=False, extra={"iotdb": list(path.nodes)})
        columns = (Column(TS, m.DataType("TIMESTAMP"), "ts"), Column(TBNAME, m.DataType("VARCHAR", (192,)), TBNAME),
                   Column(DEVICE_TAG, m.DataType("VARCHAR", (192,)), "tag"))
        self.catalog.create_table(name, DEVICES, columns, if_not_exists=False)
        self._save(SeriesDatabase(path, name, self.catalog.table_path(name, DEVICES)), SeriesRegistry())
        return SeriesDatabase(path, name, self.catalog.table_path(name, DEVICES))

    def attach_database(self, stmt: m.AttachDevices, location: str) -> SeriesDatabase:
        """CREATE DEVICES ... FROM DELTA: the table at ``location`` recorded as the devices under
        ``stmt.prefix`` once its mapping fits it (:mod:`.attached`); nothing of it is copied."""
        self._check_free(stmt.prefix)
        entry = attached.entry_of(stmt, location)
        columns = attached.check(stmt.prefix, entry)
        entry["types"] = {c.source: c.delta_type for c in columns}
        attached.registry(SeriesDatabase(stmt.prefix, "", location, attached=True), entry)  # the device values
        name = self._free_name(stmt.prefix)
        self.catalog.create_database(name, PRECISION, if_not_exists=False,
                                     extra={"iotdb": list(stmt.prefix.nodes), "attached": entry})
        return SeriesDatabase(stmt.prefix, name, location, attached=True)

    def _check_free(self, path: m.SeriesPath) -> None:
        """Refuse a new database at ``path`` where one is, or above or below one."""
        for db in self.databases():
            if db.path == path:
                raise WarehouseError(f"{path} has already been created as database")
            if db.contains(path):
                raise WarehouseError(f"{path} is under the database {db.path}: a database cannot hold another")
            if path.nodes == db.path.nodes[: len(path.nodes)]:
                raise WarehouseError(f"the database {db.path} is under {path}: a database cannot hold another")

    def _free_name(self, path: m.SeriesPath) -> str:
        """The warehouse database name of a new IoTDB database."""
        base = re.sub(r"[^a-z0-9_]", "_", "_".join(path.nodes[1:]).lower())[:50] or "db"
        taken = {*self.catalog.databases(), CQ_NAMESPACE}
        if base not in taken and base == "_".join(path.nodes[1:]):
            return base
        digest = hashlib.sha1(str(path).encode()).hexdigest()
        for size in (6, 10, 40):
            name = f"{base}_{digest[:size]}"
            if name not in taken:
                return name
        raise WarehouseError(f"no free warehouse name for the database {path}")

    def ensure_database(self, device: m.SeriesPath) -> SeriesDatabase:
        """The database of ``device``; created at ``root.<first node>`` when there is none (IoTDB's
        automatic creation, ``default_storage_group_level`` 1)."""
        found = self.database_of(device)
        if found is not None:
            return found
        return self.create_database(m.SeriesPath(device.nodes[:2]))

    def drop_databases(self, patterns: Sequence[m.SeriesPath]) -> list[m.SeriesPath]:
        dropped = []
        for db in self.databases():
            if any(p.matches(db.path) for p in patterns):
                self.catalog.drop_database(db.name, if_exists=True)
                mapping.unregister(db.table)  # (an attached table's: its data stays where it is)
                dropped.append(db.path)
        return dropped

    # --- the registry ----------------------------------------------------------------------------

    def registry(self, db: SeriesDatabase) -> SeriesRegistry:
        if db.attached:
            meta = read_json_object(self.catalog.database_path(db.name) / ".database.json")
            return SeriesRegistry(*attached.registry(db, meta["attached"]))
        try:
            return SeriesRegistry.from_json(read_json_object(self._registry_path(db)))
        except FileNotFoundError:
            return SeriesRegistry()

    def _registry_path(self, db: SeriesDatabase) -> Path:
        return self.catalog.database_path(db.name) / ".series.json"

    def _save(self, db: SeriesDatabase, registry: SeriesRegistry) -> None:
        write_json(self._registry_path(db), registry.to_json())

    @contextlib.contextmanager
    def _locked(self, db: SeriesDatabase) -> Iterator[SeriesRegistry]:
        """The registry of ``db`` to change; saved when the body ends without an error."""
        attached.refuse_write(db, "creating or dropping series")
        with hold_lock(self.catalog.database_path(db.name) / ".series.lock"):
            registry = self.registry(db)
            yield registry
            self._save(db, registry)

    def series(self, db: SeriesDatabase, registry: SeriesRegistry | None = None) -> list[Series]:
        """Every series of ``db``: devices in creation order, each device's series in creation order."""
        registry = registry or self.registry(db)
        return [Series(db, m.SeriesPath(tuple(d["nodes"])), s["name"], m.SeriesType(s["type"]), s["column"],
                       s["encoding"], s["compression"], bool(d.get("aligned")))
                for d in registry.devices.values() for s in d["series"]]

    def expand(self, patterns: Iterable[m.SeriesPath]) -> list[Series]:
        """The series matching any of ``patterns``, each once, in creation order."""
        patterns = list(patterns)
        out: list[Series] = []
        for db in self.databases():
            if not any(p.matches(db.path) or p.reaches_below(db.path) for p in patterns):
                continue
            out.extend(s for s in self.series(db) if any(p.matches(s.path) for p in patterns))
        return out

    def devices(self, pattern: m.SeriesPath | None = None) -> list[tuple[SeriesDatabase, m.SeriesPath, bool]]:
        """(database, device, aligned) of the devices matching ``pattern`` (all without one)."""
        out = []
        for db in self.databases():
            for entry in self.registry(db).devices.values():
                device = m.SeriesPath(tuple(entry["nodes"]))
                if pattern is None or pattern.matches(device):
                    out.append((db, device, bool(entry.get("aligned"))))
        return out

    def create_series(self, definitions: Sequence[m.TimeseriesDefinition], aligned: bool, *,
                      existing_ok: bool = False) -> list[Series]:
        """CREATE [ALIGNED] TIMESERIES: each series new (``existing_ok``: an existing one is kept, as
        when two writers create it at once); its column added when the database has none for its
        measurement."""
        created: list[Series] = []
        homes = self.databases_of({d.path.parent for d in definitions})
        by_db: dict[str, tuple[SeriesDatabase, list[m.TimeseriesDefinition]]] = {}
        for definition in definitions:
            db = homes[definition.path.parent]
            by_db.setdefault(db.name, (db, []))[1].append(definition)
        for db, group in by_db.values():
            with self._locked(db) as registry:
                new_columns = []
                for definition in group:
                    device, name = definition.path.parent, definition.path.last
                    entry = registry.devices.get(str(device))
                    if entry is not None and any(s["name"] == name for s in entry["series"]):
                        if existing_ok:
                            continue
                        raise WarehouseError(f"Path [{definition.path}] already exist")
                    if entry is not None and entry["series"] and bool(entry.get("aligned")) != aligned:
                        raise WarehouseError(f"{device} holds {'aligned' if entry.get('aligned') else 'non-aligned'} "
                                             f"series; a device cannot mix aligned and non-aligned series")
                    column, new = self._column(db, registry, name, definition.type, str(definition.path))
                    if new:
                        new_columns.append((column, definition.type))
                    entry = registry.devices.setdefault(str(device), {"nodes": list(device.nodes), "aligned": aligned,
                                                                      "series": []})
                    entry["series"].append({"name": name, "type": definition.type.value, "column": column,
                                            "encoding": definition.encoding or DEFAULT_ENCODINGS[definition.type],
                                            "compression": definition.compression or DEFAULT_COMPRESSION})
                    created.append(Series(db, device, name, definition.type, column,
                                          entry["series"][-1]["encoding"], entry["series"][-1]["compression"],
                                          aligned))
                self._add_columns(db, new_columns)
        return created

    def _column(self, db: SeriesDatabase, registry: SeriesRegistry, name: str, dtype: m.SeriesType,
                label: str) -> tuple[str, bool]:
        """The column of measurement ``name`` in ``db`` and whether it is new; refused when the
        database has the name with another type."""
        known = registry.columns.get(name)
        if known is not None:
            if known["type"] != dtype.value:
                users = [path for path, d in registry.devices.items() if any(s["name"] == name for s in d["series"])]
                raise WarehouseError(
                    f"{label} is {dtype.value}, but {name} is {known['type']} in {db.path} "
                    f"({', '.join(users[:3])}{'...' if len(users) > 3 else ''}): a measurement name has one type "
                    "in a database here")
            return known["column"], False
        taken = {c["column"] for c in registry.columns.values()} | _RESERVED
        base = re.sub(r"[^a-z0-9_]", "_", name.lower())[:56] or "m"
        column, n = base, 2
        while column in taken:
            column, n = f"{base}_{n}", n + 1
        registry.columns[name] = {"column": column, "type": dtype.value}
        return column, True

    def _add_columns(self, db: SeriesDatabase, columns: list[tuple[str, m.SeriesType]]) -> None:
        if not columns:
            return
        from deltalake import DeltaTable
        from deltalake.schema import Field, PrimitiveType

        primitive = {"BOOL": "boolean", "INT": "integer", "BIGINT": "long", "FLOAT": "float", "DOUBLE": "double",
                     "VARCHAR": "string"}
        fields = [Field(name, PrimitiveType(primitive[_TYPES[t].name]), nullable=True,
                        metadata={"tdengine.role": "metric", "tdengine.type": str(_TYPES[t])})
                  for name, t in columns]
        DeltaTable(str(db.table)).alter.add_columns(fields)
        self.catalog.forget(db.table)

    def ensure_series(self, wanted: dict[m.SeriesPath, dict[str, m.SeriesType]], aligned: bool = False
                      ) -> dict[tuple[m.SeriesPath, str], Series]:
        """The series of each device and measurement of ``wanted``; the missing ones created with
        the given type (schema-less writing), or with the type the database already has for the
        measurement. Keyed by (device, measurement). Each database's registry is read once."""
        homes = self.databases_of(wanted)
        missing: list[m.TimeseriesDefinition] = []
        for db in set(homes.values()):
            registry = self.registry(db)
            for device in (d for d, home in homes.items() if home == db):
                entry = registry.devices.get(str(device))
                known = {s["name"] for s in entry["series"]} if entry else set()
                missing.extend(m.TimeseriesDefinition(device.child(name), _declared(registry, name, dtype))
                               for name, dtype in wanted[device].items() if name not in known)
        if missing:
            self.create_series(missing, aligned, existing_ok=True)
        found: dict[tuple[m.SeriesPath, str], Series] = {}
        for db in set(homes.values()):
            for series in self.series(db):
                if series.device in wanted and series.measurement in wanted[series.device]:
                    found[(series.device, series.measurement)] = series
        return found

    def databases_of(self, devices: Iterable[m.SeriesPath]) -> dict[m.SeriesPath, SeriesDatabase]:
        """The database of each device, created at ``root.<first node>`` when there is none; the
        databases are listed once."""
        known = self.databases()
        out: dict[m.SeriesPath, SeriesDatabase] = {}
        for device in devices:
            db = next((d for d in known if d.contains(device)), None)
            if db is None:
                db = self.create_database(m.SeriesPath(device.nodes[:2]))
                known.append(db)
            attached.refuse_write(db, "INSERT")
            out[device] = db
        return out

    def write_points(self, batches: Sequence[tuple[m.SeriesPath, pa.Array, dict[str, pa.Array]]],
                     aligned: bool = False, *, per_row: bool = False) -> int:
        """Write points of many devices: each batch is (device, times, {measurement: values}), a
        None value being no point. The series are created when new (typed by their values), and
        each database gets one commit; the number of rows written. Insert listeners see each
        device's points (each row's, with ``per_row``: an SQL INSERT) before and after the commits."""
        wanted: dict[m.SeriesPath, dict[str, m.SeriesType]] = {}
        for device, _, values in batches:
            for name, array in values.items():
                if pa.types.is_null(array.type):
                    continue
                wanted.setdefault(device, {})[name] = series_type(array.type)
        if not wanted:
            return 0
        for device in wanted:  # (INTO's placeholders make devices from the data)
            problem = device_problem(device)
            if problem is not None:
                raise WarehouseError(f"the device path {shown(str(device))}: {problem}")
        listening = listeners.active()
        writes: list[listeners.Write] = []
        if listening:
            for device, times, values in batches:
                columns = {n: a for n, a in values.items() if n in wanted.get(device, {})}
                if columns:
                    write = listeners.series_write(device, times, columns, wanted[device].__getitem__)
                    if write.rows:
                        writes.extend(listeners.split_rows(write) if per_row else [write])
            listeners.before(listening, writes)
        known = self.ensure_series(wanted, aligned)
        tables: dict[SeriesDatabase, list[pa.Table]] = {}
        schemas: dict[SeriesDatabase, pa.Schema] = {}
        for device, times, values in batches:
            columns = {name: array for name, array in values.items() if (device, name) in known}
            if not columns:
                continue
            db = known[(device, next(iter(columns)))].database
            if db not in schemas:
                schemas[db] = self.info(db).arrow_schema()
            schema = schemas[db]
            arrays = {known[(device, name)].column: _column_values(array, known[(device, name)],
                                                                  schema.field(known[(device, name)].column).type)
                      for name, array in columns.items()}
            present = None
            for array in arrays.values():
                valid = array.is_valid()
                present = valid if present is None else pc.or_(present, valid)
            assert present is not None
            relative = ".".join(device.nodes[len(db.path.nodes):])
            table = pa.table({TS: times.cast(pa.timestamp("us", tz="UTC")),
                              TBNAME: pa.array([str(device)] * len(times), pa.string()),
                              DEVICE_TAG: pa.array([relative] * len(times), pa.string()), **arrays}).filter(present)
            if table.num_rows:
                tables.setdefault(db, []).append(table)
        written = 0
        for db, parts in tables.items():
            written += self.merge(db, pa.concat_tables(parts, promote_options="default"))
        listeners.after(listening, writes)
        return written

    def drop_series(self, patterns: Sequence[m.SeriesPath]) -> list[Series]:
        """Forget the matching series and delete their points; an emptied device goes too."""
        dropped = self.expand(patterns)
        if not dropped:
            raise WarehouseError(f"no series matches {', '.join(map(str, patterns))}")
        self.delete_points(dropped)
        for db in {s.database for s in dropped}:
            with self._locked(db) as registry:
                for series in (s for s in dropped if s.database == db):
                    entry = registry.devices.get(str(series.device))
                    if entry is None:
                        continue
                    entry["series"] = [s for s in entry["series"] if s["name"] != series.measurement]
                    if not entry["series"]:
                        del registry.devices[str(series.device)]
        return dropped

    # --- points ----------------------------------------------------------------------------------

    def info(self, db: SeriesDatabase) -> TableInfo:
        found = self.catalog.lookup(m.TableName(DEVICES), db.name)
        assert isinstance(found, TableInfo)
        return found

    def merge(self, db: SeriesDatabase, rows: pa.Table) -> int:
        """Column-wise MERGE of ``rows`` (``ts``, ``tbname``, ``device`` and some measurement columns)
        into ``db``: a written value replaces the point, a NULL leaves it as it is."""
        rows = _combine(rows)
        measured = [c for c in rows.column_names if c not in (TS, TBNAME, DEVICE_TAG)]
        quoted = {c: '"' + c.replace('"', '""') + '"' for c in rows.column_names}

        def merge(table) -> None:
            if writer.append_if_new(table, rows, (TBNAME, TS)):  # every point new: as the MERGE would write it
                return
            (table.merge(rows, f"t.{quoted[TBNAME]} = s.{quoted[TBNAME]} AND t.{quoted[TS]} = s.{quoted[TS]}",
                         source_alias="s", target_alias="t")
             .when_matched_update({quoted[c]: f"coalesce(s.{quoted[c]}, t.{quoted[c]})" for c in measured})
             .when_not_matched_insert({quoted[c]: f"s.{quoted[c]}" for c in rows.column_names})
             .execute())

        writer.retrying(db.table, merge)
        return rows.num_rows

    def delete_points(self, series: Sequence[Series], start: datetime | None = None,
                      end: datetime | None = None) -> int:
        """Delete the points of ``series`` in ``[start, end]`` (all of them without bounds); a row
        left with no point goes. One commit per database; the number of points deleted."""
        deleted = 0
        for db in {s.database for s in series}:
            attached.refuse_write(db, "DELETE")
            mine = [s for s in series if s.database == db]
            deleted += self._delete_in(db, mine, start, end)
        return deleted

    def _delete_in(self, db: SeriesDatabase, series: list[Series], start: datetime | None,
                   end: datetime | None) -> int:
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        info = self.info(db)
        measured = [c.name for c in info.columns if c.role == "metric"]
        devices = sorted({str(s.device) for s in series})
        table = DeltaTable(str(db.table)).to_pyarrow_table()  # (a pushed-down filter meets tbname as string_view)
        table = table.filter(pc.is_in(table[TBNAME].cast(pa.string()), pa.array(devices, pa.string())))
        if start is not None:
            table = table.filter(pc.greater_equal(table[TS], pa.scalar(start, pa.timestamp("us", tz="UTC"))))
        if end is not None:
            table = table.filter(pc.less_equal(table[TS], pa.scalar(end, pa.timestamp("us", tz="UTC"))))
        if table.num_rows == 0:
            return 0
        deleted = 0
        columns = {c: table[c] for c in measured}
        for s in series:
            hit = pc.equal(table[TBNAME], str(s.device))
            deleted += pc.sum(pc.and_(hit, pc.is_valid(columns[s.column]))).as_py() or 0
            columns[s.column] = pc.if_else(hit, pa.nulls(table.num_rows, columns[s.column].type), columns[s.column])
        empty = pa.array([True] * table.num_rows)
        for c in measured:
            empty = pc.and_(empty, pc.is_null(columns[c]))
        rows = pa.table({TS: table[TS], TBNAME: table[TBNAME], **columns, "__empty": empty})
        names = {c: '"' + c.replace('"', '""') + '"' for c in rows.column_names}

        def merge(delta) -> None:
            (delta.merge(rows, f"t.{names[TBNAME]} = s.{names[TBNAME]} AND t.{names[TS]} = s.{names[TS]}",
                         source_alias="s", target_alias="t")
             .when_matched_delete("s.__empty")
             .when_matched_update({names[c]: f"s.{names[c]}" for c in measured})
             .execute())

        writer.retrying(db.table, merge)
        return deleted


def _declared(registry: SeriesRegistry, name: str, dtype: m.SeriesType) -> m.SeriesType:
    """A new series takes the type its measurement already has in the database, else ``dtype``."""
    known = registry.columns.get(name)
    return m.SeriesType(known["type"]) if known else dtype


def series_type(arrow: pa.DataType) -> m.SeriesType:
    """The type a new series gets from the values written into it (a query's results)."""
    if pa.types.is_boolean(arrow):
        return m.SeriesType.BOOLEAN
    if pa.types.is_int32(arrow) or pa.types.is_int16(arrow) or pa.types.is_int8(arrow):
        return m.SeriesType.INT32
    if pa.types.is_integer(arrow):
        return m.SeriesType.INT64
    if pa.types.is_float32(arrow):
        return m.SeriesType.FLOAT
    if pa.types.is_floating(arrow) or pa.types.is_decimal(arrow):
        return m.SeriesType.DOUBLE
    return m.SeriesType.TEXT


def _column_values(array: pa.Array, series: Series, arrow: pa.DataType) -> pa.Array:
    """``array`` as the values of ``series``'s column: IoTDB's compatible conversions (INT32 into
    INT64, FLOAT or DOUBLE; INT64 or FLOAT into DOUBLE; anything into TEXT), else a clear error."""
    if array.type == arrow:
        return array
    source, target = series_type(array.type), series.type
    allowed = {m.SeriesType.INT64: {m.SeriesType.INT32}, m.SeriesType.FLOAT: {m.SeriesType.INT32},
               m.SeriesType.DOUBLE: {m.SeriesType.INT32, m.SeriesType.INT64, m.SeriesType.FLOAT}}
    if source == target or source in allowed.get(target, set()) or target is m.SeriesType.TEXT:
        return array.cast(arrow)
    raise WarehouseError(f"{series.path} is {target.value}: {source.value} values cannot be written into it")


def coerce_point(value: object, kind: m.SeriesType, label: str) -> object:
    """``value`` as a point of a ``kind`` series: an integer fits a floating series and anything
    fits TEXT (IoTDB's compatible conversions); otherwise a clear error naming ``label``."""
    if value is None:
        return None
    bad = WarehouseError(f"{label}: {value!r} is not a {kind.value} value")
    if kind is m.SeriesType.BOOLEAN:
        if isinstance(value, bool):
            return value
        raise bad
    if kind in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        low, high = _INT_RANGES[kind]
        if not low <= value <= high:
            raise WarehouseError(f"{label}: {value} is out of the {kind.value} range")
        return value
    if kind in (m.SeriesType.FLOAT, m.SeriesType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def arrow_of(kind: m.SeriesType) -> pa.DataType:
    return arrow_type(_TYPES[kind])


def _combine(rows: pa.Table) -> pa.Table:
    """One row per (tbname, ts): a later value of a measurement replaces an earlier one, a NULL
    keeps it (two writes of one timestamp in one batch)."""
    if rows.num_rows < 2:
        return rows
    keys = rows.select([TBNAME, TS]).to_pandas()
    if not keys.duplicated().any():
        return rows
    frame = rows.to_pandas()
    combined = frame.groupby([TBNAME, TS], sort=False, as_index=False).last()
    return pa.Table.from_pandas(combined[rows.column_names], schema=rows.schema, preserve_index=False)

