"""PostgreSQL for the pytest process: Django's backend, flushed faster (``base.py``)."""
