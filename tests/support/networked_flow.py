"""A workflow only the replay tests register (listed in KEEL_WORKFLOW_MODULES):
``phone_home`` v1, whose compute step calls the URL of its input past
``executions.authoring.http`` — with urllib, http.client (by the name ``localhost``, so a
name lookup too), requests, httpx (whichever is installed) and a raw socket — then waits
for a signal that never comes, so the execution stays live for ``keel replay``."""

import http.client
import socket
import urllib.request
from urllib.parse import urlsplit

import requests

from executions.authoring import Workflow, WorkflowInput, register


class HomeInput(WorkflowInput):
    url: str


flow = register(Workflow(name="phone_home", version=1, title="Call home from a compute step", input=HomeInput))


def _raw(host: str, port: int, path: str) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect((host, port))
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        return s.recv(64).decode(errors="replace").split("\r\n")[0]


def _libraries(url: str) -> dict:
    parts = urlsplit(url)
    calls = {
        "urllib": lambda: urllib.request.urlopen(url + "?by=urllib", timeout=5).status,
        "http.client": lambda: _http_client(parts.port, parts.path + "?by=http.client"),
        "requests": lambda: requests.get(url, params={"by": "requests"}, timeout=5).status_code,
        "socket": lambda: _raw(parts.hostname, parts.port, parts.path + "?by=socket"),
    }
    try:
        import httpx2 as httpx  # the openai SDK's HTTP client, whichever name it goes by
    except ImportError:
        try:
            import httpx
        except ImportError:
            httpx = None
    if httpx is not None:
        calls["httpx"] = lambda: httpx.get(url, params={"by": "httpx"}, timeout=5).status_code
    return calls


def _http_client(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("localhost", port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


@flow.step("fetch", label="Calling home")
def fetch(ctx):
    answers = {}
    for library, call in _libraries(ctx.input["url"]).items():
        try:
            answers[library] = str(call())
        except Exception as exc:  # each library's failure is the answer
            answers[library] = f"{type(exc).__name__}: {exc}"
    return {"answers": answers}


flow.wait("hold", label="Waiting for nothing", signal="never", timeout=3600)
