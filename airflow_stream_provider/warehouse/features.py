"""The Delta table features a trigger or compute table may use, which reader reads each, and the check
that refuses a table no reader of the project can read correctly.

Writers outside the project (Spark, Delta, delta-rs jobs) turn on features the project's own tables
never use. Each reader here handles these (``docs/table-features.md`` has the table):

- **deletion vectors**: the kernel's scan (``DeltaTable.scan``) and its change feed honour them;
  pyarrow's dataset of a table's files would not, so it is never used on such a table.
- **column mapping, name mode**: the kernel's scan reads by logical names; its change feed refuses
  the feature, so the change feed of such a table is read from the files each version names
  (:mod:`~airflow_stream_provider.warehouse.change_files`), and by Spark where those cannot say it.
- **timestamp_ntz**: read as TDengine's TIMESTAMP, its wall-clock value taken in UTC.
- **v2 checkpoints**: the kernel reads them (not pyarrow's dataset).
- commits whose actions are all ``dataChange=false`` (OPTIMIZE, auto-compaction, REORG ... PURGE)
  hold no change: both change feeds give none for them.

What neither the kernel nor Spark reads, or what the project has not verified (column mapping in id
mode, type widening, a reader version above 3, a feature unknown here), is refused by
:func:`check_table_features` with the feature's name and what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from airflow_stream_provider.storage import Location
from airflow_stream_provider.warehouse.catalog import WarehouseError

#: reader features the project reads (the kernel, or Spark where the kernel cannot)
READ_FEATURES = frozenset({"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint",
                           "vacuumProtocolCheck"})
#: reader features pyarrow's dataset of a table's files reads (the kernel's own list)
PYARROW_FEATURES = frozenset({"timestampNtz"})
#: what to do about a reader feature refused, by feature
_REMEDY = {
    "typeWidening": "rewrite the widened columns and drop the feature: ALTER TABLE ... DROP FEATURE typeWidening",
    "typeWidening-preview": "rewrite the widened columns and drop the feature: "
                            "ALTER TABLE ... DROP FEATURE 'typeWidening-preview'",
    "variantType": "the project has no VARIANT type: keep VARIANT columns in another table",
    "variantType-preview": "the project has no VARIANT type: keep VARIANT columns in another table",
    "catalogManaged": "read it through its catalog's own engine, or copy it to a path table",
    "catalogOwned-preview": "read it through its catalog's own engine, or copy it to a path table",
}


@dataclass(frozen=True)
class TableFeatures:
    """A Delta table's protocol and configuration, as its latest version has them."""

    reader_version: int
    writer_version: int
    reader_features: frozenset[str]
    writer_features: frozenset[str]
    configuration: dict[str, str]
    schema_json: str

    @property
    def column_mapping(self) -> str:
        """``none``, ``name`` or ``id``."""
        return self.configuration.get("delta.columnMapping.mode", "none").lower()

    @property
    def deletion_vectors(self) -> bool:
        return "deletionVectors" in self.reader_features

    @property
    def plain_files(self) -> bool:
        """Whether the table's rows are its Parquet files as they are: no partitions to add, no column
        mapping to rename, no deletion vectors to apply (reader version 1)."""
        return self.reader_version < 2

    @property
    def pyarrow_reads(self) -> bool:
        """Whether pyarrow's dataset of the table's files reads it correctly. It renames no column (a
        column-mapped table reads as NULLs) and applies no deletion vector."""
        if self.column_mapping != "none" or self.reader_version > 3:
            return False
        return self.reader_version < 3 or self.reader_features <= PYARROW_FEATURES

    @property
    def kernel_change_feed(self) -> bool:
        """Whether the kernel reads the table's change feed (it refuses column mapping)."""
        return self.column_mapping == "none"

    @cached_property
    def physical_names(self) -> dict[str, str]:
        """Each top-level column's name in the data files (column mapping), logical name -> physical."""
        found: dict[str, str] = {}
        for field in json.loads(self.schema_json).get("fields", []):
            physical = (field.get("metadata") or {}).get("delta.columnMapping.physicalName")
            if physical and physical != field["name"]:
                found[field["name"]] = physical
        return found


def table_features(location: Location) -> TableFeatures:
    """The protocol and configuration of the Delta table at ``location`` (latest version)."""
    from deltalake import DeltaTable

    return features_of(DeltaTable(str(location)))


def features_of(table: Any) -> TableFeatures:
    """The :class:`TableFeatures` of a kernel ``DeltaTable`` at the version it holds."""
    protocol = table.protocol()
    return TableFeatures(protocol.min_reader_version, protocol.min_writer_version,
                         frozenset(protocol.reader_features or ()), frozenset(protocol.writer_features or ()),
                         dict(table.metadata().configuration or {}), table.schema().to_json())


def check_table_features(location: Location) -> None:
    """Refuse the Delta table at ``location`` when a stream could not read it correctly: raise
    :class:`~airflow_stream_provider.warehouse.catalog.WarehouseError` naming the feature and what to
    do. A table that is not there, or not a Delta table, is refused too."""
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        found = table_features(location)
    except TableNotFoundError as err:
        raise WarehouseError(f"{location} is not a Delta table", hint=str(err).splitlines()[0]) from err
    except DeltaError as err:
        raise WarehouseError(f"cannot read the Delta log of {location}: {err}",
                             hint="the table uses a log format the project cannot read") from err
    refuse_unread(str(location), found)


def refuse_unread(name: str, found: TableFeatures) -> None:
    """Raise :class:`WarehouseError` for what ``found`` holds that the project does not read."""
    if found.reader_version > 3:
        raise WarehouseError(f"{name} needs Delta reader version {found.reader_version}; the project reads "
                             "versions 1 to 3", hint="write the table with a Delta release that keeps reader version 3")
    for feature in sorted(found.reader_features - READ_FEATURES):
        remedy = _REMEDY.get(feature, "drop it (ALTER TABLE ... DROP FEATURE), or copy the table without it")
        raise WarehouseError(f"{name} uses the Delta table feature {feature!r}, which the stream readers do "
                             "not read", hint=remedy)
    if found.column_mapping not in ("none", "name"):
        raise WarehouseError(f"{name} uses column mapping in {found.column_mapping!r} mode; the stream readers "
                             "read 'name' mode", hint="write the table with delta.columnMapping.mode = 'name'")
