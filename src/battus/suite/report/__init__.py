"""The paper's tables and figures, assembled from score files.

The workflow's report rules call :func:`make` with an item's *spec* (its experiments'
configuration, dataset labels, run labels), its runs and the files it reads. The registry
(:mod:`.registry`, :data:`REPORT_ITEMS`) says for every table and figure which experiments it
shows and which input files it reads, so the rules and scripts never ask for an item by name.

- :mod:`.seeds`: means over seeds (:class:`SeedStat`), their sd and 95% Student-t interval.
- :mod:`.tables`: the table model (:class:`Table`, :class:`Panel`) and its CSV (long format),
  Markdown and LaTeX writers; :func:`label_text`, the one conversion of config labels.
- :mod:`.scores`: reading score files (merged over seeds), published rows and history
  summaries; :func:`scores_long`, every number of every score file (``scores.csv``).
- :mod:`.comparison_tables`, :mod:`.sensitivity_tables`: the table builders.
- :mod:`.figures`: the figures (matplotlib is imported only when one is drawn).
- :mod:`.registry`: :data:`REPORT_ITEMS` and what the workflow asks of them.
"""

from .figures import method_color
from .registry import (
    INPUT_KINDS,
    REPORT_ITEMS,
    ItemData,
    ReportItem,
    build_table,
    make,
    read_inputs,
    render_figure,
    report_datasets,
    report_made,
    report_reads,
    report_runs,
    report_spec,
)
from .scores import (
    DITTO_PUBLISHED,
    SCORES_COLUMNS,
    UPSTREAM_MEASURED,
    load_scores,
    read_measured,
    read_published,
    scores_long,
)
from .seeds import SeedStat, merge_seeds, seed_mean, seeded, t975
from .tables import Panel, Table, bold_mask, fmt_value, label_text, long_rows, table_csv, table_latex, write_table

__all__ = [
    "DITTO_PUBLISHED", "INPUT_KINDS", "REPORT_ITEMS", "SCORES_COLUMNS", "UPSTREAM_MEASURED", "ItemData", "Panel",
    "ReportItem", "SeedStat",
    "Table", "bold_mask", "build_table", "fmt_value", "label_text", "load_scores", "long_rows", "make",
    "merge_seeds", "method_color", "read_inputs", "read_measured", "read_published", "render_figure", "report_datasets",
    "report_made", "report_reads", "report_runs", "report_spec", "scores_long", "seed_mean", "seeded", "t975",
    "table_csv", "table_latex", "write_table",
]
