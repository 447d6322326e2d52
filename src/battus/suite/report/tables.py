"""The table model and its writers: CSV (long format), Markdown and LaTeX.

A :class:`Table` holds wide :class:`Panel` objects for reading and one tidy long frame
(:attr:`Table.tidy`) for analysis. :func:`write_table` writes

- CSV: the tidy frame. One row per number: the columns that say what was
  measured (``dataset``, ``label``, ``method``, ...), then ``metric`` and
  ``value``. Metric names carry their unit (``time_ms``, ``violation_fraction``);
  every proportion (F1, NRMSE, violation rates) is a fraction in [0, 1].
  Aggregates over datasets are rows with ``dataset = "all"`` and the metric
  says how they aggregate (``mean_f1``, ``geomean_time_ms``; a pooled
  ``violation_fraction`` is event-weighted). Every cell is filled: a value
  that was not reported (SPIN's OOM) is a missing row, not a blank cell.
- Markdown and LaTeX (booktabs): the wide panels, best values in bold (:data:`BOLD_RULE`), the
  paper's ``.8726`` number style, violation rates in percent (headers say %). The LaTeX is a
  ``table*`` float whose tabulars shrink to the text width where wider (``\\resizebox``), with
  math for symbols (``β^I`` is ``$\\beta^I$``, ``±`` is ``$\\pm$``): it compiles in a plain
  ``article`` with booktabs and graphicx.

Means over seeds (:class:`~battus.suite.report.seeds.SeedStat`) print ``mean ± sd`` (sample sd,
ddof 1) in Markdown and LaTeX; the tidy CSV gives the mean under the metric's own name plus
``<metric>_sd``, ``<metric>_ci95_low``, ``<metric>_ci95_high`` (Student-t interval of the mean
over seeds) and ``<metric>_n_seeds``.

Labels. Config labels are written LaTeX-style (``BA--SI``) because the .tex
tables need it; :func:`label_text` is the one conversion: an en dash for PNGs,
Markdown and CSV, ``--`` kept for LaTeX.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .seeds import SeedStat, seeded

BOLD_RULE = ("Bold: the best value of a column (or row) among the rows ranked; a mean over seeds only "
             "where its 95% interval does not overlap the runner-up's, else none; values of one run "
             "where best at the printed precision (ties all bold); none in a column (or row) where a "
             "ranked row's cell is empty, as a missing competitor could be the best; controls and single "
             "timings never.")


def label_text(text: str, latex: bool = False) -> str:
    """A config label as printed: ``--``/``---`` become an en/em dash (PNG, Markdown, CSV);
    with ``latex`` the Unicode dashes become ``--``/``---`` instead."""
    if latex:
        return text.replace("\u2014", "---").replace("\u2013", "--")
    return text.replace("---", "\u2014").replace("--", "\u2013")


@dataclass
class Panel:
    """One block of a table: raw values plus how to print and where to bold."""

    title: str
    frame: pd.DataFrame
    formats: dict[str, str] = field(default_factory=dict)  # column -> metric|pct|rank|int|ms|str
    best: dict[str, str] = field(default_factory=dict)  # column -> max|min (within the column)
    best_by: list[str] = field(default_factory=list)  # bold within groups of these columns
    row_best: tuple[list[str], str] | None = None  # (columns, max|min): bold the best of each row
    skip_best_rows: list[int] = field(default_factory=list)  # rows never bold (controls): not in any best
    rules_before: list[int] = field(default_factory=list)  # LaTeX \midrule before these rows
    # cells printed with a mark after the value, (row position, column) -> mark, e.g. a value converted
    # from another convention; mark_notes says what each mark means (a footnote of the caption)
    marks: dict[tuple[int, str], str] = field(default_factory=dict)
    mark_notes: dict[str, str] = field(default_factory=dict)


@dataclass
class Table:
    """A table of the paper: its panels, caption and note, and the tidy frame its CSV holds."""

    name: str
    caption: str
    panels: list[Panel]
    tidy: pd.DataFrame  # the CSV: one row per number (module docstring)
    note: str = ""
    protocol: str = ""  # how its numbers were made: frames observed, final frame pinned, NRMSE convention

    def caption_text(self) -> str:
        """The full caption: the title, the protocol, where a panel bolds the bold rule, and a footnote
        for each mark a cell carries (:attr:`Panel.marks`)."""
        bolds = any(p.best or p.row_best for p in self.panels)
        return " ".join(x for x in (f"{self.caption}.", self.protocol, BOLD_RULE if bolds else "",
                                    *self.footnotes()) if x)

    def footnotes(self) -> list[str]:
        """``"<mark> <meaning>"`` for every mark a printed cell carries, in order of first use."""
        used: dict[str, str] = {}
        for panel in self.panels:
            for mark in panel.marks.values():
                used.setdefault(mark, panel.mark_notes.get(mark, ""))
        return [f"{mark} {text}".strip() for mark, text in used.items()]


def long_rows(ids: dict, metrics: dict) -> list[dict]:
    """Rows of a tidy frame: ``ids`` repeated for each (metric, value), missing values left out.

    A mean over seeds gives its mean under the metric's name, then ``<metric>_sd``,
    ``<metric>_ci95_low``, ``<metric>_ci95_high`` and ``<metric>_n_seeds``.
    """
    rows = []
    for metric, value in metrics.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if seeded(value):
            low, high = value.ci95()
            rows += [{**ids, "metric": metric, "value": float(value)},
                     {**ids, "metric": f"{metric}_sd", "value": value.sd},
                     {**ids, "metric": f"{metric}_ci95_low", "value": low},
                     {**ids, "metric": f"{metric}_ci95_high", "value": high},
                     {**ids, "metric": f"{metric}_n_seeds", "value": value.n}]
            continue
        rows.append({**ids, "metric": metric, "value": float(value) if isinstance(value, SeedStat) else value})
    return rows


def panel_frame(rows: list[dict]) -> pd.DataFrame:
    """A panel's frame that keeps means over seeds as SeedStat cells (pandas would make them
    plain floats), so that Markdown and LaTeX can print their sd."""
    frame = pd.DataFrame(rows)
    for col in frame.columns:
        cells = [row.get(col) for row in rows]
        if any(seeded(c) for c in cells):
            frame[col] = pd.Series([np.nan if c is None else c for c in cells], index=frame.index, dtype=object)
    return frame


def tidy_frame(rows: list[dict]) -> pd.DataFrame:
    """A tidy frame whose ``value`` column keeps counts as integers (``884``, not ``884.0``)."""
    frame = pd.DataFrame(rows)
    if "value" in frame:
        frame["value"] = pd.Series([row["value"] for row in rows], index=frame.index, dtype=object)
    return frame


def fmt_value(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    text = _fmt_value(value, kind)
    # a difference that rounds to zero prints without a sign
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def _fmt_value(value, kind: str) -> str:
    if seeded(value) and kind in ("metric", "pct", "ms"):
        # a mean over seeds: mean ± sample sd
        return f"{fmt_value(float(value), kind)} \u00b1 {fmt_value(value.sd, kind)}"
    if kind == "metric":
        text = f"{float(value):.4f}"
        return text[1:] if text.startswith("0.") else text.replace("-0.", "-.")
    if kind == "rate":
        text = f"{float(value):.2f}"
        return text[1:] if text.startswith("0.") else text
    if kind == "pct":
        return f"{100.0 * float(value):.2f}"
    if kind == "rank":
        return f"{float(value):.2f}"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "ms":
        return f"{float(value):.0f}" if float(value) >= 10 else f"{float(value):.1f}"
    return str(value)


def _interval(value) -> tuple[float, float]:
    """A value's 95% interval: over seeds for a mean over seeds, else the value at the printed
    precision (four decimals)."""
    if seeded(value):
        return value.ci95()
    x = round(float(value), 4)
    return x, x


def best_cells(values: dict, how: str) -> list:
    """The keys of ``values`` (numbers, NaN = none) bold under :data:`BOLD_RULE`.

    The best mean wins alone where no other value's interval (:func:`_interval`) overlaps its own;
    where the only overlaps are exact ties of single-run values all of them win; an overlap that
    involves a mean over seeds is not a difference the table can show: none wins.
    """
    values = {k: v for k, v in values.items() if v is not None and not pd.isna(v)}
    if not values:
        return []
    means = {k: round(float(v), 4) for k, v in values.items()}
    best = max(means.values()) if how == "max" else min(means.values())
    lead = [k for k, m in means.items() if m == best]
    low, high = min(_interval(values[k])[0] for k in lead), max(_interval(values[k])[1] for k in lead)
    tied = [k for k in values if _interval(values[k])[0] <= high and _interval(values[k])[1] >= low]
    if any(seeded(values[k]) for k in tied) and len(tied) > 1:
        return []
    return tied


def bold_mask(panel: Panel) -> pd.DataFrame:
    """Where a panel prints bold (:data:`BOLD_RULE`): within each column (groups of ``best_by``) and
    each row of ``row_best``; rows of ``skip_best_rows`` (controls) are never bold nor compared;
    a time column (``ms``) only where every value compared is a mean over repeated runs."""
    df = panel.frame
    mask = pd.DataFrame(False, index=df.index, columns=df.columns)

    def empty(v) -> bool:
        return not seeded(v) and pd.isna(pd.to_numeric(v, errors="coerce"))

    eligible = ~df.index.isin(df.index[panel.skip_best_rows]) if panel.skip_best_rows else np.ones(len(df), bool)
    groups = [df.index[eligible]] if not panel.best_by else [
        idx[eligible[df.index.get_indexer(idx)]] for _, idx in df.groupby(panel.best_by, sort=False).groups.items()
    ]
    for col, how in panel.best.items():
        if col not in df:
            continue
        for idx in groups:
            cells = {i: df.at[i, col] for i in idx}
            cells = {i: (v if seeded(v) else pd.to_numeric(v, errors="coerce")) for i, v in cells.items()}
            if panel.formats.get(col) == "ms" and not all(seeded(v) for v in cells.values() if not pd.isna(v)):
                continue  # a single timing on a shared machine is not a difference worth bold
            if any(empty(v) for v in cells.values()):
                continue  # a competitor without a value here might be the best: no bold in this column
            for i in best_cells(cells, how):
                mask.at[i, col] = True
    if panel.row_best:
        cols, how = panel.row_best
        cols = [c for c in cols if c in df]
        for i in df.index[eligible]:
            cells = {c: (df.at[i, c] if seeded(df.at[i, c]) else pd.to_numeric(df.at[i, c], errors="coerce"))
                     for c in cols}
            if any(empty(v) for v in cells.values()):
                continue
            for c in best_cells(cells, how):
                mask.at[i, c] = True
    return mask


def formatted_panel(panel: Panel, bold) -> pd.DataFrame:
    """The printed cells: values in their format, a cell's mark (:attr:`Panel.marks`) after its value,
    ``bold`` around the cells :func:`bold_mask` picks."""
    mask = bold_mask(panel)
    out = pd.DataFrame(index=panel.frame.index)
    for col in panel.frame.columns:
        kind = panel.formats.get(col, "str")
        cells = []
        for k, (i, v) in enumerate(panel.frame[col].items()):
            text = fmt_value(v, kind)
            if text != "--":
                text += panel.marks.get((k, col), "")
            cells.append(bold(text) if mask.at[i, col] and text != "--" else text)
        out[col] = cells
    return out


# symbols printed as math in LaTeX (Markdown and CSV keep the Unicode); longest first
_TEX_MATH = (
    ("1/(T+1)\u00b7\u221a((MSE(h^I) + MSE(h^R))/2)", r"$\frac{1}{T+1}\sqrt{(\mathrm{MSE}(h^I)+\mathrm{MSE}(h^R))/2}$"),
    ("{\u230aT/2\u230b, T}", r"$\{\lfloor T/2\rfloor, T\}$"), ("{T}", r"$\{T\}$"),
    ("\u230aT/2\u230b", r"$\lfloor T/2\rfloor$"), ("\u00d7\u221a2", r"$\times\sqrt{2}$"), ("\u221a2", r"$\sqrt{2}$"),
    ("\u03b2^I", r"$\beta^I$"), ("\u03b2^R", r"$\beta^R$"), ("h^I", r"$h^I$"), ("h^R", r"$h^R$"), ("|E|", r"$|E|$"),
    ("\u2020", r"$^{\dagger}$"), ("\u00f7", r"$\div$"),
    ("\u00b1", r"$\pm$"), ("\u2192", r"$\rightarrow$"), ("\u00d7", r"$\times$"), ("\u0394", r"$\Delta$"),
    ("\u2212", r"$-$"), ("\u2265", r"$\geq$"), ("\u2264", r"$\leq$"), ("\u03c4", r"$\tau$"), ("\u03b2", r"$\beta$"),
    ("\u221a", r"$\surd$"), ("\u00b7", r"$\cdot$"), ("\u2248", r"$\approx$"), ("<", r"$<$"), (">", r"$>$"),
    ("|", r"$|$"),
)


def _tex_escape(text: str) -> str:
    """Plain text as LaTeX: special characters escaped, dashes as ``--``, symbols as math."""
    text = label_text(text, latex=True)
    marks = {}
    for k, (symbol, tex) in enumerate(_TEX_MATH):
        if symbol in text:
            marks[f"\x00{k}\x00"] = tex
            text = text.replace(symbol, f"\x00{k}\x00")
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("$", r"\$"), ("{", r"\{"), ("}", r"\}"), ("^", r"\textasciicircum{}"),
                 ("~", r"\textasciitilde{}")):
        text = text.replace(a, b)
    text = text.replace("\u2026", r"\ldots{}")
    for mark, tex in marks.items():
        text = text.replace(mark, tex)
    return text


def column_groups(columns: list[str]) -> list[tuple[str, list[str]]]:
    """Runs of adjacent columns named ``<group> <sub>`` with one group (``BA--SI F1``, ``BA--SI NRMSE``):
    (group, subheads); a column of no run is its own ("", [name]). The LaTeX prints the group once,
    spanning its subheads, which keeps wide tables narrow."""
    def split(c: str) -> list[str]:  # a trailing "(...)" belongs to the subhead: "NRMSE (DITTO)"
        head, paren = (c[:c.rindex(" (")], c[c.rindex(" ("):]) if c.endswith(")") and " (" in c else (c, "")
        return head.rsplit(" ", 1)[:1] + [head.rsplit(" ", 1)[1] + paren] if " " in head else ["", c]

    split = [split(c) for c in columns]
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(columns):
        j = i + 1
        while split[i][0] and j < len(columns) and split[j][0] == split[i][0]:
            j += 1
        out += [(split[i][0], [s for _, s in split[i:j]])] if j - i > 1 else [("", [columns[i]])]
        i = j
    return out


def _tex_head(text: str, width: int = 9) -> str:
    """A column header; a long one stacked on lines of about ``width`` characters (\\shortstack)."""
    if len(text) <= width:
        return _tex_escape(text)
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return r"\shortstack{" + r"\\".join(_tex_escape(x) for x in lines) + "}"


def _tabular(shown: pd.DataFrame, columns: list[str], align: str, rules_before: list[int]) -> str:
    """A booktabs tabular of formatted cells: a spanning header over each column group, a \\midrule
    before the rows of ``rules_before``."""
    groups = column_groups(columns)
    lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule"]
    if any(g for g, _ in groups):
        top, rules, col = [], [], 1
        for g, subs in groups:
            top.append(rf"\multicolumn{{{len(subs)}}}{{c}}{{{_tex_escape(g)}}}" if g else "")
            if g:
                rules.append(rf"\cmidrule(lr){{{col}-{col + len(subs) - 1}}}")
            col += len(subs)
        lines += [" & ".join(top) + r" \\", "".join(rules)]
        lines.append(" & ".join(_tex_head(s) for _, subs in groups for s in subs) + r" \\")
    else:
        lines.append(" & ".join(_tex_head(c) for c in columns) + r" \\")
    lines.append(r"\midrule")
    for k, (_, row) in enumerate(shown.iterrows()):
        if k in rules_before and k > 0:
            lines.append(r"\midrule")
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def _tex_cell(text: str) -> str:
    """A LaTeX cell: a value marked bold by :func:`formatted_panel` as ``\\textbf``, an indented
    label after ``\\quad``, the rest escaped (``±`` in math mode)."""
    bold = text.startswith("\x01") and text.endswith("\x01")
    text = text.strip("\x01")
    indent = len(text) - len(text.lstrip(" "))
    cell = (r"\quad " if indent else "") + _tex_escape(text.lstrip(" "))
    return rf"\textbf{{{cell}}}" if bold else cell


def table_csv(table: Table) -> str:
    """The tidy frame as CSV: labels with en dashes, labels' indentation stripped."""
    tidy = table.tidy.copy()
    for col in tidy.columns:
        if pd.api.types.is_string_dtype(tidy[col]):
            tidy[col] = tidy[col].map(lambda v: label_text(v.strip()) if isinstance(v, str) else v)
    return tidy.to_csv(index=False)


def table_markdown(table: Table) -> str:
    parts = [f"### {label_text(table.caption)}", ""]
    rest = table.caption_text()[len(table.caption) + 2:]
    if rest:
        parts += [f"*{label_text(rest)}*", ""]
    for panel in table.panels:
        if len(table.panels) > 1 or panel.title:
            parts += [f"**{label_text(panel.title)}**", ""]
        shown = formatted_panel(panel, lambda s: f"**{s}**").map(label_text)
        shown.columns = [label_text(str(c)) for c in shown.columns]
        parts += [shown.to_markdown(index=False, disable_numparse=True), ""]
    if table.note:
        parts += [label_text(table.note), ""]
    return "\n".join(parts)


WIDE_COLUMNS = 8  # a table with more columns than this spans both columns of a two-column paper
CHUNK_COLUMNS = 10  # LaTeX prints at most this many value columns a tabular, the label columns repeated


def _column_chunks(panel: Panel) -> list[list]:
    """A panel's columns as the LaTeX tabulars that print them: the leading label columns, then at
    most CHUNK_COLUMNS value columns each (a column of means over seeds counts two), never splitting a
    column group (:func:`column_groups`)."""
    columns = list(panel.frame.columns)
    lead = 0
    while lead < len(columns) and panel.formats.get(columns[lead], "str") == "str":
        lead += 1
    labels, rest = columns[:lead], columns[lead:]
    chunks, current, size = [], [], 0
    k = 0
    for _, subs in column_groups([str(c) for c in rest]):
        group = rest[k:k + len(subs)]
        k += len(subs)
        # a column of means over seeds prints "mean ± sd": it counts twice
        width = sum(2 if any(seeded(x) for x in panel.frame[c]) else 1 for c in group)
        if current and size + width > CHUNK_COLUMNS:
            chunks.append(current)
            current, size = [], 0
        current += group
        size += width
    if current or not chunks:
        chunks.append(current)
    return [labels + chunk for chunk in chunks]


def table_latex(table: Table) -> str:
    """The table as a booktabs float: ``table*`` where wide, each tabular shrunk to the text width
    where its natural width is more (``\\resizebox`` with ``\\width``: never enlarged)."""
    wide = max(len(p.frame.columns) for p in table.panels) > WIDE_COLUMNS if table.panels else False
    env = "table*" if wide else "table"
    parts = [
        f"% {table.name}: generated by battus.suite.report (booktabs, graphicx); do not edit",
        rf"\begin{{{env}}}[t]",
        rf"\caption[{_tex_escape(table.caption)}]{{{_tex_escape(table.caption_text())}}}",
        rf"\label{{tab:{table.name.replace('_', '-')}}}",
        r"\centering",
        r"\scriptsize",
        r"\setlength{\tabcolsep}{3pt}",
    ]
    for panel in table.panels:
        shown = formatted_panel(panel, lambda s: f"\x01{s}\x01")
        shown = shown.apply(lambda col: col.map(_tex_cell))
        if len(table.panels) > 1 or panel.title:
            parts.append(rf"\par\smallskip\emph{{{_tex_escape(panel.title)}}}\par")
        for k, columns in enumerate(_column_chunks(panel)):
            align = "".join("l" if panel.formats.get(c, "str") == "str" else "r" for c in columns)
            tabular = _tabular(shown[columns], [str(c) for c in columns], align, panel.rules_before)
            parts += ([r"\par\smallskip"] if k else []) + [
                r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%", tabular + "}"]
    if table.note:
        parts.append(rf"\par\smallskip{{\footnotesize {_tex_escape(table.note)}\par}}")
    parts.append(rf"\end{{{env}}}")
    return "\n".join(parts) + "\n"


def write_table(table: Table, csv: str | Path, md: str | Path, tex: str | Path) -> None:
    Path(csv).write_text(table_csv(table))
    Path(md).write_text(table_markdown(table))
    Path(tex).write_text(table_latex(table))


def seeds_note(table: Table) -> str:
    """What ``±`` means, where a table shows means over seeds ("" where none)."""
    counts = sorted({x.n for p in table.panels for col in p.frame.columns for x in p.frame[col] if seeded(x)})
    if not counts:
        return ""
    n = " or ".join(str(c) for c in counts)
    return (f"Simulated datasets repeated over {n} seeds: mean \u00b1 sample sd (ddof 1) over seeds; the CSV "
            "adds the 95% Student-t interval of the mean (_ci95_low, _ci95_high) and n_seeds.")
