"""The files a user reads before running anything: config/README.md, LICENSE, CITATION.cff."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_config_readme_describes_every_top_level_key():
    schema = yaml.safe_load((ROOT / "config/schemas/config.schema.yaml").read_text())
    readme = (ROOT / "config/README.md").read_text()
    described = set(re.findall(r"^\| `([a-z_]+)` \|", readme, flags=re.M))
    assert described == set(schema["properties"]), "config/README.md's key table and the schema differ"


def test_config_readme_lists_every_config_file():
    readme = (ROOT / "config/README.md").read_text()
    files = {p.relative_to(ROOT / "config").as_posix() for p in (ROOT / "config").rglob("*.yaml")}
    files -= {"schemas/config.schema.yaml"}
    for name in files:
        assert name in readme or name.replace("test/", "") in readme, name


def test_citation_matches_the_package():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert citation["cff-version"] == "1.2.0"
    assert citation["version"] == project["version"]
    assert citation["license"] == project["license"]["text"]
    assert "MIT License" in (ROOT / "LICENSE").read_text().splitlines()[0]
    assert citation["preferred-citation"]["title"].startswith("Algorithmic Simplification")
