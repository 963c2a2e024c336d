"""IoTDB's continuous queries: ``CREATE CQ ... [RESAMPLE EVERY/BOUNDARY/RANGE] [TIMEOUT POLICY] BEGIN
SELECT ... END``, lowered into a stream, ``DROP CQ`` and ``SHOW CQS``."""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.model.names import CQ_NAMESPACE
from airflow_stream_provider.sql.iotdb.query_statements import QueryStatements
from airflow_stream_provider.sql.iotdb.validate import lower_cq
from airflow_stream_provider.values import instant


class CqStatements(QueryStatements):
    """A continuous query's body is a query: these statements extend :class:`QueryStatements`."""

    def create_cq(self, pos: m.Position) -> m.Statement:
        start_tok = self.tok
        self.advance()
        self.accept("CQ") or self.expect("CONTINUOUS", "QUERY")
        clause = "CREATE CQ"
        id_tok = self.tok
        cq_id = self.ident("a continuous query id", clause)
        if "." in cq_id or not cq_id.strip():
            raise self.error(f"a continuous query id is one name, found {cq_id!r}", id_tok, clause)
        every = boundary = start = end = None
        tokens: dict[str, object] = {}
        if self.accept("RESAMPLE"):
            if self.accept("EVERY"):
                tokens["EVERY"] = self.tok
                every = self.duration_micros("EVERY", "RESAMPLE")
            if self.accept("BOUNDARY"):
                tokens["BOUNDARY"] = self.tok
                boundary = self.time_constant("BOUNDARY", "RESAMPLE")
            if self.accept("RANGE"):
                tokens["RANGE"] = self.tok
                start = self.duration_micros("RANGE's start offset", "RESAMPLE")
                if self.accept_op(","):
                    tokens["RANGE_END"] = self.tok
                    end = self.duration_micros("RANGE's end offset", "RESAMPLE", positive=False)
            if not tokens:
                raise self.error(f"RESAMPLE needs EVERY, BOUNDARY or RANGE (in that order), found "
                                 f"{self.tok.describe()}", clause="RESAMPLE", syntax=True)
        policy = "BLOCKED"
        if self.accept("TIMEOUT"):
            self.expect("POLICY", clause="TIMEOUT POLICY")
            tok = self.tok
            if tok.upper not in ("BLOCKED", "DISCARD"):
                raise self.error(f"expected BLOCKED or DISCARD, found {tok.describe()}", clause="TIMEOUT POLICY",
                                 syntax=True)
            policy = self.advance().upper
        self.expect("BEGIN", clause=clause)
        body_tok = self.tok
        query = self.query()
        self.expect("END", clause=clause)
        return lower_cq(self, pos, cq_id, every, boundary, start, end, policy, query, body_tok, tokens, start_tok)

    def drop_cq(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("CQ") or self.expect("CONTINUOUS", "QUERY")
        return m.DropContinuousQuery(self.ident("a continuous query id", "DROP CQ"), position=pos, text="")

    def verify_cq(self, pos: m.Position) -> m.Statement:
        """``VERIFY CQ id [FROM time] [TO time] [REPAIR]``: the times as IoTDB writes them (a
        timestamp, ``now() - 1d``, epoch milliseconds)."""
        self.advance()
        self.accept("CQ") or self.expect("CONTINUOUS", "QUERY")
        cq_id = self.ident("a continuous query id", "VERIFY CQ")
        start = self._verify_time("FROM") if self.accept("FROM") else None
        end = None
        if self.at("TO"):
            to_tok = self.advance()
            end = self._verify_time("TO")
            if start is not None and start.at is not None and end.at is not None and end.at <= start.at:
                raise self.error("VERIFY CQ: TO must be later than FROM", to_tok, "VERIFY CQ")
        repair = bool(self.accept("REPAIR"))
        return m.VerifyStream(m.TableName(cq_id.lower(), CQ_NAMESPACE), start, end, repair, position=pos, text="")

    def _verify_time(self, what: str) -> m.TimePoint:
        value = self.time_constant(f"VERIFY CQ {what}", "VERIFY CQ")
        return value if isinstance(value, m.TimePoint) else m.TimePoint(at=instant(value * 1000))

    def show_cqs(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("CQS") or self.expect("CONTINUOUS", "QUERIES")
        return m.ShowContinuousQueries(position=pos, text="")
