"""The error shape every refusal of the Task API answers with, and the answers each kind
of operation can give besides its success (docs/api.md, "Errors")."""

from __future__ import annotations

from typing import Any

from ninja import Schema


class ErrorOut(Schema):
    detail: Any


READ = {401: ErrorOut, 422: ErrorOut, 500: ErrorOut}
READ_ONE = {**READ, 404: ErrorOut, 410: ErrorOut}
WRITE = {**READ, 403: ErrorOut, 409: ErrorOut, 413: ErrorOut, 415: ErrorOut}
WRITE_ONE = {**WRITE, 404: ErrorOut, 410: ErrorOut}
