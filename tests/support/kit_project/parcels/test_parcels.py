"""An author's tests of ``kit_parcel``, with keel's test kit imported from their own
package: signals delivered, decisions delivered on the exact version and sha256, and
waits that run out saying how long they actually waited."""

import re
import time

import pytest

from executions.authoring.testing import Conflict, InvalidInput, Keel, WaitTimedOut

DELIVERED = {"at": "2026-12-01T10:00:00Z"}


@pytest.fixture
def keel(transactional_db, tmp_path):
    with Keel(modules="parcels.flow", sandbox=True, tmp=tmp_path) as keel:
        yield keel


def said_seconds(timed_out: WaitTimedOut) -> float:
    """The seconds the message says were waited."""
    return float(re.search(r"not after ([0-9.]+) s", str(timed_out)).group(1))


def test_signals_are_delivered(keel):
    ref = keel.start("kit_parcel", {"item": "book"})
    keel.wait(ref, "awaiting_approval")
    keel.decide(ref, "approve")
    waiting = keel.wait(ref, "waiting")
    assert waiting["pending_gate"]["step"] == "delivered"
    with pytest.raises(Conflict, match="not waiting for the signal parcel_lost"):
        keel.signal(ref, "parcel_lost")
    assert keel.signal(ref, "parcel_delivered", DELIVERED, event_id="delivery-1")["event_id"] == "delivery-1"
    keel.wait(ref, "completed")
    assert keel.outputs(ref)["close"] == {"delivered_at": DELIVERED["at"]}

    # run() takes one to its end, delivering the signals it is given when it waits for them
    done = keel.run("kit_parcel", {"item": "pen"}, signals={"parcel_delivered": DELIVERED}, timeout=30)
    assert done["status"] == "completed", done
    assert keel.outputs(done["id"])["close"] == {"delivered_at": DELIVERED["at"]}


def test_decisions_are_delivered_on_the_exact_version(keel):
    ref = keel.start("kit_parcel", {"item": "lamp"})
    first = keel.wait(ref, "awaiting_approval")["pending_approval"]
    assert (first["artifact_version"], first["action"]) == (1, "ship_parcel")
    with pytest.raises(Conflict):  # a hash it does not show is refused, as the API's 409
        keel.decide(ref, "approve", content_sha256="0" * 64)

    keel.decide(ref, "request_changes", comment="Mark it fragile")
    second = keel.wait(ref, "awaiting_approval")["pending_approval"]
    assert second["artifact_version"] == 2 and second["content_sha256"] != first["content_sha256"]
    answer = keel.decide(ref, "approve")
    assert answer["decision"] == "approve" and answer["decided_by"] == keel.approver.get_username()
    keel.wait(ref, "waiting")
    assert keel.effect(f"{ref}:ship:v2")["status"] == "succeeded"
    assert keel.provider_calls(f"{ref}:ship:v2") == {"calls": 1, "effects": 1}
    assert keel.effect(f"{ref}:ship:v1")["status"] != "succeeded"  # the version sent back: nothing shipped
    assert keel.provider_calls(f"{ref}:ship:v1") == {"calls": 0, "effects": 0}

    rejected = keel.start("kit_parcel", {"item": "vase"})
    keel.wait(rejected, "awaiting_approval")
    keel.decide(rejected, "reject", comment="Too fragile")
    assert keel.wait(rejected, "cancelled")["status"] == "cancelled"
    assert keel.provider_calls(f"{rejected}:ship:v1") == {"calls": 0, "effects": 0}
    with pytest.raises(Conflict, match="awaits no approval: it is cancelled"):  # as the API's 409
        keel.decide(rejected, "approve")


def test_a_wait_that_runs_out_names_the_time_it_waited(keel):
    ref = keel.start("kit_parcel", {"item": "kite"})
    keel.wait(ref, "awaiting_approval")
    began = time.monotonic()
    with pytest.raises(WaitTimedOut) as timed_out:
        keel.wait(ref, "completed", timeout=1.5)  # nobody approves: it never comes
    waited = time.monotonic() - began
    message = str(timed_out.value)
    assert 1.5 <= said_seconds(timed_out.value) <= waited + 0.05, (message, waited)
    assert waited - said_seconds(timed_out.value) < 0.5, (message, waited)
    assert "timeout 1.5 s" in message and "awaiting_approval at approve" in message

    began = time.monotonic()
    with pytest.raises(WaitTimedOut) as timed_out:
        keel.run("kit_parcel", {"item": "drum"}, timeout=4)  # approved, then no signal ever comes
    waited = time.monotonic() - began
    assert 4 <= said_seconds(timed_out.value) <= waited + 0.05, (str(timed_out.value), waited)
    assert waited - said_seconds(timed_out.value) < 0.5, (str(timed_out.value), waited)


def test_a_crash_a_retried_decision_and_a_budget(keel):
    ref = keel.start("kit_parcel", {"item": "clock"})
    keel.wait(ref, "awaiting_approval")
    first = keel.decide(ref, "approve", event_id="approve-clock")
    assert keel.decide(ref, "approve", event_id="approve-clock") == first  # the API's retry: the same answer
    keel.wait(ref, "waiting")
    keel.crash_workers()  # SIGKILLed, and a new worker (with the sweeper) started
    keel.signal(ref, "parcel_delivered", DELIVERED)
    keel.wait(ref, "completed")
    assert keel.provider_calls(f"{ref}:ship:v1") == {"calls": 1, "effects": 1}
    assert keel.user("kit-auditor", group="auditors").groups.filter(name="auditors").exists()
    with pytest.raises(InvalidInput, match="budget_usd"):  # this workflow asks no model
        keel.start("kit_parcel", {"item": "pen"}, budget_usd=1)
