"""The fast reading of INSERT and the full parser agree: the same statement (values, their types,
text, position) or, for text the fast reading leaves to the parser, the same error at the same
place. Generated INSERTs cover quotes and escapes, NULL and booleans, negative and exponent
numbers, timestamps as strings, as epoch numbers and as now(), names in backquotes, USING ... TAGS,
column lists, several targets; mutated ones cover the errors."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse, tdengine_legacy
from airflow_stream_provider.sql.tdengine.fast_insert import parse_insert

BLANKS = st.sampled_from([" ", "  ", "\n", "\t", " \r\n "])
OPTIONAL_BLANKS = st.sampled_from(["", " ", "\n  "])


@st.composite
def quoted(draw) -> str:
    quote = draw(st.sampled_from(["'", '"']))
    out = []
    for ch in draw(st.text(st.sampled_from(list("ab é'\"\\,()n%_")) | st.characters(), max_size=8)):
        if ch == quote:
            out.append(draw(st.sampled_from([quote * 2, "\\" + quote])))
        elif ch == "\\":
            out.append(draw(st.sampled_from(["\\\\", "\\n", "\\t"])))
        else:
            out.append(ch)
    return quote + "".join(out) + quote


NUMBERS = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["+5", "-0", "-0.0", ".5", "-.25", "1.", "1e3", "2.5E-3", "-7e+2", "1735689600000", "007", "-05",
                     "1e05", "1e-05", "10.05", "0", "1e999"]),
)
TIMES = st.sampled_from(["now", "NOW()", "now ( )", "Now()", "'2025-01-01 00:00:00'", "'2025-01-01T08:00:00.123+08:00'",
                         "\"2025-06-30 12:00:00.000001\"", "1735689600000", "now - 1d", "now() + 10s"])
WORDS = st.sampled_from(["NULL", "null", "TRUE", "false", "False"])
VALUES = st.one_of(NUMBERS, quoted(), WORDS, TIMES)
NAMES = st.sampled_from(["t", "d1", "_x$1", "Meters", "`my table`", "`a``b`", "é1", "VALUES", "using", "tags"])


@st.composite
def value_list(draw, width: int) -> str:
    sep = draw(OPTIONAL_BLANKS) + "," + draw(OPTIONAL_BLANKS)
    inner = sep.join(draw(VALUES) for _ in range(width))
    return "(" + draw(OPTIONAL_BLANKS) + inner + draw(OPTIONAL_BLANKS) + ")"


@st.composite
def target(draw) -> str:
    name = draw(NAMES)
    if draw(st.booleans()):
        name = draw(NAMES) + "." + name
    parts = [name]
    if draw(st.booleans()):
        tags = draw(st.integers(1, 3))
        parts.append("USING " + draw(NAMES))
        if draw(st.booleans()):
            parts.append("(" + ", ".join(draw(NAMES) for _ in range(tags)) + ")")
        parts.append("TAGS" + draw(OPTIONAL_BLANKS) + draw(value_list(tags)))
    width = draw(st.integers(1, 4))
    if draw(st.booleans()):
        parts.append("(" + ",".join(draw(NAMES) for _ in range(width)) + ")")
    rows = [draw(value_list(width)) for _ in range(draw(st.integers(1, 4)))]
    parts.append("VALUES" + draw(OPTIONAL_BLANKS) + draw(OPTIONAL_BLANKS).join(rows))
    return draw(BLANKS).join(parts)


@st.composite
def inserts(draw) -> str:
    targets = draw(BLANKS).join(draw(target()) for _ in range(draw(st.integers(1, 3))))
    head = draw(st.sampled_from(["INSERT INTO ", "insert into\n", "Insert  Into\t"]))
    return draw(st.sampled_from(["", "  ", "\n\n "])) + head + targets + draw(st.sampled_from(["", ";", " ;\n", ";;"]))


FRAGMENTS = ["(", ")", ",", "'", '"', "`", ";", "-", "--", "/*", "#", "\\", "1e", "x", " ", "\n", "root.", "."]


@st.composite
def mutated(draw) -> str:
    text = draw(inserts())
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(FRAGMENTS) | st.text(min_size=1, max_size=2))
        text = text[:pos] + piece + text[pos + draw(st.integers(0, 3)):]
    return text


def outcome(read, text: str) -> tuple:
    """What reading ``text`` gives: its statements with every value's type, or the error and where."""
    try:
        found = read(text)
    except StreamDefinitionError as err:
        return ("error", type(err).__name__, str(err), err.line, err.column)
    return ("ok", [(repr(s), s.text, s.position) for s in found])


def full(text: str) -> list:
    return tdengine_legacy.parse(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inserts())
def test_generated_inserts_read_the_same(text):
    expected = outcome(full, text)
    assert outcome(lambda t: parse(t, "tdengine"), text) == expected
    fast = parse_insert(text)
    if fast is not None:
        assert outcome(lambda t: fast, text) == expected


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_inserts_fail_the_same(text):
    expected = outcome(full, text)
    assert outcome(lambda t: parse(t, "tdengine"), text) == expected
    if expected[0] == "error":
        assert parse_insert(text) is None


def test_the_common_shapes_take_the_fast_reading():
    """Without this the tests above would pass with no fast reading at all."""
    texts = [
        "INSERT INTO d.c0 USING d.meters TAGS ('City0', 0) VALUES (1735689600000, 10.5, 200, 0.5) "
        "(1735689600001, 11.0, 201, 0.5) d.c1 USING d.meters TAGS ('City1', 1) VALUES (1735689600000, 1, 2, 3)",
        "insert into t (ts, v, s) values ('2025-01-01 00:00:00', -1.5e3, 'it''s \\'x\\'') (now(), NULL, \"a\"\"b\")",
        "INSERT INTO `My T` VALUES (NOW, false, -0);",
    ]
    for text in texts:
        fast = parse_insert(text)
        assert fast is not None, text
        assert outcome(lambda t, fast=fast: fast, text) == outcome(full, text)
    # values by hand: the type of each matters (1 and 1.0 and True compare equal in Python)
    (stmt,) = parse_insert("INSERT INTO t VALUES (1, -2.0, TRUE, NULL, 'a''b\\\\c', -0.0, 1e2)")
    assert [(type(v).__name__, v) for v in stmt.targets[0].rows[0]] == [
        ("int", 1), ("float", -2.0), ("bool", True), ("NoneType", None), ("str", "a'b\\c"), ("float", -0.0),
        ("float", 100.0)]


def test_what_the_fast_reading_leaves_to_the_parser():
    for text in ["INSERT INTO root.sg.d1(time, s1) VALUES (1, 2)",  # IoTDB's
                 "INSERT INTO t VALUES (now - 1d, 1)",  # an expression
                 "INSERT INTO t VALUES (1, 2) -- a comment",
                 "INSERT INTO t VALUES (1, 2) (3)",  # rows of different widths: the parser's error
                 "INSERT INTO t VALUES (1, 2); SELECT 1",
                 "INSERT INTO t VALUES (1, 2\u00a0)"]:  # a blank other than space, tab, newline
        assert parse_insert(text) is None, text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(NUMBERS, min_size=2, max_size=2), min_size=1, max_size=5), OPTIONAL_BLANKS)
def test_rows_of_numbers_read_the_same(rows, blank):
    """Rows of numbers only: the ones JSON spells the same are read by JSON's reader."""
    text = "INSERT INTO t VALUES " + blank.join(f"({a},{blank}{b})" for a, b in rows)
    assert outcome(lambda t: parse(t, "tdengine"), text) == outcome(full, text)
