"""The offline report (`python -m engine report`): the figures it carries, its escaping of
what the database holds, its refusals, and that the HTML renders its charts in a real
browser with the network cut off."""

import html
import re
import statistics
from dataclasses import replace

import pytest

from engine.analysis.cost import cost_per_million, cpu_shapes, default_shape, load_catalog
from engine.cli import main
from engine.present.report import REPORT_FORMATS, build_report
from engine.core.errors import UserError
from store.db import open_db
from store.runs import save_record, save_sweep
from seeds.records import SYSTEM, ok_record, seed_sweep, seed_workloads
from tests.conftest import seed_once

# What seed_sweep stores, worked out by hand: torch's batch-1 round medians are 10.1 and
# 10.2 ms at 1 thread (5.1 and 5.2 ms at 2), TensorFlow's twice that.
TORCH_B1_T1 = "★ 10.15 [10.10-10.20]"  # geometric mean [min-max] of 10.1 and 10.2
TF_B1_T1 = "20.15 [20.10-20.20]"
# No rule stored with the seeded sweep: looks at rounds 2-6, so 2 rounds give a wide interval.
SENTENCE = ("mobilenet_v3_small 64px b1 t1: torch (eager) is 1.99x faster than tensorflow "
            "(tf_function) (95 % sequential interval 1.85-2.13, 2 rounds)")
# Every configuration is 0.1 ms slower in round 2: drift, which the model takes out; what
# is left (the 1-thread and 2-thread runs moved by different shares) is the noise.
NOISE = ("Measurement noise ±0.5 %: what pairing leaves (residual of configuration + round on "
         "log round medians, 8 configurations x 2 rounds, 7 degrees of freedom).")
DRIFT = "The machine drifted 0.6 % between rounds (round 2 against round 1"
REBUILT = ("python -m engine run --model mobilenet_v3_small --framework tensorflow torch "
           "--runtime eager tf_function --batch 1 8 32 --threads 1 2 --image-size 64 "
           "--warmup 2 --min-time 0 --min-iters 3 --max-time 60 --rounds 2 --seed 1")
CHARTS = 5  # latency and throughput vs batch, thread scaling, distribution, heat map
EVIL = '<script>alert("x")</script>'


@pytest.fixture
def seeded(db_path):
    seed_once(seed_sweep, db_path)
    return db_path


def report(db_path, sweep="sweep-seeded", fmt="html") -> str:
    with open_db(db_path) as con:
        return build_report(con, sweep, fmt).decode("utf-8")


def test_html_report_carries_the_table_sentences_noise_machine_policy_and_command(seeded):
    doc = report(seeded)
    assert "<title>mobilenet_v3_small: torch (eager) vs tensorflow (tf_function) · " \
           "benchmark report</title>" in doc
    assert f'<td class="num best">{TORCH_B1_T1}</td><td class="num">{TF_B1_T1}</td>' in doc
    assert "★ 98.5 [98.0-99.0]" in doc  # throughput table: 1000/10.2 .. 1000/10.1 samples/s
    assert f"<li>{SENTENCE}</li>" in doc
    # the raw figures one click away, and the caption says which figure the cells show
    assert ("<details><summary>Raw figures: each configuration over its own rounds "
            "(geometric mean and every round's median, not drift-adjusted)</summary>") in doc
    assert "Cells over up to 2 rounds: drift-adjusted figures: a configuration + round" in doc
    assert "Holm over the k-1 comparisons of a contest: family-wise error ≤ 5 % per " \
           "contest" in doc
    assert NOISE in doc and DRIFT in doc and "<b>±0.5 %</b>" in doc and "<b>0.6 %</b>" in doc
    assert ("<td>box</td><td>Test CPU @ 2 GHz</td><td class=\"num\">1</td><td class=\"num\">1"
            "</td><td class=\"num\">2</td><td class=\"num\">2</td><td class=\"num\">24.0</td>"
            "<td>none</td><td>Linux 6.1</td>") in doc
    assert "<td>torch 2.14.1</td><td>abc123</td>" in doc
    assert ("warm-up 2 iterations, then timing until both 0 s and 3 iterations are reached "
            "(at most 60 s per run)") in doc
    assert "seed (order of rounds 3 and later): 1" in doc
    assert f"<pre><code>{REBUILT}</code></pre>" in doc
    assert "rebuilt from the stored runs (no command stored)" in doc
    assert doc.count('class="plotly-graph-div"') == CHARTS


def test_html_cost_uses_the_cost_pages_default_shape_with_its_source_and_date(seeded):
    doc = report(seeded)
    cpu = cpu_shapes(load_catalog())
    shape = cpu[default_shape(cpu)]
    assert f"Priced on <b>{html.escape(shape.label)}</b>" in doc
    assert f"<td>{html.escape(shape.source)}</td><td>{shape.as_of}</td>" in doc
    # each priced machine's memory beside its price: 32 GB on OCI against 64 GB on AWS
    assert "<th>memory [GB]</th><th>USD/hour</th>" in doc
    assert ('<td>AWS c6i.8xlarge</td><td class="num">32</td><td class="num">64</td>'
            '<td class="num">1.3600</td>') in doc
    # torch, batch 1, on 16 OCPUs (16 cores): the 2-thread throughput (median of two
    # rounds) is one core's on a host with 2 threads per core, times 16.
    projected = 16 * statistics.median([1000 / 5.1, 1000 / 5.2])
    assert f"{projected:,.1f}" == "3,107.1"
    row = (f"<td>torch (eager)</td><td class=\"num\">1</td><td>{html.escape(shape.label)}"
           f"</td><td class=\"num\">3,107.1 (est.)</td><td class=\"num\">"
           f"{cost_per_million(shape.usd_per_hour, projected):,.4f}</td>")
    assert row in doc
    assert ("Assumption (est.): 194.2 samples/s per core from Test CPU @ 2 GHz (best split "
            "2 threads x 1 replica at 1 core) scaled to 16 cores") in doc
    assert "Throughput measured on Test CPU @ 2 GHz (2 vCPUs) at 1, 2 thread(s)" in doc


def test_html_cost_names_stale_prices_on_the_day_given_and_where_to_check(seeded):
    from datetime import date
    with open_db(seeded) as con:
        doc = build_report(con, "sweep-seeded", "html", today=date(2026, 11, 27)).decode()
        march = build_report(con, "sweep-seeded", "html", today=date(2026, 3, 10)).decode()
    # the default shape (OCI E3) and the closest AWS, GCP and Azure machines, oldest first
    assert ("<b>Older than 6 months on 2026-11-27 or undated:</b> Azure Standard_D32s_v5: as "
            "of 2025 (read as 2025-01-01, the earliest it can mean), 22 months (695 days) "
            "before 2026-11-27; OCI VM.Standard.E3.Flex 16 OCPU/32 GB: as of 2026-03-03, 8 "
            "months (269 days) before 2026-11-27; GCP n2-standard-32: undated (its source "
            "gives no date), so its age is unknown. Check them") in doc
    assert ("<td>yes</td><td>not reached from here: Oracle&#x27;s price list API "
            "apexapps.oracle.com/pls/apex/cetools/api/v1/products/?partNumber=B92306") in doc
    # the AWS, GCP and Azure machines priced beside it: Azure's 2025 and GCP's undated
    # price are stale on any day; in March OCI's snapshot was new
    assert "OCI VM.Standard.E3.Flex" not in march.split("Older than 6 months")[1][:400]


def test_markdown_report_for_a_pull_request(seeded):
    doc = report(seeded, fmt="md")
    lines = doc.splitlines()
    assert lines[0] == ("## Benchmark: mobilenet_v3_small: torch (eager) vs tensorflow "
                        "(tf_function)")
    assert "| model | batch | threads | torch (eager) | tensorflow (tf_function) |" in lines
    assert f"| mobilenet_v3_small 64px | 1 | 1 | **{TORCH_B1_T1}** | {TF_B1_T1} |" in lines
    assert "| mobilenet_v3_small 64px | 32 | 1 |  | oom |" in lines
    assert f"- {SENTENCE}" in lines
    assert NOISE in lines and any(line.startswith(DRIFT) for line in lines)
    assert ("**Machine:** Test CPU @ 2 GHz (1 physical / 2 logical cores, 2 usable), "
            "24.0 GiB, Linux 6.1, Python 3.11.7; torch 2.14.1; commit abc123") in lines
    assert lines[lines.index(REBUILT) - 1] == "```bash"
    assert "<" not in doc  # no raw HTML for a wiki to render


def test_html_fetches_nothing_and_inlines_plotly_once(seeded):
    doc = report(seeded)
    assert not re.search(r"<script[^>]*\bsrc\s*=", doc, re.I)
    assert not re.search(r"<link\b", doc, re.I)
    assert not re.search(r"@import|@font-face|url\(\s*['\"]?(https?:)?//", doc, re.I)
    # Plotly's config line, plotly.js itself once, then one call per figure
    assert doc.count("<script") == 2 + CHARTS
    assert len(re.findall(r"\* plotly\.js v\d", doc)) == 1
    assert doc.count("Plotly.newPlot(") == CHARTS


def test_the_same_sweep_gives_the_same_bytes(seeded):
    assert report(seeded) == report(seeded)
    assert report(seeded, fmt="md") == report(seeded, fmt="md")


def test_text_from_the_database_is_escaped(db_path):
    evil_system = {**SYSTEM, "system_id": "sys-evil", "cpu_model": f"CPU {EVIL}"}
    with open_db(db_path) as con:
        save_sweep(con, "sweep-evil", rounds=2, seed=7, plan=[[], []], configurations=2,
                   command=f"python -m engine run --model '{EVIL}' --rounds 2 "
                           "--max-rounds 4")
        for fw in ("torch", "tensorflow"):
            for rnd in (1, 2):
                rec = ok_record(f"evil-{fw}-{rnd}", framework=fw, minute=rnd)
                save_record(con, replace(rec, sweep_id="sweep-evil", round_no=rnd,
                                         model=EVIL, system_id="sys-evil"), evil_system)
    doc = report(db_path, "sweep-evil")
    assert "<script>alert" not in doc and "alert(&quot;x&quot;)" in doc
    assert f"<td>CPU {html.escape(EVIL)}</td>" in doc
    assert f"<pre><code>{html.escape(f'python -m engine run --model {EVIL!r}')}" in doc
    # the stored command says how many rounds were asked for and allowed
    assert "rounds: 2 minimum, each in fresh worker processes; 2 ran; max rounds: 4" in doc
    md = report(db_path, "sweep-evil", fmt="md")
    prose, code = md.split("```bash\n")
    assert "<script>" not in prose  # the fenced command is shown, not rendered
    assert code.startswith(f"python -m engine run --model {EVIL!r} --rounds 2")
    assert "&lt;script&gt;alert(\"x\")&lt;/script&gt; 64px" in md


def test_a_users_model_is_named_by_its_file_digest_and_rebuilt_as_a_model_file_command(
        db_path):
    digest = "ab" * 32
    with open_db(db_path) as con:  # launched from the dashboard: no command line stored
        save_sweep(con, "sweep-mine", rounds=2, seed=3, plan=[[], []], configurations=2,
                   command="dashboard")
        for rt in ("eager", "onnxruntime"):
            for rnd in (1, 2):
                rec = ok_record(f"mine-{rt}-{rnd}", runtime=rt, minute=rnd)
                save_record(con, replace(
                    rec, sweep_id="sweep-mine", round_no=rnd, model="my_net",
                    image_size=None, weight_policy="as_given", model_format="pt2",
                    model_origin="/data/models/3f2a9c.pt2", model_sha256=digest,
                    model_bytes=17853, model_inputs="input:1x3x16x16:float32"), SYSTEM)
    md = report(db_path, "sweep-mine", fmt="md")
    assert (f"| my_net | pt2 | /data/models/3f2a9c.pt2 | input:1x3x16x16:float32 | {digest} "
            "| 17,853 | 4 |") in md
    assert "| my_net | 1 | 1 |" in md  # no image size after a user model's name
    code = md.split("```bash\n")[1]
    assert code.startswith("python -m engine run --model-file /data/models/3f2a9c.pt2 "
                           "--name my_net --input input:1x3x16x16:float32 --framework torch "
                           "--runtime eager onnxruntime --batch 1 --threads 1 --warmup 2")
    doc = report(db_path, "sweep-mine")
    assert "<h2>Your models</h2>" in doc and f"<td>{digest}</td>" in doc


def test_refusals_name_the_field_and_the_allowed_values(seeded):
    seed_once(seed_workloads, seeded)
    with open_db(seeded) as con:
        save_sweep(con, "sweep-seeded-2", rounds=1, seed=1, plan=[[]], configurations=0)
        cases = {("sweep-seeded", "pdf"): ("format", "allowed: html, md"),
                 ("nope", "html"): ("sweep", "'nope' matches 0 sweeps; allowed: a unique "
                                             "id prefix"),
                 ("sweep-s", "html"): ("sweep", "'sweep-s' matches 2 sweeps"),
                 ("sweep-train", "md"): ("sweep", "allowed: an inference sweep")}
        for (sweep, fmt), (field, words) in cases.items():
            with pytest.raises(UserError) as err:
                build_report(con, sweep, fmt)
            assert err.value.field == field and words in str(err.value)
        # an exact id wins over the longer id it prefixes ("sweep-seeded-2")
        assert build_report(con, "sweep-seeded", "md").startswith(b"## Benchmark: mobilenet")


def test_cli_writes_the_file_and_refuses_bad_input_with_exit_2(seeded, tmp_path, capsys,
                                                              monkeypatch):
    out = tmp_path / "report.html"
    assert main(["report", "sweep-see", "--out", str(out), "--db", str(seeded)]) == 0
    assert out.read_bytes() == report(seeded).encode("utf-8")
    assert capsys.readouterr().out == (f"wrote {out} ({out.stat().st_size:,} bytes, html) "
                                       "for sweep sweep-seeded\n")
    md = tmp_path / "pr.md"  # the format follows the suffix
    assert main(["report", "--out", str(md), "--db", str(seeded)]) == 0
    assert md.read_text().startswith("## Benchmark: ")
    monkeypatch.chdir(tmp_path)  # the default name, in the current folder
    assert main(["report", "--format", "md", "--db", str(seeded)]) == 0
    assert (tmp_path / f"report-sweep-se{REPORT_FORMATS['md'][1]}").exists()
    capsys.readouterr()

    missing = tmp_path / "no-such-folder" / "r.html"
    assert main(["report", "--out", str(missing), "--db", str(seeded)]) == 2
    assert capsys.readouterr().err == (f"error: out: folder {missing.parent} does not exist; "
                                       "allowed: a file path in an existing folder (create "
                                       "it first)\n")
    assert main(["report", "--out", str(tmp_path), "--db", str(seeded)]) == 2
    assert capsys.readouterr().err.startswith(f"error: out: {tmp_path} is a folder; allowed:")
    assert main(["report", "--format", "pdf", "--db", str(seeded)]) == 2
    assert capsys.readouterr().err == ("error: format: 'pdf' is not a report format; "
                                       "allowed: html, md\n")
    assert main(["report", "zzz", "--db", str(seeded)]) == 2
    assert "error: sweep: 'zzz' matches 0 sweeps" in capsys.readouterr().err
    assert not missing.parent.exists()


@pytest.mark.slow
def test_html_renders_every_chart_offline_in_a_real_browser(seeded, tmp_path):
    from tests.test_e2e_browser import ARTIFACTS, CHROMIUM

    from playwright.sync_api import sync_playwright

    path = tmp_path / "report.html"
    path.write_bytes(report(seeded).encode("utf-8"))
    outside, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1400,
                                                                   "height": 1000})
            page = context.new_page()

            def gate(route):
                # A report that needed the network would stall here: count and refuse.
                if route.request.url.startswith(("file://", "data:", "blob:")):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()
            page.route("**/*", gate)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(path.as_uri(), wait_until="load")
            # a figure Plotly drew: its layout computed and its axes in the SVG
            drawn_js = ("[...document.querySelectorAll('.js-plotly-plot')]"
                        ".filter(d => d._fullLayout && d.querySelector('.main-svg .xtick'))"
                        ".length")
            page.wait_for_function(f"{drawn_js} >= {CHARTS}", timeout=30_000)
            drawn = page.evaluate(drawn_js)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report-offline.png"), full_page=True)
            report_outside = list(outside)
            # The gate sees what a page fetches: a CDN script is counted (and refused).
            cdn = tmp_path / "cdn.html"
            cdn.write_text('<script src="https://cdn.plot.ly/plotly-3.0.1.min.js"></script>')
            page.goto(cdn.as_uri(), wait_until="load")
        finally:
            browser.close()
    assert report_outside == [] and errors == []
    assert drawn == CHARTS
    assert outside == ["https://cdn.plot.ly/plotly-3.0.1.min.js"]


def test_a_dashboard_sweep_is_rebuilt_with_the_rule_it_kept_and_its_neighbour(db_path):
    with open_db(db_path) as con:  # launched from the dashboard with a 5 % margin
        save_sweep(con, "sweep-rule", rounds=3, seed=4, plan=[[]] * 3, configurations=3,
                   command="dashboard",
                   rule={"min_rounds": 3, "max_rounds": 8, "margin": 0.05, "alpha": 0.05})
        for contention in ("none", "steady"):
            for rnd in (1, 2, 3):
                rec = ok_record(f"r-{contention}-{rnd}", minute=rnd)
                save_record(con, replace(rec, sweep_id="sweep-rule", round_no=rnd,
                                         contention=contention), SYSTEM)
    md = report(db_path, "sweep-rule", fmt="md")
    code = md.split("```bash\n")[1]
    assert "--rounds 3 --max-rounds 8 --margin 0.05 --contention --seed 4" in code
    doc = report(db_path, "sweep-rule")
    assert "verdict margin: ±5 %" in doc
    assert "rounds: 3 minimum, each in fresh worker processes; 3 ran; max rounds: 8" in doc
