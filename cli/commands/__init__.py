"""One module per group of ``manage.py keel`` commands; each registers its commands with
``cli.registry.command`` when ``manage.py keel`` imports it."""
