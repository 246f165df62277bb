"""What model calls cost, and a budget in USD that can't be overrun.

Prices: ``RUNTIME_MODEL_PRICES`` (USD per million input and output tokens, by model),
looked up by the model requested, then by the model the provider says it used. A call
without a price costs ``None`` (null), never a guess.

A budget (``Execution.budget_usd``) covers the execution and every descendant
(children started through ``Execution.parent``, their children…): a child's calls count
against its parent's budget, and against its own when it has one. Before a call is
asked, ``reserve`` takes its *worst case* — the request's tokens (``request_tokens``: one
per two UTF-8 bytes of its canonical JSON, an upper bound in every script) plus its
``max_tokens`` (sent, so the provider answers no more), at the requested model's
price — against every budget above it, in one fenced transaction serialised per
budget holder:

    spent (the journal's recorded costs) + reserved (reservations the journal hasn't
    settled) + this worst case  <=  budget_usd

or it raises ``BudgetExceeded`` (needs_attention ``budget_exceeded``) and no call is
made. The reservation (``CostReservation``, one per call key and revision) is settled
by the journal: once the ModelCall row of that key and revision exists, its recorded
``cost`` counts instead of the reservation. A call replayed from the journal is never
reserved or charged again; a call in flight when its worker died stays reserved until
it is asked again under the same key (the reservation is reused, not added).

When the requested model has no price, the worst case is unknown: a budget is refused at
the start (``budget_usd``: it could stop nothing), and a call's recorded cost is null.
A provider reporting usage past the call's reservation (``overrun``) is recorded as it
reported it (capped at what the column holds, ``COST_MAX``) and the execution stops for a
person: a budget must never be passed silently (docs/agents.md, "Budgets").
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Sum

import dblocks

from ..authoring.modelcalls import canonical_json
from ..errors import NeedsAttention
from ..models import CostReservation, Execution, ModelCall
from ..reasons import StuckReason
from .leases import Lease, fence

MICRO = Decimal("0.000001")
MILLION = Decimal(1_000_000)
MAX_DEPTH = 50  # a parent chain longer than this is a bug, not a tree


class BudgetExceeded(NeedsAttention):
    """A spent budget: model calls, tokens, cost or time (an agent step's, or the USD budget)."""

    code = StuckReason.BUDGET_EXCEEDED


@dataclass(frozen=True)
class Price:
    input_per_mtok: Decimal
    output_per_mtok: Decimal

    def of(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (Decimal(input_tokens) * self.input_per_mtok + Decimal(output_tokens) * self.output_per_mtok) / MILLION


def price_for(model: str, returned: str = "") -> Price | None:
    """The price of ``model`` (requested), else of ``returned`` (what the provider named), else None."""
    prices = settings.RUNTIME_MODEL_PRICES
    for name in (model, returned):
        price = prices.get(name) if name else None
        if price is not None:
            return Price(Decimal(str(price["input_per_mtok"])), Decimal(str(price["output_per_mtok"])))
    return None


def cost_usd(*, model: str, returned: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    """What one answered call cost, from the usage its provider reported (None: no price)."""
    price = price_for(model, returned)
    if price is None:
        return None
    return price.of(input_tokens, output_tokens).quantize(MICRO, rounding=ROUND_HALF_UP)


def request_tokens(canonical: dict) -> int:
    """An upper bound of what a provider counts for a request, in any language: one token
    per two bytes of its canonical JSON in UTF-8. A tokenizer gives about one token per
    four bytes of English and one or two per CJK character (three bytes), so the bound
    holds for every script; a provider also counts the framing of its messages and tool
    schemas, which the JSON's punctuation covers. (A provider's own tokenizer would be
    tighter; tiktoken needs its BPE files from the network, which a worker may not reach.)"""
    return (len(canonical_json(canonical)) + 1) // 2


def worst_case(*, model: str, canonical: dict, max_tokens: int) -> Decimal | None:
    """The most the call can cost: every token of its request (``request_tokens``) plus
    ``max_tokens`` out — the provider is asked for no more — rounded up (None: the
    requested model has no price)."""
    price = price_for(model)
    if price is None:
        return None
    return price.of(request_tokens(canonical), max_tokens).quantize(MICRO, rounding=ROUND_CEILING)


# What the journal's ``cost`` column holds (DecimalField(12, 6)).
COST_MAX = Decimal("999999.999999")


def overrun(reported: Decimal | None, reserved: Decimal | None) -> bool:
    """Did the provider report usage past what the call reserved (its worst case)? A
    budget then can't be trusted to hold: the call is recorded as reported and the
    execution stops for a person (``journal``)."""
    return reported is not None and reserved is not None and reported > reserved


def holders(execution_id: int) -> list[tuple[int, Decimal]]:
    """(id, budget_usd) of the execution and each ancestor that has a budget, nearest first."""
    found, current, depth = [], execution_id, 0
    while current is not None and depth < MAX_DEPTH:
        budget, parent = Execution.objects.filter(pk=current).values_list("budget_usd", "parent_id").get()
        if budget is not None:
            found.append((current, budget))
        current, depth = parent, depth + 1
    return found


def tree_ids(root_id: int) -> list[int]:
    """The execution and all its descendants (one query per generation)."""
    ids, generation = [root_id], [root_id]
    for _ in range(MAX_DEPTH):
        generation = list(Execution.objects.filter(parent_id__in=generation).values_list("pk", flat=True))
        if not generation:
            break
        ids += generation
    return ids


@dataclass(frozen=True)
class Spend:
    spent_usd: Decimal  # recorded in the journal
    reserved_usd: Decimal  # reserved for calls the journal hasn't recorded (in flight, or lost with a worker)
    input_tokens: int
    output_tokens: int
    priced: bool  # at least one call had a price


def spend_of(ids: list[int]) -> Spend:
    """What the executions ``ids`` spent and have reserved, together."""
    calls = ModelCall.objects.filter(execution_id__in=ids).aggregate(
        usd=Sum("cost"), i=Sum("input_tokens"), o=Sum("output_tokens")
    )
    settled = ModelCall.objects.filter(key=OuterRef("key"), revision=OuterRef("revision"))
    reserved = (
        CostReservation.objects.filter(execution_id__in=ids)
        .exclude(Exists(settled))
        .aggregate(usd=Sum("amount_usd"))["usd"]
    )
    return Spend(
        spent_usd=calls["usd"] or Decimal(0),
        reserved_usd=reserved or Decimal(0),
        input_tokens=calls["i"] or 0,
        output_tokens=calls["o"] or 0,
        priced=calls["usd"] is not None,
    )


def costs_for(ids: list[int]) -> dict[int, Spend]:
    """For each of ``ids``: what it and its descendants spent (the journal only; no
    reservations), in a fixed number of queries for the whole list (the API's pages)."""
    root_of = {pk: {pk} for pk in ids}  # execution → the roots of ``ids`` it counts for
    generation = list(ids)
    for _ in range(MAX_DEPTH):
        rows = list(Execution.objects.filter(parent_id__in=generation).values_list("pk", "parent_id"))
        if not rows:
            break
        for pk, parent in rows:
            root_of.setdefault(pk, set()).update(root_of[parent])
        generation = [pk for pk, _ in rows]
    totals: dict[int, list[Any]] = {pk: [Decimal(0), 0, 0, False] for pk in ids}  # usd, in, out, priced
    rows = (
        ModelCall.objects.filter(execution_id__in=list(root_of))
        .values("execution_id")
        .annotate(usd=Sum("cost"), i=Sum("input_tokens"), o=Sum("output_tokens"))
    )
    for row in rows:
        for root in root_of[row["execution_id"]]:
            total = totals[root]
            total[0] += row["usd"] or 0
            total[1] += row["i"] or 0
            total[2] += row["o"] or 0
            total[3] = total[3] or row["usd"] is not None
    return {
        pk: Spend(spent_usd=t[0], reserved_usd=Decimal(0), input_tokens=t[1], output_tokens=t[2], priced=t[3])
        for pk, t in totals.items()
    }


def _serialise(holder_ids: list[int]) -> None:
    """Inside the transaction: one reservation at a time per budget holder (its whole tree
    reserves against it). PostgreSQL: an advisory transaction lock per holder, taken in id
    order (never a row lock on an ancestor, which a parent's cancel may hold while it
    locks its children). SQLite: its transactions are serialised already."""
    for holder in sorted(holder_ids):  # the order of dblocks
        dblocks.xact(dblocks.Lock.BUDGET, holder)


def reserve(lease: Lease, *, execution: Execution, key: str, revision: int, amount: Decimal | None) -> bool:
    """Reserve ``amount`` (a call's worst case) for call ``key`` (``revision``) of
    ``execution`` against every budget above it, or raise BudgetExceeded (nothing written,
    no call to be made). Its own fenced transaction; a no-op without a budget or a price.
    Returns whether a budget holds the call (a reservation was taken)."""
    if amount is None or (execution.budget_usd is None and execution.parent_id is None):
        return False
    with transaction.atomic():
        fence(lease)
        budgets = holders(execution.pk)
        if not budgets:
            return False
        _serialise([holder for holder, _ in budgets])
        for holder, budget in budgets:
            ids = tree_ids(holder)
            spend = spend_of(ids)
            # A reservation of this very call (its worker died while it was out) is replaced, not added.
            earlier = (
                CostReservation.objects.filter(key=key, revision=revision).values_list("amount_usd", flat=True).first()
            )
            committed = spend.spent_usd + spend.reserved_usd - (earlier or Decimal(0))
            if committed + amount > budget:
                whose = "its" if holder == execution.pk else f"its ancestor {Execution(pk=holder).ref}'s"
                raise BudgetExceeded(
                    f"the next model call ({key}) could cost up to ${amount}; {whose} budget of ${budget} has "
                    f"${max(budget - committed, Decimal(0))} left (${spend.spent_usd} spent, "
                    f"${spend.reserved_usd} reserved); no call was made — raise the budget, then resume",
                    evidence={
                        "key": key,
                        "budget_holder": Execution(pk=holder).ref,
                        "budget_usd": str(budget),
                        "spent_usd": str(spend.spent_usd),
                        "reserved_usd": str(spend.reserved_usd),
                        "worst_case_usd": str(amount),
                    },
                )
        CostReservation.objects.update_or_create(
            key=key, revision=revision, defaults={"execution_id": execution.pk, "amount_usd": amount}
        )
    return True
