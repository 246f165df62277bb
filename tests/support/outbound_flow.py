"""A workflow only the outbound-answer tests register (listed in KEEL_WORKFLOW_MODULES):
``outbound_probe`` v1 POSTs one effect to the URL of its input — a local receiver that
answers a redirect or an answer too large to store — with the authoring surface alone.
Its lookup asks the same receiver (which knows nothing: 404); the provider does not
honour keys, so an unknown outcome is never re-sent."""

from executions.authoring import Effect, RetryPolicy, Workflow, WorkflowInput, register, request_json


class ProbeInput(WorkflowInput):
    url: str


flow = register(Workflow(name="outbound_probe", version=1, title="Send one effect to a URL", input=ProbeInput))


def _find(key: str, args: dict) -> dict | None:
    return request_json("GET", f"{args['url']}?key={key}").get("found")


@flow.effect("send", label="Sending the effect", action="probe_send", retry=RetryPolicy(max_attempts=1, timeout=5))
def send(ctx):
    return Effect(
        key=f"{ctx.ref}:send",
        args={"url": ctx.input["url"], "hello": "world"},
        call=lambda args, key: request_json("POST", args["url"], body={"hello": args["hello"]}, key=key),
        lookup=_find,
        honors_key=False,
    )
