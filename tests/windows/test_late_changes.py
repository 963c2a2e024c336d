"""Which closed windows a late change reports again (:func:`.late.changed`), without Spark: a window
whose bounds and count stand is recomputed when it holds a changed row (an update of a value)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airflow_stream_provider.windows.columns import WINDOW_COLUMNS
from airflow_stream_provider.windows.late import changed


def windows(*spans: tuple[int, int, int], closed: bool = True) -> pd.DataFrame:
    frame = pd.DataFrame({c: [None] * len(spans) for c in WINDOW_COLUMNS})
    frame["wstart"] = [s for s, _, _ in spans]
    frame["wend"] = [e for _, e, _ in spans]
    frame["rows"] = [n for _, _, n in spans]
    frame["closed"], frame["opened"], frame["ordinal"] = closed, False, 0
    return frame


SAME = windows((0, 10, 2), (10, 20, 3), (20, 30, 1))


@pytest.mark.parametrize("touched, end_inclusive, again", [
    ([], False, []),              # nothing changed: nothing reported
    ([12], False, [10]),          # a value update inside [10, 20)
    ([10], False, [10]),          # INTERVAL: the end is exclusive, 10 belongs to [10, 20) only
    ([10], True, [0, 10]),        # the others: wend is the last row, 10 is in [0, 10] and [10, 20]
    ([5, 25], True, [0, 20]),
    ([40], True, []),             # after every closed window
    ([31], True, []),             # between windows (EVENT/STATE rows outside any window)
])
def test_a_window_holding_a_changed_row_is_invalidated_and_closed_again(touched, end_inclusive, again):
    gone, report = changed(SAME, SAME.copy(), np.array(touched, np.int64), end_inclusive=end_inclusive)
    assert list(gone["wstart"]) == again  # the old close is invalidated...
    assert list(report.loc[report["closed"], "wstart"]) == again  # ...and the window closes again


def test_windows_that_changed_shape_are_reported_as_before():
    old = windows((0, 10, 2), (10, 20, 3))
    new = windows((0, 10, 3), (10, 20, 3))  # a late row in [0, 10)
    gone, report = changed(old, new, np.array([4], np.int64), end_inclusive=False)
    assert list(gone["rows"]) == [2] and list(report["rows"]) == [3]
    gone, report = changed(old, new)  # the signature alone still tells
    assert list(gone["rows"]) == [2] and list(report["rows"]) == [3]


def test_open_windows_are_not_closed_by_a_change():
    old = windows((0, 10, 2), closed=False)
    gone, report = changed(old, old.copy(), np.array([4], np.int64))
    assert gone.empty and report.empty
