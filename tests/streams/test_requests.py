"""The requests a stream's triggerer tasks leave for the stream node: taken once, answered once,
withdrawn only while nobody has taken them."""

from __future__ import annotations

import threading

from airflow_stream_provider.streams import node_requests


def test_a_request_is_taken_once_answered_and_cleaned_up(tmp_path):
    first = node_requests.submit(tmp_path, "compute", upto_batch=7)
    second = node_requests.submit(tmp_path, "notify")
    taken = node_requests.waiting(tmp_path)
    assert [(r, body) for r, body in taken] == [(first, {"role": "compute", "upto_batch": 7}),
                                                  (second, {"role": "notify"})]
    assert node_requests.waiting(tmp_path) == []  # taken: nobody takes them again
    assert node_requests.answer(tmp_path, first) is None and node_requests.taken(tmp_path, first)
    node_requests.reply(tmp_path, first, {"status": "done", "progress": {"consumed_batch": 7}})
    assert not node_requests.taken(tmp_path, first)  # answered: its answer waits to be read
    assert node_requests.answer(tmp_path, first) == {"status": "done", "progress": {"consumed_batch": 7}}
    node_requests.reply(tmp_path, second, {"status": "error", "message": "no receiver"})
    assert node_requests.answer(tmp_path, second)["status"] == "error"
    assert list((tmp_path / node_requests.FOLDER).iterdir()) == []


def test_a_request_can_be_withdrawn_until_it_is_taken(tmp_path):
    left = node_requests.submit(tmp_path, "compute", upto_batch=1)
    assert node_requests.withdraw(tmp_path, left)
    assert node_requests.waiting(tmp_path) == []
    kept = node_requests.submit(tmp_path, "compute", upto_batch=2)
    assert [r for r, _ in node_requests.waiting(tmp_path)] == [kept]
    assert not node_requests.withdraw(tmp_path, kept)  # the node works on it: its answer will come


def test_concurrent_takers_take_each_request_once(tmp_path):
    made = {node_requests.submit(tmp_path, "compute", upto_batch=i) for i in range(50)}
    taken: list[str] = []
    lock = threading.Lock()

    def take() -> None:
        for request, _ in node_requests.waiting(tmp_path):
            with lock:
                taken.append(request)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(made)


def _hosted_by(state_dir, pid: int) -> None:
    """``state_dir``'s stream as the node process ``pid`` reports hosting it."""
    import json

    (state_dir / "detector.json").write_text(json.dumps({"host": "node", "status": "running", "pid": pid}))


def test_a_request_taken_by_a_node_process_since_replaced_is_asked_again(tmp_path, monkeypatch):
    """The node took a compute that goes on, then restarted: the process that took the request can
    no longer answer it, and the new one never saw it. The asker asks the new one again, and drops
    the old request; while the same process hosts the stream, a taken request is waited for."""
    import asyncio
    import fcntl
    import os

    from airflow_stream_provider.triggers import served

    monkeypatch.setattr(served, "HOSTING_EVERY_S", 0.1)
    lock = os.open(tmp_path / "detector.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # (the node's detector lock, held)
    _hosted_by(tmp_path, 111)

    async def taken_request() -> tuple[str, dict]:
        for _ in range(200):
            found = node_requests.waiting(tmp_path)
            if found:
                (one,) = found
                return one
            await asyncio.sleep(0.05)
        raise AssertionError("no request came")

    async def scenario() -> dict | None:
        asking = asyncio.create_task(served.ask_node(str(tmp_path), "compute", upto_batch=3, keep_for_s=60.0,
                                                     longest_poll_s=served.MAX_ANSWER_POLL_S))
        old, body = await taken_request()  # process 111 takes it
        await asyncio.sleep(0.6)
        # waited for, not asked again
        assert node_requests.waiting(tmp_path) == [] and node_requests.taken(tmp_path, old)
        _hosted_by(tmp_path, 222)  # the node restarted
        new, again = await taken_request()
        assert new != old and again == body == {"role": "compute", "upto_batch": 3, "keep_for_s": 60.0}
        assert not node_requests.taken(tmp_path, old)
        node_requests.reply(tmp_path, new, {"status": "done", "progress": {"consumed_batch": 3}})
        return await asyncio.wait_for(asking, 10)

    try:
        assert asyncio.run(scenario()) == {"status": "done", "progress": {"consumed_batch": 3}}
        assert list((tmp_path / node_requests.FOLDER).iterdir()) == []
    finally:
        os.close(lock)
