"""Every id derived from a stream's name, in one place: its DAGs, their tasks, their kinds and tags.

They are deterministic in the stream's database and name, so a restart, a re-render or another
process derives the same ids.
"""

from __future__ import annotations

import hashlib
import re

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
#: the one task of a freshness DAG's runs
CHECK_FRESHNESS_TASK = "check_freshness"


#: Airflow's rule for a DAG id: letters, digits, ``-``, ``.`` and ``_``, at most 250 characters
DAG_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")
#: a name kept as it is in a DAG id: runs of lower-case letters and digits joined by single ``_``
_PLAIN = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
#: the suffix of the recalculation DAG's id
_RECALC = "__recalc"
_DIGEST = 12


def _part(name: str, limit: int) -> str:
    """``name`` cut down to a plain part of at most ``limit`` characters (``x`` when nothing is left)."""
    return re.sub(r"[^a-z0-9]+", "_", name)[:limit].strip("_") or "x"


def stream_dag_ids(db: str, name: str) -> tuple[str, str]:
    """The DAG of a stream and the DAG of its recalculation.

    ``stream__<db>__<name>`` when both names are plain (letters and digits joined by single
    underscores) and the ids fit Airflow's 250 characters; otherwise ``stream__<db>__<name>__<hash>``
    with each name cut down to a plain part and 12 hex digits of the SHA-256 of the exact names.
    The ids are valid Airflow keys and injective: a plain id has two ``__`` separators, a hashed
    one three, and the hash tells hashed ids apart. CREATE STREAM still refuses the (unlikely)
    collision of two hashes.
    """
    db, name = db.lower(), name.lower()
    main = f"stream__{db}__{name}"
    if not (_PLAIN.fullmatch(db) and _PLAIN.fullmatch(name) and len(main + _RECALC) <= 250):
        main = f"stream__{_part(db, 40)}__{_part(name, 150)}__{_digest(db, name)}"
    return main, main + _RECALC


def verify_dag_id(db: str, name: str) -> str:
    """The DAG of a stream's periodic verification: its main DAG's id and ``__verify`` (as long as
    ``__recalc``, so it fits where that one does, and as injective)."""
    return stream_dag_ids(db, name)[0] + "__verify"


#: Airflow's limit on the length of a DAG tag
TAG_LIMIT = 100


def stream_tag(db: str, name: str) -> str:
    """The DAG tag naming a stream: ``stream:<db>.<name>`` when it fits Airflow's 100 characters;
    otherwise ``stream:<db>.<name cut short>.<hash>`` of exactly 100 characters, with 12 hex digits
    of the SHA-256 of the exact names. A database has at most 64 bytes, so the cut name keeps at
    least 15 characters. The tags are injective: a name holds no ``.``, so a tag with two is a cut one,
    and the hash tells cut ones apart."""
    db, name = db.lower(), name.lower()
    tag = f"stream:{db}.{name}"
    if len(tag) <= TAG_LIMIT:
        return tag
    head = f"stream:{db}."
    return f"{head}{name[:TAG_LIMIT - len(head) - _DIGEST - 1]}.{_digest(db, name)}"


def _digest(db: str, name: str) -> str:
    """12 hex digits of the SHA-256 of a stream's exact (lower-case) names: a hashed id's or tag's end."""
    return hashlib.sha256(f"{db}\0{name}".encode()).hexdigest()[:_DIGEST]


def freshness_dag_id(db: str, name: str) -> str:
    """The DAG that checks a stream's freshness: its main DAG's id and ``__fresh`` (shorter than
    ``__recalc``, so it fits where that one does, and as injective)."""
    return stream_dag_ids(db, name)[0] + "__fresh"
