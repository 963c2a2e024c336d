"""Airflow timetables of PERIOD and SLIDING triggers (:mod:`.schedule`), of IoTDB continuous queries
(:mod:`.resample`) and of the recalculation DAGs (:mod:`.recalc`). They are registered through the
provider's plugin, so that the scheduler and the API server can deserialize them, by this package's
path: each class names it as its module.
"""

from __future__ import annotations

from airflow_stream_provider.timetables.recalc import RecalcTimetable
from airflow_stream_provider.timetables.resample import ResampleTimetable
from airflow_stream_provider.timetables.schedule import PeriodTimetable, ScheduleTimetable, SlidingTimetable
from airflow_stream_provider.timetables.time import duration, format_duration, utc_datetime

TIMETABLES = [PeriodTimetable, SlidingTimetable, RecalcTimetable, ResampleTimetable]

__all__ = ["TIMETABLES", "PeriodTimetable", "RecalcTimetable", "ResampleTimetable", "ScheduleTimetable",
           "SlidingTimetable",
           "duration", "format_duration", "utc_datetime"]
