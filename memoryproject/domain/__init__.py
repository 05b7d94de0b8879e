"""Pure computation shared by every app (no Django import)."""
