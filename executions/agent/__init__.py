"""The agent runtime (filled in below the moves)."""
