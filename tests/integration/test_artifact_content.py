"""GET /api/artifacts/{artifact_id}/versions/{n}/content: the stored bytes, verified."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.test import Client

from artifacts import store
from artifacts.models import Artifact, ArtifactVersion
from tests.support.screens import logged_in


def url(artifact_ref: str, n) -> str:
    return f"/api/artifacts/{artifact_ref}/versions/{n}/content"


def bearer(person) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {person.token}"}


def test_any_authenticated_user_reads_the_verified_bytes(people, awaiting):
    execution, request = awaiting
    version = request.artifact_version
    expected = store.get(version.storage_path, expected_sha256=version.sha256)
    for reader in ("outsider", "requester", "manager", "auditor"):
        response = Client().get(url(version.artifact.ref, 1), **bearer(people[reader]))
        assert response.status_code == 200, response.content
        assert response.content == expected
        assert response["Content-Type"] == "text/markdown"
        assert response["X-Content-SHA256"] == version.sha256 == hashlib.sha256(response.content).hexdigest()
    by_session = logged_in(people["outsider"]).get(url(version.artifact.ref, 1))
    assert by_session.status_code == 200 and by_session.content == expected
    anonymous = Client().get(url(version.artifact.ref, 1))
    assert anonymous.status_code == 401 and anonymous.json()["detail"]


def test_unknown_artifacts_and_versions_are_404_json(people, awaiting):
    execution, request = awaiting
    ref = request.artifact_version.artifact.ref
    kind, _, number = ref.rpartition("_")
    for missing in [url(ref, 2), url(f"{kind}_999", 1), url(f"ORDER_{number}", 1), url("REPORT", 1)]:
        response = Client().get(missing, **bearer(people["outsider"]))
        assert response.status_code == 404, (missing, response.content)
        assert response.json()["detail"]


def test_malformed_version_numbers_are_422_naming_n(people, awaiting):
    ref = awaiting[1].artifact_version.artifact.ref
    for n in ["0", "-1", "abc", "1.5", str(2**31), "9" * 30]:
        response = Client().get(url(ref, n), **bearer(people["outsider"]))
        assert response.status_code == 422, (n, response.content)
        assert response.json()["detail"][0]["loc"] == ["path", "n"]


def test_bytes_that_no_longer_match_their_sha256_are_never_served(people, awaiting):
    execution, _ = awaiting
    blob = store.put(b"# a report only this test stores\n")
    artifact = Artifact.objects.create(kind="report", title="tampered", execution=execution)
    ArtifactVersion.objects.create(
        artifact=artifact,
        number=1,
        sha256=blob.sha256,
        size=blob.size,
        content_type="text/markdown",
        storage_path=blob.path,
        produced_by_step="draft_report",
    )
    (settings.ARTIFACTS_ROOT / blob.path).write_bytes(b"# rewritten behind our back\n")
    response = Client().get(url(artifact.ref, 1), **bearer(people["outsider"]))
    assert response.status_code == 409
    assert "do not match their sha256" in response.json()["detail"]
    assert b"rewritten" not in response.content
