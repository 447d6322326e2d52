"""The HTML report as a reader sees it: headless Chromium opens the built report, its first page,
every table and every figure, and checks that numbers are on the screen.

The report is a JavaScript app (Snakemake's), so the test drives a real browser (Selenium and
chromedriver) instead of reading the file: it clicks each result's view button, as a reader would,
and reads what is displayed: a table's page in its frame (cells with numbers, bold best values),
a figure's image (decoded, non-empty), a CSV's download link (a data URI holding numbers). The
report is built from config/test/tiny.yaml, once for the module, as one file and as the zip (whose
results are files beside report.html). Skips, saying why, where Chromium, chromedriver or Selenium
is absent (Debian: apt-get install chromium chromium-driver; pip: the `test` extra).
"""

from __future__ import annotations

import base64
import csv
import io
import math
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BIN = Path(sys.executable).parent
SNAKEMAKE = str(_BIN / "snakemake") if (_BIN / "snakemake").exists() else (shutil.which("snakemake") or "snakemake")
CHROMIUM = os.environ.get("BATTUS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = os.environ.get("BATTUS_CHROMEDRIVER") or shutil.which("chromedriver")
NUMBER = re.compile(r"(?<![\w.])-?\d*\.\d{2,}")  # .8726, 0.25, 12.50: a printed measurement

try:
    import selenium  # noqa: F401

    _SELENIUM = True
except ImportError:
    _SELENIUM = False

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM, reason="Chromium is not installed (apt-get install chromium chromium-driver)"),
    pytest.mark.skipif(not CHROMEDRIVER, reason="chromedriver is not installed (apt-get install chromium-driver)"),
    pytest.mark.skipif(not _SELENIUM, reason="selenium is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(shutil.which(SNAKEMAKE) is None, reason="snakemake is not installed"),
]


def _snakemake(work: Path, *args: str) -> None:
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--cores", "2", "--nocolor",
           "--configfile", str(ROOT / "config/test/tiny.yaml"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The tiny configuration run, and its report as report.html and as report.zip, unpacked."""
    work = tmp_path_factory.mktemp("report")
    _snakemake(work)
    _snakemake(work, "--report", str(work / "report.html"))
    _snakemake(work, "--report", str(work / "report.zip"))
    with zipfile.ZipFile(work / "report.zip") as zf:
        zf.extractall(work / "unzipped")
    return work


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def _open(driver, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return typeof app !== 'undefined' && !!app.state"))


def _wait(driver, predicate, what: str, timeout: float = 30):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(predicate)
    except TimeoutException:
        raise AssertionError(f"the report never showed {what}") from None


def _results(driver) -> dict[str, dict]:
    """The report's results: path -> category, MIME type and the text of its row's first cell
    (its first label, or its path where the category's results have no labels)."""
    return driver.execute_script("""
        const out = {};
        for (const [cat, subcats] of Object.entries(categories))
            for (const paths of Object.values(subcats))
                for (const p of paths) {
                    const labels = results[p].labels;
                    out[p] = {category: cat, mime: getResultMimeType(p), params: results[p].job_properties.params,
                              row: labels ? String(Object.values(labels)[0]) : p};
                }
        return out;""")


def _view_button(driver, path: str, info: dict):
    """Show the item's category and return the view (eye) button of its row."""
    # through the menu, as a reader goes: the results list is built when it is first shown
    driver.execute_script("app.setView({navbarMode: 'menu'})")
    _wait(driver, lambda d: not d.find_elements("css selector", "table.table-auto"), "the menu")
    driver.execute_script("app.showCategory(arguments[0])", info["category"])

    def button(d):
        for row in d.find_elements("css selector", "table.table-auto tbody tr"):
            cells = row.find_elements("css selector", "td")
            if cells and cells[0].text.strip() == info["row"]:
                links = cells[-1].find_elements("css selector", "a")
                return links[0] if links else False
        return False

    return _wait(driver, button, f"the row of {path}")


def _in_frame(driver, path: str) -> tuple[str, list[str], int]:
    """The displayed page's text, its table cells and how many of them are bold."""
    frame = _wait(driver, lambda d: d.execute_script(
        "const f = document.querySelector('iframe');"
        "return f && f.getAttribute('src') === results[arguments[0]].data_uri && f;", path),
        f"the frame of {path}")
    driver.switch_to.frame(frame)
    try:
        _wait(driver, lambda d: d.find_elements("css selector", "h1"), f"the page of {path}")
        text = driver.find_element("css selector", "body").text
        cells = [c.text for c in driver.find_elements("css selector", "td")]
        bold = len(driver.find_elements("css selector", "td strong"))
    finally:
        driver.switch_to.default_content()
    return text, cells, bold


def _csv_text(href: str, page: Path) -> str:
    """What a CSV's download link holds: a data URI in the single-file report, a file in the zip."""
    if href.startswith("data:"):
        head, data = href.split(",", 1)
        return base64.b64decode(data).decode() if ";base64" in head else urllib.parse.unquote(data)
    assert href.startswith("file:"), href
    return Path(urllib.parse.unquote(urllib.parse.urlparse(href).path)).read_text()


def _empty_tables(work: Path) -> set[str]:
    """Tables that say no number applies to this run (a CSV of its header alone, e.g. the paper's
    numbers beside a run without the paper's data): their pages show a sentence, not numbers."""
    return {p.stem for p in (work / "results/report/tables").glob("*.csv") if len(p.read_text().splitlines()) < 2}


def _check_all_items(driver, page: Path, work: Path) -> dict[str, int]:
    """Open every result of the report by its view button; what was seen, by kind."""
    empty = _empty_tables(work)
    _open(driver, page)
    items = _results(driver)
    assert {i["category"] for i in items.values()} >= {"Tables", "Figures", "Scores", "About this run"}
    seen = {"table": 0, "figure": 0, "csv": 0, "bold": 0, "summary": 0}
    for path, info in items.items():
        # the information panel lists the rule's params: a few names, not the item's whole spec
        assert len(info["params"] or "") < 300 or info["category"] == "Scores", f"{path}: {info['params'][:300]}"
        button = _view_button(driver, path, info)
        if path.endswith(".csv"):  # its button downloads it: read what it would save
            reader = csv.DictReader(io.StringIO(_csv_text(button.get_attribute("href") or "", page)))
            rows = list(reader)
            assert "value" in (reader.fieldnames or []), f"{path}: not a long CSV"
            assert (rows or Path(path).stem in empty) and all(math.isfinite(float(r["value"])) for r in rows), \
                f"{path}: not numbers"
            seen["csv"] += 1
            continue
        button.click()
        if info["mime"] == "text/html":
            text, cells, bold = _in_frame(driver, path)
            if info["category"] == "Tables" and Path(path).stem in empty:
                assert cells and len(text) > 40, f"{path}: an empty page"
                seen["table"] += 1
            elif info["category"] == "Tables":
                numeric = [c for c in cells if NUMBER.search(c) or c.strip().replace(",", "").isdigit()]
                assert len(numeric) >= 2, f"{path}: no numbers in its cells: {cells[:20]}"
                seen["table"] += 1
                seen["bold"] += bold
            else:
                assert "Battus report" in text and NUMBER.search(text), f"{path}: {text[:300]}"
                seen["summary"] += 1
        elif info["mime"].startswith("image/"):
            img = _wait(driver, lambda d, path=path: d.execute_script(
                "return [...document.querySelectorAll('img')]"
                ".find(i => i.getAttribute('src') === results[arguments[0]].data_uri);",
                path), f"the image of {path}")
            _wait(driver, lambda d, img=img: d.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth > 100", img), f"{path} decoded")
            seen["figure"] += 1
        else:
            raise AssertionError(f"{path}: unexpected type {info['mime']}")
    return seen


def test_first_page_says_what_ran(built, browser):
    _open(browser, built / "report.html")
    text = _wait(browser, lambda d: "Battus report" in d.find_element("css selector", "body").text
                 and d.find_element("css selector", "body").text, "the first page")
    assert "battus-tiny" in text
    assert re.search(r"random control scores SI mean F1 \.\d{4}, NRMSE \.\d{4}", text), text[:3000]
    assert "not a floor" in text
    for needle in ("Battus:", "Machine:", "Wall time:", "Libraries:", "numpy", "ba-sir", "Controls",
                   "Baselines", "forward-fill"):
        assert needle in text, needle


def test_every_table_and_figure_opens_with_numbers(built, browser):
    seen = _check_all_items(browser, built / "report.html", built)
    tables = len(list((built / "results/report/tables").glob("*.html")))
    figures = len(list((built / "results/report/figures").glob("*.png")))
    assert seen["table"] == tables > 0 and seen["figure"] == figures > 0 and seen["summary"] == 1
    assert seen["csv"] == tables + 1  # each table's long CSV, and scores.csv
    assert seen["bold"] > 0  # best values in bold, as in the Markdown and LaTeX
    assert len(_empty_tables(built)) <= 1  # at most one table with nothing to show on the tiny run


def test_zip_report_opens_its_tables_and_figures(built, browser):
    page = next((built / "unzipped").rglob("report.html"))
    seen = _check_all_items(browser, page, built)
    assert seen["table"] > 0 and seen["figure"] > 0 and seen["csv"] > 0
