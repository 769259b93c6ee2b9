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
    from balancebench.experiment_params import EXPERIMENT_PARAMS
    from balancebench.metric_definitions import METRIC_DEFINITIONS

    params = (ROOT / "docs/reference/generated/params.md").read_text(encoding="utf-8")
    metrics = (ROOT / "docs/reference/generated/metrics.md").read_text(encoding="utf-8")
    cli = (ROOT / "docs/reference/generated/cli.md").read_text(encoding="utf-8")
    assert all(f"- **`{name}`** (" in params for name in EXPERIMENT_PARAMS)
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
