"""Django's SQLite backend with each statement's placeholders converted once (``base``)."""
