"""The embedded default's broker: kombu's filesystem transport, with every file published whole.

kombu's own transport creates a message's file under its final ``<ms>_<uuid>.<queue>.msg``
name and only then writes the body, holding an advisory lock the reader never takes. A
consumer that lists the folder in between moves and reads an empty or half-written file,
and the JSON error that follows is "unrecoverable": the worker exits (CI saw it with beat,
web and worker publishing at once). The exchange tables under ``control/`` had the same
window when first created.

Here a writer writes the whole body under a name no reader matches (``.<name>.part``, same
folder, so same filesystem) and renames it into place; a rename is atomic, so a reader
finds a complete file or none. A consumer claims a message by renaming it into the
``processed`` folder (same filesystem: atomic, one winner among competing workers), reads
it there and deletes it. A consumer that dies between the claim and the read leaves the
message in ``processed/``, unsent: the sweeper rings again for any execution nobody works on. A file that still does not decode (written by something else) is
kept as ``processed/<name>.unreadable`` with an error in the log, and the worker goes on:
the message only said "look at execution X", and the sweeper finds X anyway.

Selected in settings by ``CELERY_BROKER_TRANSPORT`` whenever the broker URL is
``filesystem://``; the folders are the same transport options kombu's transport reads.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)


def publish_whole(path: Path | str, body: bytes, *, replace: bool = True) -> bool:
    """Write ``body`` to ``path`` so that no reader ever sees part of it. With ``replace``
    False the file is created only if absent (``os.link`` fails on an existing name), and
    False is returned when another writer got there first."""
    path = Path(path)
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        with open(part, "wb") as out:
            out.write(body)
        if replace:
            os.replace(part, path)
            return True
        try:
            os.link(part, path)
        except FileExistsError:
            return False
        return True
    finally:
        part.unlink(missing_ok=True)


class Channel(filesystem.Channel):
    """kombu's filesystem channel, publishing and claiming by rename."""

    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        try:
            publish_whole(Path(self.data_folder_out) / name, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to {self.data_folder_out}") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        claimed_folder = Path(self.processed_folder)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue  # another queue's message, or a file still being written (".….part")
            claimed = claimed_folder / name
            try:
                os.rename(Path(self.data_folder_in) / name, claimed)
            except FileNotFoundError:
                continue  # another consumer claimed it first
            except OSError as exc:  # e.g. the processed folder on another filesystem
                raise ChannelError(f"Cannot claim {name!r} into {claimed_folder}") from exc
            try:
                payload = claimed.read_bytes()
            except OSError as exc:
                raise ChannelError(f"Cannot read {claimed}") from exc
            try:
                message = loads(bytes_to_str(payload))
            except ValueError as exc:
                kept = claimed.with_name(f"{name}.unreadable")
                os.replace(claimed, kept)
                log.error("broker message %s is unreadable (%s); kept as %s and skipped", name, exc, kept)
                continue
            if not self.store_processed:
                claimed.unlink(missing_ok=True)
            return message
        raise Empty()

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        # The first binding creates the exchange's table whole; later ones update it in
        # place under kombu's lock, as before (the file is never empty by then).
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        if not file.exists():
            row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
            try:
                if publish_whole(file, str_to_bytes(dumps([row])), replace=False):
                    return
            except OSError as exc:
                raise ChannelError(f"Cannot open {file}") from exc
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel
