"""A soak with faults: streams of every window kind, a PERIOD stream and a notify-only stream, fed at
a steady rate with late rows, updates and deletes, while their processes are killed and restarted.
Two of the streams read an attached Delta table that a writer of the team's own feeds meanwhile.

    .venv/bin/python -m bench.soak [--minutes 10] [--seed N]

It runs the stream node, Airflow's api-server, scheduler, dag-processor and triggerer
(LocalExecutor) and an ``airflow-stream receive`` WebSocket receiver, all as separate processes.
While rows are written, a fault injector sends SIGKILL, at moments drawn from a seeded random
generator, to the node, the scheduler, the triggerer, a running Airflow task process and the
receiver, and restarts each as a supervisor would: the node with ``node.start``, an Airflow
component with its own command, the receiver on the same port, appending to the same file.

The attached table (``CREATE STABLE soak.fm FROM DELTA '<home>/owner/readings' MAP (...)``) lives
outside the warehouse. A separate process (:mod:`bench.soak.writer`) that imports nothing of this
project writes it with delta-rs, tick by tick alongside our own INSERTs: appends of the rows in time
order, MERGEs of late rows and updates, and deletes by predicate, with the same rules as our feed.
Its streams (an INTERVAL stream that notifies and a SESSION stream) are checked like the others,
their oracle reading the table's final snapshot with delta-rs.

Beside them, ``airflow-stream serve`` runs as a process of its own and three client threads
(:mod:`bench.soak.rest`) write through its TDengine REST endpoint (``POST /rest/sql``), each into a
subtable of ``m`` of its own (``r0``..``r2``), a row at every tick and now and then an update of its
previous row; the streams over ``m`` read them with the rest, and a request that fails is a failure.

When the feed stops and everything has caught up, the checks are exact:

- Window streams: every window of the final table, computed in pandas from the table's rows
  (:func:`oracle_windows`, independent of the window engine), is in the output table with the same
  start, end, average, maximum and count. A row of the output that no window of the final table has
  is a window that late rows, updates or deletes took apart (a SESSION merged, a STATE run split):
  TDengine 3.3.7 semantics keep its result and send ``WINDOW_INVALIDATION``, so such a row must be
  invalidated (its notifications, or the stream's event log when it does not notify), else it is
  counted as stale, a failure. Every stream but COUNT_WINDOW has ``DELETE_RECALC``, so deletes
  recalculate as late rows do. The feed never deletes a subtable's first or latest rows, so each
  group's first window and latest event time stay what the detector saw.
- COUNT_WINDOW ignores late rows, updates and deletes (reference 000, "Atypical Data Ingestion"),
  so the COUNT_WINDOW streams read subtable ``d3``, which only gets rows in time order.
- Notifications, after dropping resent ``messageId``s: every window of the oracle has a
  ``WINDOW_CLOSE`` whose last state (a later ``WINDOW_INVALIDATION`` revokes it) carries the
  oracle's result; a window the oracle no longer has ends invalidated; a ``WINDOW_CLOSE`` sent twice
  for one ``triggerId`` without an invalidation between is a duplicate.
- PERIOD: its instants follow the wall clock, so which instants ran depends on when the scheduler
  was up; what is exact is that each instant is aligned to the period and appears once, and that
  each instant counts the rows written (inserted or updated, from the table's change feed) between
  the table versions at the previous fired instant and at this one (reference 000: the rows written
  since the previous trigger), each row once. A commit stamped just before an instant can land
  after the instant's run looked, and then counts in the next instant: so each boundary may be any
  version stamped up to ``IN_FLIGHT_MS`` before the instant, and the sum over the instants must
  equal the rows written between the first and the last. The first instant is not checked: its
  start is the stream's creation or the instant before it, whichever is later.
- No stream is failed in ``information_schema.ins_streams``, and none has notifications pending.
- Once all of that holds, ``VERIFY STREAM`` of every stream that writes an output, but the PERIOD
  one (:mod:`bench.soak.verified`), finds no difference, but for the rows of windows taken apart that
  TDengine keeps and the checks above found invalidated (VERIFY reports them as ``extra``).

The checks run every 10 s after the feed until they all pass or ``--settle`` seconds have passed.
The exit status is 1 when then anything is lost, duplicated or stale, a stream failed, a message
could not be read, or a fault's restart failed.
"""


from bench.soak.oracle import oracle_windows
from bench.soak.run import run_soak
from bench.soak.spec import COMPONENTS, STREAMS

__all__ = ["COMPONENTS", "STREAMS", "oracle_windows", "run_soak"]
