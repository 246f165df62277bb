"""The Task API, assembled: triage's endpoints (triage.api), the runtime's
(executions.api), approvals' (approvals.api) and the measures (metrics.api) under one
schema at /api/, with one error contract. Triage's router comes first: its
``/executions/summary`` and ``/executions/bulk`` must match before the runtime's
``/executions/{execution_id}``.

401 without credentials, 403 without authority, 409 when the state doesn't allow it,
422 naming the field for malformed input (nothing is written in that case), 429 with
``Retry-After`` past a burst of refused decisions. docs/api.md has the whole contract.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from apikit.auth import BearerToken, BrowserSession
from approvals.api import router as approvals_router
from executions import runtime
from executions.api import router as executions_router
from executions.errors import InvalidInput, RateLimited, ServiceError
from fleet.api import router as fleet_router
from metrics.api import router as metrics_router
from notifications.api import router as notifications_router
from retention.api import router as retention_router
from schedules.api import router as schedules_router
from triage.api import router as triage_router


class BodyNotAnObject(ValueError):
    """A JSON body that is not an object (``[]``, ``"x"``, ``3``)."""


class ObjectBodies(Parser):
    """Every body of this API is a JSON object: anything else is a 422, never read as ``{}``."""

    def parse_body(self, request: HttpRequest):
        data = super().parse_body(request)
        if not isinstance(data, dict):
            raise BodyNotAnObject(f"the request body must be a JSON object, not {type(data).__name__}")
        return data


api = NinjaAPI(
    parser=ObjectBodies(),
    title="keel Task API",
    version="1",
    description="Start, follow, decide, signal and cancel durable agent executions.",
    auth=[BearerToken(), BrowserSession()],
    urls_namespace="api",
    # No deep links: Swagger UI puts each one, a link, inside the operation's toggle button
    # (a control nested in a control, which screen readers can't reach; axe's nested-interactive).
    docs=Swagger(settings={"deepLinking": False}),
)
api.add_router("", triage_router)
api.add_router("", executions_router)
api.add_router("", approvals_router)
api.add_router("", metrics_router)
api.add_router("", notifications_router)
api.add_router("", schedules_router)
api.add_router("", retention_router)
api.add_router("", fleet_router)


@api.exception_handler(ServiceError)
def _service_error(request: HttpRequest, exc: ServiceError):
    if isinstance(exc, InvalidInput):
        detail = [
            {"loc": ["body", *field.split(".")], "msg": reason, "type": "value_error"} for field, reason in exc.errors
        ]
        return api.create_response(request, {"detail": detail}, status=422)
    response = api.create_response(request, {"detail": exc.message, **exc.detail}, status=exc.status_code)
    if isinstance(exc, RateLimited):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError):
    """422 with ``loc`` naming the field from the body's root (``["body", "receipt",
    "order_id"]``), the same shape a service's InvalidInput answers: django-ninja's
    name for the body parameter (``payload``) is ours, not the client's, and so is the
    name of the variant of a tagged union (``DecisionEventIn``)."""
    detail = []
    for error in exc.errors:
        loc = list(error.get("loc", []))
        if loc[:2] == ["body", "payload"]:
            loc = ["body", *loc[2:]]
            if len(loc) > 1 and loc[1] in _EVENT_TAGS:
                loc = ["body", *loc[2:]]
        if error.get("type") in ("union_tag_invalid", "union_tag_not_found"):
            loc = [*loc, "type"]  # the tag itself is what's wrong
        detail.append({**error, "loc": loc})
    return api.create_response(request, {"detail": detail}, status=422)


# The tags pydantic puts in ``loc`` for a tagged union's variant: the events endpoint's types.
_EVENT_TAGS = {event_type.name for event_type in runtime.event_types()}


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError):
    if exc.status_code == 400 and str(exc).startswith("Cannot parse request body"):
        # Malformed input is a 422 everywhere in this API, an unparseable body included.
        if isinstance(exc.__cause__, BodyNotAnObject):
            detail = [{"loc": ["body"], "msg": str(exc.__cause__), "type": "model_type"}]
        else:
            detail = [{"loc": ["body"], "msg": "the request body is not valid JSON", "type": "json_invalid"}]
        return api.create_response(request, {"detail": detail}, status=422)
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required: a session or a Bearer token"}, status=401)
