"""Every CREATE STREAM example of reference 000 parses to the model its prose describes."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

D = m.Duration
T = m.TableName

# (example as printed in reference 000, expected fields of the CreateStream)
EXAMPLES = [
    (
        """CREATE stream sm1 count_window(1) FROM tb1
INTO tb3 AS
SELECT _twstart, avg(col1) FROM tb2
WHERE _c0 >= _twend - 5m AND _c0 <= _twend;""",
        {"name": T("sm1"), "trigger": m.CountWindow(1), "trigger_table": T("tb1"), "into": T("tb3"),
             "placeholders": {"_twstart", "_twend"}},
    ),
    (
        """CREATE STREAM `idmp`.`ana_temp` EVENT_WINDOW(start with `temp` > 80 end with `temp` <= 80 ) TRUE_FOR(10m) \
FROM `idmp`.`vt_envsens02_471544`
STREAM_OPTIONS( IGNORE_DISORDER)
INTO `idmp`.`ana_temp`
AS
SELECT _twstart+0s as output_timestamp, avg(`temp`) as `avgtemp` FROM idmp.`vt_engsens02_471544` \
where ts >= _twstart and ts <= _twend;""",
        {"name": T("ana_temp", "idmp"), "trigger_table": T("vt_envsens02_471544", "idmp"),
             "into": T("ana_temp", "idmp"), "given": {"IGNORE_DISORDER"}, "true_for": m.TrueFor(D(10, "m")),
             "event": ("`temp` > 80", "`temp` <= 80"), "placeholders": {"_twstart", "_twend"}},
    ),
    (
        """CREATE stream sm1 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
INTO stb2
AS
SELECT _twstart, avg(col1) FROM %%tbname
WHERE _c0 >= _twstart AND _c0 <= _twend;""",
        {"name": T("sm1"), "trigger": m.IntervalWindow(D(5, "m"), D(5, "m")), "trigger_table": T("stb1"),
             "partition_by": ("tbname",), "into": T("stb2"), "placeholders": {"_twstart", "_twend"}},
    ),
    (
        """CREATE stream sm2 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
STREAM_OPTIONS(MAX_DELAY(1m) | FILL_HISTORY_FIRST)
INTO stb2
AS
SELECT _twstart, avg(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 <= _twend;""",
        {"name": T("sm2"), "trigger": m.IntervalWindow(D(5, "m"), D(5, "m")), "partition_by": ("tbname",),
             "given": {"MAX_DELAY", "FILL_HISTORY_FIRST"}, "max_delay": D(1, "m"),
             "fill_history": m.FillHistory(None, first=True)},
    ),
    (
        """CREATE STREAM avg_stream INTERVAL(1m) SLIDING(1m) FROM meters
NOTIFY ('ws://localhost:8080/notify', 'wss://192.168.1.1:8080/notify?key=foo') \
ON ('WINDOW_OPEN', 'WINDOW_CLOSE') NOTIFY_OPTIONS(NOTIFY_HISTORY | ON_FAILURE_PAUSE)
INTO avg_stb
AS
SELECT _twstart, _twend, AVG(current) FROM %%trows;""",
        {"name": T("avg_stream"), "trigger": m.IntervalWindow(D(1, "m"), D(1, "m")), "trigger_table": T("meters"),
             "notify": m.Notify(("ws://localhost:8080/notify", "wss://192.168.1.1:8080/notify?key=foo"),
                             (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE), None, history=True,
                             on_failure_pause=True),
             "into": T("avg_stb")},
    ),
    (
        """CREATE stream sm1 PERIOD(1h)
INTO tb2
AS
SELECT cast(_tlocaltime/1000000 AS TIMESTAMP), count(*) FROM tb1;""",
        {"name": T("sm1"), "trigger": m.PeriodTrigger(D(1, "h")), "trigger_table": None, "into": T("tb2"),
             "placeholders": {"_tlocaltime"}},
    ),
    (
        """CREATE stream sm1 PERIOD(1h)
NOTIFY("ws://localhost:8080/notify");""",
        {"name": T("sm1"), "trigger": m.PeriodTrigger(D(1, "h")), "query": None,
             "notify": m.Notify(("ws://localhost:8080/notify",))},
    ),
    # The misspelled example of reference 000, with the spelling mended.
    (
        """CREATE stream sm2 count_window(10, 1, col1) FROM tb1
STREAM_OPTIONS(CALC_NOTIFY_ONLY | PRE_FILTER(col1 > 0))
NOTIFY("ws://localhost:8080/notify") ON (WINDOW_CLOSE)
AS
SELECT avg(col1) FROM %%trows;""",
        {"name": T("sm2"), "trigger": m.CountWindow(10, 1, ("col1",)), "into": None,
             "given": {"CALC_NOTIFY_ONLY", "PRE_FILTER"}, "calc_notify_only": True, "pre_filter": "col1 > 0",
             "notify": m.Notify(("ws://localhost:8080/notify",), (m.EventType.WINDOW_CLOSE,))},
    ),
]


@pytest.mark.parametrize("text, expected", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_reference_example_parses_to_model(text, expected):
    [stmt] = parse(text)
    assert isinstance(stmt, m.CreateStream)
    for key, value in expected.items():
        if key == "given":
            assert stmt.options.given == frozenset(value)
        elif key in ("max_delay", "fill_history", "calc_notify_only"):
            assert getattr(stmt.options, key) == value
        elif key == "pre_filter":
            assert stmt.options.pre_filter.text == value
        elif key == "placeholders":
            assert stmt.placeholders == frozenset(value)
        elif key == "true_for":
            assert stmt.trigger.true_for == value
        elif key == "event":
            assert (stmt.trigger.start.text.strip(), stmt.trigger.end.text.strip()) == value
        else:
            assert getattr(stmt, key) == value, key


def test_misspelled_calc_notify_only_is_rejected_with_a_hint():
    text = """CREATE stream sm2 count_window(10, 1, col1) FROM tb1
STREAM_OPTIONS(CALC_ONTIFY_ONLY | PRE_FILTER(col1 > 0))
NOTIFY("ws://localhost:8080/notify") ON (WINDOW_CLOSE)
AS
SELECT avg(col1) FROM %%trows;"""
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    err = info.value
    assert "CALC_ONTIFY_ONLY" in str(err)
    assert err.hint == "did you mean CALC_NOTIFY_ONLY?"
    assert (err.line, err.column, err.clause) == (2, 16, "STREAM_OPTIONS")


@pytest.mark.parametrize("separator", ["|", ","])
@pytest.mark.parametrize("quote", ["", "'", '"'])
def test_event_types_accept_both_separators_and_quotes(separator, quote):
    types = f"{quote}WINDOW_OPEN{quote} {separator} {quote}window_close{quote}"
    [stmt] = parse(f"CREATE STREAM s SESSION(ts, 10s) FROM t NOTIFY('ws://h:1') ON ({types})")
    assert stmt.notify.on == (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE)


def test_legacy_style_text_is_reported_at_its_position_by_the_3_3_7_parser():
    with pytest.raises(StreamDefinitionError) as info:
        parse("CREATE STREAM avg_vol_s INTO avg_vol AS\nSELECT _wstart, count(*) FROM meters INTERVAL(1m);",
              language="tdengine-3.3.7")
    assert (info.value.line, info.value.column) == (1, 25)
