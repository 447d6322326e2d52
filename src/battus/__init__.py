"""Battus: deterministic diffusion history reconstruction on graphs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("battus")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.1.0"

__all__ = ["__version__"]
