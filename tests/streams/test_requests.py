"""The requests a stream's triggerer tasks leave for the stream node: taken once, answered once,
withdrawn only while nobody has taken them."""

from __future__ import annotations

import threading

from airflow_stream_provider.streams import requests


def test_a_request_is_taken_once_answered_and_cleaned_up(tmp_path):
    first = requests.submit(tmp_path, "compute", upto_batch=7)
    second = requests.submit(tmp_path, "notify")
    taken = requests.waiting(tmp_path)
    assert [(r, body) for r, body in taken] == [(first, {"role": "compute", "upto_batch": 7}),
                                                  (second, {"role": "notify"})]
    assert requests.waiting(tmp_path) == []  # taken: nobody takes them again
    assert requests.answer(tmp_path, first) is None
    requests.reply(tmp_path, first, {"status": "done", "progress": {"consumed_batch": 7}})
    assert requests.answer(tmp_path, first) == {"status": "done", "progress": {"consumed_batch": 7}}
    requests.reply(tmp_path, second, {"status": "error", "message": "no receiver"})
    assert requests.answer(tmp_path, second)["status"] == "error"
    assert list((tmp_path / requests.FOLDER).iterdir()) == []


def test_a_request_can_be_withdrawn_until_it_is_taken(tmp_path):
    left = requests.submit(tmp_path, "compute", upto_batch=1)
    assert requests.withdraw(tmp_path, left)
    assert requests.waiting(tmp_path) == []
    kept = requests.submit(tmp_path, "compute", upto_batch=2)
    assert [r for r, _ in requests.waiting(tmp_path)] == [kept]
    assert not requests.withdraw(tmp_path, kept)  # the node works on it: its answer will come


def test_concurrent_takers_take_each_request_once(tmp_path):
    made = {requests.submit(tmp_path, "compute", upto_batch=i) for i in range(50)}
    taken: list[str] = []
    lock = threading.Lock()

    def take() -> None:
        for request, _ in requests.waiting(tmp_path):
            with lock:
                taken.append(request)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(made)
