"""The ``classify`` kind (docs/architecture.md, "A new step kind") on keel's real
processes: declared with ``flow.classify``, run by a worker through the journal,
replayed by ``keel replay``, and — a worker SIGKILLed after the model answered, before
the checkpoint — finished by another worker from the journal, the model asked once."""

import json
import os
import subprocess
import sys
import time

import pytest

from examples.classify import workflow
from executions.authoring.testing import Keel
from executions.models import ModelCall, execution_for

MODULE = "examples.classify.workflow"
ANSWERED = "after_classify:label"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    with Keel(modules=MODULE, tmp=tmp_path, failpoints=getattr(request, "param", "")) as keel:
        yield keel


def test_the_kind_plugs_in_without_a_method_of_its_own_on_workflow():
    step = workflow.flow.get_step("label")
    assert (step.kind, step.spec.labels) == ("classify", ("refund", "question", "complaint"))
    assert workflow.flow.successors("label") == ("route",)
    with pytest.raises(ValueError, match="two distinct labels"):
        workflow.flow.classify("again", label="x", prompt_id="p", prompt_version="v", labels=["a"], text=str)


def replay(keel: Keel, ref: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "django", "keel", "replay", "--id", ref, "--json"],
        env={**os.environ, **keel.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [item] = json.loads(done.stdout)["items"]
    return item


def test_a_message_is_labelled_routed_and_replayed(keel):
    ref = keel.start("triage_message", {"message": "It arrived broken. Unacceptable."})
    keel.wait(ref, "waiting")
    assert keel.outputs(ref)["helpdesk"] == {"desk": "helpdesk", "urgent": True}
    assert replay(keel, ref)["verdict"] == "ok"  # the label asked of the journal, the same
    keel.signal(ref, "answered")
    assert keel.wait(ref, "completed")["result"] == {"label": "complaint", "desk": "helpdesk"}


@pytest.mark.parametrize("keel", [f"{ANSWERED}=pause"], indirect=True)
def test_a_worker_killed_after_the_answer_finishes_from_the_journal(keel):
    ref = keel.start("triage_message", {"message": "I want a refund, please"})
    deadline = time.monotonic() + 30
    while not keel.failpoint_reached(ANSWERED):  # journaled, not yet checkpointed
        assert time.monotonic() < deadline, keel.logs()
        time.sleep(0.1)
    keel.crash_workers()
    done = keel.wait(ref, "completed", timeout=60)
    assert done["result"] == {"label": "refund", "desk": "refunds"}
    asked = ModelCall.objects.filter(execution=execution_for(ref), step="label")
    assert asked.count() == 1, list(asked.values("key", "revision"))  # the second worker read the journal
