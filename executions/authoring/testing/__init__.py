"""The author's test kit: test a workflow on keel's real processes, from your own package.

    import pytest

    from executions.authoring.testing import Keel


    @pytest.fixture
    def keel(transactional_db, tmp_path):
        with Keel(modules="myflows.expense", sandbox=True, tmp=tmp_path) as keel:
            yield keel


    def test_an_approved_claim_is_paid_once(keel):
        ref = keel.start("expense_approval", {"employee": "ana", ...})
        keel.wait(ref, "awaiting_approval")
        keel.decide(ref, "approve")          # the exact version and sha256 it awaits
        keel.wait(ref, "completed")
        assert keel.effect(f"{ref}:pay:v1")["status"] == "succeeded"
        assert keel.provider_calls(f"{ref}:pay:v1") == {"calls": 1, "effects": 1}

``Keel`` starts a Celery worker (with beat inside it), and when asked the web server
and keel's sandbox, against the database and broker the test's process uses (under
pytest-django, the test database: it must commit, so ``transactional_db``). It drives
executions through the services the API uses — ``start``, ``signal``, ``decide``, each
refused exactly as the API would refuse it — and reads them as the API shows them
(``execution``, ``wait``), the ledger by key (``effect``) and what the sandbox saw under a
key (``provider_calls``); ``run`` takes one execution to its end, deciding and signalling
on the way. Every wait has a true timeout: ``WaitTimedOut`` names the seconds actually
waited and where the execution stopped. The refusals are the services' errors, here for
a test to expect: ``Conflict`` (the API's 409), ``Forbidden`` (403), ``NotFound`` (404),
``InvalidInput`` (422, naming the field). docs/authoring.md, "Testing it", is the guide.

Who imports this package: an author's tests, and keel's. Nothing of the runtime does (an
import-linter contract in pyproject.toml keeps it so), and importing
``executions.authoring`` doesn't load it. Unlike the surface it may import the runtime's
services and the engine's registries: it stands where the API stands, outside the rooms
(docs/architecture.md).
"""

from ...errors import Conflict, Forbidden, InvalidInput, NotFound
from .kit import Api, Keel
from .waiting import WaitTimedOut

__all__ = ["Api", "Conflict", "Forbidden", "InvalidInput", "Keel", "NotFound", "WaitTimedOut"]
