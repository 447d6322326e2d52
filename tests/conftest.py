"""Shared fixtures: the canonical benchmark through the mirror in ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # The CPU test run exercises the CUDA code paths in Numba's CUDA simulator;
    # the GPU test mode (`pytest -m gpu`, on a machine with a GPU) must not.
    # Set before any test module imports numba, which reads it once.
    expr = (config.option.markexpr or "").strip()
    wants_gpu = "gpu" in expr and expr != "not gpu"
    if not wants_gpu and os.environ.get("BATTUS_GPU_TESTS") != "1":
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
SHARED = Path(os.environ.get("BATTUS_SHARED", REPO.parent / "shared"))
DITTO = SHARED / "data" / "ditto"

CANONICAL_FILES = {
    "ba-si": "synthetic/ba-si.pt", "er-si": "synthetic/er-si.pt", "oregon2-si": "oregon2/oregon2-si.pt",
    "prost-si": "prost/prost-si.pt", "farmers-si": "farmers/farmers-si.pt", "pol-si": "pol/rt-pol.txt",
    "ba-sir": "synthetic/ba-sir.pt", "er-sir": "synthetic/er-sir.pt", "oregon2-sir": "oregon2/oregon2-sir.pt",
    "prost-sir": "prost/prost-sir.pt", "covid-sir": "covid/covid-sir.pt", "heb-sir": "heb/heb-sir.pt",
}


def load_canonical(name: str):
    from battus.hermes import canonical_from_pt, pol_from_retweets

    path = DITTO / CANONICAL_FILES[name]
    if not path.is_file():  # the paper-number tests must fail, not skip, without the mirror
        raise FileNotFoundError(f"canonical mirror missing: {path} (set BATTUS_SHARED)")
    return pol_from_retweets(path) if name == "pol-si" else canonical_from_pt(path, name=name)


@pytest.fixture(scope="session")
def canonical():
    """All 12 canonical histories, imported once per test session."""
    return {name: load_canonical(name) for name in CANONICAL_FILES}
