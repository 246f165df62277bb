"""The archive chain's head, anchored in the database (issue 38; ``retention.models``).

``record`` is the one writer of ``ArchiveAnchor``: ``retention.archiver.purge`` calls it
inside the transaction that deletes and tombstones a manifest's batch, so a manifest is
anchored exactly when its purge committed — a crash before that leaves it unanchored
with its executions whole in the database, and the next pass finishes it (S43).

``pending`` is what every pass asks before it writes: does the storage's chain end
where the database says? Either its newest manifest is the newest anchored one
(nothing pending), or it is the one link after it that a crashed pass wrote and did not
purge (pending: finish it). Anything else — the anchored head missing or changed, a
manifest that doesn't follow it — raises ``ChainCut`` and nothing is archived or purged
on top of it. An archive written before the anchor existed (no row at all) is taken
as it is: its newest manifest is pending, and anchored by the next purge.
"""

from __future__ import annotations

from .models import ArchiveAnchor
from .store import Head, Unreachable


class ChainCut(Unreachable):
    """The storage's chain does not end where the database anchored it: nothing is archived or purged."""


def newest(*, using: str) -> ArchiveAnchor | None:
    return ArchiveAnchor.objects.using(using).order_by("-seq").first()


def record(*, seq: int, manifest: str, sha256: str, purged: int, using: str) -> None:
    """Anchor ``manifest`` (inside the caller's purge transaction, on the owner's connection)."""
    ArchiveAnchor.objects.using(using).create(seq=seq, manifest=manifest, sha256=sha256, purged=purged)


def pending(head: Head | None, *, using: str) -> bool:
    """True when ``head`` (the storage's newest manifest) is still to be purged and anchored,
    False when it is the anchored head (or there is no archive); ChainCut otherwise."""
    anchored = newest(using=using)
    if anchored is None:
        return head is not None
    if head is None:
        raise ChainCut(_cut(anchored, "the storage holds no manifest at all"))
    if head.path == anchored.manifest:
        if head.sha256 != anchored.sha256:
            raise ChainCut(f"{head.path} hashes to {head.sha256}, not the {anchored.sha256} the database anchored")
        return False
    follows = head.manifest.get("seq") == anchored.seq + 1 and head.manifest.get("previous") == {
        "name": anchored.manifest,
        "sha256": anchored.sha256,
    }
    if not follows:
        raise ChainCut(_cut(anchored, f"the storage's newest is {head.path}"))
    return True


def _cut(anchored: ArchiveAnchor, found: str) -> str:
    return (
        f"the archive chain was cut: the database anchored {anchored.manifest} (number {anchored.seq}) "
        f"as its newest manifest, but {found}; run keel archive --verify"
    )
