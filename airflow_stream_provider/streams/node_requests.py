"""Work a stream's Airflow tasks hand to the stream node: files in the stream's state folder.

A task that starts in Airflow's triggerer (no worker process) asks the node hosting the stream's
detector to compute the batches its run covers, or to deliver the stream's notifications, and ends
when the node answers. A request is ``requests/<id>.json`` ({"role": ..., arguments}); the node
takes it, does the work with the same code a worker would run (:func:`.run.run`,
:func:`.notifications.deliver_outbox`) and answers in ``requests/<id>.answer.json`` ({"status": "done", ...} or
{"status": "error", "message": ...}). Requests are idempotent: a trigger that runs again (the
triggerer restarted) asks again, and the work gives the same rows and the same message ids.

A compute request with ``keep_for_s`` goes on: the node records each round's progress and computes
the stream's next committed batch as soon as its detector commits it, until that many seconds have
passed; it answers with a line per round and no progress left for the run's commit, and goes on
until the stream's next run asks (for a while). Without ``upto_batch`` it first waits for a batch,
and answers ``{"status": "idle"}`` when none came in time.

A request nobody answers (the node stopped meanwhile) is withdrawn by the asker, which then does
the work on a worker as before: :func:`withdraw` removes it unless the node took it already. One
that a node took and stopped before answering is asked again of the node hosting the stream next.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from airflow_stream_provider.files import make_dirs, write_text

FOLDER = "requests"
#: the answer to a compute that goes on when no batch came to compute in its time
IDLE = "idle"
_ANSWER = ".answer.json"
_TAKEN = ".taken"


def _folder(state_dir: Path) -> Path:
    return Path(state_dir) / FOLDER


def submit(state_dir: Path, role: str, **arguments: object) -> str:
    """Ask for ``role`` (``compute``, ``notify``) with ``arguments``; the request's id."""
    request = uuid.uuid4().hex
    folder = make_dirs(_folder(state_dir))
    write_text(folder / f"{request}.json", json.dumps({"role": role, **arguments}))
    return request


def answer(state_dir: Path, request: str) -> dict | None:
    """The node's answer to ``request`` (None: none yet); the request's files go once read."""
    folder = _folder(state_dir)
    try:
        found = json.loads((folder / f"{request}{_ANSWER}").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    for name in (f"{request}{_ANSWER}", f"{request}.json", f"{request}{_TAKEN}"):
        (folder / name).unlink(missing_ok=True)
    return found


def taken(state_dir: Path, request: str) -> bool:
    """Whether a node has taken ``request`` and not answered it yet."""
    folder = _folder(state_dir)
    return (folder / f"{request}{_TAKEN}").exists() and not (folder / f"{request}{_ANSWER}").exists()


def drop(state_dir: Path, request: str) -> None:
    """Forget a taken ``request`` without answering it (a newer one of the same task took over)."""
    (_folder(state_dir) / f"{request}{_TAKEN}").unlink(missing_ok=True)


def nodata(answer: dict) -> bool:
    """A compute ``answer`` computed nothing because no trigger had new rows (IGNORE_NODATA_TRIGGER)."""
    return answer.get("status") == "done" and not answer.get("triggers") and bool(answer.get("skipped"))


def succeeded(answer: dict) -> bool:
    """A compute ``answer`` ends its task with success: progress to record."""
    return answer.get("status") == "done" and not nodata(answer)


def withdraw(state_dir: Path, request: str) -> bool:
    """Take ``request`` back; False when the node has taken it (its answer will come)."""
    folder = _folder(state_dir)
    try:
        os.rename(folder / f"{request}.json", folder / f"{request}.withdrawn")
    except FileNotFoundError:
        return False
    (folder / f"{request}.withdrawn").unlink(missing_ok=True)
    return True


def changed(state_dir: Path) -> int | None:
    """When the requests folder last changed (nanoseconds; None: no folder): a new request changes
    it, so a node looking for requests reads the folder only when this moved."""
    try:
        return os.stat(_folder(state_dir)).st_mtime_ns
    except FileNotFoundError:
        return None


def waiting(state_dir: Path) -> list[tuple[str, dict]]:
    """The requests not taken yet, oldest first, each marked taken as it is returned (a request is
    taken once, by one node thread)."""
    folder = _folder(state_dir)
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        if entry.name.endswith(".json") and not entry.name.endswith(_ANSWER):
            try:
                found.append((entry.stat().st_mtime_ns, entry.name))
            except FileNotFoundError:  # taken by another thread meanwhile
                continue
    out = []
    for _, name in sorted(found):
        request = name.removesuffix(".json")
        try:  # taking it: a rename only one taker wins, and which a withdrawal cannot follow
            os.rename(folder / name, folder / f"{request}{_TAKEN}")
        except FileNotFoundError:
            continue
        try:
            out.append((request, json.loads((folder / f"{request}{_TAKEN}").read_text(encoding="utf-8"))))
        except (OSError, ValueError) as err:
            reply(state_dir, request, {"status": "error", "message": f"unreadable request: {err}"})
    return out


def reply(state_dir: Path, request: str, result: dict) -> None:
    """Answer ``request`` with ``result``."""
    folder = _folder(state_dir)
    if folder.is_dir():  # the stream was dropped meanwhile: nobody waits
        write_text(folder / f"{request}{_ANSWER}", json.dumps(result, default=str))
