"""Screens for artifact versions: one version with its diff, and its raw bytes."""

from __future__ import annotations

import logging
import mimetypes

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import redirect, render
from django.utils.http import parse_etags
from django.views.decorators.http import require_GET

from . import selectors
from .models import Artifact, ArtifactVersion
from .rendering import render_artifact, unavailable_message, version_diff
from .services import artifact_version_content

log = logging.getLogger(__name__)


def _artifact_or_404(ref: str) -> Artifact:
    artifact = selectors.artifact_for(artifact_ref=ref)
    if artifact is None:
        raise Http404(f"no artifact {ref}")
    return artifact


def _version_or_404(ref: str, number: int) -> ArtifactVersion:
    version = selectors.version_for(artifact_ref=ref, number=number)
    if version is None:
        raise Http404(f"no version {number} of {ref}")
    return version


@login_required
@require_GET
def artifact_latest(request: HttpRequest, artifact_ref: str) -> HttpResponse:
    artifact = _artifact_or_404(artifact_ref)
    latest = artifact.versions.order_by("-number").first()
    if latest is None:
        raise Http404(f"{artifact_ref} has no versions")
    return redirect("artifacts:version", artifact.ref, latest.number)


@login_required
@require_GET
def version_detail(request: HttpRequest, artifact_ref: str, number: int) -> HttpResponse:
    version = _version_or_404(artifact_ref, number)
    diff = version_diff(version)
    return render(
        request,
        "artifacts/version.html",
        {
            "artifact": version.artifact,
            "execution": version.artifact.execution,
            "version": version,
            "versions": list(version.artifact.versions.only("number", "created_at", "sha256", "artifact_id")),
            "previous": diff.previous,
            "content_html": render_artifact(version),
            "diff": diff,
        },
    )


@login_required
@require_GET
def version_raw(request: HttpRequest, artifact_ref: str, number: int) -> HttpResponse:
    """The version's bytes, verified against its sha256, which is also the ETag."""
    version = _version_or_404(artifact_ref, number)
    etag = f'"{version.sha256}"'
    if etag in parse_etags(request.headers.get("If-None-Match", "")):
        response = HttpResponseNotModified()
        response["ETag"] = etag
        return response
    try:
        content = artifact_version_content(version)
    except Exception as exc:  # never serve bytes that fail verification
        log.error("artifact %s V%s unavailable: %s", version.artifact.ref, version.number, exc)
        # 409: the stored bytes conflict with the recorded digest; never serve them.
        return HttpResponse(unavailable_message(exc), status=409, content_type="text/plain; charset=utf-8")
    response = HttpResponse(content, content_type=version.content_type)
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"  # revalidate by ETag: a 304 costs no read
    # Model-produced bytes: never let the browser run them as a page of ours.
    response["Content-Security-Policy"] = "sandbox"
    ext = mimetypes.guess_extension(version.content_type.split(";")[0].strip()) or ""
    response["Content-Disposition"] = f'inline; filename="{version.artifact.ref}-v{version.number}{ext}"'
    return response
