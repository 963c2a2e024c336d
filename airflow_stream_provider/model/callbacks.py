"""Deprecated home of the insert trigger API: import it from :mod:`airflow_stream_provider` (or
:mod:`airflow_stream_provider.model.insert_triggers`)."""

from __future__ import annotations

import warnings

from airflow_stream_provider.model.insert_triggers import (
    CreateInsertTrigger,
    DropInsertTrigger,
    FailureStrategy,
    InsertTrigger,
    Measurement,
    ShowInsertTriggers,
    Tablet,
    TriggerAttributes,
    TriggerEvent,
    TriggerType,
)

warnings.warn("airflow_stream_provider.model.callbacks is deprecated: import InsertTrigger and its types from "
              "airflow_stream_provider", DeprecationWarning, stacklevel=2)

__all__ = ["CreateInsertTrigger", "DropInsertTrigger", "FailureStrategy", "InsertTrigger", "Measurement",
           "ShowInsertTriggers", "Tablet", "TriggerAttributes", "TriggerEvent", "TriggerType"]
