"""Static files: hashed and compressed by ``collectstatic``, served by WhiteNoise."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """After ``collectstatic``: hashed names (cached forever) and gzip copies. Before it — a
    process started with only the four variables of docs/design.md §6 — no manifest exists at all,
    and the plain names are used, which WhiteNoise then serves from the source folders
    (``WHITENOISE_USE_FINDERS``). A manifest that lacks a file is still an error."""

    def stored_name(self, name: str) -> str:
        if not self.hashed_files and not self.manifest_storage.exists(self.manifest_name):
            return name
        return super().stored_name(name)
