"""A workflow whose one effect calls a provider in this process that answers, or fails,
the way real SDKs and services do (the tests advance the steps here): ``PROVIDER`` holds
what it did by key, ``ANSWERS[mode]`` what it returns. Input ``mode`` picks the answer;
``honors_key`` and ``lookup`` what the effect declares."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import uuid

from pydantic import BaseModel

from executions.authoring import END, Effect, RetryPolicy, Workflow, WorkflowInput, register

PROVIDER: dict[str, list[str]] = {}  # key → each call's mode, in order (a repeat under a key is no new effect)


class Charge(BaseModel):  # an SDK's answer object
    id: str
    created: dt.datetime


@dataclasses.dataclass
class Refund:
    id: str
    amount: decimal.Decimal


class Opaque:  # an answer nothing can write as JSON
    def __repr__(self) -> str:
        return "<Opaque>"


AT = dt.datetime(2026, 12, 7, 12, 30, tzinfo=dt.UTC)
ANSWERS = {
    "sdk_objects": lambda: {
        "charge": Charge(id="ch_1", created=AT),
        "refund": Refund(id="re_1", amount=decimal.Decimal("12.50")),
        "at": AT,
        "day": AT.date(),
        "request": uuid.UUID(int=7),
        "tags": ("a", "b"),
        "raw": b"ok",
    },
    "nothing": lambda: None,
    "unstorable_text": lambda: {"name": "a\x00b", "bad\x00key": "\ud800", "score": float("nan")},
    "opaque": Opaque,
    "same_key": lambda: {"totals": {1: "by int", "1": "by text"}},  # it happened: kept, the last key winning
}


class AnsweringInput(WorkflowInput):
    mode: str = "nothing"
    honors_key: bool = True
    lookup: bool = False


def _call(args: dict, key: str):
    mode = args["mode"]
    PROVIDER.setdefault(key, []).append(mode)
    if mode == "die_once" and len(PROVIDER[key]) == 1:  # it charged, then the worker died in the call
        raise SystemExit("the worker died while the provider was charging")
    if mode == "die_once":
        return {"charged": key}  # asked again under the key: the same charge (it de-duplicates)
    if mode == "raise_once" and len(PROVIDER[key]) == 1:
        raise ConnectionResetError("connection reset by peer after the request was written")
    if mode in ("raise_once", "raise_always"):
        if mode == "raise_always":
            raise ConnectionResetError("connection reset by peer")
        return {"charged": key}
    return ANSWERS[mode]()


def _lookup(key: str, args: dict):
    raise RuntimeError("the provider's search API is down")


answering = register(
    Workflow(name="answering", version=1, title="An effect and its provider's answers", input=AnsweringInput)
)


@answering.effect(
    "charge", label="Charging", action="charge", then=END, retry=RetryPolicy(max_attempts=2, initial_backoff_seconds=0)
)
def charge(ctx) -> Effect:
    i = ctx.input
    long = "x" * 300 if i["mode"] == "long_key" else ""  # a key past what the ledger records
    args = {"mode": i["mode"], **({"at": AT} if i["mode"] == "args_not_json" else {})}  # a datetime: not JSON
    return Effect(
        key=f"{ctx.ref}:charge{long}",
        args=args,
        call=_call,
        honors_key=i["honors_key"],
        lookup=_lookup if i["lookup"] else None,
    )


# A compute step returning what Python code returns (``SHAPES[mode]``), and the step after
# it saying what it read: the same value in the slice that made it as after a crash.
SHAPES = {
    "python": lambda: {
        "at": AT,
        "amount": decimal.Decimal("12.50"),
        "pair": (1, 2),
        "ids": {7},
        1: "an int key",
        "charge": Charge(id="ch_2", created=AT),
    },
    "falsy": list,
    "nothing": lambda: None,
    "nan": lambda: {"score": float("nan")},
    "nul": lambda: {"name": "a\x00b"},
    "opaque": lambda: {"thing": Opaque()},
    "same_key": lambda: {"totals": {1: "by int", "1": "by text"}},  # one key once stored: neither dropped
}

shaped = register(Workflow(name="shaped", version=1, title="A step's output and the step after", input=AnsweringInput))


@shaped.step("make", label="Making")
def make(ctx):
    return SHAPES[ctx.input["mode"]]()


@shaped.step("use", label="Using what it made", then=END)
def use(ctx):
    return {"read": ctx.state["make"]}
