"""report.html as a browser lays it out: headless Chromium at 1280 x 800, every detail opened.

A script added to a copy of the page measures every table cell with ``getBoundingClientRect`` and writes what it
finds into the page, which ``chromium --dump-dom`` prints: cells that reach past the window's width (a table that
scrolls sideways), and where the verdict and the decision chart sit on the first screen. The pages are real ones:
a short run of the bundled sample over every --wire policy kind with a codec that cannot send most calls and one
that garbles a method (not compared, not recommended), the 21 codecs of a saved real run, and the hand-built
suite of tests/test_reports.py with its hostile method names.

Without Chromium the test is skipped locally; with ``CI`` set it fails (``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from rpcbench.reports import decide
from rpcbench.reports.capacity import ReportOptions
from rpcbench.reports.charts import render_charts
from rpcbench.reports.html import write_report
from rpcbench.results import load

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 800
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FAST = ["--repeat", "3", "--sample", "200", "--no-floor", "--no-tails", "--no-memory", "--processes", "0", "--quiet"]
#: garbles one method's arguments on decode: undeclared mismatches, so it is never recommended
BROKEN_CODEC = '''
import json
from rpc_capture import Call
from rpcbench.codec import Codec, Received


class Garbling(Codec):
    id = "garbling"

    def encode(self, call: Call) -> bytes:
        return json.dumps({"m": call.method, "a": call.args}, default=str).encode()

    def decode(self, data: bytes) -> Received:
        obj = json.loads(data)
        return obj["m"], ({} if obj["m"] == "obj_move" else obj["a"])
'''

#: opens every <details>, then measures: cells past the viewport's right edge, the verdict line and decision chart
MEASURE = """
document.querySelectorAll('details').forEach(function (d) { d.open = true; });
var width = document.documentElement.clientWidth, over = [];
document.querySelectorAll('td, th').forEach(function (c) {
  var r = c.getBoundingClientRect();
  if (r.width && r.right > width + 0.5) {
    over.push([(c.closest('section') || {id: '?'}).id, c.textContent.slice(0, 30), Math.round(r.right)]);
  }
});
document.querySelectorAll('details').forEach(function (d) { d.open = false; });
window.scrollTo(0, 0);
function box(selector) {
  var e = document.querySelector(selector);
  if (!e) { return null; }
  var r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
}
var out = document.createElement('script');
out.type = 'application/json'; out.id = 'layout';
out.textContent = JSON.stringify({width: width, overflow: over, verdict: box('.verdict-line'),
                                  chart: box('.decision-chart svg'), notes: box('.not-compared > summary')});
document.body.appendChild(out);
"""


def browser() -> Optional[str]:
    """The Chromium (or Chrome) on the PATH, if any."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    found = browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI: headless Chromium is needed for the page layout test (.ci/run installs it)")
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    return found


def layout(chromium: str, page: Path) -> Dict[str, Any]:
    """What :data:`MEASURE` finds on ``page`` in a 1280 x 800 window."""
    probe = page.with_name(page.stem + "-probe.html")
    probe.write_text(page.read_text(encoding="utf-8") + f"<script>{MEASURE}</script>", encoding="utf-8")
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=180)
    found = re.search(r'<script type="application/json" id="layout">(.*?)</script>', done.stdout, re.S)
    assert found, f"no layout written by the probe: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def run_report(folder: Path, *args: str) -> Path:
    """A short real run of the bundled sample; its report.html."""
    done = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), "--out", str(folder), *FAST, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return folder / "report.html"


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """report.html of each kind of run the test looks at."""
    tmp = tmp_path_factory.mktemp("pages")
    (tmp / "garbling.py").write_text(BROKEN_CODEC, encoding="utf-8")
    wire = run_report(tmp / "wire", "--wire", "per-call,tick:50+mtu:1200", "--transport", "udp", "--codec-path",
                      str(ROOT / "tests" / "data" / "partialcodec.py"), "--codec-path", str(tmp / "garbling.py"),
                      "--codecs", "json,bson,msgpack,orjson,protobuf,msgspec-struct,json+zlib-1,protobuf+zlib-1,"
                      "json+zlibstream-1,json+zstddict-3,partial,garbling")
    saved = tmp / "saved"
    saved.mkdir()
    suite = load(str(ROOT / "tests" / "data" / "results" / "quiet.json"))
    d = decide(suite)
    many = Path(write_report(d, str(saved), render_charts(d)))
    from test_reports import make_suite  # the hand-built suite, hostile names included

    built = tmp / "built"
    built.mkdir()
    d = decide(make_suite(hostile=True))
    return {"wire": wire, "saved": many, "built": Path(write_report(d, str(built), render_charts(d)))}


@pytest.mark.parametrize("kind", ["wire", "saved", "built"])
def test_no_table_cell_lies_beyond_the_window(chromium: str, pages: Dict[str, Path], kind: str) -> None:
    found = layout(chromium, pages[kind])
    assert found["width"] <= WIDTH
    assert found["overflow"] == [], f"{len(found['overflow'])} cells past {found['width']} px: {found['overflow'][:8]}"


@pytest.mark.parametrize("kind", ["wire", "saved"])
def test_first_screen_shows_the_verdict_beside_the_decision_chart(chromium: str, pages: Dict[str, Path],
                                                                   kind: str) -> None:
    found = layout(chromium, pages[kind])
    verdict, chart = found["verdict"], found["chart"]
    assert verdict and chart, found
    assert chart["left"] >= verdict["right"] - 1  # beside it, to the right
    assert verdict["bottom"] <= HEIGHT and chart["bottom"] <= HEIGHT  # both whole on the first screen
    assert chart["right"] <= found["width"] and chart["right"] - chart["left"] >= 400


def test_not_compared_codecs_fold_into_one_line_on_the_first_screen(chromium: str, pages: Dict[str, Path]) -> None:
    found = layout(chromium, pages["wire"])
    assert found["notes"] and found["notes"]["bottom"] <= HEIGHT, found
    page = pages["wire"].read_text(encoding="utf-8")
    verdict = page[page.index("<section id='verdict'"):page.index("</section>")]
    (folded,) = re.findall(r"<details class='not-compared warn'><summary>(.*?)</summary>(.*?)</details>", verdict,
                           re.S)
    assert "1 codec not compared: <b>partial</b>" in folded[0]
    assert folded[1].strip().startswith("<p>Not compared: <b>partial</b> carries ")
    assert "--min-coverage 100%" in folded[1]
    assert verdict.count("Not compared:") == 1  # the note is inside the fold, not beside it


def cells(row: str) -> List[str]:
    """A table row's cells as text (tags dropped, whitespace collapsed)."""
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split())
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_decision_chart_shows_the_capacity_tables_figures_and_the_verdicts_pick(pages: Dict[str, Path]) -> None:
    page = pages["wire"].read_text(encoding="utf-8")
    start = page.index("class='decision-chart'")
    chart = page[start:page.index("</svg>", start)]
    labels = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", chart)]
    capacity = page[page.index("<section id='capacity'"):]
    lead = capacity[:capacity.index("</table>")]  # the first table: pick, baseline, the front
    rows = [cells(row) for row in re.findall(r"<tr class='[a-z]*' data-gb=.*?</tr>", lead, re.S)]
    assert len(rows) >= 3
    # each bar's label is the table's down and up kbit/s (the figure before its [CI]), in the table's order
    table = [f"{down.split()[0]} down + {up.split()[0]} up" for _, down, up, *_ in rows]
    assert [t for t in labels if t.endswith(" up") and " down + " in t] == table
    assert all(row[0] in labels for row in rows)  # each bar named as its row: codec (recommended), codec (baseline)
    # the pick is the verdict's, ringed and named in the pick's green on the front
    pick = decide(load(str(pages["wire"].with_name("results.json"))), ReportOptions(transport="udp")).verdict.pick
    assert pick and rows[0][0] == f"{pick.codec} (recommended)"
    assert re.search(r'<text style="[^"]*fill: #2e7d32"[^>]*>' + re.escape(pick.codec) + "</text>", chart)
