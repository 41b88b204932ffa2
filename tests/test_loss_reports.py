"""What the outputs show of a lossy link (--loss): the terminal's tables, report.html's loss section and charts,
report.md's table, the verdict's rate (--decide-loss) and the capacity plan at it.

The results come from real --loss runs (the link engine of rpcbench/link.py) on samples/battle.rpct, a simulated
30 Hz trace of the dict profile, and a slice of the sample whose busiest method has a hostile name. The expected
figures are worked out in the tests from results.json's link figures and the trace's connection-seconds, never
copied from the outputs.
"""

import dataclasses
import html
import json
import re
import subprocess
import sys
from itertools import islice
from pathlib import Path

import pytest

from rpc_capture import open_trace, write_jsonl
from rpcbench import results
from rpcbench.reports import charts
from rpcbench.reports.capacity import ReportOptions
from rpcbench.reports.decision import decide

REPO = Path(__file__).resolve().parent.parent
RATES = (0.0, 1.0, 5.0)
CODECS = "json,msgpack,json+zlib-1,json+zlibstream-1,msgpack+zstdstream-3,msgpack+ackdelta"
FAST = ("--repeat", "3", "--sample", "200", "--processes", "1", "--min-time", "0.001", "--no-memory", "--quiet")
LINK = ("--transport", "udp", "--loss", "0,1,5", "--rtt", "100")


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], capture_output=True,
                          text=True, encoding="utf-8", cwd=REPO, timeout=900)


def run(out, *args):
    """A short real run into ``out``; its terminal text."""
    done = run_bench(*args, *FAST, "--out", out)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A real run on the bundled sample, over UDP, without a lossy link."""
    out = tmp_path_factory.mktemp("plain") / "out"
    run(out, "--codecs", CODECS, "--transport", "udp")
    return out


@pytest.fixture(scope="module")
def lossy_run(tmp_path_factory):
    """The same run over a lossy link at 0, 1 and 5 % loss, 100 ms RTT."""
    out = tmp_path_factory.mktemp("lossy") / "out"
    run(out, "--codecs", CODECS, *LINK)
    return out


# --- what the tests expect, worked out from the link figures themselves ---------------------------------------------

def expected_rows(folder):
    """Every (rate, codec) -> the cells the outputs must show, from results.json's link figures and the trace's
    connection-seconds (each connection's first to last call)."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    seconds = sum(data["trace"]["per_connection"]["span_ms"]) / 1000
    rows = {}
    for r in data["results"]:
        for f in r["link"]:
            lost = sorted(f["lost_by_method"].items(), key=lambda x: (-x[1], x[0]))
            named = ", ".join(f"{m} {n:,}" for m, n in lost[:3]) + (f", +{len(lost) - 3} more" if len(lost) > 3 else "")
            rows[(f["loss_pct"], r["codec"])] = [
                f"{f['loss_pct']:g}", r["codec"], f["delivery"], f"{f['wire_bytes'] / f['calls']:.1f}",
                f"{f['wire_bytes'] * 8 / 1000 / seconds:.2f}", f"{f['lost_calls']:,}", named or "-",
                f"{f['resend_bytes'] / f['calls']:.1f}", f"{f['ack_bytes'] / f['calls']:.1f}",
                f"{f['latency_p50_ms']:.1f}", f"{f['latency_p99_ms']:.1f}"]
    return rows


def page_rows(page):
    """The loss section's table of report.html: rows of cell texts."""
    section = page[page.index("<section id='loss'"):]
    table = section[section.index("<table"):section.index("</table>")]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr class='[a-z]*'>(.*?)</tr>", table, re.S)]


def md_rows(text):
    """The "Under loss" table of report.md: rows of cell texts, Markdown escapes undone."""
    part = text[text.index("## Under loss"):]
    part = part[:part.index("\n## ", 3)]
    lines = [line for line in part.splitlines()[1:] if line.startswith("| ")]
    body = lines[2:] if lines[0].startswith("| loss %") else lines
    return [[re.sub(r"\\(.)", r"\1", c.strip()) for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in body]


def terminal_rows(text):
    """The terminal's loss tables: (rate, cells) per codec row."""
    rows, rate = [], None
    for line in text[text.index("under loss ("):].splitlines():
        head = re.match(r"  (\S+) % loss  ", line)
        if head:
            rate = head.group(1)
        elif rate is not None and line.startswith("  ") and not line.startswith("   ") and "  " in line.strip():
            rows.append((rate, re.split(r"\s{2,}", line.strip())))
        elif not line.startswith("  "):
            rate = None
    return rows


def test_terminal_page_and_markdown_show_the_link_figures_each_computed_from_results(lossy_run):
    done = run_bench("report", lossy_run)
    assert done.returncode == 0, done.stderr
    expected = expected_rows(lossy_run)
    page = page_rows((lossy_run / "report.html").read_text(encoding="utf-8"))
    assert sorted(map(tuple, page)) == sorted(map(tuple, expected.values()))  # every codec at every rate
    assert md_rows((lossy_run / "report.md").read_text(encoding="utf-8")) == page  # the same rows, same order
    shown = terminal_rows(done.stdout)
    assert {rate for rate, _ in shown} == {f"{r:g}" for r in RATES}
    for rate, cells in shown:  # codec, delivery, B/call, kbit/s, lost calls, added p99
        row = expected[(float(rate), cells[0])]
        assert cells == [row[1], row[2], row[3], row[4], row[5], row[10]]
    assert len(shown) == len(expected)  # six codecs: every one is shown
    for rate in RATES[1:]:  # fewest wire bytes first within a rate, on the page
        ours = [float(r[3]) for r in page if r[0] == f"{rate:g}"]
        assert ours == sorted(ours)
    said = " ".join(done.stdout.split())  # lost calls flagged: how many, which methods; the reliable layer's resends
    for (rate, codec), row in expected.items():
        if rate and row[5] != "0":
            assert f"{codec} ({row[2]}) {row[5]} of 20,000 ({row[6]})" in said
        if rate and row[2] == "reliable":
            assert f"{codec} resends {row[7]} B/call, +{row[9]} ms p50, +{row[10]} ms p99" in said
    assert {row[2] for row in expected.values()} == {"udp", "reliable", "ackdelta"}


def test_the_chart_draws_the_tables_figures(lossy_run):
    d = decide(results.load(lossy_run), ReportOptions(transport="udp"))
    table = {(float(r[0]), r[1]): r for r in page_rows((lossy_run / "report.html").read_text(encoding="utf-8"))}
    fig = charts.loss_chart(d)
    try:
        rate_axes, delay_axes = fig.axes
        colours = {}
        for line in rate_axes.get_lines()[:len(d.loss_codecs)]:
            codec = line.get_label().removesuffix(" (recommended)")
            colours[line.get_color()] = codec
            assert [float(x) for x in line.get_xdata()] == list(RATES)
            assert [f"{y:.2f}" for y in line.get_ydata()] == [table[(rate, codec)][4] for rate in RATES]
        assert sorted(colours.values()) == sorted(d.loss_codecs)
        delayed = [line for line in delay_axes.get_lines() if len(line.get_xdata()) == len(RATES)]
        not_udp = {codec for (_, codec), row in table.items() if row[2] != "udp"}  # loss delays them, not drops
        assert {colours[line.get_color()] for line in delayed} == not_udp
        for line in delayed:  # the same colour is the same codec on both panels
            codec = colours[line.get_color()]
            assert [f"{y:.1f}" for y in line.get_ydata()] == [table[(rate, codec)][10] for rate in RATES]
    finally:
        charts.plt.close(fig)


def test_decide_loss_picks_the_rate_and_the_verdict_says_which(lossy_run):
    default = run_bench("report", lossy_run, "--goal", "bandwidth")
    assert default.returncode == 0, default.stderr
    assert "on the lossy link at 1 % loss (the lowest nonzero rate measured" in " ".join(default.stdout.split())
    chosen = run_bench("report", lossy_run, "--goal", "bandwidth", "--decide-loss", "5")
    assert chosen.returncode == 0, chosen.stderr
    said = " ".join(chosen.stdout.split())
    assert "on the lossy link at 5 % loss (--decide-loss)" in said
    link = {(r.codec, f.loss_pct): f for r in results.load(lossy_run).results for f in r.link}
    fewest = min((f.wire_bytes, codec) for (codec, rate), f in link.items() if rate == 5.0)[1]
    assert f"\n  {fewest}: " in chosen.stdout  # the bandwidth pick: fewest wire bytes at 5 %
    lost = link[(fewest, 5.0)].lost_calls
    assert link[(fewest, 5.0)].delivery == "udp"  # on this traffic: the acks cost the others more than they save
    assert f"{fewest} over plain UDP at 5 % loss: {lost:,} of 20,000 calls never arrive" in said
    for bad, message in (("3", "not one of the run's --loss rates (0, 1, 5)"), ("200", "from 0 to 100")):
        refused = run_bench("report", lossy_run, "--decide-loss", bad)
        assert refused.returncode == 2 and message in refused.stderr and "Traceback" not in refused.stderr


def test_the_capacity_plan_prices_the_decided_rate_and_stream_codecs_compete_over_udp(lossy_run, plain_run):
    suite = results.load(lossy_run)
    seconds = sum(suite.trace["per_connection"]["span_ms"]) / 1000
    for rate in RATES:
        d = decide(suite, ReportOptions(transport="udp", loss=rate))
        assert d.plan.loss_pct == rate
        for r in suite.results:
            f = next(f for f in r.link if f.loss_pct == rate)
            row = d.plan.rows[r.codec]
            assert (row.down.value + row.up.value) * seconds == pytest.approx(f.wire_bytes, rel=1e-9)
            assert row.down.value * seconds == pytest.approx(f.by_direction["s2c"].wire_bytes, rel=1e-9)
            assert d.front_axes.bytes[r.codec] == f.wire_bytes / f.calls  # the front stands on them too
        assert not any(codec.endswith("stream-1") or "stream-3" in codec for codec, _ in d.verdict.excluded)
    without = decide(results.load(plain_run), ReportOptions(transport="udp"))
    assert {c for c, why in without.verdict.excluded if "ordered delivery" in why} == {
        "json+zlibstream-1", "msgpack+zstdstream-3"}
    assert without.plan.loss_pct is None and not without.loss.shown


def test_a_codec_whose_messages_break_on_the_link_is_not_recommended_at_that_rate(lossy_run):
    suite = results.load(lossy_run)
    smallest = min(suite.results, key=lambda r: next(f.wire_bytes for f in r.link if f.loss_pct == 5.0))
    problem = "call 7 (hit): the receiver could not decode it: missing baseline"
    broken = dataclasses.replace(smallest, link=tuple(dataclasses.replace(f, mismatches=3, problem=problem)
                                                      if f.loss_pct == 5.0 else f for f in smallest.link))
    suite = dataclasses.replace(suite, results=tuple(broken if r is smallest else r for r in suite.results))
    at_five = decide(suite, ReportOptions(goal="bandwidth", transport="udp", loss=5.0))
    assert (smallest.codec, f"3 delivered messages did not decode to their call on the lossy link at 5 % ({problem})") \
        in at_five.verdict.excluded
    assert at_five.verdict.pick and at_five.verdict.pick.codec != smallest.codec
    assert f"at 5 %: delivered messages that did not decode to their call: {smallest.codec} 3 ({problem})" \
        in at_five.loss.flags
    at_one = decide(suite, ReportOptions(goal="bandwidth", transport="udp", loss=1.0))
    assert at_one.verdict.pick and at_one.verdict.pick.codec == smallest.codec  # whole at 1 %
    assert "At the run's other loss rates the pick would be: 0 %: the same; 5 %: " in " ".join(at_one.verdict.caveats)


def test_method_names_are_escaped_in_the_page_and_the_markdown(tmp_path):
    hostile = "<img src=x onerror=alert(1)>|*x*"
    trace = tmp_path / "hostile.jsonl"  # the sample's first 4,000 calls, its busiest method renamed
    write_jsonl((c._replace(method=hostile) if c.method == "hit" else c
                 for c in islice(open_trace(REPO / "samples" / "battle.rpct"), 4000)), trace)
    folder = tmp_path / "out"
    run(folder, "--trace", trace, "--codecs", "json,json+zlibstream-1", *LINK)
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and html.escape(hostile, quote=False) in page
    assert any(hostile in r[6] for r in page_rows(page))  # the most lost method, named in its row
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert not re.search(r"(?<!\\)<img", md) and r"\<img src=x onerror=alert(1)>\|\*x\*" in md  # no tag opens
    assert md_rows(md) == page_rows(page)


def test_results_without_link_figures_show_nothing_of_loss(plain_run):
    suite = results.load(plain_run)
    assert all(r.link == () for r in suite.results)
    d = decide(suite, ReportOptions(transport="udp"))
    assert not d.loss.shown and d.loss_codecs == () and charts.loss_chart(d) is None
    page = (plain_run / "report.html").read_text(encoding="utf-8")
    assert "id='loss'" not in page and "lossy link" not in page
    assert "Under loss" not in (plain_run / "report.md").read_text(encoding="utf-8")
    done = run_bench("report", plain_run, "--decide-loss", "1")
    assert done.returncode == 2 and "this run measured no lossy link (run it with --loss)" in done.stderr


def test_the_loss_section_fits_the_window(lossy_run):
    from test_page_layout import browser, layout

    found = browser()
    if found is None:
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    measured = layout(found, lossy_run / "report.html")
    assert measured["overflow"] == [], measured["overflow"][:8]


# --- a real lossy link (the engine of rpcbench/link.py), once it is on this branch -----------------------------------

@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A real --loss run on a simulated 30 Hz dict-profile trace (other methods and sizes than the sample's)."""
    tmp = tmp_path_factory.mktemp("real")
    made = run_bench("simulate", "--profile", "dict", "--tick-hz", "30", "--calls", "4000", "--seed", "5", "--out",
                     tmp / "dict30.rpct")
    assert made.returncode == 0, made.stderr
    out = tmp / "out"
    return out, run(out, "--trace", tmp / "dict30.rpct", "--codecs", "json,msgpack,json+zlibstream-1,msgpack+ackdelta",
                    *LINK)


def test_a_real_lossy_run_shows_its_link_figures_alike_everywhere(real_run):
    out, stdout = real_run
    expected = expected_rows(out)
    page = page_rows((out / "report.html").read_text(encoding="utf-8"))
    assert sorted(map(tuple, page)) == sorted(map(tuple, expected.values())) and len(page) == 4 * len(RATES)
    assert md_rows((out / "report.md").read_text(encoding="utf-8")) == page
    for rate, cells in terminal_rows(stdout):
        row = expected[(float(rate), cells[0])]
        assert cells == [row[1], row[2], row[3], row[4], row[5], row[10]]
    assert "on the lossy link at 1 % loss (the lowest nonzero rate measured" in " ".join(stdout.split())
    suite = results.load(out)
    seconds = sum(suite.trace["per_connection"]["span_ms"]) / 1000
    d = decide(suite, ReportOptions(transport="udp", loss=5.0))
    for r in suite.results:  # the capacity plan's traffic: the link's wire bytes at the decided rate
        f = next(f for f in r.link if f.loss_pct == 5.0)
        row = d.plan.rows[r.codec]
        assert (row.down.value + row.up.value) * seconds == pytest.approx(f.wire_bytes, rel=1e-9)


def test_a_decide_loss_rate_the_run_will_not_measure_stops_it_before_it_starts(tmp_path):
    loss = ["--loss", "1,5"] if "--loss-seed" in run_bench("--help").stdout else []
    done = run_bench("--codecs", "json", "--sizes-only", "--decide-loss", "2", *loss, "--out", tmp_path / "o",
                     "--quiet")
    assert done.returncode == 2 and not (tmp_path / "o").exists() and "Traceback" not in done.stderr
    assert ("not one of the run's --loss rates (1, 5)" if loss else "this run measured no lossy link") in done.stderr
