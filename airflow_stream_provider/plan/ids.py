"""Every id derived from a stream's name, in one place: its DAGs, their tasks, and their kinds.

They are deterministic in the stream's database and name, so a restart, a re-render or another
process derives the same ids.
"""

from __future__ import annotations

#: the task of a SLIDING stream's DAG that waits until event time passes the run's instant
WAIT_EVENT_TIME_TASK = "wait_for_event_time"
#: the task that computes and writes what fired
COMPUTE_TASK = "compute"
#: the task that delivers a run's notifications
NOTIFY_TASK = "notify"
#: the task that records a run's progress, last in every run
COMMIT_TASK = "commit"
#: the one task of a recalculation DAG's runs
RECALCULATE_TASK = "recalculate"


def stream_dag_ids(db: str, name: str) -> tuple[str, str]:
    """The DAG of a stream and the DAG of its recalculation."""
    main = f"stream__{db.lower()}__{name.lower()}"
    return main, f"{main}__recalc"
