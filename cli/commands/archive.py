"""``keel archive``: retention's archive and purge, its verifier and its reader (docs/design.md §6).

* ``keel archive [--older-than 90d] [--dry-run] [--json]`` archives and purges the
  terminal executions that ended before the cut-off and are not on hold, then runs the
  blob sweep (``retention.blobs``; not in a dry run);
* ``keel archive --blobs [--dry-run] [--json]`` runs the blob sweep alone;
* ``keel archive --verify`` checks every manifest, file and chain link, the chain
  against its anchor in the database, every tombstone against the manifests and
  approval integrity on the archive: exit 0, or 1 naming each file and check that
  failed (a missing manifest named as the database anchored it);
* ``keel archive --show ID [--as USER]`` prints an archived execution from the archive
  (as ``USER`` reads it: one of a workflow they may not read is a "no execution");
  one whose manifest or data file is missing: one sentence, exit 2.

``--json`` of a pass carries exactly docs/design.md §6's keys; the sweep's counts are a line of
the human output (and ``--blobs --json``). The storage unreachable, or the database
refusing the purge (the application role can't delete): exit 1 with the reason,
nothing deleted. The sweep after a pass unable to read the store or a manifest, or to
remove a blob: the pass's output, then exit 1 with why the sweep stopped. ``--older-than``
not ``<n>d``, or ``--blobs`` with an option of another mode: exit 2.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError

from retention import reader
from retention.archiver import Busy, archive_run, sweep_run
from retention.blobs import Sweep
from retention.policy import BadAge, parse_age
from retention.store import Unreachable
from retention.verify import verify

from ..registry import Result, UsageError, command

FAILED = 1


def _arguments(parser) -> None:
    parser.add_argument("--older-than", metavar="AGE", help="the cut-off as days, e.g. 90d (default: the policy)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be archived, change nothing")
    parser.add_argument("--verify", action="store_true", help="check the archive's chain, hashes and approvals")
    parser.add_argument("--show", metavar="ID", help="print an archived execution from the archive")
    parser.add_argument("--batch", type=int, metavar="N", help="executions per batch (RUNTIME_RETENTION_BATCH)")
    parser.add_argument(
        "--blobs", action="store_true", help="only remove the artifact blobs nothing references (no archive, no purge)"
    )


@command(
    "archive",
    help="Archive and purge old terminal executions; sweep unreferenced blobs; verify or read the archive",
    arguments=_arguments,
    as_optional=True,  # --show … --as USER reads as that user (access by workflow); the rest is the shell's
)
def archive(args, user=None) -> Result:
    if user is not None and not args.get("show"):  # a pass is the runtime's: it must see every execution
        raise UsageError("--as goes with --show only: archiving, sweeping and verifying are the shell's")
    if args.get("blobs"):
        return _blobs(args)
    if args.get("verify"):
        return _verify()
    if args.get("show"):
        try:
            record = reader.archived_execution(args["show"])
        except Unreachable as exc:
            raise CommandError(str(exc), returncode=FAILED) from None
        return Result(record, reader.lines_for_people(record))
    try:
        days = parse_age(args["older_than"]) if args.get("older_than") is not None else None
    except BadAge as exc:
        raise UsageError(str(exc)) from None
    if args.get("batch") is not None and args["batch"] < 1:
        raise UsageError("--batch must be at least 1")
    try:
        outcome = archive_run(older_than_days=days, dry_run=bool(args.get("dry_run")), batch=args.get("batch"))
    except (Unreachable, Busy) as exc:
        raise CommandError(f"nothing purged: {exc}", returncode=FAILED) from None
    data = outcome.as_json(dry_run=bool(args.get("dry_run")))
    if args.get("dry_run"):
        lines = [f"would archive {outcome.would_archive} executions; {outcome.skipped_on_hold} kept by a legal hold"]
    else:
        lines = [
            f"archived {outcome.archived} executions into {len(outcome.manifests)} manifests"
            + (f" (the last {outcome.manifests[-1]})" if outcome.manifests else "")
            + f"; {outcome.skipped_on_hold} kept by a legal hold"
            + (f"; finished {outcome.recovered} from an interrupted pass" if outcome.recovered else "")
        ]
        if outcome.blobs.failed:  # the pass's work stands: its answer, then why the sweep stopped
            return Result(
                data, lines, exit=FAILED, error=f"the blob sweep after the pass stopped: {outcome.blobs.failed}"
            )
        lines.append(_sweep_line(outcome.blobs, dry_run=False))
    return Result(data, lines)


# Options of the other modes, which --blobs refuses (their names as the user types them).
_NOT_WITH_BLOBS = {"verify": "--verify", "show": "--show", "older_than": "--older-than", "batch": "--batch"}


def _blobs(args) -> Result:
    given = [flag for key, flag in _NOT_WITH_BLOBS.items() if args.get(key) not in (None, False)]
    if given:
        raise UsageError(f"--blobs runs only the blob sweep; it can't be combined with {' or '.join(given)}")
    dry_run = bool(args.get("dry_run"))
    try:
        outcome = sweep_run(dry_run=dry_run)
    except Busy as exc:
        raise CommandError(f"no blob removed: {exc}", returncode=FAILED) from None
    if outcome.failed:
        raise CommandError(f"the blob sweep stopped: {outcome.failed}", returncode=FAILED)
    return Result(outcome.as_json(dry_run=dry_run), [_sweep_line(outcome, dry_run=dry_run)])


def _sweep_line(outcome: Sweep, *, dry_run: bool) -> str:
    return (
        f"{'would remove' if dry_run else 'removed'} {outcome.removed} artifact blobs nothing references; "
        f"{outcome.kept} still referenced and {outcome.within_grace} stored within the last "
        f"{settings.RUNTIME_BLOB_GRACE_HOURS} hours stay"
    )


def _verify() -> Result:
    try:
        report = verify()
    except Exception as exc:  # the storage itself: say so in one sentence
        raise CommandError(f"the archive could not be read: {exc}", returncode=FAILED) from None
    lines = [f.sentence() for f in report.findings]
    lines += [f"{path}: not listed by any manifest (an interrupted pass; ignored)" for path in report.unreferenced]
    if report.pending:
        lines.append(f"{report.pending}: not anchored yet (an interrupted pass; the next pass finishes its purge)")
    lines.append(
        f"{'ok' if report.ok else 'FAILED'}: {report.manifests} manifests ({report.anchored} anchored), "
        f"{report.files} files, {report.executions} executions, {report.tombstones} tombstones, "
        f"{report.guarded_effects} guarded effects checked"
    )
    return Result(report.as_json(), lines, exit=0 if report.ok else FAILED)
