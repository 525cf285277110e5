"""The documentation site: built by Sphinx, opened in headless Chromium.

The site is built once per session with the README's command (warnings are errors) unless
``docs/_build/html`` already holds a build. Skipped, with the reason, where Sphinx (the
``[docs]`` extra) or Debian's ``chromium`` is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import mixfold

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"
GALLERY = sorted(p.stem for p in (ROOT / "docs" / "gallery").glob("plot_*.py"))


@pytest.fixture(scope="module")
def site() -> Path:
    pytest.importorskip("sphinx", reason="the docs need the [docs] extra: "
                                         "pip install -e '.[docs]'")
    if not (SITE / "index.html").is_file():
        subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "-b", "html", "docs",
                        str(SITE)], cwd=ROOT, check=True)
    return SITE


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (as root: apt-get install -y chromium)")
    return found


def dump_dom(chromium: str, url: str) -> str:
    """The page's DOM after its scripts ran (headless, no network: the site is local)."""
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          "--virtual-time-budget=15000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


class _Links(HTMLParser):
    """Every href and img src of a page, and every id it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])


def parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def test_search_page_finds_optimize(site: Path, chromium: str) -> None:
    dom = dump_dom(chromium, (site / "search.html").as_uri() + "?q=optimize")
    assert 'href="api/fitting.html#mixfold.optimize"' in dom
    found = re.search(r"found (\d+) pages? matching", dom)
    assert found and int(found.group(1)) >= 1


@pytest.mark.parametrize("example", GALLERY)
def test_gallery_page_has_its_image(site: Path, chromium: str, example: str) -> None:
    page = site / "auto_examples" / f"{example}.html"
    dom = dump_dom(chromium, page.as_uri())
    p = _Links()
    p.feed(dom)
    figures = [src for src in p.images if f"sphx_glr_{example}_0" in src]
    assert figures, f"{example}: no figure on its page"
    for src in figures:
        png = (page.parent / unquote(src)).resolve()
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{src} is not a PNG"
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        assert width >= 300 and height >= 200, f"{src}: {width}x{height}"


def test_every_gallery_script_is_on_the_site(site: Path) -> None:
    index = parse(site / "auto_examples" / "index.html")
    assert {f"{e}.html" for e in GALLERY} <= {urlsplit(h).path for h in index.links}
    assert len(GALLERY) >= 6


def test_every_public_name_is_in_the_api_reference(site: Path) -> None:
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    documented = {name for kind, names in inventory.items() if kind.startswith("py:")
                  for name in names}
    missing = [n for n in mixfold.__all__ if f"mixfold.{n}" not in documented
               and not any(d.endswith(f".{n}") for d in documented)]
    assert missing == []


def test_internal_links_resolve(site: Path) -> None:
    """Every relative href and img src of every page points at a file, and a #fragment at an
    id on that page (no network: external links are not followed)."""
    pages = {p: parse(p) for p in site.rglob("*.html")}
    broken = []
    for page, p in pages.items():
        for target in p.links + p.images:
            parts = urlsplit(target)
            if parts.scheme or target.startswith("//") or target.startswith("mailto:"):
                continue
            file = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if file.is_dir():
                file = file / "index.html"
            if not file.is_file():
                broken.append(f"{page.relative_to(site)} -> {target}")
            elif parts.fragment and file.suffix == ".html":
                ids = pages[file].ids if file in pages else parse(file).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)} -> {target} (no such id)")
    assert not broken, "\n".join(broken)
