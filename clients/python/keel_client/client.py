"""``KeelClient`` (sync) and ``AsyncKeelClient`` (async): the Task API over HTTP, as one
bearer token. Both build the same requests (``_Calls``) and read the same answers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

try:  # the maintained httpx, as keel's environment carries it; classic httpx has the same API
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

from .errors import KeelError, Timeout, VersionMismatch, error_for
from .models import TERMINAL, Decision, Execution, ExecutionPage, PendingApproval, SignalAnswer

# The Task API version this client speaks: the server's ``info.version`` in /api/openapi.json.
API_VERSION = "1"
DEFAULT_TIMEOUT = 15.0


class _Call:
    """One request: method, path under ``/api``, JSON body, query."""

    def __init__(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> None:
        self.method, self.path, self.json = method, path, json
        self.params = {k: v for k, v in (params or {}).items() if v is not None}


def _statuses(status: str | Iterable[str] | None) -> frozenset[str]:
    if status is None:
        return frozenset()
    return frozenset([status] if isinstance(status, str) else status)


def _approval(approval: PendingApproval | Execution | dict[str, Any]) -> PendingApproval:
    if isinstance(approval, Execution):
        if approval.pending_approval is None:
            raise ValueError(f"{approval.id} has no pending approval (it is {approval.status})")
        return approval.pending_approval
    if isinstance(approval, dict):
        return PendingApproval.model_validate(approval)
    return approval


class _Calls:
    """The requests of each method and how their answers read (shared by both clients)."""

    def __init__(self, base_url: str, token: str, check_version: bool) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.check_version = check_version
        self.version_checked = False

    @staticmethod
    def read(response: httpx.Response, method: str) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            raise error_for(response.status_code, body, method=method, url=str(response.url))
        return body

    def compare_version(self, response: httpx.Response) -> None:
        server: str | None = None
        if response.status_code == 200:
            try:
                server = str(response.json()["info"]["version"])
            except (ValueError, KeyError, TypeError):
                server = None
        if server != API_VERSION:
            raise VersionMismatch(
                f"keel-client {API_VERSION!r} expects Task API version {API_VERSION!r}; the server at "
                f"{self.base_url} says {server!r} (info.version of /api/openapi.json, HTTP {response.status_code}). "
                "Install the client that matches the server (clients/python of its release).",
                expected=API_VERSION,
                server=server,
            )
        self.version_checked = True

    # --- the requests

    @staticmethod
    def start(workflow: str, input: dict[str, Any], idempotency_key: str | None, version: int | None) -> _Call:
        body: dict[str, Any] = {"workflow": workflow, "input": input}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if version is not None:
            body["version"] = version
        return _Call("POST", "/executions", json=body)

    @staticmethod
    def get(id: str) -> _Call:
        return _Call("GET", f"/executions/{id}")

    @staticmethod
    def page(status: str | None, workflow: str | None, cursor: str | None, **filters: Any) -> _Call:
        return _Call("GET", "/executions", params={"status": status, "workflow": workflow, "cursor": cursor, **filters})

    @staticmethod
    def decide(id: str, approval: PendingApproval, decision: str, comment: str, event_id: str | None) -> _Call:
        body = {
            "type": "approval.decision",
            "approval_id": approval.id,
            "decision": decision,
            "artifact_version": approval.artifact_version,
            "content_sha256": approval.content_sha256,
            "comment": comment,
            "event_id": event_id or uuid.uuid4().hex,
        }
        return _Call("POST", f"/executions/{id}/events", json=body)

    @staticmethod
    def signal(id: str, name: str, payload: Any, event_id: str | None) -> _Call:
        body = {"type": "signal", "name": name, "payload": payload, "event_id": event_id or uuid.uuid4().hex}
        return _Call("POST", f"/executions/{id}/events", json=body)

    @staticmethod
    def cancel(id: str, reason: str) -> _Call:
        return _Call("POST", f"/executions/{id}/cancel", json={"reason": reason})

    @staticmethod
    def timeout(id: str, wanted: frozenset[str], timeout: float, last: Execution | None) -> Timeout:
        status = last.status if last else None
        return Timeout(
            f"{id} did not reach {' or '.join(sorted(wanted)) or 'a terminal status'} in {timeout:g} s; "
            f"its last status: {status}",
            last_status=status,
            execution=last,
        )


class KeelClient:
    """The Task API, synchronously: ``KeelClient("https://keel.example", token)``.

    ``check_version``: before the first call, compare the server's Task API version
    (``info.version`` of ``/api/openapi.json``) with ``API_VERSION``; another → ``VersionMismatch``.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        check_version: bool = True,
        http: httpx.Client | None = None,
    ) -> None:
        self._calls = _Calls(base_url, token, check_version)
        self._http = http or httpx.Client(timeout=timeout)

    def __enter__(self) -> KeelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def server_version(self) -> str | None:
        """The server's Task API version (``info.version``), or None if it says none."""
        response = self._http.get(self._calls.base_url + "/api/openapi.json", headers=self._calls.headers)
        try:
            return str(response.json()["info"]["version"])
        except (ValueError, KeyError, TypeError):
            return None

    def check_version(self) -> None:
        self._calls.compare_version(
            self._http.get(self._calls.base_url + "/api/openapi.json", headers=self._calls.headers)
        )

    def _send(self, call: _Call) -> Any:
        if self._calls.check_version and not self._calls.version_checked:
            self.check_version()
        url = self._calls.base_url + "/api" + call.path
        response = self._http.request(call.method, url, json=call.json, params=call.params, headers=self._calls.headers)
        return self._calls.read(response, call.method)

    def start(
        self, workflow: str, input: dict[str, Any], idempotency_key: str | None = None, version: int | None = None
    ) -> Execution:
        return Execution.model_validate(self._send(self._calls.start(workflow, input, idempotency_key, version)))

    def get(self, id: str) -> Execution:
        return Execution.model_validate(self._send(self._calls.get(id)))

    def page(
        self, status: str | None = None, workflow: str | None = None, cursor: str | None = None, **filters: Any
    ) -> ExecutionPage:
        """One page (50, newest first); ``filters``: ``reason``, ``parent``, ``hold``, ``input`` (docs/api.md)."""
        return ExecutionPage.model_validate(self._send(self._calls.page(status, workflow, cursor, **filters)))

    def list(self, status: str | None = None, workflow: str | None = None, **filters: Any) -> Iterator[Execution]:
        """Every execution that matches, newest first, following the ``next`` cursor page by page."""
        cursor: str | None = None
        while True:
            page = self.page(status, workflow, cursor, **filters)
            yield from page.items
            if not page.next:
                return
            cursor = page.next

    def wait(
        self, id: str, status: str | Iterable[str] | None = None, timeout: float = 60.0, interval: float = 0.5
    ) -> Execution:
        """Poll until ``id`` is in one of ``status`` or terminal; ``Timeout`` (naming its last status) after ``timeout`` s."""
        wanted = _statuses(status)
        deadline = time.monotonic() + timeout
        last: Execution | None = None
        while True:
            last = self.get(id)
            if last.status in wanted or last.status in TERMINAL:
                return last
            if time.monotonic() >= deadline:
                raise self._calls.timeout(id, wanted, timeout, last)
            time.sleep(interval)

    def decide(
        self,
        id: str,
        approval: PendingApproval | Execution | dict[str, Any],
        decision: str,
        comment: str = "",
        event_id: str | None = None,
    ) -> Decision:
        """Decide the pending ``approval`` (its exact version and hash are sent); reuse ``event_id`` on retries."""
        return Decision.model_validate(
            self._send(self._calls.decide(id, _approval(approval), decision, comment, event_id))
        )

    def signal(self, id: str, name: str, payload: Any = None, event_id: str | None = None) -> SignalAnswer:
        return SignalAnswer.model_validate(self._send(self._calls.signal(id, name, payload, event_id)))

    def cancel(self, id: str, reason: str) -> Execution:
        return Execution.model_validate(self._send(self._calls.cancel(id, reason)))


class AsyncKeelClient:
    """The Task API with ``async``/``await``: the same methods as ``KeelClient``; ``list`` is an async iterator."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        check_version: bool = True,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._calls = _Calls(base_url, token, check_version)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._version_lock = asyncio.Lock()

    async def __aenter__(self) -> AsyncKeelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def check_version(self) -> None:
        self._calls.compare_version(
            await self._http.get(self._calls.base_url + "/api/openapi.json", headers=self._calls.headers)
        )

    async def _send(self, call: _Call) -> Any:
        if self._calls.check_version and not self._calls.version_checked:
            async with self._version_lock:
                if not self._calls.version_checked:
                    await self.check_version()
        url = self._calls.base_url + "/api" + call.path
        response = await self._http.request(
            call.method, url, json=call.json, params=call.params, headers=self._calls.headers
        )
        return self._calls.read(response, call.method)

    async def start(
        self, workflow: str, input: dict[str, Any], idempotency_key: str | None = None, version: int | None = None
    ) -> Execution:
        return Execution.model_validate(await self._send(self._calls.start(workflow, input, idempotency_key, version)))

    async def get(self, id: str) -> Execution:
        return Execution.model_validate(await self._send(self._calls.get(id)))

    async def page(
        self, status: str | None = None, workflow: str | None = None, cursor: str | None = None, **filters: Any
    ) -> ExecutionPage:
        return ExecutionPage.model_validate(await self._send(self._calls.page(status, workflow, cursor, **filters)))

    async def list(
        self, status: str | None = None, workflow: str | None = None, **filters: Any
    ) -> AsyncIterator[Execution]:
        cursor: str | None = None
        while True:
            page = await self.page(status, workflow, cursor, **filters)
            for item in page.items:
                yield item
            if not page.next:
                return
            cursor = page.next

    async def wait(
        self, id: str, status: str | Iterable[str] | None = None, timeout: float = 60.0, interval: float = 0.5
    ) -> Execution:
        wanted = _statuses(status)
        deadline = time.monotonic() + timeout
        while True:
            last = await self.get(id)
            if last.status in wanted or last.status in TERMINAL:
                return last
            if time.monotonic() >= deadline:
                raise self._calls.timeout(id, wanted, timeout, last)
            await asyncio.sleep(interval)

    async def decide(
        self,
        id: str,
        approval: PendingApproval | Execution | dict[str, Any],
        decision: str,
        comment: str = "",
        event_id: str | None = None,
    ) -> Decision:
        call = self._calls.decide(id, _approval(approval), decision, comment, event_id)
        return Decision.model_validate(await self._send(call))

    async def signal(self, id: str, name: str, payload: Any = None, event_id: str | None = None) -> SignalAnswer:
        return SignalAnswer.model_validate(await self._send(self._calls.signal(id, name, payload, event_id)))

    async def cancel(self, id: str, reason: str) -> Execution:
        return Execution.model_validate(await self._send(self._calls.cancel(id, reason)))


__all__ = ["API_VERSION", "AsyncKeelClient", "KeelClient", "KeelError"]
