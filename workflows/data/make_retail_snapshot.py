"""Generate the deterministic retail snapshot used by the seed "monthly report" workflow.

Usage::

    python workflows/data/make_retail_snapshot.py [OUTPUT_PATH]

Without an argument the snapshot is written to ``retail_snapshot_v1.json`` next to
this script. The output is byte-for-byte reproducible: everything is drawn from a
single ``random.Random(20260801)`` in a fixed order, amounts are rounded to whole
euros, and the JSON is written with sorted keys, compact separators and one store
per line (so a diff of a regenerated file stays readable).

The data is synthetic but shaped to be plausible for a small Dutch grocery chain:

* weekly seasonality (Friday and Saturday busiest, Sunday quietest);
* a summer bump for beverages, frozen food and fresh produce;
* a back-to-school surge for stationery that peaks in late August;
* a tourist-season lift for the Maastricht store in July and August;
* every store closed on New Year's Day;
* the Eindhoven store closed 10-16 August 2026 for renovation, with a modest
  reopening boost afterwards.

Standard library only. Changing anything here changes the snapshot, so a new
snapshot should get a new id (``retail_snapshot_v2``) rather than overwrite v1.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from datetime import date, timedelta
from pathlib import Path

SEED = 20260801
SNAPSHOT_ID = "retail_snapshot_v1"
GENERATED_BY = "workflows/data/make_retail_snapshot.py"
FIRST_DAY = date(2026, 1, 1)
LAST_DAY = date(2026, 10, 31)
DEFAULT_OUTPUT = Path(__file__).resolve().with_name(f"{SNAPSHOT_ID}.json")

# id, name, city, size multiplier
STORES = [
    ("S01", "Utrecht Centrum", "Utrecht", 1.25),
    ("S02", "Rotterdam Waterfront", "Rotterdam", 1.10),
    ("S03", "Amsterdam Oost", "Amsterdam", 1.00),
    ("S04", "Eindhoven Station Plaza", "Eindhoven", 0.95),
    ("S05", "Groningen Markt", "Groningen", 0.80),
    ("S06", "Maastricht Zuid", "Maastricht", 0.70),
]

# id, name, base daily revenue (EUR) for a size-1.0 store, average basket (EUR)
CATEGORIES = [
    ("grocery", "Grocery", 5200, 18.5),
    ("fresh", "Fresh produce", 3400, 11.0),
    ("bakery", "Bakery", 1500, 6.5),
    ("beverages", "Beverages", 2100, 13.0),
    ("frozen", "Frozen food", 1300, 9.5),
    ("household", "Household", 1600, 15.0),
    ("personal_care", "Personal care", 1200, 12.5),
    ("stationery", "Stationery & school", 400, 8.5),
]

# Monday .. Sunday
WEEKDAY_FACTOR = [0.88, 0.90, 0.95, 1.00, 1.14, 1.30, 0.83]

RENOVATION_STORE = "S04"
RENOVATION_CLOSED = (date(2026, 8, 10), date(2026, 8, 16))
REOPENING_BOOST_DAYS = 4
REOPENING_BOOST = 1.18


def _bump(day_of_year: int, *, peak: int, width: float, height: float) -> float:
    """A smooth Gaussian-shaped seasonal bump centred on ``peak`` (day of year)."""
    return 1.0 + height * math.exp(-(((day_of_year - peak) / width) ** 2))


def _season(category: str, day: date) -> float:
    """Seasonal multiplier for one category on one day."""
    doy = day.timetuple().tm_yday
    # Gentle baseline: quieter late winter, slow upward trend through the year.
    base = 0.95 + 0.06 * (doy / 365) + 0.02 * math.sin(2 * math.pi * (doy - 80) / 365)
    if category == "beverages":
        return base * _bump(doy, peak=200, width=40, height=0.28)
    if category == "frozen":
        return base * _bump(doy, peak=205, width=35, height=0.35)
    if category == "fresh":
        return base * _bump(doy, peak=190, width=50, height=0.10)
    if category == "stationery":
        # Back to school (Dutch schools restart mid/late August), plus a small
        # January restart bump.
        return base * _bump(doy, peak=236, width=12, height=1.9) * _bump(doy, peak=8, width=6, height=0.35)
    return base


def _store_season(store: str, day: date) -> float:
    """Store-specific seasonal multiplier (tourism in Maastricht)."""
    if store == "S06":
        return _bump(day.timetuple().tm_yday, peak=222, width=22, height=0.16)
    return 1.0


def _clamped_gauss(rng: random.Random, sigma: float) -> float:
    return min(1.35, max(0.65, rng.gauss(1.0, sigma)))


def build_snapshot() -> dict:
    """Build the snapshot dict. Deterministic: same code, same output."""
    rng = random.Random(SEED)
    n_days = (LAST_DAY - FIRST_DAY).days + 1
    days = [FIRST_DAY + timedelta(days=i) for i in range(n_days)]

    sales: dict[str, dict[str, list[int]]] = {}
    transactions: dict[str, dict[str, list[int]]] = {}
    for store_id, _name, _city, size in STORES:
        sales[store_id] = {cat_id: [] for cat_id, *_ in CATEGORIES}
        transactions[store_id] = {cat_id: [] for cat_id, *_ in CATEGORIES}
        reno_start, reno_end = RENOVATION_CLOSED
        for day in days:
            # Draw the store-day factor every day (even closed ones) so that the
            # random stream does not depend on the closure calendar.
            traffic = _clamped_gauss(rng, 0.04)
            closed = (day.month, day.day) == (1, 1) or (store_id == RENOVATION_STORE and reno_start <= day <= reno_end)
            factor = size * traffic * WEEKDAY_FACTOR[day.weekday()] * _store_season(store_id, day)
            if day.day >= 25:
                factor *= 1.04  # payday
            if store_id == RENOVATION_STORE and 0 < (day - reno_end).days <= REOPENING_BOOST_DAYS:
                factor *= REOPENING_BOOST
            for cat_id, _cat_name, base, basket in CATEGORIES:
                noise = _clamped_gauss(rng, 0.05)
                basket_noise = _clamped_gauss(rng, 0.03)
                if closed:
                    sales[store_id][cat_id].append(0)
                    transactions[store_id][cat_id].append(0)
                    continue
                revenue = round(base * factor * _season(cat_id, day) * noise)
                count = max(1, round(revenue / (basket * basket_noise)))
                sales[store_id][cat_id].append(revenue)
                transactions[store_id][cat_id].append(count)

    return {
        "snapshot_id": SNAPSHOT_ID,
        "currency": "EUR",
        "generated_by": GENERATED_BY,
        "stores": [{"id": s, "name": n, "city": c} for s, n, c, _ in STORES],
        "categories": [{"id": c, "name": n} for c, n, _, _ in CATEGORIES],
        "first_day": FIRST_DAY.isoformat(),
        "last_day": LAST_DAY.isoformat(),
        "sales": sales,
        "transactions": transactions,
    }


def _compact(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def render_snapshot(snapshot: dict) -> str:
    """Serialise with sorted keys and compact separators, one store per line.

    The result parses back to exactly ``snapshot``.
    """
    lines = ["{"]
    keys = sorted(snapshot)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = snapshot[key]
        if key in ("sales", "transactions"):
            lines.append(f"{_compact(key)}:{{")
            store_ids = sorted(value)
            for j, store_id in enumerate(store_ids):
                inner_comma = "," if j < len(store_ids) - 1 else ""
                lines.append(f"{_compact(store_id)}:{_compact(value[store_id])}{inner_comma}")
            lines.append("}" + comma)
        else:
            lines.append(f"{_compact(key)}:{_compact(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "output",
        nargs="?",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"where to write the JSON (default: {DEFAULT_OUTPUT.name} next to this script)",
    )
    args = parser.parse_args(argv)
    text = render_snapshot(build_snapshot())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(text.encode("utf-8"))
    print(f"wrote {args.output} ({len(text.encode('utf-8')):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
