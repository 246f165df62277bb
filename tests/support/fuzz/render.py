"""A fuzz case as a workflow module: Python source written with the authoring surface
alone (``executions.authoring`` and ``approvals.gate.Approval``), the way an author
would write it. The fuzzer's workers import exactly this text (``loader``), and a
failure prints exactly this text: a developer saves it, names it in
``KEEL_WORKFLOW_MODULES`` and runs it.

``render(case, name)`` → the module: the main workflow ``name`` and, when a children
step starts some, ``<name>_child``. Every step's output, effect key and arguments are
a function of the execution alone (its ref, its input, its artifacts' versions), so a
step run again after a crash asks for exactly the same effect.
"""

from __future__ import annotations

import textwrap

from .specs import ENDPOINTS, Act, Agent, Approve, Case, Children, Compute, Flow, Wait, describe, steps_of

# Effects retry briefly (a run is seconds long): the provider's transient failures, the
# reconciliation of an unknown outcome.
RETRY = "RetryPolicy(max_attempts=3, initial_backoff_seconds=0.5, max_backoff_seconds=2)"

# Per provider: the helpers a module needs (call, lookup), their names, and the effect's
# arguments as an expression of ``key`` (and ``doc``, the approved artifact, when guarded).
PROVIDERS = {
    "notify": (
        """
        def _notify(args: dict, key: str) -> dict:
            return request_json("POST", _sandbox("/notify"), body=args, key=key)


        def _notified(key: str, args: dict) -> dict | None:
            found = request_json("GET", _sandbox(f"/notifications?key={key}"))["notifications"]
            return found[0] if found else None
        """,
        "_notify",
        "_notified",
        '{"channel": "email", "to": ["fuzz@example.com"], "subject": key, "body": "%(what)s"}',
    ),
    "orders": (
        """
        def _order(args: dict, key: str) -> dict:
            return request_json("POST", _sandbox("/orders"), body=args, key=key)


        def _ordered(key: str, args: dict) -> dict | None:
            found = request_json("GET", _sandbox(f"/orders?reference={args['reference']}"))["orders"]
            return found[0] if found else None
        """,
        "_order",
        "_ordered",
        '{"reference": key, "sku": "SKU-FUZZ-1", "quantity": 1, "note": "%(what)s"}',
    ),
    "publish": (
        """
        def _publish(args: dict, key: str) -> dict:
            return request_json("POST", _sandbox("/reports/publish"), body=args, key=key)


        def _published(key: str, args: dict) -> dict | None:
            found = request_json("GET", _sandbox(f"/reports/publications?key={key}"))["publications"]
            return found[0] if found else None
        """,
        "_publish",
        "_published",
        '{"artifact_id": %(artifact)s, "version": %(version)s, "sha256": %(sha)s, "title": "%(what)s"}',
    ),
}


def child_name(name: str) -> str:
    return f"{name}_child"


def render(case: Case, name: str) -> str:
    """The workflow module of ``case``, its main workflow named ``name``."""
    flows = [("child", child_name(name), case.child, "c")] if case.has_children else []
    flows.append(("flow", name, case.main, "s"))
    blocks = [b for _, _, flow, _ in flows for b in flow.blocks]
    acts = [b for b in blocks if isinstance(b, Act)] + [a for b in blocks if isinstance(b, Approve) for a in b.effects]
    agents = [b for b in blocks if isinstance(b, Agent)]
    providers = sorted({a.provider for a in [*acts, *agents]})
    surface = {"Workflow", "WorkflowInput", "register"}
    if acts or agents:
        surface |= {"Effect", "RetryPolicy", "request_json"}
    if agents:
        surface |= {"Decision", "ModelRequest", "Tool", "ToolArgs"}
    if case.has_children:
        surface.add("Child")
    if any(isinstance(b, Act) and b.passes > 1 for b in blocks):
        surface.add("END")
    parts: list[str] = []
    imports = ["import os", ""] if acts or agents else []
    if any(isinstance(b, Approve | Agent) for b in blocks):
        imports.append("from approvals.gate import Approval")
    names = sorted(surface, key=_isort)
    line = f"from executions.authoring import {', '.join(names)}"
    imports.append(
        line
        if len(line) <= 120
        else "from executions.authoring import (\n" + "".join(f"    {n},\n" for n in names) + ")"
    )
    parts.append("\n".join(imports))
    parts.append('class Input(WorkflowInput):\n    tag: str = "e1"')
    if acts or agents:
        parts.append(
            "def _sandbox(path: str) -> str:\n"
            '    return os.environ["SANDBOX_URL"].rstrip("/") + path\n\n\n' + f"RETRY = {RETRY}"
        )
    parts += [textwrap.dedent(PROVIDERS[p][0]).strip() for p in providers]
    for var, wf_name, flow, prefix in flows:
        deadline = f", deadline_seconds={flow.deadline:g}" if flow.deadline is not None else ""
        parts.append(
            f"{var} = register(\n"
            f'    Workflow(name="{wf_name}", version=1, title="Fuzz case {wf_name}", input=Input{deadline})\n'
            ")"
        )
        parts += _steps(var, flow, prefix, child_name(name))
    return _header(case, name) + "\n\n" + "\n\n\n".join(parts) + "\n"


def _isort(name: str) -> tuple[int, str]:
    """isort's order of imported names: constants, classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def _header(case: Case, name: str) -> str:
    lines = [
        wrapped for line in describe(case).splitlines() for wrapped in textwrap.wrap(line, 92, subsequent_indent="  ")
    ]
    return (
        f'"""Workflow {name}: a case generated by keel\'s workflow fuzzer (S60, tests/support/fuzz).\n\n'
        + "\n".join(lines)
        + "\n\n"
        + f"To run it: save this file as myflows/{name}.py (beside an empty myflows/__init__.py, on\n"
        + f"PYTHONPATH), set KEEL_WORKFLOW_MODULES=myflows.{name} and start {name} with\n"
        + '{"tag": "e1"} (make run, then the dashboard or `keel start`); its effects go to the\n'
        + "sandbox at SANDBOX_URL. The schedule above is what the fuzzer played against it.\n"
        + '"""'
    )


def _steps(var: str, flow: Flow, prefix: str, child: str) -> list[str]:
    out: list[str] = []
    names = [s.name for s in steps_of(flow, prefix)]
    after = dict(zip(names, [*names[1:], ""], strict=True))  # each step → the next declared ("": the end)
    for i, block in enumerate(flow.blocks, start=1):
        base = f"{prefix}{i}"
        match block:
            case Compute(artifact=artifact):
                out.append(_compute(var, f"{base}_compute", f"{base}_notes" if artifact else ""))
            case Act(passes=passes):
                name = f"{base}_{block.provider}"
                out.append(_effect(var, name, block, action=name))
                if passes > 1:
                    out.append(_loop(var, f"{base}_again", back_to=name, passes=passes, on=after[f"{base}_again"]))
            case Approve(effects=effects):
                doc = f"{base}_doc"
                out.append(_compute(var, f"{base}_draft", doc, draft=True))
                out.append(
                    f'{var}.gate("{base}_review", label="Approving draft {base}", '
                    f'spec=Approval(artifact="{doc}", action="{base}_apply"))'
                )
                for j, act in enumerate(effects, start=1):
                    out.append(
                        _effect(var, f"{base}_apply{j}", act, action=f"{base}_apply", gate=f"{base}_review", doc=doc)
                    )
            case Agent():
                out += _agent(var, f"{base}_agent", base, block)
            case Wait(signal=signal, timeout=timeout):
                name = f"{base}_wait"
                if signal:
                    out.append(
                        f'{var}.wait("{name}", label="Waiting for the signal go_{base}", signal="go_{base}", '
                        f"timeout={timeout:g})"
                    )
                else:
                    out.append(
                        f'{var}.wait("{name}", label="A timer of {timeout:g} s", signal="", timeout={timeout:g})'
                    )
            case Children(count=count):
                name = f"{base}_kids"
                body = (
                    "    return []"
                    if count == 0
                    else f'    return [Child(workflow="{child}", input={{"tag": f"{{ctx.ref}}-k{{n}}"}}, key=f"k{{n}}") '
                    f"for n in range({1}, {count + 1})]"
                )
                out.append(
                    f'@{var}.children("{name}", label="Starting {count} child execution(s)")\ndef {name}(ctx):\n{body}'
                )
    return out


def _loop(var: str, name: str, *, back_to: str, passes: int, on: str) -> str:
    """A branch leading back to ``back_to`` until it ran ``passes`` times, then on."""
    following = f'"{on}"' if on else "END"
    return (
        f'@{var}.branch("{name}", label="Again?", to=["{back_to}", {following}])\n'
        f"def {name}(ctx):\n"
        f'    return "{back_to}" if len(ctx.visits("{back_to}")) < {passes} else {following}'
    )


def _compute(var: str, name: str, artifact: str, *, draft: bool = False) -> str:
    if not artifact:
        return (
            f'@{var}.step("{name}", label="Computing {name}")\n'
            f"def {name}(ctx):\n"
            f'    return {{"step": "{name}", "tag": ctx.input["tag"]}}'
        )
    kind, title = ("draft", "A draft to approve") if draft else ("note", "A note")
    return (
        f'@{var}.step("{name}", label="{"Drafting" if draft else "Computing"} {name}")\n'
        f"def {name}(ctx):\n"
        f"    text = f\"{name} of {{ctx.ref}}, version {{ctx.next_version('{artifact}')}}\\n\"\n"
        f'    ctx.save_artifact("{artifact}", kind="{kind}", title="{title}", content=text, content_type="text/plain")\n'
        f'    return {{"characters": len(text)}}'
    )


def _effect(var: str, name: str, act: Act, *, action: str, gate: str = "", doc: str = "") -> str:
    _, call, lookup, args = PROVIDERS[act.provider]
    lines = [f"def {name}(ctx):"]
    if doc:
        lines += [f'    doc = ctx.artifact("{doc}")', f"    key = f\"{{ctx.ref}}:{name}:v{{doc['version']}}\""]
        values = {"artifact": 'doc["artifact_id"]', "version": 'doc["version"]', "sha": 'doc["sha256"]'}
    else:
        visit = ":v{ctx.visit}" if act.passes > 1 else ""  # in a loop: one effect per visit
        lines.append(f'    key = f"{{ctx.ref}}:{name}{visit}"')
        values = {"artifact": 'f"{ctx.ref}-' + name + '"', "version": "1", "sha": '""'}
    lines.append(f"    args = {args % {**values, 'what': name}}")
    honors = "" if act.honors_key else ", honors_key=False"
    lines.append(f"    return Effect(key=key, args=args, call={call}, lookup={lookup}{honors})")
    guard = f', guarded_by="{gate}"' if gate else ""
    decorator = (
        f'@{var}.effect("{name}", label="Calling {ENDPOINTS[act.provider]}", action="{action}"{guard}, retry=RETRY)'
    )
    return decorator + "\n" + "\n".join(lines)


# What an agent's tool sends: its arguments only, never the key (the approval binds the
# arguments' hash; the runtime keys the effect by that approval).
AGENT_ARGS = {
    "notify": '{"channel": "email", "to": ["fuzz@example.com"], "subject": "%(tool)s " + args["item"], "body": "%(tool)s"}',
    "publish": '{"artifact_id": "%(tool)s-" + args["item"], "version": 1, "sha256": "", "title": "%(tool)s"}',
}


def _agent(var: str, name: str, base: str, agent: Agent) -> list[str]:
    tool, cls = f"{base}_do", f"{base.upper()}Args"
    _, call, lookup, _ = PROVIDERS[agent.provider]
    calls = 1 + agent.repeats
    return [
        f"class {cls}(ToolArgs):\n    item: str",
        f"def {tool}(args: dict, progress, key: str) -> Effect:\n"
        f"    body = {AGENT_ARGS[agent.provider] % {'tool': tool}}\n"
        f"    return Effect(key=key, args=body, call={call}, lookup={lookup})",
        f"def {base}_model(request: ModelRequest) -> Decision:\n"
        f'    """The offline model: call {tool}, then propose the very same call {agent.repeats} more time(s)."""\n'
        f'    results = [m for m in request.messages if m["role"] == "tool" and m["name"] == "{tool}" and not m["is_error"]]\n'
        f"    if len(results) < {calls}:\n"
        f'        return Decision(text="Calling {tool}.", tool="{tool}", args={{"item": "one"}})\n'
        f'    return Decision(text="Done.")',
        f"{var}.agent(\n"
        f'    "{name}",\n'
        f'    label="An agent calling {tool}",\n'
        f'    prompt_id="fuzz-{base}",\n'
        f'    prompt_version="fuzz-{base}-v1",\n'
        f'    instruction=lambda ctx: "Call {tool} for item one.",\n'
        f"    tools=[\n"
        f"        Tool(\n"
        f'            name="{tool}",\n'
        f'            description="Does an item (a manager approves its arguments first).",\n'
        f"            args={cls},\n"
        f"            run={tool},\n"
        f"            effect=True,\n"
        f'            approval=Approval(artifact="{base}_call", action="{tool}"),\n'
        f"        )\n"
        f"    ],\n"
        f"    offline_policy={base}_model,\n"
        f")",
    ]
