"""What the report is made from: score files, published rows and history files.

:func:`load_scores` reads one score file per run, keyed ``"dataset|method|variant"``, and merges
the runs of a dataset repeated over seeds (:func:`~battus.suite.report.seeds.merge_seeds`);
:func:`score_of`, :func:`dataset_label`, :func:`method_label` and :func:`is_control` look runs
and labels up in them and in an item's spec. :func:`scores_long` is every number of every score
file in one long frame (the workflow's ``scores.csv``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from .seeds import merge_seeds
from .tables import tidy_frame


def load_scores(runs: list, paths: list, replicates: dict | None = None) -> dict[str, dict]:
    """Score JSONs keyed ``dataset|method|variant`` (``runs`` and ``paths`` in the same order).

    ``replicates`` maps a dataset simulated at another seed to the dataset it repeats (the spec's
    ``replicates``): the runs of one dataset over several seeds are merged (:func:`merge_seeds`)
    into one record under the dataset's own key, which keeps the per-seed records as ``seeds``.
    """
    if len(runs) != len(paths):
        raise ValueError(f"{len(runs)} runs but {len(paths)} score files")
    replicates = replicates or {}
    groups: dict[str, list[dict]] = {}
    for (d, m, v), path in zip(runs, paths, strict=True):
        groups.setdefault(f"{replicates.get(d, d)}|{m}|{v}", []).append(json.loads(Path(path).read_text()))
    out = {}
    for key, records in groups.items():
        out[key] = records[0] if len(records) == 1 else {**merge_seeds(records), "seeds": records}
    return out


def score_of(scores: dict, d: str, m: str, v: str) -> dict:
    """The score record of one run."""
    key = f"{d}|{m}|{v}"
    if key not in scores:
        raise KeyError(f"no score for {key}")
    return scores[key]


def dataset_label(spec: dict, d: str) -> str:
    """A dataset's label in the config (its name where none is given)."""
    return spec["datasets"].get(d, {}).get("label", d)


def method_label(spec: dict, m: str, v: str) -> str:
    """A run's label in the config (``method variant`` where none is given)."""
    return spec["labels"].get(f"{m}/{v}", f"{m} {v}")


def is_control(spec: dict, m: str, v: str) -> bool:
    """A positive or negative control (a check of the scorer and a floor): never ranked or bold."""
    return f"{m}/{v}" in spec.get("controls", ())


def read_published(path: str | Path) -> pd.DataFrame:
    """Published rows: method, dataset, f1, nrmse (empty = not reported, note says why), or the paper's
    tables one row per number (table, method, dataset, metric, value)."""
    df = pd.read_csv(path, comment="#")
    for col in ("f1", "nrmse", "value"):  # wide rows (f1, nrmse) or one row per number (value)
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def published_rows(published: pd.DataFrame | None, keys: list[str | None]) -> dict[str, list[tuple[float, float]]]:
    """Each published method's (F1, NRMSE) on the datasets ``keys``, in order; only methods that report
    every one of them (a value may be NaN: not reported), none where a dataset has no published key."""
    if published is None or not keys or not all(keys):
        return {}
    rows = {}
    for name, grp in published.groupby("method", sort=False):
        by = grp.set_index("dataset")
        if all(k in by.index for k in keys):
            rows[name] = [(float(by.at[k, "f1"]), float(by.at[k, "nrmse"])) for k in keys]
    return rows


UPSTREAM_MEASURED = "data/measured/upstream_methods.csv"
UPSTREAM_TAG = "(measured, upstream code)"
# the upstream methods' names as DITTO's paper prints them (the file has the plug-ins' names)
UPSTREAM_NAMES = {"cri": "CRI", "dhrec": "DHREC", "gcn": "GCN", "gin": "GIN"}


def read_measured(path: str | Path) -> pd.DataFrame:
    """Measured rows of the upstream methods (UPSTREAM_MEASURED): one per (method, dataset, protocol);
    only those that finished (``status`` ok: a run stopped at its time limit has no scores)."""
    df = read_published(path)
    df = df[df["status"].astype(str).str.strip() == "ok"].copy()
    for col in ("nrmse_ditto", "unobserved_f1", "unobserved_nrmse", "causal_violation_rate", "algorithm_seconds"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def measured_rows(measured: pd.DataFrame | None, spec: dict, datasets: list[str],
                  protocol: str) -> dict[str, list[dict | None]]:
    """Each upstream method's measured scores (f1, nrmse, nrmse_ditto) under ``protocol`` on ``datasets``,
    in order, None where it was not run; labelled ``<NAME> (measured, upstream code)``. Only datasets
    that are canonical exports (``published:`` in the config) match: the file's dataset names are the
    canonical configuration's, which another configuration may give to data of its own. Methods with
    no value on any of ``datasets`` are left out."""
    if measured is None or not datasets:
        return {}
    canonical = [d if spec["datasets"].get(d, {}).get("published") else None for d in datasets]
    rows = {}
    for name, grp in measured[measured["protocol"] == protocol].groupby("method", sort=False):
        by = grp.drop_duplicates("dataset", keep="last").set_index("dataset")
        values = [None if d is None or d not in by.index else
                  {k: float(by.at[d, k]) for k in ("f1", "nrmse", "nrmse_ditto")} for d in canonical]
        if any(v is not None for v in values):
            rows[f"{UPSTREAM_NAMES.get(str(name), str(name).upper())} {UPSTREAM_TAG}"] = values
    return rows


DITTO_PUBLISHED = "data/published/ditto_kdd23.csv"
PAPER_TABLES = "data/published/battus_paper_tables.csv"


SCORES_COLUMNS = ["dataset", "protocol", "method", "variant", "seed", "metric", "convention", "value"]


def protocol_of(observed_times: list[int], T: int) -> str:
    """The observation protocol a run was scored under: benchmark {floor(T/2), T}, final {T}, or custom."""
    from ...problem import schedule_times

    for name in ("benchmark", "final"):
        if list(observed_times) == schedule_times(T, name).tolist():
            return name
    return "custom"


NRMSE_CONVENTION = {
    "paper": ("NRMSE: the paper's convention, 1/(T+1)\u00b7\u221a((MSE(h^I) + MSE(h^R))/2) of hitting times "
              "(never reached = T+1), on SI the recovery term 0 with its 1/2 kept"),
    "ditto": ("NRMSE (DITTO): as DITTO's evaluation code computes it, on SI without the 1/2 (\u00d7\u221a2 "
              "the paper's convention), on SIR the same"),
}


def protocol_text(records: list[dict], scorer: str = "hermes", conventions: tuple[str, ...] = ("paper",),
                  schedule: str = "benchmark") -> str:
    """One sentence that says how the scores of ``records`` were made: the frames observed (from the
    records' ``observed_times`` and ``T``; ``schedule`` where a record does not say), whether the final
    frame is pinned, which frames are scored and the NRMSE ``conventions`` shown."""
    seen = {(int(round(float(r["T"]))), tuple(int(t) for t in r["observed_times"])) for r in records
            if "observed_times" in r and "T" in r}
    names = {protocol_of(list(times), T) for T, times in seen} or {schedule}
    described = {"benchmark": "{\u230aT/2\u230b, T}, HERMES's two-snapshot protocol",
                 "final": "{T} only, DITTO's single-snapshot protocol"}
    what = " and ".join(described.get(n, "as listed (a custom schedule)") for n in sorted(names))
    text = f"Protocol: observed frames {what}"
    if seen:
        shown = sorted(seen)
        frames = "; ".join(f"T = {T}: {{{', '.join(map(str, times))}}}" for T, times in shown[:6])
        text += f" ({frames}{'; ...' if len(shown) > 6 else ''})"
    if scorer == "unobserved":
        text += "; scored on the unobserved frames only (every observed frame dropped)"
    elif scorer == "both":
        text += ("; HERMES-compatible scores pin the predicted final frame to the observed one and score "
                 "every frame, unobserved-only scores drop every observed frame")
    elif scorer == "causal":
        text += "; violation rates of the predicted history as reconstructed (no frame pinned)"
    elif scorer == "hermes":
        text += "; the predicted final frame pinned to the observed one, every frame scored (HERMES-compatible)"
    text += "."
    for c in conventions:
        text += f" {NRMSE_CONVENTION[c]}."
    return text


def scores_long(runs: list, paths: list, seeds: dict, replicates: dict | None = None) -> pd.DataFrame:
    """Every number of every score file, one row each (SCORES_COLUMNS): the leaderboard's input.

    ``metric`` names the scorer and the measure (``hermes_f1``, ``unobserved_nrmse``,
    ``causal_violation_fraction``, ``time_ms``, ``calibration_brier``, ...); ``convention`` is
    ``paper`` or ``ditto`` for NRMSE and empty otherwise; ``seed`` is the simulation seed of a
    simulated dataset, empty for an imported one. A dataset simulated at another seed
    (``replicates``: its name -> the dataset it repeats) is written under the dataset it
    repeats, its own seed in ``seed``: one row per seed.
    """
    replicates = replicates or {}
    rows = []
    for (d, m, v), path in zip(runs, paths, strict=True):
        s = json.loads(Path(path).read_text())
        ids = {"dataset": replicates.get(d, d), "protocol": protocol_of(s["observed_times"], s["T"]),
               "method": m, "variant": v, "seed": "" if seeds.get(d) is None else seeds[d]}

        def add(metric: str, value, convention: str = "", ids: dict = ids) -> None:
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                rows.append({**ids, "metric": metric, "convention": convention, "value": value})

        for scorer in ("hermes", "unobserved"):
            add(f"{scorer}_f1", s[scorer]["f1"])
            add(f"{scorer}_nrmse", s[scorer]["nrmse"], "paper")
            add(f"{scorer}_nrmse", s[scorer].get("nrmse_ditto"), "ditto")
        causal = s["causal"]["prediction"]
        add("causal_violation_fraction", causal["rate"])
        add("causal_violations", causal["violations"])
        add("causal_events", causal["events"])
        add("time_ms", 1e3 * s["algorithm_seconds"])
        for key in ("brier", "log_loss", "ece", "overconfidence"):
            add(f"calibration_{key}", (s.get("calibration") or {}).get(key))
    return tidy_frame(rows).reindex(columns=SCORES_COLUMNS)


def history_summary(path: str | Path) -> dict:
    """n, |E| (arcs if directed else edges), T and model of a history file."""
    from ...io import read_history

    p = read_history(path)
    return {"n": p.n, "edges": p.graph.num_edges, "arcs": p.graph.m, "T": p.T, "model": p.model,
            "directed": p.graph.directed}
