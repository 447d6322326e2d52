"""A table as one self-contained HTML page: the paper's wide layout, for the HTML report.

The page holds what the Markdown and LaTeX writers print (:mod:`.tables`): the caption (with
the protocol, the bold rule and the footnotes of marked cells), every panel with its title, the
formatted cells with the best values in bold, the LaTeX midrules as separators, and the note
under the table. It is a whole document with its own small stylesheet and no script or outside
resource, so Snakemake's report shows it inline (in an iframe) in the single-file report and in
the zip alike.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from .tables import Panel, Table, formatted_panel, label_text

_BOLD_OPEN, _BOLD_CLOSE = "\x00b\x01", "\x00/b\x01"  # markers that no cell text contains

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 14px;
       color: #1f2937; margin: 1.2em 1.5em; }
h1 { font-size: 1.05em; font-weight: 600; max-width: 60em; line-height: 1.4; }
h2 { font-size: 0.95em; font-weight: 600; font-style: italic; margin: 1.4em 0 0.4em; }
table { border-collapse: collapse; margin: 0.3em 0 1em; font-variant-numeric: tabular-nums; }
thead th { border-top: 2px solid #111; border-bottom: 1px solid #111; font-weight: 600; }
th, td { padding: 0.25em 0.8em; white-space: nowrap; }
tbody tr:last-child td { border-bottom: 2px solid #111; }
tr.rule td { border-top: 1px solid #9ca3af; }
td.num, th.num { text-align: right; }
td.text, th.text { text-align: left; }
td.indent { padding-left: 2em; }
p.caption { max-width: 60em; color: #374151; font-size: 0.92em; line-height: 1.45; margin-top: -0.3em; }
p.note { max-width: 60em; color: #374151; font-size: 0.92em; line-height: 1.45; }
p.files { color: #6b7280; font-size: 0.85em; }
"""


def _cell(text: str) -> str:
    """One formatted cell as HTML: escaped, label dashes as printed, bold markers as <strong>."""
    shown = escape(label_text(text.strip(" ")))
    return shown.replace(escape(_BOLD_OPEN), "<strong>").replace(escape(_BOLD_CLOSE), "</strong>")


def panel_html(panel: Panel) -> str:
    """One panel as an HTML table: header, formatted rows (bold where the writers bold), rules."""
    shown = formatted_panel(panel, lambda s: f"{_BOLD_OPEN}{s}{_BOLD_CLOSE}")
    kinds = {c: "text" if panel.formats.get(c, "str") == "str" else "num" for c in panel.frame.columns}
    head = "".join(f'<th class="{kinds[c]}">{escape(label_text(str(c)))}</th>' for c in panel.frame.columns)
    rows = []
    for k, (_, row) in enumerate(shown.iterrows()):
        cells = []
        for col in panel.frame.columns:
            text = str(row[col])
            classes = [kinds[col]] + (["indent"] if text.startswith(" ") and kinds[col] == "text" else [])
            cells.append(f'<td class="{" ".join(classes)}">{_cell(text)}</td>')
        rule = ' class="rule"' if k in panel.rules_before and k > 0 else ""
        rows.append(f"<tr{rule}>{''.join(cells)}</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def table_html(table: Table, files: str = "") -> str:
    """The table as a whole HTML document (caption as heading, panels, note); ``files`` an optional
    line under it (e.g. where the CSV, Markdown and LaTeX files are)."""
    parts = [f"<h1>{escape(label_text(table.caption))}</h1>"]
    rest = table.caption_text()[len(table.caption) + 2:]  # protocol, bold rule, footnotes of marked cells
    if rest:
        parts.append(f'<p class="caption">{escape(label_text(rest))}</p>')
    for panel in table.panels:
        if len(table.panels) > 1 or panel.title:
            parts.append(f"<h2>{escape(label_text(panel.title))}</h2>")
        parts.append(panel_html(panel))
    if table.note:
        parts.append(f'<p class="note">{escape(label_text(table.note))}</p>')
    if files:
        parts.append(f'<p class="files">{escape(files)}</p>')
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(table.name)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")


def write_table_html(table: Table, path: str | Path) -> None:
    name = Path(path).stem
    files = (f"The same table: {name}.md (Markdown) and {name}.tex (LaTeX) for reading, {name}.csv (long "
             "format, one row per number) for analysis, beside this file under report/tables.")
    Path(path).write_text(table_html(table, files), encoding="utf-8")
