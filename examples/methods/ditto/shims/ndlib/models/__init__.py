"""See ndlib/__init__.py: import-only."""
