"""A stream's output table as an Airflow asset: what each committed batch wrote, kept in order and
published as asset events through Airflow's REST API.

The asset of output table ``db.table`` has the URI ``airflow-stream://db/table`` (:func:`output_uri`);
a DAG scheduled on ``Asset("airflow-stream://db/table")`` runs after the stream writes. Every
commit that wrote rows (a run's, wherever it ran: a task, the stream node, ``airflow-stream run``)
and every recalculation that did appends one entry to the stream's ledger (``assets.jsonl`` in its
state folder), and the ledger is published in order, at least once:

- one event per entry, without a partition key, whose ``extra`` names the stream, the entry's
  stable ``id``, the ``windows`` (``start``/``end``, ISO instants), the detector ``batches``
  (``from``/``to``), the trigger table ``versions`` detected without a live detector, or the
  PERIOD ``instant``, the ``rows`` written and whether it is a
  ``recalculation``: a DAG with ``schedule=[asset]`` runs for it;
- one event per window, with the window's start as its partition key (``%Y-%m-%dT%H:%M:%S``, UTC),
  for the DAGs of a ``PartitionedAssetTimetable``: a recalculation re-runs exactly the partitions it
  rewrote. (Airflow queues a partitioned event only for partitioned DAGs and a plain one only for
  the others, so each DAG sees each batch once.)

An entry is published once Airflow took all its events; one that Airflow cannot take now stays
for the next commit (after :data:`RETRY_AFTER_S` in a process that found nothing listening). An
entry for an asset no DAG names is dropped: nothing waits for it (a process asks again after
:data:`UNNAMED_FOR_S`). Entry ids are derived from what
was committed, so a commit repeated (a retried task) appends nothing, and a receiver that sees an
event twice can tell.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_stream_provider.airflow_api import DEFAULT_URL, AirflowApi, AirflowApiError, configured_url
from airflow_stream_provider.files import hold_lock, make_dirs, write_text
from airflow_stream_provider.streams.fired import Fired

log = logging.getLogger(__name__)

SCHEME = "airflow-stream"
#: the format of a window's partition key (the default input format of Airflow's temporal mappers)
PARTITION_FORMAT = "%Y-%m-%dT%H:%M:%S"
#: the progress key that carries a run's entry to its commit (never merged into the stream's state)
PROGRESS_KEY = "asset_entry"
#: how long publishing waits after Airflow could not be reached
RETRY_AFTER_S = 30.0
#: the entries a ledger keeps unpublished at most (the oldest go first, logged)
MAX_PENDING = 10_000
#: the published entries a ledger remembers, so that a commit repeated later appends nothing
KEEP_PUBLISHED = 1000
#: how long a request to Airflow may take while a commit waits for it (a busy api-server on SQLite
#: can take seconds now and then)
TIMEOUT_S = 10.0


#: this process's client of Airflow's API (its token kept between commits), and the asset ids it found
_clients: dict[str, AirflowApi] = {}
_asset_ids: dict[str, int] = {}
#: when this process tries an Airflow API again that it could not reach (by URL)
_retry_at: dict[str, float] = {}
#: until when this process takes an asset that no DAG named as still unnamed (by URI)
_unnamed_until: dict[str, float] = {}
#: how long an asset no DAG names is taken as such before Airflow is asked again
UNNAMED_FOR_S = 10.0


def _client() -> AirflowApi:
    url = configured_url() or DEFAULT_URL
    if url not in _clients:
        _clients[url] = AirflowApi(url, timeout=TIMEOUT_S)
    return _clients[url]


def output_uri(db: str, table: str) -> str:
    """The URI of the asset of output table ``db.table``."""
    return f"{SCHEME}://{db.lower()}/{table.lower()}"


def _iso(value: Any) -> str:
    return value.astimezone(UTC).isoformat() if isinstance(value, datetime) else str(value)


def windows_of(fired: Iterable[Fired], also: Iterable[Mapping[str, str]] = ()) -> list[dict[str, str]]:
    """The distinct windows of ``fired`` and ``also`` in order: ``[_twstart, _twend)``, or for a
    scheduled trigger ``[_tprev_ts, _tcurrent_ts)`` (its instant alone when it has no previous one)."""
    found: dict[tuple[str, str], None] = {(w["start"], w["end"]): None for w in also}
    for trigger in fired:
        values = trigger.values
        start, end = values.get("_twstart"), values.get("_twend")
        if not isinstance(start, datetime) or not isinstance(end, datetime):
            end = values.get("_tcurrent_ts")
            start = values.get("_tprev_ts") or end
        if isinstance(start, datetime) and isinstance(end, datetime):
            found[(_iso(start), _iso(end))] = None
    return [{"start": s, "end": e} for s, e in sorted(found, key=lambda w: (datetime.fromisoformat(w[0]), w[1]))]


def entry(stream: str, uri: str, windows: list[dict[str, str]], rows: int, *, batches: tuple[int, int] | None = None,
          versions: tuple[int, int] | None = None, instant: datetime | None = None,
          recalculation: str | None = None) -> dict[str, Any]:
    """A ledger entry; its id is derived from what it covers, so the same commit gives the same id.

    :param batches: the detector batches the run consumed (first, last)
    :param versions: the trigger table versions it detected in batch, without a live detector
    :param recalculation: the recalculation's own id (its range and count), None for a run's commit
    """
    if recalculation is not None:
        ident = f"{stream}/recalc/{recalculation}"
    elif batches is not None:
        ident = f"{stream}/batches/{batches[0]}-{batches[1]}"
    elif versions is not None:
        ident = f"{stream}/versions/{versions[0]}-{versions[1]}"
    elif instant is not None:
        ident = f"{stream}/instant/{_iso(instant)}"
    else:
        ident = f"{stream}/windows/{windows[0]['start'] if windows else ''}-{windows[-1]['end'] if windows else ''}"
    return {"id": ident, "stream": stream, "uri": uri, "windows": windows, "rows": int(rows),
            "batches": {"from": batches[0], "to": batches[1]} if batches is not None else None,
            "versions": {"from": versions[0], "to": versions[1]} if versions is not None else None,
            "instant": _iso(instant) if instant is not None else None, "recalculation": recalculation is not None}


def events_of(item: Mapping[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    """The asset events of a ledger entry: ``(extra, partition key)``, the entry's own first."""
    extra = {k: v for k, v in item.items() if k not in ("uri", "published")}
    out: list[tuple[dict[str, Any], str | None]] = [(extra, None)]
    for window in item["windows"]:
        key = datetime.fromisoformat(window["start"]).astimezone(UTC).strftime(PARTITION_FORMAT)
        out.append(({"id": f"{item['id']}/{key}", "stream": item["stream"], "window": window, "entry": item["id"],
                     "rows": item["rows"], "recalculation": item["recalculation"]}, key))
    return out


class AssetLedger:
    """The stream's entries in order (``assets.jsonl``), under ``assets.lock``: those not yet
    published, and the latest :data:`KEEP_PUBLISHED` published ones (marked ``published``)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "assets.jsonl"
        self.lock = Path(state_dir) / "assets.lock"

    def _read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _write(self, items: list[dict[str, Any]]) -> None:
        write_text(self.path, "".join(json.dumps(i, sort_keys=True) + "\n" for i in items), durable=True)

    def pending(self) -> list[dict[str, Any]]:
        return [i for i in self._read() if not i.get("published")]

    def append(self, item: Mapping[str, Any]) -> bool:
        """Add ``item`` unless an entry of its id waits already; whether it was added."""
        make_dirs(self.path.parent)
        with hold_lock(self.lock):
            items = self._read()
            if any(i["id"] == item["id"] for i in items):
                return False
            items.append(dict(item))
            waiting = [i for i in items if not i.get("published")]
            if len(waiting) > MAX_PENDING:
                log.warning("asset ledger %s: %d entries were never published; the oldest are dropped", self.path,
                            len(waiting) - MAX_PENDING)
                items = waiting[-MAX_PENDING:]
            self._write(items)
        return True

    def publish(self, api: AirflowApi | None = None) -> int:
        """Publish the pending entries in order; how many were published (or dropped, no DAG
        naming their asset). Stops at the first that Airflow cannot take, which stays."""
        client = api or _client()
        if not self.pending() or time.time() < _retry_at.get(client.url, 0.0):
            return 0
        done = 0
        with hold_lock(self.lock):
            items = self._read()
            try:
                for item in items:
                    if item.get("published"):
                        continue
                    uri = item["uri"]
                    if uri not in _asset_ids and time.time() >= _unnamed_until.get(uri, 0.0):
                        found = client.asset_id(uri)
                        if found is not None:
                            _asset_ids[uri] = found
                        else:
                            _unnamed_until[uri] = time.time() + UNNAMED_FOR_S
                    asset = _asset_ids.get(uri)
                    if asset is not None:
                        for extra, key in events_of(item):
                            client.create_asset_event(asset, extra, key)
                    item["published"] = True
                    done += 1
            except AirflowApiError as err:
                log.warning("asset events of %s wait: %s", self.path.parent.name, err)
                _clients.clear()  # (a token that expired, an asset that was removed: found afresh)
                _asset_ids.clear()
                if err.status is None and not err.timed_out:  # nothing listens (this process only: another may
                    _retry_at[client.url] = time.time() + RETRY_AFTER_S  # reach it); a slow answer: the next commit
            kept = {i["id"] for i in items if i.get("published")}
            kept = set(list(kept)[-KEEP_PUBLISHED:]) if len(kept) > KEEP_PUBLISHED else kept
            self._write([i for i in items if not i.get("published") or i["id"] in kept])
        return done
