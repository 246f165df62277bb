"""The embedded default's broker (config/broker_filesystem.py): with several processes
publishing while a worker consumes, every message arrives once and whole, and a file that
does not decode is kept aside without stopping the consumer.

kombu's own filesystem transport fails the first test: its writer creates the message's
file before writing the body, so the consumer reads empty or half-written JSON (CI saw a
worker stop on it, "Unrecoverable error: JSONDecodeError")."""

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kombu import Connection

pytestmark = pytest.mark.processes

TRANSPORT = "config.broker_filesystem:Transport"

PRODUCER = """
import sys
from kombu import Connection
transport, folder, name, who = sys.argv[1:5]
count, size = int(sys.argv[5]), int(sys.argv[6])
options = {"data_folder_in": folder + "/queue", "data_folder_out": folder + "/queue",
           "processed_folder": folder + "/processed", "control_folder": folder + "/control"}
with Connection("filesystem://", transport=transport, transport_options=options) as connection:
    queue = connection.SimpleQueue(name)
    for n in range(count):
        queue.put({"id": f"{who}-{n}", "padding": "x" * size})
    queue.close()
"""


@pytest.fixture
def name() -> str:
    """A queue of the test's own: kombu remembers declared queues per process (its transport's
    global state), so a name reused with another folder would not be declared there."""
    return f"steps-{uuid.uuid4().hex}"


def connect(folder: Path, **options: object) -> Connection:
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        **options,
    }
    return Connection("filesystem://", transport=TRANSPORT, transport_options=options)


def test_messages_published_by_several_processes_arrive_once_and_whole(tmp_path, name):
    # Large bodies (a write takes a while) and a consumer that looks all the time: kombu's
    # own writer is caught between creating a file and filling it almost every run.
    producers, count, size = 3, 30, 1_000_000
    with connect(tmp_path, polling_interval=0) as connection:
        queue = connection.SimpleQueue(name)
        running = [
            subprocess.Popen(
                [sys.executable, "-c", PRODUCER, TRANSPORT, str(tmp_path), name, f"p{i}", str(count), str(size)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(producers)
        ]
        seen: list[str] = []
        deadline = time.monotonic() + 120
        while len(seen) < producers * count and time.monotonic() < deadline:
            try:
                message = queue.get(timeout=0.2)
            except queue.Empty:
                continue
            assert len(message.payload["padding"]) == size, "a message arrived cut short"
            seen.append(message.payload["id"])
            message.ack()
        for process in running:
            _, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
        queue.close()

    expected = {f"p{i}-{n}" for i in range(producers) for n in range(count)}
    assert sorted(seen) == sorted(expected)
    assert not any((tmp_path / "queue").iterdir()), "a published file was left behind"
    assert not list((tmp_path / "processed").iterdir()), "a consumed message was kept"


def test_a_file_that_does_not_decode_is_kept_aside_and_the_next_message_still_arrives(tmp_path, name):
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue(name)
        (tmp_path / "queue" / f"0_garbage.{name}.msg").write_bytes(b"")
        with pytest.raises(queue.Empty):  # skipped, not raised: the consumer goes on
            queue.get(timeout=1)
        assert (tmp_path / "processed" / f"0_garbage.{name}.msg.unreadable").exists()

        queue.put({"id": "after"})
        message = queue.get(timeout=5)
        assert message.payload == {"id": "after"}
        message.ack()
        queue.close()

    assert not any((tmp_path / "queue").iterdir())
