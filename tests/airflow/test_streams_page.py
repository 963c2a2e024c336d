"""The Streams page of the Airflow UI, against a real api-server (with Airflow's simple auth
manager and two users, an admin and a viewer) and Debian's headless Chromium.

One window stream is created and run here; the page must show what its files say, refuse
anonymous and forged requests, let the viewer read but not recalculate, and create a backfill of
the recalculation DAG from the form for the admin. A second stream's recalculation DAG is
backfilled from Airflow's own Backfill dialog.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.processes import wait_for
from airflow_stream_provider.progress import Progress
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse
from tests.iotdb.test_triggers import FILES as TRIGGER_FILES

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def http(url: str, token: str | None = None, body: dict | None = None, cookie: bool = False) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     method="POST" if body is not None else "GET")
    request.add_header("Content-Type", "application/json")
    if token and cookie:
        request.add_header("Cookie", f"_token={token}")
    elif token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text.startswith("{") else {"text": text}
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode() or "{}")


def browser() -> WebDriver:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "dev/setup installs Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def nth(elements: list, index: int):
    """The element at index, or None while there are not that many yet: a wait that gets None looks again."""
    return elements[index] if -len(elements) <= index < len(elements) else None


def test_streams_page(spark, tmp_path, monkeypatch):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    stream_home = tmp_path / "stream"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(stream_home))
    wh = Warehouse(stream_home / "warehouse", spark=spark)
    list(statements.run(wh, f"""
        CREATE DATABASE power; USE power;
        CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
        CREATE TABLE m1 USING meters TAGS ('north');
        CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m1 INTO avg1m_out
          AS SELECT _twstart ts, avg(v) AS a FROM %%trows;
        CREATE STREAM max1m INTERVAL(1m) SLIDING(1m) FROM m1 INTO max1m_out
          AS SELECT _twstart ts, max(v) AS mx FROM %%trows;
        CREATE TRIGGER meter_values AFTER INSERT ON root.power.m1.v AS 'counters.Refuser'
          USING URI '{TRIGGER_FILES / "counters.py"}' WITH ("dir" = "{stream_home}", "name" = "meter_values",
          "bad" = "3");
        INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:01:10', 2) ('2025-01-01 00:02:10', 3)
          ('2025-01-01 00:03:10', 4);
    """))
    report = run_stream(wh, "power", "avg1m")
    assert report.triggers == 3  # [00:00, 00:01), [00:01, 00:02), [00:02, 00:03) closed; [00:03, 00:04) open

    # avg1m's results may be an hour stale: its lag (under 4 minutes of event time) is within that,
    # and no row came after its run fired, so the page marks it ok; max1m declares no bound
    (stream_home / "airflow-stream.toml").write_text('[streams.power.avg1m]\nfreshness = "1h"\n')
    airflow = LocalAirflow(tmp_path / "airflow", stream_home,
                           users={"admin": ("admin", "admin-pw"), "viewer": ("viewer", "viewer-pw")})
    driver = None
    try:
        airflow.start()
        page = f"{airflow.url}/streams/"
        api = f"{airflow.url}/streams/api/streams"
        # anonymous and forged requests are refused, for the page and for its API
        assert http(page)[0] == 401
        assert http(api)[0] == 401
        assert http(f"{api}/power/avg1m/recalculate", body={"start": "2025-01-01T00:00:00Z",
                                                              "end": "2025-01-01T00:02:00Z"})[0] == 401
        assert http(api, token="not-a-jwt")[0] == 403
        admin, viewer = airflow.token("admin"), airflow.token("viewer")
        status, body = http(api, admin)
        assert status == 200
        row = {r["stream_name"]: r for r in body["streams"]}["avg1m"]
        assert (row["db_name"], row["stream_name"], row["computations"], row["windows_closed"]) == \
            ("power", "avg1m", 3, 3)
        assert http(page, admin, cookie=True)[0] == 200  # the browser's way: Airflow's session cookie

        wait_for(lambda: http(f"{airflow.url}/api/v2/dags/stream__power__avg1m__recalc", admin)[0] == 200, 120,
                 "the recalculation DAG to be parsed")
        status, body = http(f"{api}/power/avg1m/recalculate", viewer,
                            {"start": "2025-01-01T00:00:00Z", "end": "2025-01-01T00:02:00Z"})
        assert status == 403, body  # a viewer reads, but may not create runs

        driver = browser()
        driver.get(f"{airflow.url}/api/v2/monitor/health")  # on the origin, so that its cookie can be set
        driver.add_cookie({"name": "_token", "value": admin, "path": "/"})
        driver.get(page)
        # React re-renders elements while the page settles: a check that meets a replaced element
        # looks again
        wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))
        cell = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR,
                                                    'tr[data-stream="power.avg1m"] td[data-col="computations"]'))
        assert cell[0].text == "3"
        row_text = driver.find_element(By.CSS_SELECTOR, 'tr[data-stream="power.avg1m"]').text
        listed = driver.find_element(By.CSS_SELECTOR, 'tr[data-stream="power.avg1m"]')
        # the minute's rates (0.00 once the run is a minute old) and no FILL_HISTORY
        for col in ("input-rate", "output-rate"):
            assert re.fullmatch(r"\d+\.\d\d", listed.find_element(By.CSS_SELECTOR, f'td[data-col="{col}"]').text)
        assert listed.find_element(By.CSS_SELECTOR, 'td[data-col="history"]').text == "-"
        assert listed.find_element(By.CSS_SELECTOR, 'td[data-col="freshness"]').text == "ok"
        other = driver.find_element(By.CSS_SELECTOR, 'tr[data-stream="power.max1m"]')
        assert other.find_element(By.CSS_SELECTOR, 'td[data-col="freshness"]').text == ""
        assert "running" in row_text and "INTERVAL(1m) SLIDING(1m)" in row_text
        # the insert trigger, fired once per row of the INSERT, failed on the value 3
        trigger = driver.find_element(By.CSS_SELECTOR, 'tr[data-trigger="meter_values"]')
        assert trigger.find_element(By.CSS_SELECTOR, 'td[data-col="fires"]').text == "4 / 1"
        assert "AFTER_INSERT" in trigger.text and "root.power.m1.v" in trigger.text
        assert "fire returned False" in trigger.text
        driver.save_screenshot(str(tmp_path / "streams.png"))
        assert (tmp_path / "streams.png").stat().st_size > 10_000

        # a history fill under way, as the runner records it: the page shows its bar
        fill = Progress("history fill of power.avg1m", 100, "triggers", path=StreamStore().get("power", "avg1m")
                        .progress_path)
        fill.advance(40)
        driver.find_element(By.LINK_TEXT, "power.avg1m").click()
        wait.until(lambda d: "CREATE STREAM avg1m" in d.find_element(By.ID, "sql").text)
        bar = driver.find_element(By.ID, "progress")
        assert bar.is_displayed()
        assert bar.text.startswith("history fill of power.avg1m: 40 of 100 triggers (40%)")
        assert bar.find_element(By.CLASS_NAME, "fill").get_attribute("style") == "width: 40%;"
        events = driver.find_elements(By.CSS_SELECTOR, "#events tbody tr")
        assert sorted(e.text.split()[0] for e in events) == ["WINDOW_CLOSE"] * 3  # as detected: three closes
        windows = wait.until(lambda d: d.find_element(By.ID, "windows-chart").get_attribute("data-points"))
        assert windows == "3"  # the three windows end in three different minutes
        assert driver.find_element(By.ID, "lag-chart").get_attribute("data-points") == "1"  # one commit, one sample
        driver.save_screenshot(str(tmp_path / "stream.png"))

        form = driver.find_element(By.ID, "recalculate")
        driver.execute_script("arguments[0].start.value = '2025-01-01T00:00:00';"
                              "arguments[0].end.value = '2025-01-01T00:02:00';", form)
        form.find_element(By.TAG_NAME, "button").click()
        result = wait.until(lambda d: d.find_element(By.ID, "recalc-result").text
                            if "creating" not in d.find_element(By.ID, "recalc-result").text else None)
        assert "backfill" in result and "stream__power__avg1m__recalc" in result, result
        # the request, listed with its state on the next refresh: two slices of 1 min, none done yet or some
        recalc_id = re.search(r"recalc_id (\d+), 2 run\(s\)", result).group(1)
        listed = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-recalc="{recalc_id}"]'))
        state = (listed[0].find_element(By.CSS_SELECTOR, 'td[data-col="status"]').text,
                 listed[0].find_element(By.CSS_SELECTOR, 'td[data-col="progress"]').text)
        assert state in {("Pending", "0%"), ("Running", "0%"), ("Running", "50%"), ("Finished", "100%")}, state
        assert "RECALCULATE STREAM" in listed[0].text
        backfills = airflow.api("/api/v2/backfills?dag_id=stream__power__avg1m__recalc")["backfills"]
        assert len(backfills) == 1
        assert backfills[0]["from_date"].startswith("2025-01-01T00:00:00")

        # Airflow's navigation holds the page as an external view, framed in Airflow's UI
        driver.get(f"{airflow.url}/plugin/streams")
        frame = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "iframe"))
        assert frame[0].get_attribute("src").rstrip("/").endswith("/streams")

        # Airflow's own Backfill dialog on a recalculation DAG: its dry run counts the slices
        # (RecalcTimetable, one per minute of INTERVAL(1m)) that start in [00:00, 00:02]: 3
        wait_for(lambda: http(f"{airflow.url}/api/v2/dags/stream__power__max1m__recalc", admin)[0] == 200, 120,
                 "the second recalculation DAG to be parsed")
        driver.get(f"{airflow.url}/dags/stream__power__max1m__recalc")
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=trigger-dag-button]")).click()
        wait.until(lambda d: d.find_element(By.XPATH, "//*[text()='Backfill']")).click()
        for index, (day, hhmm) in enumerate((("2025/01/01", "00:00"), ("2025/01/01", "00:02"))):
            # the dialog and its popovers open a moment after the click: wait until they are there
            wait.until(lambda d, i=index: nth(d.find_elements(By.CSS_SELECTOR, "[data-testid=datetime-input]"), i)
                       ).click()
            picker = wait.until(lambda d: nth([p for p in d.find_elements(
                By.CSS_SELECTOR, "[data-scope=popover][data-part=content]") if p.is_displayed()], -1))
            for box, text in zip(picker.find_elements(By.CSS_SELECTOR, "input"), (day, hhmm), strict=True):
                box.send_keys(Keys.CONTROL, "a")
                box.send_keys(Keys.BACKSPACE)
                box.send_keys(text)
            box.send_keys(Keys.ESCAPE)
        driver.find_element(By.XPATH, "//*[text()='All Runs']").click()
        wait.until(lambda d: "3 runs will be triggered." in d.find_element(By.TAG_NAME, "body").text)
        run = driver.find_element(By.XPATH, "//button[text()='Run Backfill']")
        wait.until(lambda d: run.is_enabled())
        run.click()
        created = wait_for(lambda: airflow.api("/api/v2/backfills?dag_id=stream__power__max1m__recalc")["backfills"],
                           30, "the backfill of the dialog")
        assert [(b["from_date"], b["to_date"], b["reprocess_behavior"]) for b in created] == [
            ("2025-01-01T00:00:00Z", "2025-01-01T00:02:00Z", "completed")]
    finally:
        if driver is not None:
            driver.quit()
        airflow.stop()
