"""Writes that pass their deadline and land later (issue #61's named gaps, items 2 and 3; sweeper/s3_conditional.py),
against moto's S3 server: a sweep's record written late cannot go over a newer one, a driver's late release cannot
delete a newer driver's lock, two drivers taking over one stale lock cannot both win, and a stop request that lands
after its driver ended does not stop the next one."""

from __future__ import annotations

import json
import threading
import time

import pytest

from sweeper import driver_lock, s3_conditional, sweeps
from sweeper.driver_lock import LOCK_FILE, read_holder, take
from sweeper.space import SpecError
from sweeper.storage import Storage, open_storage
from tests.hostile import SlowProxy, slow_proxy
from tests.servers import MotoS3, environment

LATE_S = 2.5  # how long the proxy holds a PUT: past the 1 s deadline the writes here run under


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    s3 = MotoS3(tmp_path_factory.mktemp("moto"))
    yield s3
    s3.stop()


def test_a_record_written_late_cannot_go_over_a_newer_one(moto):
    with slow_proxy(moto.port, LATE_S, delayed=(b"PUT",)) as proxy, environment({"NMT_SWEEPER_TIMEOUT": "1"}):
        # the sweep as a driver sees it whose PUTs arrive late, and as another that reaches the store at once
        slow, fast = late_and_prompt(moto, proxy, "late")
        s3_conditional.write_record(fast, '{"state": "running"}', sweeps.STATUS_FILE)
        with pytest.raises(SpecError, match="no whole answer within 1 s"):
            s3_conditional.write_record(slow, '{"state": "old"}', sweeps.STATUS_FILE)  # its PUT is on its way
        s3_conditional.write_record(fast, '{"state": "finished"}', sweeps.STATUS_FILE)
        answers = all_answered(proxy)  # the late PUT (and botocore's retry of it) has reached the store
        assert answers[0] == 200 and len(answers) > 1 and set(answers[1:]) == {412}, answers  # a HEAD, late PUTs
        assert fast.read_text(sweeps.STATUS_FILE) == '{"state": "finished"}'


def test_the_same_late_write_without_its_condition_lands_over_the_newer_record(moto):
    """The control of the test above: the proxy does deliver a late PUT, and without its condition it lands over
    the newer record, which is what the condition stops. (One proxy a test: the first version of these two ran in
    one test, and a late answer of its first half, arriving after the second half's, failed it under load.)"""
    with slow_proxy(moto.port, LATE_S, delayed=(b"PUT",)) as proxy, environment({"NMT_SWEEPER_TIMEOUT": "1"}):
        slow, fast = late_and_prompt(moto, proxy, "unconditional")
        with pytest.raises(SpecError, match="no whole answer within 1 s"):
            s3_conditional.put(slow, b"old", "plain.json")
        s3_conditional.write_record(fast, "new", "plain.json")
        answers = all_answered(proxy)
        assert answers and set(answers) == {200}, answers
        assert fast.read_text("plain.json") == "old"


def late_and_prompt(moto: MotoS3, proxy: SlowProxy, prefix: str) -> tuple[Storage, Storage]:
    """One sweep's folder as seen through the proxy (every PUT late) and straight from the store."""
    slow = open_storage(moto.uri("w").replace(str(moto.port), str(proxy.port)), "test").below(prefix)
    return slow, open_storage(moto.uri("w"), "test").below(prefix)


def all_answered(proxy: SlowProxy) -> list[int]:
    """The store's answers, once every request that reached the proxy has one and no new one came for a second
    (botocore retries a PUT after its read timeout). No deadline of its own: pytest-timeout bounds the wait."""
    seen = -1
    while seen != proxy.requests or len(proxy.answers) < proxy.requests:
        seen = proxy.requests
        time.sleep(1.0)
    return list(proxy.answers)


def test_a_late_release_cannot_delete_the_lock_a_newer_driver_took(moto):
    experiment = open_storage(moto.uri("w"), "test").below("release")
    first, second = ({"host": host, "pid": 1, "since": 1.0} for host in "ab")
    assert driver_lock.create_only(experiment, json.dumps(first).encode())
    _, first_tag = driver_lock.read_holder_tagged(experiment)
    assert driver_lock.take_over(experiment, json.dumps(second).encode(), first_tag)  # the first is gone
    assert not s3_conditional.delete(experiment, LOCK_FILE, if_match=first_tag)  # the first's release, landing late
    assert read_holder(experiment) == second
    driver_lock.release(experiment, first)  # a release by the first finds the second's record and leaves it
    assert read_holder(experiment) == second
    driver_lock.release(experiment, second)
    assert read_holder(experiment) is None


def test_two_drivers_taking_over_one_stale_lock_cannot_both_win(moto, monkeypatch):
    experiment = open_storage(moto.uri("w"), "test").below("race")
    experiment.write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": 1.0}), LOCK_FILE)  # silent for years
    judged, first_holds = threading.Barrier(2, timeout=30), threading.Event()
    judge = driver_lock.gone

    def both_judge_it_gone(experiment_, holder):
        """Both read the stale record and judge it gone; then b takes it over only once a holds it (before, b's
        delete removed a's fresh lock, and both drove the sweep)."""
        verdict = judge(experiment_, holder)
        judged.wait()
        if threading.current_thread().name == "b":
            first_holds.wait(30)
        return verdict

    monkeypatch.setattr(driver_lock, "gone", both_judge_it_gone)
    outcomes: dict[str, str] = {}

    def drive() -> None:
        host = threading.current_thread().name
        try:
            take(experiment, {"host": host, "pid": 2, "since": 2.0}, "race", "sweeper resume")
            outcomes[host] = "holds"
        except SpecError as err:
            outcomes[host] = str(err)
        finally:
            first_holds.set()

    threads = [threading.Thread(target=drive, name=host) for host in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes["a"] == "holds" and "sweep race is driven by a driver on a (pid 2" in outcomes["b"], outcomes
    assert read_holder(experiment)["host"] == "a"


def test_a_stop_request_for_an_earlier_driver_does_not_stop_the_next(tmp_path):
    experiment = open_storage(str(tmp_path), "test").below("s")
    earlier = {"host": "elsewhere", "pid": 7, "since": 1.0}
    experiment.write_text(json.dumps({"state": "running", "driver": earlier}), sweeps.STATUS_FILE)
    sweeps.request_stop(experiment, "alice")  # addressed to the driver status.json names
    assert json.loads(experiment.read_text(sweeps.STOP_FILE))["driver"] == earlier
    assert sweeps.stop_request(experiment) is None  # this process drives now: not its request
    sweeps.write_status(experiment, {"state": "running"})  # this process's own status
    sweeps.request_stop(experiment, "alice")
    assert sweeps.stop_request(experiment)["by"] == "alice"
    experiment.write_text(json.dumps({"by": "bob", "at": 1.0}), sweeps.STOP_FILE)  # as an older sweeper wrote it
    assert sweeps.stop_request(experiment)["by"] == "bob"
