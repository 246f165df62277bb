"""Simulated external services (report publisher, order desk, notifier, support
desk, and the OpenAI and Anthropic model APIs).

The sandbox runs as its own HTTP process (``python -m sandbox.server``) with its
own SQLite file. The keel runtime talks to it only over HTTP and never imports
this package; it is a Django app solely to provide the ``runsandbox`` command.
"""
