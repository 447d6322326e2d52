"""Several GPUs for the rate fit: `battus reconstruct --devices`, get_backend, reconstruct, and the
workflow's `devices` key (params, gpu resources, SLURM --gpus).

CPU only: the CUDA backend itself is never built here (a stand-in records what it would get);
tests/test_cuda_backend.py tests CUDABackend(devices=...).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_slurm_profile import SNAKEMAKE, dry_run_jobs, needs_snakemake

from battus import backends
from battus.backends import CPUBackend, get_backend
from battus.cli import build_parser, main
from battus.errors import InputError
from battus.graph import from_arcs
from battus.io import write_history
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe
from battus.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def problem() -> Problem:
    rng = np.random.default_rng(3)
    graph = from_arcs(rng.integers(0, 40, 160), rng.integers(0, 40, 160), directed=False, n=40)
    truth = simulate(graph, "sir", 6, 3, 0.3, 0.2, seed=7)
    return Problem(graph=graph, model="sir", T=6, n0=3, observations=observe(truth, np.array([3, 6])),
                   truth=truth, name="toy")


@pytest.fixture()
def history(tmp_path, problem) -> Path:
    path = tmp_path / "toy.h5"
    write_history(path, problem)
    return path


# ---------------------------------------------------------------------------
# the command line


def parsed(*extra: str):
    return build_parser().parse_args(["reconstruct", "h.h5", "--out", "p.h5", "--method", "battus", *extra])


def test_devices_option_parses_distinct_ordinals():
    assert parsed().devices is None  # default: the current GPU
    assert parsed("--devices", "0,1").devices == [0, 1]
    assert parsed("--devices", "3").devices == [3]
    assert parsed("--devices", "2, 0").devices == [2, 0]


@pytest.mark.parametrize("value", ["1,1", "0,1,0", "-1", "0,-2", "x", "", "0,,1", "1.5", "0;1", "0,1,"])
def test_bad_devices_end_in_one_line_naming_the_option(tmp_path, history, capsys, value):
    out = tmp_path / "p.h5"
    code = main(["reconstruct", str(history), "--out", str(out), "--method", "battus", "--devices", value])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "--devices" in err, err
    assert not out.exists() and not list(tmp_path.glob(".p.h5.*"))


def test_devices_is_documented_for_reconstruct_only(capsys):
    assert main(["reconstruct", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--devices" in text and "--backend cuda" in text and "default: the current GPU" in text
    assert main(["simulate", "g.h5", "--out", "s.h5", "--model", "si", "--devices", "0"]) == 2
    assert "--devices" in capsys.readouterr().err


def test_several_devices_on_the_cpu_are_refused(tmp_path, history, capsys):
    out = tmp_path / "p.h5"
    code = main(["reconstruct", str(history), "--out", str(out), "--method", "battus-z", "--backend", "cpu",
                 "--devices", "0,1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("battus: error: --devices: devices: 2 GPUs (0,1)") and "--backend cpu" in err, err
    assert not out.exists()
    # one device on the CPU backend asks for nothing it lacks: ignored
    assert main(["reconstruct", str(history), "--out", str(out), "--method", "battus-z", "--backend", "cpu",
                 "--devices", "0", "--quiet"]) == 0
    assert out.exists()


def test_the_cli_hands_devices_to_reconstruct(tmp_path, history, monkeypatch):
    import battus.pipeline

    seen = {}

    def fake(problem, options, **kwargs):
        seen.update(kwargs)
        raise InputError("--devices", "devices", "stop here")

    monkeypatch.setattr(battus.pipeline, "reconstruct", fake)
    argv = ["reconstruct", str(history), "--out", str(tmp_path / "p.h5"), "--method", "battus", "--quiet"]
    assert main([*argv, "--backend", "cuda", "--devices", "1,0"]) == 2
    assert seen["devices"] == [1, 0] and seen["backend"] == "cuda"
    assert main(argv) == 2
    assert seen["devices"] is None


# ---------------------------------------------------------------------------
# get_backend and reconstruct


class FakeCUDABackend:
    """Stands in for battus.backends.cuda.CUDABackend (the package): records its arguments."""

    calls: list[dict] = []

    def __init__(self, **kwargs):
        FakeCUDABackend.calls.append(kwargs)


@pytest.fixture()
def fake_cuda(monkeypatch):
    """get_backend("cuda") builds FakeCUDABackend (the simulator counts as a CUDA device)."""
    module = types.ModuleType("battus.backends.cuda")
    module.CUDABackend = FakeCUDABackend
    monkeypatch.setitem(sys.modules, "battus.backends.cuda", module)
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    FakeCUDABackend.calls = []
    return FakeCUDABackend.calls


def test_get_backend_refuses_several_devices_on_the_cpu(monkeypatch):
    with pytest.raises(InputError, match="--backend cpu runs on the CPU") as exc:
        get_backend("cpu", devices=[0, 1])
    assert (exc.value.source, exc.value.field) == ("--devices", "devices")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # auto never picks the simulator
    with pytest.raises(InputError, match="--backend auto found no GPU"):
        get_backend("auto", devices=(0, 1))
    assert isinstance(get_backend("cpu", devices=[0]), CPUBackend)
    assert isinstance(get_backend("cpu", devices=[]), CPUBackend)
    with pytest.raises(InputError, match=">= 0"):
        get_backend("cpu", devices=[-1])


def test_get_backend_passes_devices_to_the_cuda_backend(fake_cuda):
    get_backend("cuda")
    get_backend("cuda", devices=[])
    get_backend("cuda", devices=[1])
    get_backend("cuda", devices=(0, 1))
    assert fake_cuda == [{}, {}, {"devices": [1]}, {"devices": [0, 1]}]


def test_get_backend_names_a_device_this_machine_lacks(monkeypatch):
    from numba import cuda

    monkeypatch.setattr(cuda, "gpus", [object(), object()], raising=False)
    backends._require_devices([0, 1])
    with pytest.raises(InputError, match="no CUDA device 2: 2 visible here, numbered 0 to 1"):
        backends._require_devices([0, 2])


def test_reconstruct_refuses_several_devices_on_the_cpu(problem):
    with pytest.raises(InputError, match="--devices"):
        reconstruct(problem, method_options("battus-z"), backend="cpu", devices=[0, 1])
    with pytest.raises(ValueError, match="by name"):
        reconstruct(problem, method_options("battus-z"), backend=CPUBackend(), devices=[0])


def test_auto_falls_back_to_the_cpu_whatever_devices_asked(problem, monkeypatch):
    import battus.backends

    class TooSmallGPU(CPUBackend):
        name, device, closed = "cuda", "fake GPU", 0

        def prepare(self, problem, fit=True):
            raise InputError("--backend", "device memory", "a graph needs 9 GiB on the GPU, more than the 1 GiB free")

        def close(self):
            TooSmallGPU.closed += 1

    asked = []

    def pick(name, devices=None):
        asked.append((name, devices))
        return TooSmallGPU() if name == "auto" else get_backend(name, devices)

    monkeypatch.setattr(battus.backends, "get_backend", pick)
    said = []
    recon = reconstruct(problem, method_options("battus-z"), backend="auto", devices=[0, 1], progress=said.append)
    assert asked == [("auto", [0, 1]), ("cpu", None)]
    assert recon.backend == "cpu" and TooSmallGPU.closed >= 1
    assert any("reconstructing on the CPU instead (--backend auto; --devices 0,1 unused)" in m for m in said), said
    reference = reconstruct(problem, method_options("battus-z"), backend="cpu")
    assert np.array_equal(recon.states, reference.states)


# ---------------------------------------------------------------------------
# the workflow: Plan options and GPU counts, the dry run under the SLURM profile


def validated(config: dict) -> dict:
    from snakemake.utils import validate

    validate(config, str(ROOT / "config/schemas/config.schema.yaml"))
    return config


def plan(path: str | Path, **changes):
    from battus.suite.experiments import Plan

    config = yaml.safe_load((ROOT / path).read_text())
    config.update(changes)
    return Plan(validated(config))


def gpu_config(**changes) -> dict:
    """config/test/cudasim.yaml (backend cuda, one `large` dataset) with fitted Battus in `large`."""
    config = yaml.safe_load((ROOT / "config/test/cudasim.yaml").read_text())
    config["experiments"]["large"]["methods"].append(["battus", "default"])
    config.update(changes)
    return config


def test_schema_documents_devices_and_refuses_bad_lists():
    from snakemake.exceptions import WorkflowError

    schema = yaml.safe_load((ROOT / "config/schemas/config.schema.yaml").read_text())
    devices = schema["properties"]["devices"]
    assert devices["default"] == [] and devices["uniqueItems"] and devices["items"]["minimum"] == 0
    assert "same whatever the device count" in " ".join(devices["description"].split())
    assert validated(gpu_config())["devices"] == []
    for bad in ([0, 0], [-1], ["0"], "0,1"):
        with pytest.raises(WorkflowError):
            validated(gpu_config(devices=bad))


def test_plan_gives_devices_to_gpu_reconstructions_only():
    from battus.suite.experiments import Plan

    p = Plan(validated(gpu_config(devices=[0, 1])))
    fitted = p.options("ba-sir", "battus", "default")
    assert fitted["devices"] == "0,1" and p.gpus("ba-sir", "battus", "default") == 2
    # without a fit one GPU does all the work: the first device, one GPU asked for
    assert p.options("ba-sir", "battus-z", "default")["devices"] == "0"
    assert p.gpus("ba-sir", "battus-z", "causal") == 1
    # controls and baselines never use a GPU
    assert "devices" not in p.options("ba-sir", "truth", "default") and p.gpus("ba-sir", "truth", "default") == 0
    # devices change nothing else
    plain = Plan(validated(gpu_config())).options("ba-sir", "battus", "default")
    assert {k: v for k, v in fitted.items() if k != "devices"} == plain
    assert p.gpus("ba-sir", "battus", "default") == 2
    # on the CPU the key does nothing
    cpu = Plan(validated(gpu_config(devices=[0, 1], backend="cpu")))
    for run in cpu.all_runs():
        assert "devices" not in cpu.options(*run) and cpu.gpus(*run) == 0


@pytest.mark.parametrize("config", ["config/config.yaml", "config/paper.yaml", "config/test/tiny.yaml",
                                    "config/test/cudasim.yaml"])
def test_empty_devices_leave_every_job_as_before(config, monkeypatch):
    monkeypatch.setenv("BATTUS_MIRROR", "")
    raw = yaml.safe_load((ROOT / config).read_text())
    raw.pop("devices", None)
    from battus.suite.experiments import Plan

    without = Plan(validated(raw))
    empty = plan(config, devices=[])
    runs = without.all_runs()
    assert runs == empty.all_runs() and runs
    for run in runs:
        options = without.options(*run)
        assert "devices" not in options and empty.options(*run) == options, run
        assert empty.gpus(*run) == without.gpus(*run) == int(without.uses_gpu(run[0], run[1])), run


@needs_snakemake
def test_dry_run_asks_for_one_gpu_per_device_of_the_fit(tmp_path):
    config = gpu_config(devices=[0, 1])
    configfile = tmp_path / "devices.yaml"
    configfile.write_text(yaml.safe_dump(config))
    jobs = dry_run_jobs(tmp_path / "run", configfile)
    gpus = {(j["rule"], j["wildcards"].get("method"), j["wildcards"].get("variant")):
            (int(j["resources"].get("gpu", 0)), j["resources"].get("slurm_partition")) for j in jobs}
    assert gpus[("reconstruct", "battus", "default")] == (2, "gpu")  # --gpus=2
    assert gpus[("reconstruct", "battus-z", "default")] == (1, "gpu")
    assert gpus[("reconstruct", "battus-z", "causal")] == (1, "gpu")
    assert gpus[("simulate", None, None)] == (1, "gpu")  # sim_backend cuda: one GPU, as before
    assert not any(rule == "score" for rule, _, _ in gpus)  # scored inside the reconstruct job


@needs_snakemake
@pytest.mark.slow
def test_workflow_jobs_run_battus_with_devices(tmp_path):
    """A real run: the jobs' commands (first line of their logs) carry --devices. On this machine no GPU
    is visible, so `auto` runs on the CPU: one device is ignored there, two are refused in one line."""
    import subprocess

    config = {
        "name": "devices", "results": "results", "backend": "auto", "devices": [0, 1],
        "timing": {"repeats": 1},
        "graphs": {"ba": {"generator": "ba", "n": 60, "m": 2, "seed": 1}},
        "datasets": {"ba-sir": {"graph": "ba", "model": "sir", "T": 4, "n0": 4, "beta_i": 0.3, "large": True}},
        "variants": {},
        "experiments": {"large": {"datasets": ["ba-sir"], "methods": [["battus", "default"],
                                                                      ["battus-z", "default"]]}},
    }
    configfile = tmp_path / "devices.yaml"
    configfile.write_text(yaml.safe_dump(config))
    work = tmp_path / "run"
    targets = [f"results/ba-sir/{m}/default/prediction.h5" for m in ("battus", "battus-z")]
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "CUDA_VISIBLE_DEVICES": ""}
    # targets before --configfile, which takes several files
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--cores", "2", "--nocolor",
                           "--keep-going", *targets, "--configfile", str(configfile)],
                          capture_output=True, text=True, timeout=300, env=env)
    logs = work / "results/logs/reconstruct/ba-sir"
    fitted = (logs / "battus/default.log").read_text().splitlines()
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert fitted[0].startswith("battus reconstruct ") and "--devices 0,1" in fitted[0], fitted[0]
    assert any(line.startswith("battus: error: --devices: devices: 2 GPUs (0,1) asked for the fit, but "
                               "--backend auto found no GPU") for line in fitted), fitted
    assert not (work / targets[0]).exists()
    fixed = (logs / "battus-z/default.log").read_text().splitlines()
    assert "--devices 0 " in fixed[0] + " " and "--devices 0,1" not in fixed[0], fixed[0]
    assert (work / targets[1]).exists()


def test_auto_without_a_driver_never_imports_numba_cuda(tmp_path):
    """On a machine without a CUDA driver, --backend auto picks the CPU without importing
    Numba-CUDA (0.4 s of every run); with NUMBA_CUDA_DRIVER set, Numba is asked as before."""
    import subprocess

    probe = ("import sys; from battus import backends, cuda_driver; "
             "cuda_driver.DRIVER_NAMES = ('/nonexistent/libcuda.so',); "
             "print(backends.cuda_available(), backends.get_backend('auto').name, 'numba.cuda' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_CUDA_DRIVER")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "cpu", "False"]
    env["NUMBA_CUDA_DRIVER"] = str(tmp_path / "libcuda.so")  # named, missing: Numba says no device
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "cpu", "True"]


class _FakeDriver:
    """The three driver calls :func:`battus.cuda_driver.start_driver` makes, recorded."""

    def __init__(self, init_status: int = 0) -> None:
        self.calls: list[tuple[str, int]] = []
        self.init_status = init_status

    def cuInit(self, flags):  # noqa: N802 - the driver's names
        self.calls.append(("init", flags))
        return self.init_status

    def cuDeviceGet(self, out, ordinal):  # noqa: N802
        self.calls.append(("device", ordinal))
        out._obj.value = 100 + ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, out, device):  # noqa: N802
        self.calls.append(("retain", device.value))
        return 0


def test_start_driver_retains_the_asked_devices_primary_context(monkeypatch):
    from battus import cuda_driver

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    driver = _FakeDriver()
    monkeypatch.setattr(cuda_driver, "_library", lambda: driver)
    cuda_driver.start_driver(1)
    assert driver.calls == [("init", 0), ("device", 1), ("retain", 101)]
    failing = _FakeDriver(init_status=100)  # CUDA_ERROR_NO_DEVICE: left for Numba to report
    monkeypatch.setattr(cuda_driver, "_library", lambda: failing)
    cuda_driver.start_driver(0)
    assert failing.calls == [("init", 0)]
    monkeypatch.setattr(cuda_driver, "_library", lambda: None)  # no driver at all
    cuda_driver.start_driver(0)
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    simulated = _FakeDriver()
    monkeypatch.setattr(cuda_driver, "_library", lambda: simulated)
    cuda_driver.start_driver(0)
    assert simulated.calls == []


def test_start_backend_hands_the_backend_over_before_its_warm_up_ends():
    """`battus reconstruct` prepares its problem beside the warm-up: ``chosen`` gets the backend
    when the warm-up calls ``ready``, the call's own result only when the warm-up is done; an
    error before ``ready`` reaches both."""
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

    from battus.backends import start_backend

    gate = threading.Event()

    def warm(backend, ready=None):
        ready()
        assert gate.wait(30)

    chosen = Future()
    with ThreadPoolExecutor(1) as pool:
        warmed = pool.submit(start_backend, "cpu", None, warm, chosen)
        backend = chosen.result(timeout=30)
        assert not warmed.done()
        gate.set()
        assert warmed.result(timeout=30) is backend
    chosen = Future()
    with pytest.raises(InputError, match="unknown backend"):
        start_backend("tpu", None, warm, chosen)
    with pytest.raises(InputError, match="unknown backend"):
        chosen.result(timeout=0)

    def broken(backend, ready=None):
        raise RuntimeError("kernel failed to load")

    chosen = Future()
    with pytest.raises(RuntimeError):
        start_backend("cpu", None, broken, chosen)
    with pytest.raises(RuntimeError):
        chosen.result(timeout=0)
