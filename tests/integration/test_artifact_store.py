"""The artifact store on the filesystem and on S3 (moto), and the version page."""

from __future__ import annotations

import hashlib
import runpy

import boto3
import pytest
from django.core.files.storage import storages
from django.db import transaction
from django.test import Client
from moto import mock_aws

import config.settings
from artifacts import store
from artifacts.services import artifact_version_create
from executions.models import Execution

BUCKET = "keel-artifacts-test"


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


@pytest.fixture
def fs_store(settings, tmp_path):
    """The default backend (FileSystemStorage), rooted in this test's own directory."""
    root = tmp_path / "artifacts"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}},
    }
    return root


@pytest.fixture
def s3_store(settings, monkeypatch):
    """S3Storage configured exactly as config/settings.py does it with the bucket set, on moto."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "KEEL_ARTIFACTS_S3_BUCKET": BUCKET,
        "KEEL_ARTIFACTS_S3_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KEEL_ARTIFACTS_S3_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("KEEL_ARTIFACTS_S3_PREFIX", raising=False)
    configured = runpy.run_path(config.settings.__file__)["STORAGES"]["artifacts"]  # the settings block itself
    assert configured["BACKEND"] == "storages.backends.s3.S3Storage"
    assert configured["OPTIONS"]["file_overwrite"] is False
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        settings.STORAGES = {**settings.STORAGES, "artifacts": configured}
        yield client


def s3_keys(client) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def fs_keys(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# --- filesystem (the default) -------------------------------------------------------


def test_override_settings_switches_the_store(fs_store):
    assert storages["artifacts"].location == str(fs_store)


def test_fs_round_trip(fs_store):
    content = b"# Report\n\nbody\n"
    blob = store.put(content)
    assert blob == store.StoredBlob(
        path=f"sha256/{digest(content)[:2]}/{digest(content)}", sha256=digest(content), size=len(content)
    )
    assert blob.path == store.path_for(blob.sha256)
    assert store.get(blob.path, expected_sha256=blob.sha256) == content
    assert (fs_store / blob.path).read_bytes() == content


def test_fs_same_bytes_twice_is_one_object_and_no_second_write(fs_store, monkeypatch):
    first = store.put(b"same")
    saves = []
    storage = storages["artifacts"]
    real_save = storage.save
    monkeypatch.setattr(storage, "save", lambda *a, **k: saves.append(a) or real_save(*a, **k))
    second = store.put(b"same")
    assert second == first
    assert saves == []  # the key existed: nothing written
    assert fs_keys(fs_store) == [first.path]
    store.put(b"other")
    assert len(fs_keys(fs_store)) == 2


def test_fs_tampered_file_is_corrupt_and_never_overwritten(fs_store):
    blob = store.put(b"original")
    (fs_store / blob.path).write_bytes(b"tampered")
    with pytest.raises(store.CorruptArtifact):
        store.get(blob.path, expected_sha256=blob.sha256)
    with pytest.raises(store.CorruptArtifact):  # a put of the same bytes does not "repair" by rewriting
        store.put(b"original")
    assert (fs_store / blob.path).read_bytes() == b"tampered"
    (fs_store / blob.path).write_bytes(b"origina")  # truncated
    with pytest.raises(store.CorruptArtifact):
        store.get(blob.path, expected_sha256=blob.sha256)


def test_fs_missing_blob_is_an_error(fs_store):
    with pytest.raises(FileNotFoundError):
        store.get(store.path_for(digest(b"never stored")), expected_sha256=digest(b"never stored"))


def test_fs_put_verifies_what_was_written(fs_store, monkeypatch):
    storage = storages["artifacts"]
    real = storage._save

    def lossy_save(name, content):  # a backend that silently drops the last byte
        from django.core.files.base import ContentFile

        return real(name, ContentFile(content.read()[:-1]))

    monkeypatch.setattr(storage, "_save", lossy_save)
    with pytest.raises(store.CorruptArtifact):
        store.put(b"written, then read back")


def test_fs_lost_race_leaves_one_object(fs_store, monkeypatch):
    """Another writer stores the same bytes between our exists() and save(): no overwrite, no duplicate."""
    blob = store.put(b"raced")
    storage = storages["artifacts"]
    calls = []
    real_exists = storage.exists
    monkeypatch.setattr(
        storage, "exists", lambda name: bool(calls.append(name)) or (len(calls) > 1 and real_exists(name))
    )
    deleted = []
    real_delete = storage.delete
    monkeypatch.setattr(storage, "delete", lambda name: deleted.append(name) or real_delete(name))
    assert store.put(b"raced") == blob
    assert len(deleted) == 1 and deleted[0].startswith(blob.path + "_")  # the renamed copy, never the key
    assert fs_keys(fs_store) == [blob.path]


# --- S3 (django-storages S3Storage on moto) -----------------------------------------


def test_s3_round_trip_under_the_digest_key(s3_store):
    content = b"# Report\n\nbody on S3\n"
    blob = store.put(content)
    assert s3_keys(s3_store) == [f"sha256/{digest(content)[:2]}/{digest(content)}"] == [blob.path]
    assert s3_store.get_object(Bucket=BUCKET, Key=blob.path)["Body"].read() == content
    assert store.get(blob.path, expected_sha256=blob.sha256) == content


def test_s3_put_is_idempotent(s3_store, monkeypatch):
    first = store.put(b"same on s3")
    modified = s3_store.head_object(Bucket=BUCKET, Key=first.path)["LastModified"]
    storage = storages["artifacts"]
    saves = []
    real_save = storage.save
    monkeypatch.setattr(storage, "save", lambda *a, **k: saves.append(a) or real_save(*a, **k))
    assert store.put(b"same on s3") == first
    assert saves == []
    assert s3_keys(s3_store) == [first.path]
    assert s3_store.head_object(Bucket=BUCKET, Key=first.path)["LastModified"] == modified


def test_s3_overwritten_object_is_corrupt_and_never_rewritten(s3_store):
    blob = store.put(b"original on s3")
    s3_store.put_object(Bucket=BUCKET, Key=blob.path, Body=b"tampered")
    with pytest.raises(store.CorruptArtifact):
        store.get(blob.path, expected_sha256=blob.sha256)
    with pytest.raises(store.CorruptArtifact):
        store.put(b"original on s3")
    assert s3_store.get_object(Bucket=BUCKET, Key=blob.path)["Body"].read() == b"tampered"


def test_s3_lost_race_renames_and_tidies_up(s3_store, monkeypatch):
    """S3Storage with file_overwrite=False saves a colliding name under a new one; the store drops it."""
    blob = store.put(b"raced on s3")
    storage = storages["artifacts"]
    calls = []
    real_exists = storage.exists
    monkeypatch.setattr(
        storage, "exists", lambda name: bool(calls.append(name)) or (len(calls) > 1 and real_exists(name))
    )
    deleted = []
    real_delete = storage.delete
    monkeypatch.setattr(storage, "delete", lambda name: deleted.append(name) or real_delete(name))
    assert store.put(b"raced on s3") == blob
    assert len(deleted) == 1 and deleted[0].startswith(blob.path + "_")  # the renamed copy, never the key
    assert s3_keys(s3_store) == [blob.path]


def test_s3_lost_race_without_delete_permission_still_succeeds(s3_store, monkeypatch):
    blob = store.put(b"raced, no delete")
    storage = storages["artifacts"]
    calls = []
    real_exists = storage.exists
    monkeypatch.setattr(
        storage, "exists", lambda name: bool(calls.append(name)) or (len(calls) > 1 and real_exists(name))
    )
    monkeypatch.setattr(storage, "delete", lambda name: (_ for _ in ()).throw(PermissionError("no s3:DeleteObject")))
    assert store.put(b"raced, no delete") == blob
    keys = s3_keys(s3_store)
    assert blob.path in keys and len(keys) == 2  # an unreferenced copy, the original untouched
    assert store.get(blob.path, expected_sha256=blob.sha256) == b"raced, no delete"


# --- the version page ---------------------------------------------------------------


V1 = b"# Monthly report\n\nRevenue: 100\nV1 body\n"
V2 = b"# Monthly report\n\nRevenue: 100\nV2 body <script>alert(1)</script>\n"


def logged_in(person) -> Client:
    client = Client()
    client.force_login(person.user)  # the login form itself is tested in tests/integration/test_accounts.py
    return client


@pytest.fixture
def report(people, fs_store):
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="review",
        context={},
    )
    versions = []
    with transaction.atomic():
        for content, step in [(V1, "draft_report"), (V2, "revise_report")]:
            versions.append(
                artifact_version_create(
                    execution=execution,
                    kind="report",
                    title="August report",
                    blob=store.put(content),
                    content_type="text/markdown",
                    step=step,
                )
            )
    return execution, versions


def test_version_pages_render_content_facts_and_diff(people, report):
    execution, (v1, v2) = report
    ref = v1.artifact.ref
    client = logged_in(people["outsider"])

    page = client.get(f"/artifacts/{ref}/v1/").content.decode()
    for fact in [
        ref,
        "August report",
        f'href="/executions/{execution.ref}/"',
        v1.sha256,
        f"{v1.size} bytes",
        "text/markdown",
        "draft_report",
        "First version",
        f'href="/artifacts/{ref}/v2/"',
        f'href="/artifacts/{ref}/v1/raw"',
    ]:
        assert fact in page, fact
    assert "<h1>Monthly report</h1>" in page

    response = client.get(f"/artifacts/{ref}/v2/")
    assert response.status_code == 200
    page = response.content.decode()
    assert v2.sha256 in page and "revise_report" in page and f'href="/artifacts/{ref}/v1/"' in page
    assert "First version" not in page
    # The changed words marked within their lines (issue 39 item 15: word-level diff), escaped.
    assert '<span class="diff-del">-<del class="diff-word">V1</del> body</span>' in page
    assert (
        '<span class="diff-add">+<ins class="diff-word">V2</ins> body'
        '<ins class="diff-word"> &lt;script&gt;alert(1)&lt;/script&gt;</ins></span>'
    ) in page
    assert '<span class="diff-ctx"> Revenue: 100</span>' in page
    assert "<script>alert(1)" not in page  # raw HTML in the Markdown is escaped, in content and diff


def test_latest_redirects_to_newest_version(people, report):
    _, (v1, _) = report
    response = logged_in(people["outsider"]).get(f"/artifacts/{v1.artifact.ref}/")
    assert response.status_code == 302 and response.url == f"/artifacts/{v1.artifact.ref}/v2/"


def test_raw_serves_verified_bytes_with_etag(people, report):
    _, (v1, v2) = report
    client = logged_in(people["outsider"])
    response = client.get(f"/artifacts/{v2.artifact.ref}/v2/raw")
    assert response.status_code == 200
    assert response.content == V2
    assert response["Content-Type"] == "text/markdown"
    assert response["ETag"] == f'"{v2.sha256}"'
    assert response["Content-Security-Policy"] == "sandbox"
    again = client.get(f"/artifacts/{v2.artifact.ref}/v2/raw", HTTP_IF_NONE_MATCH=f'"{v2.sha256}"')
    assert again.status_code == 304 and again["ETag"] == f'"{v2.sha256}"'
    assert client.get(f"/artifacts/{v1.artifact.ref}/v1/raw").content == V1


def test_unknown_and_malformed_refs_are_404(people, report):
    _, (v1, _) = report
    ref, pk = v1.artifact.ref, v1.artifact.pk
    client = logged_in(people["outsider"])
    for url in [
        "/artifacts/REPORT_x/v1/",
        "/artifacts/REPORT_99999999999999999999/v1/",
        "/artifacts/REPORT_/v1/",
        "/artifacts/_001/v1/",
        "/artifacts/REPORT_²/v1/",
        f"/artifacts/ORDER_{pk:03d}/v1/",  # right pk, wrong kind
        f"/artifacts/REPORT_{pk + 4242}/v1/",
        f"/artifacts/{ref}/v3/",
        f"/artifacts/{ref}/v0/",
        f"/artifacts/{ref}/v99999999999999999999999/",
        f"/artifacts/{ref}/vx/",
        f"/artifacts/{ref}/v3/raw",
        "/artifacts/REPORT_x/v1/raw",
        "/artifacts/REPORT_x/",
    ]:
        assert client.get(url).status_code == 404, url
    assert client.get(f"/artifacts/{ref.lower()}/v1/").status_code == 200  # refs are case-insensitive, like RUN_


def test_login_required(people, report):
    _, (v1, _) = report
    client = Client()
    for url in [
        f"/artifacts/{v1.artifact.ref}/v1/",
        f"/artifacts/{v1.artifact.ref}/v1/raw",
        f"/artifacts/{v1.artifact.ref}/",
    ]:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url


def test_corrupt_blob_shows_an_error_not_a_500(people, report, fs_store):
    _, (v1, v2) = report
    (fs_store / v2.storage_path).write_bytes(b"# Monthly report\n\nRevenue: 1000000\n")
    client = logged_in(people["outsider"])
    response = client.get(f"/artifacts/{v2.artifact.ref}/v2/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "failed verification" in page and "1000000" not in page
    assert v2.sha256 in page
    raw = client.get(f"/artifacts/{v2.artifact.ref}/v2/raw")
    assert raw.status_code == 409 and b"1000000" not in raw.content and b"failed verification" in raw.content
    assert "ETag" not in raw
    assert client.get(f"/artifacts/{v1.artifact.ref}/v1/").status_code == 200  # V1 unaffected
