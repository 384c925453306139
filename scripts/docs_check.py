"""Look at the built docs as a reader does: in headless Chromium, offline.

``make docs-check`` (after ``make docs``) opens every page of
``docs/_build/html`` from disk in Debian's ``chromium``, driven by the
``playwright`` package (which can drive an installed browser, so nothing is
downloaded), with every non-``file:`` request blocked. A page fails when

* a code block, display formula or table is wider than its box (its end is
  cut off or hidden behind a horizontal scrollbar) or runs past the main
  column,
* a math delimiter ``\\(``, ``\\)``, ``\\[`` or ``\\]`` is visible as text
  (MathJax did not typeset the formula), MathJax reports an error, or a
  backslash is printed inside a formula's text (``\\_`` in ``\\text{}``),
* it asks for anything over the network (the docs must work offline).

With ``--screenshots DIR`` (``make docs-check DOCS_SCREENSHOTS=DIR``) it
also writes a full-page PNG screenshot of each page (a long page in tiles of
at most 8,000 px: ``api-1.png``, ``api-2.png``, ...), for a person to look
at; the checks do not need them. Without Chromium or playwright it prints why
and skips (exit 0), except under CI (``CI`` set) or with
``--require-browser``, where it fails (exit 2).

    python scripts/docs_check.py docs/_build/html --screenshots docs/_build/screenshots

The decisions are pure functions over measurements taken in the page, so
they are tested without a browser (tests/test_docs_check.py).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

# Pages every build has: one missing means the docs were not built (or lost a page).
KEY_PAGES = ("index.html", "quickstart.html", "quickstart_cn.html", "adamwdl.html", "schedules.html")
# A desktop browser window: the width a newcomer reads the docs at.
VIEWPORT = {"width": 1280, "height": 900}
CHROMIUM_FLAGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often give /dev/shm 64 MB, too little for a long page's capture
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MATH_DELIMITERS = ("\\(", "\\)", "\\[", "\\]")
# The tallest capture taken at once: one full-page capture of a 70,000 px page
# (the API reference) fails intermittently with "Unable to capture screenshot".
SCREENSHOT_TILE_PX = 8000
# Sub-pixel layout rounding, not overflow.
TOLERANCE_PX = 1.0

# Runs in the page after MathJax has finished; returns what the pure
# functions below judge. Text inside code, or inside MathJax's own output, may
# legitimately contain backslashes, so only prose text nodes are returned.
MEASURE_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    // A MathJax that never finishes is reported as untypeset math, not waited for.
    await Promise.race([MathJax.startup.promise, new Promise(done => setTimeout(done, 20000))]);
  }
  const main = document.querySelector('[role="main"]') || document.body;
  const column = main.getBoundingClientRect();
  const kinds = [['pre', 'code block'], ['mjx-container[display="true"]', 'formula'], ['table', 'table']];
  const blocks = [];
  for (const [selector, kind] of kinds) {
    for (const element of main.querySelectorAll(selector)) {
      if (!element.checkVisibility()) continue;
      // Themes put wide tables in a scrolling wrapper: what is hidden is the wrapper's overflow.
      const parent = element.parentElement;
      const box = kind === 'table' && getComputedStyle(parent).overflowX !== 'visible' ? parent : element;
      blocks.push({
        kind: kind,
        label: (element.innerText || element.textContent).trim().split('\\n')[0].slice(0, 60),
        scrollWidth: box.scrollWidth,
        clientWidth: box.clientWidth,
        right: element.getBoundingClientRect().right,
        // A scrolling wrapper may be a little wider than the column (its padding); the table must fit in it.
        limitRight: box === element ? column.right : box.getBoundingClientRect().right,
        top: Math.round(element.getBoundingClientRect().top + window.scrollY),
      });
    }
  }
  const prose = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !node.textContent.includes('\\\\')) continue;
    if (parent.closest('pre, code, script, style, mjx-container')) continue;
    if (parent.checkVisibility()) prose.push(node.textContent);
  }
  const textOf = selector => [...main.querySelectorAll(selector)].map(e => e.textContent);
  return {
    viewportWidth: window.innerWidth,
    blocks: blocks,
    proseWithBackslash: prose,
    mathElements: main.querySelectorAll('.math').length,
    typesetMath: main.querySelectorAll('mjx-container').length,
    mathErrors: textOf('mjx-merror'),
    mathTexts: textOf('mjx-assistive-mml mtext'),
  };
}
"""


def layout_problems(measure: dict[str, Any]) -> list[str]:
    """Code blocks, display formulas and tables that do not fit the page.

    A block fails when its content is wider than its box (the end is cut off
    or hidden behind a horizontal scrollbar) or when the block runs past its
    limit (``limitRight``: the main column, or the scrolling wrapper a theme
    puts around a table) or the window.

    >>> page = {"viewportWidth": 1280, "blocks": [
    ...     {"kind": "code block", "label": "x = 1", "scrollWidth": 900, "clientWidth": 700,
    ...      "right": 990, "limitRight": 1000, "top": 80},
    ...     {"kind": "table", "label": "name", "scrollWidth": 500, "clientWidth": 500,
    ...      "right": 1030, "limitRight": 1000, "top": 400}]}
    >>> for problem in layout_problems(page): print(problem)
    code block 'x = 1' (y=80): content 200 px wider than its box (cut off or behind a scrollbar)
    table 'name' (y=400): runs 30 px past the main column
    """
    problems = []
    for block in measure["blocks"]:
        name = f"{block['kind']} {block['label']!r} (y={block['top']})"
        hidden = block["scrollWidth"] - block["clientWidth"]
        if hidden > TOLERANCE_PX:
            problems.append(f"{name}: content {hidden:.0f} px wider than its box (cut off or behind a scrollbar)")
        past = block["right"] - min(block["limitRight"], measure["viewportWidth"])
        if past > TOLERANCE_PX:
            problems.append(f"{name}: runs {past:.0f} px past the main column")
    return problems


def math_problems(measure: dict[str, Any]) -> list[str]:
    r"""Formulas shown as raw LaTeX, not typeset, or typeset with errors.

    ``mathTexts`` are the ``\text{...}`` parts as MathJax typeset them: a
    backslash there (``\_`` in ``\text``) is printed literally.

    >>> page = {"proseWithBackslash": [r"ratio \(d^{L-i}\)", r"C:\temp"], "mathElements": 2,
    ...         "typesetMath": 0, "mathErrors": [], "mathTexts": []}
    >>> for problem in math_problems(page): print(problem)
    1 math delimiter(s) visible as text, e.g. "ratio \(d^{L-i}\)"
    2 formula(s) on the page, none typeset by MathJax
    >>> page = {"proseWithBackslash": [], "mathElements": 1, "typesetMath": 1,
    ...         "mathErrors": [r"Undefined control sequence \foo"], "mathTexts": [r"if a\_b", "if"]}
    >>> for problem in math_problems(page): print(problem)
    MathJax error: "Undefined control sequence \foo"
    backslash printed inside math text: "if a\_b"
    """
    problems = []
    raw = [text.strip() for text in measure["proseWithBackslash"] if any(d in text for d in MATH_DELIMITERS)]
    if raw:
        examples = ", ".join(f'"{text[:60]}"' for text in raw[:3])
        problems.append(f"{len(raw)} math delimiter(s) visible as text, e.g. {examples}")
    if measure["mathElements"] and not measure["typesetMath"]:
        problems.append(f"{measure['mathElements']} formula(s) on the page, none typeset by MathJax")
    problems += [f'MathJax error: "{error}"' for error in measure["mathErrors"]]
    problems += [f'backslash printed inside math text: "{text}"' for text in measure["mathTexts"] if "\\" in text]
    return problems


def network_problems(requested_urls: list[str]) -> list[str]:
    """Requests that would need a network; a page opened from disk makes none.

    >>> network_problems(["file:///d/index.html", "data:image/png;base64,AA", "https://cdn.example/x.js"])
    ['requested https://cdn.example/x.js (the docs must work offline)']
    """
    return [
        f"requested {url} (the docs must work offline)"
        for url in requested_urls
        if not url.startswith(("file:", "data:", "blob:", "about:"))
    ]


def page_problems(measure: dict[str, Any], requested_urls: list[str]) -> list[str]:
    return layout_problems(measure) + math_problems(measure) + network_problems(requested_urls)


def screenshot_tiles(stem: str, page_height: int, tile_px: int = SCREENSHOT_TILE_PX) -> list[tuple[str, int, int]]:
    """The screenshots of one page: ``(file name, top, height)`` for each
    tile, each at most ``tile_px`` tall, so a long page is captured in parts.

    >>> screenshot_tiles("index", 2560)
    [('index.png', 0, 2560)]
    >>> screenshot_tiles("api", 17000)
    [('api-1.png', 0, 8000), ('api-2.png', 8000, 8000), ('api-3.png', 16000, 1000)]
    """
    if page_height <= tile_px:
        return [(f"{stem}.png", 0, max(page_height, 1))]
    tops = range(0, page_height, tile_px)
    return [(f"{stem}-{n}.png", top, min(tile_px, page_height - top)) for n, top in enumerate(tops, 1)]


def default_pages(built: list[str]) -> list[str]:
    """The pages checked when ``--pages`` is not given: every top-level HTML
    page of the build (``built``: its file names), and the key pages even if
    missing, so that a build without them fails.

    The syntax-highlighted sources under ``_modules/`` (``[source]`` links) are
    not among them: a source listing keeps the code's own line lengths.

    >>> default_pages(["search.html", "api.html", "index.html", "objects.inv"])  # doctest: +NORMALIZE_WHITESPACE
    ['adamwdl.html', 'api.html', 'index.html', 'quickstart.html', 'quickstart_cn.html',
     'schedules.html', 'search.html']
    """
    return sorted({name for name in built if name.endswith(".html")} | set(KEY_PAGES))


def find_chromium(explicit: str | None) -> str | None:
    """The Chromium to drive: ``explicit`` only when given, else ``$CHROMIUM`` or one on PATH."""
    candidates = [explicit] if explicit else [os.environ.get("CHROMIUM"), "chromium", "chromium-browser"]
    for candidate in candidates:
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def check_pages(html_dir: Path, pages: list[str], chromium: str, screenshots: Path | None) -> dict[str, list[str]]:
    from playwright.sync_api import sync_playwright

    results: dict[str, list[str]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            for name in pages:
                path = html_dir / name
                if not path.is_file():
                    results[name] = [f"{path} does not exist (run `make docs` first)"]
                    continue
                page = browser.new_page(viewport=VIEWPORT)
                requested: list[str] = []

                def block_remote(route, request, requested=requested):
                    requested.append(request.url)
                    if network_problems([request.url]):
                        route.abort()
                    else:
                        route.continue_()

                page.route("**/*", block_remote)
                page.goto(path.resolve().as_uri(), wait_until="load")
                measure = page.evaluate(MEASURE_JS)
                if screenshots is not None:
                    height = page.evaluate("document.documentElement.scrollHeight")
                    width = VIEWPORT["width"]
                    for file_name, top, tile_height in screenshot_tiles(path.stem, height):
                        clip = {"x": 0, "y": top, "width": width, "height": tile_height}
                        page.screenshot(path=str(screenshots / file_name), clip=clip, full_page=True)
                results[name] = page_problems(measure, requested)
                page.close()
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built HTML (make docs: docs/_build/html)")
    parser.add_argument(
        "--pages", nargs="+",
        help="pages to check, relative to html_dir (default: every top-level page of html_dir)",
    )
    parser.add_argument("--screenshots", type=Path, help="write a full-page PNG of each page here (a long page in tiles)")
    parser.add_argument("--chromium", help="the Chromium binary (default: $CHROMIUM, then chromium on PATH)")
    parser.add_argument(
        "--require-browser", action="store_true",
        default=os.environ.get("CI", "").lower() not in ("", "0", "false"),
        help="fail instead of skipping when Chromium or playwright is missing (default under CI)",
    )
    args = parser.parse_args(argv)

    chromium = find_chromium(args.chromium)
    missing = []
    if chromium is None:
        missing.append("no Chromium found (Debian: `apt-get install chromium`, or set CHROMIUM)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package is missing (`pip install -r requirements-dev.txt`)")
    if missing:
        verdict = "FAIL" if args.require_browser else "SKIPPED, the docs were NOT checked"
        print(f"docs-check: {verdict}: " + "; ".join(missing))
        return 2 if args.require_browser else 0

    if args.screenshots is not None:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    pages = args.pages or default_pages([path.name for path in args.html_dir.glob("*.html")])
    results = check_pages(args.html_dir, pages, chromium, args.screenshots)
    failed = False
    for name, problems in results.items():
        print(f"docs-check: {'FAIL' if problems else 'ok  '} {name}")
        for problem in problems:
            print(f"    {problem}")
        failed = failed or bool(problems)
    if args.screenshots is not None:
        print(f"docs-check: screenshots in {args.screenshots}/")
    print("docs-check: " + ("FAIL" if failed else "PASS") + f" ({len(results)} pages, {chromium})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
