"""One test per class of hostile or broken input, through the CLI.

Each case checks the whole promise: exit status 2, exactly one line on
stderr naming the file or option at fault, no output (nor temporary file)
left behind, and every input byte for byte as it was.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from fuzz_corpus import PtSpec, Tensor, valid_pt

from battus.cli import main
from battus.graph import from_arcs
from battus.io import write_history, write_prediction
from battus.problem import Problem, Reconstruction, observe
from battus.simulate import simulate


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(capsys, argv: list[str], *, inputs: list[Path], out: Path | None, names: str) -> str:
    """Run ``argv``; assert exit 2, one stderr line naming ``names``, no output, inputs unchanged."""
    before = {p: sha(p) for p in inputs}
    out_before = sha(out) if out is not None and out.is_file() else None
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert names in err, err
    assert {p: sha(p) for p in inputs} == before, "an input changed"
    if out is not None:
        if out_before is None:
            assert not out.exists() or out.is_dir(), "output written"
        else:
            assert sha(out) == out_before
        folder = out.parent if out.parent.is_dir() else None
        if folder is not None:
            assert not list(folder.glob(f".{out.name}.*")), "temporary file left behind"
    return err


@pytest.fixture()
def toy(tmp_path) -> dict[str, Path]:
    """A graph, a history with truth, a prediction and an edge list, all tiny."""
    rng = np.random.default_rng(3)
    graph = from_arcs(rng.integers(0, 40, 160), rng.integers(0, 40, 160), directed=False, n=40)
    truth = simulate(graph, "sir", 6, 3, 0.3, 0.2, seed=9)
    problem = Problem(graph=graph, model="sir", T=6, n0=3, observations=observe(truth, np.array([3, 6])),
                      truth=truth, name="toy")
    hist = tmp_path / "hist.h5"
    write_history(hist, problem)
    t = np.arange(7)[:, None]
    t_inf = np.argmax(truth >= 1, axis=0).astype(np.int64)
    t_rec = np.full(40, 7, dtype=np.int64)
    states = ((t >= t_inf[None, :]).astype(np.uint8) + (t >= t_rec[None, :]).astype(np.uint8))
    recon = Reconstruction(states=states, t_inf=t_inf, t_rec=t_rec, beta_i=0.1, beta_r=0.1,
                           params={"method": "test"}, backend="cpu", device="x", algorithm_seconds=0.0)
    pred = tmp_path / "pred.h5"
    write_prediction(pred, recon, problem, hist)
    edges = tmp_path / "edges.txt"
    edges.write_text("# toy\n1 2\n2 3\n3 1\n")
    pt = tmp_path / "toy.pt"
    y = np.zeros((3, 3), dtype=np.int64)
    y[0] = 1
    y[1, 1:] = 1
    pt.write_bytes(valid_pt(3, 2, [(0, 1), (1, 0), (1, 2), (2, 1)], y).to_bytes())
    return {"hist": hist, "pred": pred, "edges": edges, "pt": pt}


COMMANDS = {
    "reconstruct": (["reconstruct", "{hist}", "--method", "battus-z", "--backend", "cpu"], "hist"),
    "simulate": (["simulate", "{hist}", "--model", "si", "--T", "4", "--n0", "2"], "hist"),
    "graph": (["graph", "{edges}", "--undirected"], "edges"),
    "import-hermes": (["import-hermes", "{pt}"], "pt"),
    "score": (["score", "{hist}", "{pred}"], "pred"),
}


def argv_for(command: str, toy: dict[str, Path], out: Path) -> list[str]:
    template, _ = COMMANDS[command]
    return [a.format(**{k: str(v) for k, v in toy.items()}) for a in template] + ["--quiet", "--out", str(out)]


# --------------------------------------------------------------------------
# data loss: an output that is an input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("alias", ["same", "dotdot", "symlink", "hardlink"])
def test_output_aliasing_an_input_is_refused(tmp_path, toy, capsys, command, alias):
    target = toy[COMMANDS[command][1]]
    if alias == "same":
        out = target
    elif alias == "dotdot":
        (tmp_path / "sub").mkdir()
        out = tmp_path / "sub" / ".." / target.name
    elif alias == "symlink":
        out = tmp_path / "link.h5"
        out.symlink_to(target)
    else:
        out = tmp_path / "hard.h5"
        os.link(target, out)
    err = refused(capsys, argv_for(command, toy, out), inputs=list(toy.values()), out=out, names="--out")
    assert "same file as the input" in err


@pytest.mark.parametrize("case", ["directory", "parent_is_file", "read_only", "fifo"])
def test_unwritable_output_is_refused_before_any_work(tmp_path, toy, capsys, case):
    if case == "directory":
        out = tmp_path / "adir"
        out.mkdir()
    elif case == "fifo":  # stands for /dev/null and other special files, which must never be replaced
        out = tmp_path / "fifo"
        os.mkfifo(out)
    elif case == "parent_is_file":
        out = toy["edges"] / "pred.h5"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        out = folder / "pred.h5"
    refused(capsys, argv_for("reconstruct", toy, out), inputs=list(toy.values()), out=None, names="--out")
    assert not out.is_file()
    if case == "fifo":
        assert stat.S_ISFIFO(out.stat().st_mode)


def test_outputs_follow_the_umask(tmp_path, toy):
    previous = os.umask(0o027)
    try:
        for command in ("reconstruct", "simulate", "graph", "import-hermes", "score"):
            out = tmp_path / f"out-{command}"
            assert main(argv_for(command, toy, out)) == 0
            assert stat.S_IMODE(out.stat().st_mode) == 0o640, command
    finally:
        os.umask(previous)
    out = tmp_path / "default-mask.h5"
    previous = os.umask(0o022)
    try:
        assert main(argv_for("graph", toy, out)) == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


# --------------------------------------------------------------------------
# memory safety: .pt views and narrowing casts
# --------------------------------------------------------------------------


def _pt_with_y(size, stride, offset=0, storage_class="LongStorage", numel=None) -> PtSpec:
    y = np.zeros((3, 3), dtype=np.int64)
    y[0] = 1
    spec = valid_pt(3, 2, [(0, 1), (1, 0), (1, 2), (2, 1)], y)
    y_tensor: Tensor = spec.mapping["y"]
    spec.mapping["y"] = Tensor(storage_class, y_tensor.key, y_tensor.numel if numel is None else numel,
                               offset, size, stride)
    return spec


@pytest.mark.parametrize("size,stride,offset", [
    ((3, 3), (1, -3), 0),           # a negative stride reads before the storage
    ((3, 3), (1, -(2**40)), 0),     # a huge negative stride (SIGSEGV before)
    ((3, 3), (1, 3), -4),           # a negative offset
    ((3, 3), (1, 3), 5),            # the view runs past the storage's end
    ((3, -3), (1, 3), 0),           # a negative size
    ((3, 2**40), (0, 0), 0),        # a view of 2**41 elements of one value: more than memory
    ((3, 3), (1,), 0),              # sizes and strides of different lengths
])
def test_pt_tensor_views_are_checked_against_storage(tmp_path, capsys, size, stride, offset):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(_pt_with_y(size, stride, offset).to_bytes())
    refused(capsys, ["import-hermes", str(bad), "--out", str(tmp_path / "h.h5")],
            inputs=[bad], out=tmp_path / "h.h5", names=str(bad))


def test_pt_huge_negative_stride_does_not_crash_a_process(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(_pt_with_y((3, 3), (1, -(2**45))).to_bytes())
    proc = subprocess.run([sys.executable, "-m", "battus.cli", "import-hermes", str(bad), "--out",
                           str(tmp_path / "h.h5")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr


@pytest.mark.parametrize("storage_class", ["ComplexFloatStorage", "BFloat16Storage", "UntypedStorage"])
def test_pt_unknown_storage_dtype_is_refused(tmp_path, capsys, storage_class):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(_pt_with_y((3, 3), (1, 3), storage_class=storage_class).to_bytes())
    refused(capsys, ["import-hermes", str(bad), "--out", str(tmp_path / "h.h5")],
            inputs=[bad], out=tmp_path / "h.h5", names=str(bad))


@pytest.mark.parametrize("T", [-3, 0, 10**12, 2**70, 2.5, "40"])
def test_pt_negative_or_absurd_T(tmp_path, capsys, T):
    y = np.zeros((3, 3), dtype=np.int64)
    y[0] = 1
    spec = valid_pt(3, 2, [(0, 1), (1, 2)], y, t_as_tensor=False)
    spec.mapping["T"] = T
    bad = tmp_path / "bad.pt"
    bad.write_bytes(spec.to_bytes())
    err = refused(capsys, ["import-hermes", str(bad), "--out", str(tmp_path / "h.h5")],
                  inputs=[bad], out=tmp_path / "h.h5", names=str(bad))
    assert ": T:" in err


def _edit(path: Path, edit) -> Path:
    with h5py.File(path, "a") as fh:
        edit(fh)
    return path


def _replace(fh, name, data):
    del fh[name]
    fh[name] = data


def test_int64_indices_beyond_int32_are_not_wrapped(tmp_path, toy, capsys):
    def edit(fh):
        indices = fh["graph/indices"][()].astype(np.int64)
        indices[0] += 2**32  # wraps back to a valid vertex if narrowed blindly
        _replace(fh, "graph/indices", indices)

    bad = _edit(toy["hist"], edit)
    out = tmp_path / "p.h5"
    err = refused(capsys, argv_for("reconstruct", toy, out), inputs=[bad], out=out, names="graph/indices")
    assert str(bad) in err


@pytest.mark.parametrize("name,data", [
    ("observations/times", np.array([3, 2**63 + 6], dtype=np.uint64)),
    ("graph/indptr", np.array([0] * 40 + [2**64 - 1], dtype=np.uint64)),
])
def test_unsigned_values_beyond_int64_are_not_wrapped(tmp_path, toy, capsys, name, data):
    bad = _edit(toy["hist"], lambda fh: _replace(fh, name, data))
    out = tmp_path / "p.h5"
    refused(capsys, argv_for("reconstruct", toy, out), inputs=[bad], out=out, names=name)


# --------------------------------------------------------------------------
# impossible evidence
# --------------------------------------------------------------------------


@pytest.mark.parametrize("n0,why", [(0, "holds infections"), (-2, "n0 must lie"), (41, "n0 must lie")])
def test_impossible_n0_is_refused(tmp_path, toy, capsys, n0, why):
    bad = _edit(toy["hist"], lambda fh: fh.attrs.__setitem__("n0", n0))
    out = tmp_path / "p.h5"
    err = refused(capsys, argv_for("reconstruct", toy, out), inputs=[bad], out=out, names="n0")
    assert why in err


@pytest.mark.parametrize("n0", ["0", "-1", "41"])
def test_simulate_refuses_n0_outside_1_to_n(tmp_path, toy, capsys, n0):
    out = tmp_path / "s.h5"
    refused(capsys, ["simulate", str(toy["hist"]), "--model", "sir", "--n0", n0, "--out", str(out)],
            inputs=[toy["hist"]], out=out, names="n0")


@pytest.mark.parametrize("model,code", [("sir", 3), ("sir", 255), ("si", 2), ("sir", 258)])
def test_score_refuses_invalid_state_codes(tmp_path, toy, capsys, model, code):
    def edit(fh):
        states = fh["states"][()].astype(np.int64)
        states[2, 5] = code
        _replace(fh, "states", states)

    pred = _edit(toy["pred"], edit)
    hist = toy["hist"]
    if model == "si":
        hist = _edit(hist, lambda fh: (fh.attrs.__setitem__("model", "si"),
                                       _replace(fh, "truth", np.minimum(fh["truth"][()], 1)),
                                       _replace(fh, "observations/states",
                                                np.minimum(fh["observations/states"][()], 1))))
    out = tmp_path / "s.json"
    err = refused(capsys, ["score", str(hist), str(pred), "--out", str(out)], inputs=[hist, pred], out=out,
                  names="states")
    assert str(pred) in err


def test_score_accepts_a_non_monotone_prediction(tmp_path, toy, capsys):
    def edit(fh):
        states = fh["states"][()]
        states[:, 0] = [1, 0, 1, 0, 2, 0, 1]
        _replace(fh, "states", states)

    pred = _edit(toy["pred"], edit)
    assert main(["score", str(toy["hist"]), str(pred)]) == 0


@pytest.mark.parametrize("lines", [["1 1", "2 2", "2 2"], ["# only comments", "5\t5"]])
def test_edge_list_empty_after_cleaning(tmp_path, capsys, lines):
    edges = tmp_path / "loops.txt"
    edges.write_text("\n".join(lines) + "\n")
    out = tmp_path / "g.h5"
    err = refused(capsys, ["graph", str(edges), "--undirected", "--out", str(out)], inputs=[edges], out=out,
                  names="edges")
    assert "no edge left after cleaning" in err


def test_dropped_self_loops_and_duplicates_are_reported(tmp_path, capsys):
    edges = tmp_path / "e.txt.gz"
    with gzip.open(edges, "wt") as fh:
        fh.write("1 2\n2 1\n1 2\n3 3\n2 3\n")
    assert main(["graph", str(edges), "--undirected", "--quiet", "--out", str(tmp_path / "g.h5")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"battus: warning: {edges}: dropped 1 self-loops and 2 duplicate edges"]


# --------------------------------------------------------------------------
# tracebacks that must be one line
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["dangling_soft", "external", "group_for_dataset", "string_dataset",
                                  "provenance_not_json", "provenance_array", "provenance_list",
                                  "T_float", "T_array", "model_int", "meta_not_json", "directed_text"])
def test_broken_links_and_attributes(tmp_path, toy, capsys, case):
    def edit(fh):
        if case == "dangling_soft":
            del fh["observations/times"]
            fh["observations/times"] = h5py.SoftLink("/nowhere")
        elif case == "external":
            del fh["truth"]
            fh["truth"] = h5py.ExternalLink(str(toy["pred"]), "/states")
        elif case == "group_for_dataset":
            del fh["observations/states"]
            fh.create_group("observations/states")
        elif case == "string_dataset":
            _replace(fh, "observations/times", np.array([b"3", b"6"]))
        elif case == "provenance_not_json":
            fh.attrs["provenance"] = "{not json"
        elif case == "provenance_array":
            fh.attrs["provenance"] = np.arange(4)
        elif case == "provenance_list":
            fh.attrs["provenance"] = "[1, 2]"
        elif case == "T_float":
            fh.attrs["T"] = 6.5
        elif case == "T_array":
            fh.attrs["T"] = np.array([6, 6])
        elif case == "model_int":
            fh.attrs["model"] = 3
        elif case == "meta_not_json":
            fh["graph"].attrs["meta"] = "nope"
        else:
            fh["graph"].attrs["directed"] = "maybe"

    bad = _edit(toy["hist"], edit)
    out = tmp_path / "s.json"
    err = refused(capsys, ["score", str(bad), str(toy["pred"]), "--out", str(out)], inputs=[bad, toy["pred"]],
                  out=out, names=str(bad))
    assert err.startswith(f"battus: error: {bad}: ")


@pytest.mark.parametrize("command", ["reconstruct", "simulate"])
def test_arrays_that_cannot_exist_are_refused_with_an_estimate(tmp_path, toy, capsys, command):
    out = tmp_path / "o.h5"
    if command == "reconstruct":
        def edit(fh):
            fh.attrs["T"] = 10**12
            del fh["truth"]

        hist = _edit(toy["hist"], edit)
        argv = ["reconstruct", str(hist), "--method", "battus-z", "--backend", "cpu", "--out", str(out)]
        names = "T"
    else:
        hist = toy["hist"]
        argv = ["simulate", str(hist), "--model", "sir", "--T", str(10**12), "--n0", "2", "--out", str(out)]
        names = "--T"
    err = refused(capsys, argv, inputs=[hist], out=out, names=names)
    assert re.search(r" needs \d+\.\d [TP]iB, more than this machine's ", err), err


@pytest.mark.parametrize("seed", ["-1", str(2**64), "1e3", "x"])
def test_seed_outside_64_bits(tmp_path, toy, capsys, seed):
    out = tmp_path / "s.h5"
    refused(capsys, ["simulate", str(toy["hist"]), "--model", "si", "--seed", seed, "--out", str(out)],
            inputs=[toy["hist"]], out=out, names="--seed")


def test_largest_seed_is_accepted(tmp_path, toy):
    out = tmp_path / "s.h5"
    assert main(["simulate", str(toy["hist"]), "--model", "si", "--T", "3", "--n0", "2", "--seed",
                 str(2**64 - 1), "--quiet", "--out", str(out)]) == 0


# --------------------------------------------------------------------------
# errors name what the user got wrong
# --------------------------------------------------------------------------


@pytest.mark.parametrize("T", ["-4", "0"])
def test_simulate_bad_T_names_T(tmp_path, toy, capsys, T):
    out = tmp_path / "s.h5"
    err = refused(capsys, ["simulate", str(toy["hist"]), "--model", "si", "--T", T, "--out", str(out)],
                  inputs=[toy["hist"]], out=out, names="--T")
    assert "--schedule" not in err


def test_short_indptr_names_indptr(tmp_path, toy, capsys):
    bad = _edit(toy["hist"], lambda fh: _replace(fh, "graph/indptr", fh["graph/indptr"][()][:-5]))
    out = tmp_path / "p.h5"
    err = refused(capsys, argv_for("reconstruct", toy, out), inputs=[bad], out=out, names="graph/indptr")
    assert "node_ids" not in err


@pytest.mark.parametrize("command", ["graph", "import-hermes", "reconstruct"])
def test_directory_as_input_says_directory(tmp_path, capsys, command):
    folder = tmp_path / "in"
    folder.mkdir()
    argv = {"graph": ["graph", str(folder), "--undirected"], "import-hermes": ["import-hermes", str(folder)],
            "reconstruct": ["reconstruct", str(folder), "--method", "battus-z"]}[command]
    out = tmp_path / "o.h5"
    err = refused(capsys, argv + ["--out", str(out)], inputs=[], out=out, names=str(folder))
    assert "is a directory" in err
