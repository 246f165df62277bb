"""The engine: the runtime core (filled in below the moves)."""
