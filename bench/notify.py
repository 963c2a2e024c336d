"""Notification throughput and latency to a local WebSocket receiver.

    .venv/bin/python bench/notify.py [--events 50000] [--latency-samples 200]

A receiver (``airflow-stream receive``, a separate process on 127.0.0.1) takes every message.
In one process:

- outbox: ``events`` window-close events queued in a stream's outbox (packed into messages of at
  most 1 MiB), then delivered, each run of messages confirmed by a ping before it is recorded;
- baseline: the same message texts sent on one raw WebSocket connection, with no outbox, no
  confirmation and no bookkeeping: the transport's own speed;
- latency: one event queued and delivered at a time, from enqueue to confirmation, p50 and p99.

Target (2 cores): 5,000 events/s or more, batched.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_stream_provider.processes import free_port

if TYPE_CHECKING:
    from airflow_stream_provider.notify.message import NotifyEvent


def close_event(stream: str, i: int) -> NotifyEvent:
    from airflow_stream_provider.notify.message import NotifyEvent

    start = 1_735_689_600_000 + i * 60_000
    return NotifyEvent(stream=stream, key=f"0:{i}", table_name=f"{stream}_42", event_type="WINDOW_CLOSE",
                       event_time=start + 60_500, trigger_id=f"42:{start}", trigger_type="Interval", group_id="42",
                       fields={"windowStart": start, "windowEnd": start + 60_000},
                       result={"_wstart": start, "avg(current)": 10.0 + i % 7, "count(*)": 60})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ["AIRFLOW_STREAM_NOTIFY_CONN_IDS"] = "none"
    import websocket

    from airflow_stream_provider.notify import delivery
    from airflow_stream_provider.notify.outbox import Outbox

    port = free_port()
    url = f"ws://127.0.0.1:{port}/bench"
    receiver = subprocess.Popen([sys.executable, "-m", "airflow_stream_provider.cli", "receive", "--port", str(port),
                                 "--quiet"], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.monotonic() > deadline:
                raise SystemExit("the receiver did not start")
            time.sleep(0.1)
        settings = delivery.Settings(conn_ids=())
        events = [close_event("avg_current", i) for i in range(args.events)]

        box = Outbox(home / "outbox", [url])
        started = time.perf_counter()
        queued = box.enqueue(events)
        report = delivery.deliver(box, pause=True, settings=settings)
        outbox_s = time.perf_counter() - started
        assert report.sent_events == args.events, report

        texts = [q.text for q in queued]
        ws = websocket.create_connection(url)
        started = time.perf_counter()
        for text in texts:
            ws.send(text)
        ws.ping(b"end")
        while ws.recv_data_frame(control_frame=True)[0] != websocket.ABNF.OPCODE_PONG:
            pass
        raw_s = time.perf_counter() - started
        ws.close()

        single = Outbox(home / "single", [url])
        delays = []
        for i in range(args.latency_samples):
            started = time.perf_counter()
            single.enqueue([close_event("latency", i)])
            delivery.deliver(single, pause=True, settings=settings)
            delays.append(time.perf_counter() - started)
            single.prune()
        delivery.close_all()
    finally:
        receiver.terminate()
        receiver.wait(10)

    rate = args.events / outbox_s
    print(f"{args.events:,} events in {len(texts)} message(s) to one receiver on 127.0.0.1")
    print(f"{'case':<52} {'seconds':>8} {'events/s':>10} {'vs baseline':>11}")
    print(f"{'outbox: queue, send, confirm, record':<52} {outbox_s:>8.2f} {rate:>10,.0f} {raw_s / outbox_s:>10.2f}x")
    print(f"{'baseline: raw send of the same texts':<52} {raw_s:>8.2f} {args.events / raw_s:>10,.0f} {1:>10.2f}x")
    cuts = statistics.quantiles(delays, n=100)
    print(f"latency of one event, enqueue to confirmed ({len(delays)} samples): "
          f"p50 {cuts[49] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms")
    verdict = "meets" if rate >= 5000 else "misses"
    print(f"batched delivery {verdict} the target of 5,000 events/s ({rate:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
