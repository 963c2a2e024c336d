"""The readings of a line-protocol body agree: one shape cut by Arrow's splits, shapes grouped,
and line by line (the reference, which also names the first bad line)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_stream_provider.serve import lineproto

KEYS = st.sampled_from(["a", "loc", "g1", "x.y", "t_", "é"])
VALUES = st.sampled_from(["1", "-2.5", "3i", "7u", "t", "false", "abc", "x=y", "1e3", "", "a b"])
TIMES = st.sampled_from(["", " 1735689600000", " -5", " 12x", "  3"])


@st.composite
def bodies(draw) -> str:
    tag_keys = draw(st.lists(KEYS, max_size=3, unique=True))
    field_keys = draw(st.lists(KEYS, min_size=1, max_size=3, unique=True))
    name = draw(st.sampled_from(["m", "meters", "cpu.load"]))
    time = draw(TIMES)
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        tags = "".join(f",{k}={draw(VALUES)}" for k in tag_keys)
        fields = ",".join(f"{k}={draw(VALUES)}" for k in field_keys)
        lines.append(f"{name}{tags} {fields}{time if draw(st.integers(0, 9)) else draw(TIMES)}")
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n", " "]))
    if draw(st.integers(0, 4)) == 0:  # another shape, a comment or a blank line somewhere
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.sampled_from(["", "# note", "other f=1", f"{name} q=1", f"{name},zz=1 f=2"])))
        text = "\n".join(lines)
    return text


def reading(read, text: str) -> tuple:
    try:
        found = read(text)
    except lineproto.ProtocolError as err:
        return ("error", err.line)
    return ("ok", found)


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_every_reading_gives_the_rows_of_the_line_by_line_one(text):
    expected = reading(lineproto._by_line, text)
    assert reading(lineproto.parse, text) == expected
    fast = lineproto._one_shape(text)
    if fast is not None:
        assert ("ok", fast) == expected


def test_a_body_of_one_shape_is_cut_by_arrow():
    text = "\n".join(f"meters,location=c{i % 3},groupid={i} current={i}.5,voltage={i}i {1000 + i}" for i in range(50))
    found = lineproto._one_shape(text + "\n")
    assert found is not None
    rows = found["meters"]
    assert rows.lines == list(range(1, 51))
    assert rows.tags["location"][:4] == ["c0", "c1", "c2", "c0"]
    assert rows.fields["voltage"][49] == "49i"
    assert rows.times[0] == "1000"
