"""The method presets and options load without Numba (the workflow reads them when Snakemake parses rules)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from battus.errors import InputError
from battus.options import FitSettings, method_options


def test_options_and_experiment_plan_import_no_numba():
    code = "import sys, battus.options, battus.suite.experiments, battus.cli; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_presets_are_the_papers():
    battus = method_options("battus")
    assert (battus.fit, battus.reset, battus.decoder) == (True, True, "map")
    battus_z = method_options("battus-z")
    assert (battus_z.fit, battus_z.reset, battus_z.decoder, battus_z.tau) == (False, False, "threshold", 0.65)
    assert (battus_z.beta_i, battus_z.beta_r) == (0.1, 0.1)
    assert battus.fit_settings == FitSettings(grid_points=24, refine_points=7, refine_rounds=4)


@pytest.mark.parametrize("override", [{"tau": 0.0}, {"beta_i": 1.5}, {"decoder": "viterbi"},
                                      {"fit_settings": FitSettings(lower=0.6, upper=0.5)}])
def test_invalid_overrides_are_input_errors(override):
    with pytest.raises(InputError):
        method_options("battus-z", **override)
