"""The statements of IoTDB's SQL (reference 004 and the IoTDB 1.2 manual it belongs to).

Databases and series (``CREATE DATABASE root.ln``, ``CREATE [ALIGNED] TIMESERIES``,
``DELETE``/``DROP`` of both, ``SHOW DATABASES``/``TIMESERIES``/``DEVICES``), points (``INSERT INTO
root.ln.wf01.wt01(time, temperature) VALUES ...``, ``DELETE FROM ... WHERE time ...``), queries
(``SELECT ... [INTO ...] FROM root... [WHERE] [GROUP BY] [HAVING] [ORDER BY TIME] [FILL] [LIMIT]
[SLIMIT] [ALIGN BY DEVICE]``), continuous queries (``CREATE CQ``, ``SHOW CQS``, ``DROP CQ``) and
triggers (``CREATE TRIGGER``, ``DROP TRIGGER``, ``SHOW TRIGGERS``).
Every rule of reference 004 that a statement alone can break is a positioned error here.

The statements themselves live in :mod:`.series_statements`, :mod:`.query_statements` (with
:mod:`.cq_statements` for the queries that run on a schedule) and :mod:`.trigger_statements`;
:attr:`Parser.STATEMENTS` says which one a statement is, by its leading keywords, the longest match
first.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.iotdb.attach_statements import AttachStatements
from airflow_stream_provider.sql.iotdb.cq_statements import CqStatements
from airflow_stream_provider.sql.iotdb.series_statements import SeriesStatements
from airflow_stream_provider.sql.iotdb.trigger_statements import TriggerStatements

ParseMethod = Callable[["Parser", m.Position], m.Statement]


class Parser(SeriesStatements, CqStatements, TriggerStatements, AttachStatements):
    STATEMENTS: dict[tuple[str, ...], ParseMethod] = {
        ("CREATE", "DATABASE"): lambda p, pos: p.create_database(pos),
        ("CREATE", "STORAGE", "GROUP"): lambda p, pos: p.create_database(pos),
        ("CREATE", "DEVICES"): lambda p, pos: p.create_devices(pos),
        ("CREATE", "TIMESERIES"): lambda p, pos: p.create_timeseries(pos),
        ("CREATE", "ALIGNED", "TIMESERIES"): lambda p, pos: p.create_timeseries(pos),
        ("CREATE", "CQ"): lambda p, pos: p.create_cq(pos),
        ("CREATE", "CONTINUOUS", "QUERY"): lambda p, pos: p.create_cq(pos),
        ("DROP", "DATABASE"): lambda p, pos: p.drop_database(pos),
        ("DELETE", "DATABASE"): lambda p, pos: p.drop_database(pos),
        ("DROP", "TIMESERIES"): lambda p, pos: p.drop_timeseries(pos),
        ("DELETE", "TIMESERIES"): lambda p, pos: p.drop_timeseries(pos),
        ("DROP", "CQ"): lambda p, pos: p.drop_cq(pos),
        ("DROP", "CONTINUOUS", "QUERY"): lambda p, pos: p.drop_cq(pos),
        ("SHOW", "DATABASES"): lambda p, pos: p.show(pos, m.ShowSeriesDatabases),
        ("SHOW", "STORAGE", "GROUP"): lambda p, pos: p.show(pos, m.ShowSeriesDatabases),
        ("SHOW", "TIMESERIES"): lambda p, pos: p.show(pos, m.ShowTimeseries),
        ("SHOW", "DEVICES"): lambda p, pos: p.show(pos, m.ShowDevices),
        ("CREATE", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("CREATE", "STATELESS", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("CREATE", "STATEFUL", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("DROP", "TRIGGER"): lambda p, pos: p.drop_trigger(pos),
        ("SHOW", "TRIGGERS"): lambda p, pos: p.show_triggers(pos),
        ("SET", "TTL"): lambda p, pos: p.set_ttl(pos),
        ("UNSET", "TTL"): lambda p, pos: p.set_ttl(pos),
        ("VERIFY", "CQ"): lambda p, pos: p.verify_cq(pos),
        ("VERIFY", "CONTINUOUS", "QUERY"): lambda p, pos: p.verify_cq(pos),
        ("SHOW", "CQS"): lambda p, pos: p.show_cqs(pos),
        ("SHOW", "CONTINUOUS", "QUERIES"): lambda p, pos: p.show_cqs(pos),
        ("INSERT", "INTO"): lambda p, pos: p.insert(pos),
        ("DELETE", "FROM"): lambda p, pos: p.delete(pos),
        ("SELECT",): lambda p, pos: p.select(pos),
    }
    KNOWN = ("CREATE DATABASE, CREATE DEVICES ... FROM DELTA, CREATE [ALIGNED] TIMESERIES, CREATE CQ, CREATE TRIGGER, "
             "DROP/DELETE DATABASE or TIMESERIES, SET/UNSET TTL, DROP CQ, VERIFY CQ, DROP TRIGGER, "
             "SHOW DATABASES/TIMESERIES/DEVICES/CQS/TRIGGERS, INSERT, DELETE or SELECT")

    def parse(self) -> list[m.Statement]:
        return self.statements(lambda: [self.statement()])

    def statement(self) -> m.Statement:
        first = self.tok
        method = next((self.STATEMENTS[w] for w in sorted(self.STATEMENTS, key=len, reverse=True) if self.at(*w)),
                      None)
        if method is None:
            raise self.error(f"unknown IoTDB statement {first.describe()}: expected {self.KNOWN}", syntax=True)
        return method(self, self.position(first))


def parse(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
    """Parse and validate the IoTDB statements of ``text`` (or of its ``span``)."""
    return Parser(text, span).parse()
