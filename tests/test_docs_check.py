"""scripts/docs_check.py: its decisions over page measurements (no browser
needed), its skip/fail behaviour without Chromium, and, where Chromium is
installed, its in-page measurements on small hand-written pages."""
import doctest
import importlib.util
import shutil
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_check", ROOT / "scripts" / "docs_check.py")
docs_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_check)


def _block(kind="code block", scroll=700, client=700, right=900, limit=1000):
    return {"kind": kind, "label": "x", "scrollWidth": scroll, "clientWidth": client,
            "right": right, "limitRight": limit, "top": 0}


def _math(prose=(), elements=0, typeset=0, errors=(), texts=()):
    return {"proseWithBackslash": list(prose), "mathElements": elements, "typesetMath": typeset,
            "mathErrors": list(errors), "mathTexts": list(texts)}


def test_docstring_examples():
    result = doctest.testmod(docs_check)
    assert result.attempted >= 6 and result.failed == 0


@pytest.mark.parametrize(
    "block, expected",
    [
        (_block(), []),
        # Sub-pixel rounding is not overflow; one more pixel is.
        (_block(scroll=701), []),
        (_block(scroll=702), ["content 2 px wider than its box"]),
        (_block(kind="formula", scroll=837), ["formula 'x' (y=0): content 137 px wider"]),
        (_block(right=1001), []),
        (_block(kind="table", right=1006), ["table 'x' (y=0): runs 6 px past the main column"]),
        (_block(scroll=800, right=1050), ["100 px wider", "runs 50 px past"]),
    ],
)
def test_layout_problems(block, expected):
    problems = docs_check.layout_problems({"viewportWidth": 1280, "blocks": [block]})
    assert len(problems) == len(expected)
    for problem, fragment in zip(problems, expected):
        assert fragment in problem


def test_a_block_past_a_narrow_window_fails_even_inside_its_column():
    problems = docs_check.layout_problems({"viewportWidth": 800, "blocks": [_block(right=850, limit=1000)]})
    assert problems == ["code block 'x' (y=0): runs 50 px past the main column"]


@pytest.mark.parametrize("delimiter", ["\\(", "\\)", "\\[", "\\]"])
def test_each_math_delimiter_shown_as_text_fails(delimiter):
    problems = docs_check.math_problems(_math(prose=[f"the ratio {delimiter} here"], elements=1, typeset=1))
    assert problems == [f'1 math delimiter(s) visible as text, e.g. "the ratio {delimiter} here"']


def test_typeset_math_and_other_backslashes_pass():
    assert docs_check.math_problems(_math(prose=["C:\\temp", "a \\ b"], elements=3, typeset=3)) == []
    assert docs_check.math_problems(_math()) == []


def test_untypeset_or_broken_math_fails():
    assert docs_check.math_problems(_math(elements=4)) == ["4 formula(s) on the page, none typeset by MathJax"]
    problems = docs_check.math_problems(
        _math(elements=1, typeset=1, errors=["Missing close brace"], texts=["layer\\_id", "otherwise, "]))
    assert problems == ['MathJax error: "Missing close brace"', 'backslash printed inside math text: "layer\\_id"']


def test_only_remote_requests_fail():
    local = ["file:///docs/_static/mathjax/tex-chtml.js", "data:font/woff2;base64,AA", "blob:file:///1", "about:blank"]
    assert docs_check.network_problems(local) == []
    assert docs_check.network_problems(["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"]) == [
        "requested https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js (the docs must work offline)"
    ]


def test_without_a_browser_it_skips_loudly_or_fails_when_required(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(docs_check, "find_chromium", lambda explicit: None)
    monkeypatch.delenv("CI", raising=False)
    assert docs_check.main([str(tmp_path)]) == 0
    assert "SKIPPED, the docs were NOT checked: no Chromium found" in capsys.readouterr().out
    assert docs_check.main([str(tmp_path), "--require-browser"]) == 2
    assert "docs-check: FAIL: no Chromium found" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert docs_check.main([str(tmp_path)]) == 2
    monkeypatch.setenv("CI", "false")
    assert docs_check.main([str(tmp_path)]) == 0


def test_by_default_every_top_level_page_is_checked(monkeypatch, tmp_path, capsys):
    for name in ["api.html", "genindex.html", "index.html", "objects.inv"]:
        (tmp_path / name).write_text("x")
    (tmp_path / "_modules").mkdir()
    (tmp_path / "_modules" / "registry.html").write_text("x")
    checked = []
    monkeypatch.setattr(docs_check, "find_chromium", lambda explicit: "/usr/bin/chromium")
    monkeypatch.setitem(sys.modules, "playwright", types.ModuleType("playwright"))
    monkeypatch.setattr(docs_check, "check_pages",
                        lambda html_dir, pages, chromium, shots: checked.extend(pages) or {p: [] for p in pages})
    assert docs_check.main([str(tmp_path)]) == 0
    # The key pages are checked even when the build lacks them (check_pages then reports them missing).
    assert checked == ["adamwdl.html", "api.html", "genindex.html", "index.html",
                       "quickstart.html", "quickstart_cn.html", "schedules.html"]
    checked.clear()
    assert docs_check.main([str(tmp_path), "--pages", "api.html"]) == 0
    assert checked == ["api.html"]


def test_an_explicit_chromium_that_is_not_there_is_not_replaced(monkeypatch):
    monkeypatch.setenv("CHROMIUM", "sh")  # an executable that is on PATH
    assert docs_check.find_chromium("/nonexistent/chromium") is None
    assert docs_check.find_chromium(None) == shutil.which("sh")


def _browser_available():
    return shutil.which("chromium") is not None and importlib.util.find_spec("playwright") is not None


BAD_PAGE = """<!doctype html><html><head><meta charset="utf-8">
<script src="https://cdn.example.invalid/mathjax.js"></script></head>
<body><div role="main" style="width: 400px">
<pre style="overflow: hidden">get_scheduler("cosine_with_min_lr", 5e-5, num_warmup_steps=100, num_training_steps=1000)</pre>
<p>a ratio <span class="math">\\(d^{L-i}\\)</span> per layer</p>
<table style="width: 600px"><tr><td>wide</td></tr></table>
</div></body></html>"""

GOOD_PAGE = """<!doctype html><html><head><meta charset="utf-8"></head>
<body><div role="main" style="width: 400px"><pre>x = 1</pre><p>C:\\temp is a path</p>
<table><tr><td>narrow</td></tr></table></div></body></html>"""


@pytest.mark.skipif(not _browser_available(), reason="needs Debian's chromium and playwright (make chromium)")
def test_measurements_in_a_real_browser(tmp_path):
    (tmp_path / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
    (tmp_path / "good.html").write_text(GOOD_PAGE, encoding="utf-8")
    results = docs_check.check_pages(tmp_path, ["bad.html", "good.html", "missing.html"],
                                     shutil.which("chromium"), tmp_path)
    bad = results["bad.html"]
    assert any(p.startswith("code block 'get_scheduler(") and "wider than its box" in p for p in bad), bad
    assert any(p.startswith("table 'wide'") and "past the main column" in p for p in bad), bad
    assert any(p.startswith("1 math delimiter(s) visible as text") for p in bad), bad
    assert "1 formula(s) on the page, none typeset by MathJax" in bad
    assert "requested https://cdn.example.invalid/mathjax.js (the docs must work offline)" in bad
    assert len(bad) == 5, bad
    assert results["good.html"] == []
    assert "does not exist" in results["missing.html"][0]
    assert (tmp_path / "bad.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
