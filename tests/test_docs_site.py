"""The documentation site (``make docs``): it builds in Sphinx's strict mode (a warning, a
broken cross-reference or a missing anchor fails it), its reference pages come from the
code, and a real headless browser shows the home page, a tutorial and a results page
with their tables and figures."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html"]
        + [str(ROOT / "docs"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _build(out)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def test_the_reference_pages_come_from_the_code(site):
    from balancebench.core.metric_definitions import METRIC_DEFINITIONS
    from balancebench.experiment.params import EXPERIMENT_PARAMS

    params = (ROOT / "docs/reference/generated/params.md").read_text(encoding="utf-8")
    metrics = (ROOT / "docs/reference/generated/metrics.md").read_text(encoding="utf-8")
    cli = (ROOT / "docs/reference/generated/cli.md").read_text(encoding="utf-8")
    assert all(f"></span>**`{name}`** (" in params for name in EXPERIMENT_PARAMS)
    assert '<span id="balance_experiment-zipf_s"></span>' in params  # an anchor per Param
    assert all(f"| `{name}` |" in metrics for name in METRIC_DEFINITIONS)
    assert "## `balancebench run`" in cli and "`--conf`" in cli
    api = (site / "reference/generated/api.html").read_text(encoding="utf-8")
    assert "MigrationPlan" in api and "verdict" in api


def test_a_broken_link_fails_the_build(tmp_path):
    # Given a copy of the site whose tutorial links to an anchor no page has
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("_build", "generated"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    for folder in ("src", "dags"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    page = docs / "tutorials/first-comparison.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n[gone](../results/crossover.md#no-such-heading)\n",
        encoding="utf-8",
    )
    # When it is built strictly, then it fails, naming the link
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(docs), str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode != 0
    assert "no-such-heading" in built.stderr


@pytest.mark.slow
def test_the_site_renders_in_a_browser(site):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium here: `make browser` installs Debian's package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto((site / "index.html").as_uri())
        assert "balancebench" in page.title()
        # the default run's verdict table, rendered from its rounds
        assert page.locator("table").first.is_visible()
        assert "capacity" in page.locator("table").first.inner_text()
        # the navigation reaches every section
        nav = page.locator(".sidebar-tree").inner_text().lower()
        for caption in ("Tutorials", "How-to guides", "Explanation", "Reference", "Results"):
            assert caption.lower() in nav
        page.goto((site / "tutorials/first-comparison.html").as_uri())
        assert page.locator("h1").first.inner_text().startswith("Your first comparison")
        page.goto((site / "results/paper000.html").as_uri())
        images = page.locator("article img")
        assert images.count() >= 7
        widths = images.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
        assert min(widths) > 0, widths  # every figure loaded
        browser.close()


def _code_texts(site: Path) -> list[tuple[str, str]]:
    """(page, text) of every code span and block of the built site, as a reader copies it."""
    import html
    import re

    found = []
    for page in sorted(site.rglob("*.html")):
        if "_modules" in page.parts or page.name in ("genindex.html", "search.html"):
            continue
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"<(?:code|pre)[^>]*>(.*?)</(?:code|pre)>", text, re.S):
            found.append((page.name, html.unescape(re.sub(r"<[^>]+>", "", block))))
    return found


#: Examples that are meant not to pass the door, each with why (the page says so).
REFUSED_ON_PURPOSE = {
    '{"n_nodes": 0, "n_nodes": 4}': "outputs.md: a duplicate key, refused",
    '{"strategies": ["hash", "qmmp", "mine"]}': "new-strategy.md: a strategy you add",
}


def test_every_json_example_on_the_site_parses_and_passes_its_door(site):
    """A JSON example copied from a page parses (straight quotes) and passes the Params
    door of the DAG its names belong to; templates (``<model>``, ``C``) are left out."""
    import json
    import re

    from balancebench.experiment.model_sweep import validate_model_params
    from balancebench.experiment.params import (
        EXPERIMENT_PARAMS,
        validate_dataset_params,
        validate_params,
    )
    from balancebench.orchestration.sweep_grid import SWEEP_PARAMS, validate_sweep_params

    examples = {
        (page, m.group(0))
        for page, text in _code_texts(site)
        for m in re.finditer(r"\{\"[^\n]*\}", text)
    }
    assert len(examples) >= 10
    # Nor in the prose: Sphinx's smart quotes once turned '{"zipf_s": 1.2}' into curly ones.
    curly = [p.name for p in site.rglob("*.html") if "{“" in p.read_text(encoding="utf-8")]
    assert not curly, curly
    checked = 0
    for page, example in sorted(examples):
        if re.search(r"<|\b[A-Z]\b|\.\.\.", example) or example in REFUSED_ON_PURPOSE:
            continue
        if page == "history.html":  # past runs quoted as they were, old Param names too
            continue
        try:
            values = json.loads(example)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{page}: {example} does not parse ({exc})") from None
        if set(values) <= set(EXPERIMENT_PARAMS):
            door = validate_params
        elif set(values) <= set(SWEEP_PARAMS):
            door = validate_sweep_params
        elif "model" in values:
            door = validate_model_params
        else:
            door = validate_dataset_params
        try:
            door(values)
        except ValueError as exc:
            raise AssertionError(f"{page}: {example} is refused: {exc}") from None
        checked += 1
    assert checked >= 10


def test_every_command_on_the_site_has_its_help(site):
    """Each ``balancebench <command>`` a page shows exists (``--help`` exits 0)."""
    import re

    commands = {
        m.group(1)
        for _, text in _code_texts(site)
        # (not the log lines' "[balancebench progress]" prefix)
        for m in re.finditer(r"(?<![\[\w/.-])balancebench ([a-z][a-z-]+)", text)
    }
    assert {"run", "report", "generate"} <= commands
    cli = str(Path(sys.executable).parent / "balancebench")
    for command in sorted(commands):
        done = subprocess.run([cli, command, "--help"], capture_output=True, text=True)
        assert done.returncode == 0, f"balancebench {command} --help: {done.stderr[-500:]}"
