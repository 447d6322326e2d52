"""See ndlib/__init__.py: import-only; any attribute use raises."""


def __getattr__(name: str):
    raise ImportError(f"ndlib is not installed (run_ditto.py only imports it): ndlib.models.{__name__}.{name}")
