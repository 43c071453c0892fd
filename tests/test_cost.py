"""Cost formulas, the shipped catalog, and price-list imports."""

import json
from dataclasses import asdict, replace

import pytest

from engine.cli import main
from engine.analysis.break_even import (MAX_STEPS, break_even_rates, break_even_steps,
                                        cost_vertices)
from engine.analysis.cost import (cost_per_million, equivalents,
                         load_catalog, load_unit_rates, machines_needed, monthly_cost,
                         oci_flex_price, storage_egress, validate_catalog, vcpus_per_ocpu)
from engine.analysis.cost_machines import basis, figure, physical_cores, training_rows
from engine.core.errors import UserError
from engine.analysis.price_import import parse_price_file
from store.db import open_db
from store.prices import effective_catalog, price_updates, save_price_updates


def test_formulas_exact():
    # $0.448/h at 100 samples/s: 360,000 inferences an hour -> $1.2444... per million
    assert cost_per_million(0.448, 100.0) == pytest.approx(0.448 / 360_000 * 1e6)
    assert cost_per_million(3.6, 1000.0) == pytest.approx(1.0)
    assert monthly_cost(0.448) == pytest.approx(327.04)
    assert monthly_cost(1.536, hours=720, machines=3) == pytest.approx(3317.76)
    assert machines_needed(250, 100) == 3 and machines_needed(200, 100) == 2
    assert machines_needed(0.5, 100) == 1
    assert oci_flex_price(0.025, 0.0015, 16, 32) == pytest.approx(0.448)
    assert (vcpus_per_ocpu("VM.Standard.E4.Flex"), vcpus_per_ocpu("VM.Standard.A1.Flex")) == (2, 1)
    with pytest.raises(UserError, match="throughput: 0 must be positive"):
        cost_per_million(1.0, 0)


def selected(threads, throughput, tpc=2, replicas=1, **kw):
    """A measured-throughput row of the selected machine (store.queries.machine_throughput)."""
    return {"threads": threads, "replicas": replicas, "throughput": throughput, "runs": 2,
            "threads_per_core": tpc, "machine_shape": None, "selected": True, **kw}


def test_an_estimate_scales_the_most_cores_measured_by_physical_cores():
    catalog = {m.label: m for m in load_catalog()}
    oci = catalog["OCI VM.Standard.E3.Flex 16 OCPU/32 GB"]
    b = basis([selected(1, 10.0), selected(2, 18.0)])  # 2 threads per core: 2 threads = 1 core
    p = figure(b, oci)
    assert p.estimate and p.throughput == pytest.approx(18.0 * 16)
    assert p.assumption == ("estimate: 18.0 samples/s per core from the selected machine "
                            "(best split 2 threads x 1 replica at 1 core) scaled to 16 cores")
    # Threads per core not recorded (an old run on an unknown host): a thread counts a core.
    p = figure(basis([selected(2, 18.0, tpc=None)]), oci)
    assert p.throughput == pytest.approx(9.0 * 16)
    assert "threads per core not recorded: 1 per thread" in p.assumption


def test_training_costs_project_each_configuration_from_its_own_splits():
    catalog = {m.label: m for m in load_catalog()}
    oci, aws = catalog["OCI VM.Standard.E3.Flex 16 OCPU/32 GB"], catalog["AWS c6i.8xlarge"]
    row = {"model": "resnet18", "batch_size": 32, "dataset": "digits", "samples_per_epoch": 1408}
    measured = [selected(1, 100.0, **row, contender="torch (eager)"),
                selected(2, 180.0, **row, contender="torch (eager)"),
                selected(2, 90.0, **row, contender="tensorflow (tf_function)")]
    rows = {(r["contender"], r["machine"]): r for r in training_rows(measured, [oci, aws])}
    assert len(rows) == 4
    torch_oci = rows[("torch (eager)", oci.label)]
    # 180/s at 2 threads = 1 core (2 threads per core) x 16 OCPUs = 2,880 samples/s
    assert torch_oci["throughput"] == pytest.approx(2880.0) and torch_oci["estimate"]
    assert torch_oci["s_per_epoch"] == pytest.approx(1408 / 2880)
    assert torch_oci["cost_per_million"] == pytest.approx(oci.usd_per_hour / (2880 * 3600) * 1e6)
    assert torch_oci["usd_per_epoch"] == pytest.approx(torch_oci["cost_per_million"] * 1408 / 1e6)
    tf_aws = rows[("tensorflow (tf_function)", aws.label)]
    assert tf_aws["throughput"] == pytest.approx(90.0 * 16)  # 32 vCPUs = 16 cores
    assert tf_aws["assumption"].endswith("scaled to 16 cores")

def test_break_even_between_two_choices():
    # A: 100/s per machine at $1/h; B: 250/s per machine at $2/h
    changes = break_even_rates((100.0, 1.0), (250.0, 2.0), 600)
    # up to 100/s A is cheaper (1 vs 2); 100-200: A needs 2 = $2 = B: equal; 200-250: A $3
    # vs B $2 -> B; 250-300: A $3 vs B $4 -> A; 300-400: A $4 = B $4; ...
    assert changes[:4] == [(100.0, "equal"), (200.0, "B"), (250.0, "A"), (300.0, "equal")]
    assert break_even_steps((100.0, 1.0), (250.0, 2.0), 600)[0].cheaper == "A"


def test_break_even_reports_each_change_at_its_rate_at_any_scale():
    # The case: A 12,000/s at $1.36/h, B 7,000/s at $0.768/h. Up to 7,000 one B
    # ($0.768) beats one A ($1.36); above 7,000 B needs 2 ($1.536): A; above 12,000 A needs
    # 2 ($2.72) against B's 2: B; above 21,000 B needs 4 ($3.072) against A's 2: A; above
    # 24,000 A needs 3 ($4.08): B. Nudging by 1e-6 reported 12,000, 14,000, 24,000, 28,000.
    steps = break_even_steps((12000, 1.36), (7000, 0.768), 60000)
    assert steps[0].cheaper == "B" and steps[0].end == 7000
    assert break_even_rates((12000, 1.36), (7000, 0.768), 60000)[:4] == [
        (7000, "A"), (12000, "B"), (21000, "A"), (24000, "B")]
    # ~100 samples/s: the same shape a hundred times smaller; and at a million samples/s,
    # where an absolute nudge vanishes inside machines_needed's forgiveness
    assert break_even_rates((120.0, 1.36), (70.0, 0.768), 600)[:4] == [
        (70.0, "A"), (120.0, "B"), (210.0, "A"), (240.0, "B")]
    assert break_even_rates((1_200_000.0, 1.36), (700_000.0, 0.768), 6_000_000)[:4] == [
        (700_000.0, "A"), (1_200_000.0, "B"), (2_100_000.0, "A"), (2_400_000.0, "B")]
    # At exactly 7,000 one B machine still serves the rate; just above it B needs two.
    assert machines_needed(7000, 7000) == 1 and machines_needed(7000.01, 7000) == 2
    at = {s.end: s.machines for s in steps}
    assert at[7000] == (1, 1) and at[12000] == (1, 2) and at[14000] == (2, 2)
    # Float noise is not a step: 3 x 0.1 and 0.3 are one breakpoint, not a flip and back.
    assert break_even_rates((0.1, 1.0), (0.3, 2.9), 0.55) == [(0.2, "B"), (0.3, "A"),
                                                              (0.5, "B")]


def test_break_even_matches_exact_arithmetic_on_seeded_cases():
    import random
    from fractions import Fraction

    rng = random.Random(7)
    for _ in range(200):
        ta, tb = rng.randint(1, 5000), rng.randint(1, 5000)
        pa, pb = rng.randint(1, 400), rng.randint(1, 400)  # cents an hour
        top = rng.randint(1, 12) * max(ta, tb)
        edges = sorted({0, top, *(k * t for t in (ta, tb) for k in range(1, top // t + 1))})
        truth, last = [], None
        for lo, hi in zip(edges, edges[1:]):
            mid = Fraction(lo + hi, 2)
            ca, cb = -(-mid // ta) * pa, -(-mid // tb) * pb  # exact ceil
            who = "A" if ca < cb else "B" if cb < ca else "equal"
            if last is not None and who != last:
                truth.append((lo, who))
            last = who
        assert break_even_rates((float(ta), pa / 100), (float(tb), pb / 100), top) == truth


def test_the_charts_step_vertices_and_the_texts_change_points_agree():
    from engine.present.charts import break_even_chart

    for a, b, top in (((12000, 1.36), (7000, 0.768), 60000), ((120.0, 1.36), (70.0, 0.768), 600),
                      ((1.2e6, 1.36), (7e5, 0.768), 6e6), ((100.0, 1.0), (250.0, 2.0), 600)):
        steps = break_even_steps(a, b, top)
        fig = break_even_chart("A", "B", steps, 730)
        # Read the chart back as two step functions (horizontal, then vertical: the cost at
        # x_i holds until x_{i+1}), judge each interval between any two vertices.
        traces = [(list(t.x), list(t.y)) for t in fig.data]
        xs = sorted({x for t in traces for x in t[0]})
        def cost(trace, r):
            vx, vy = trace
            return vy[max(i for i, x in enumerate(vx) if x < r)]
        read, last = [], None
        for lo, hi in zip(xs, xs[1:]):
            ca, cb = (cost(t, (lo + hi) / 2) for t in traces)
            who = "A" if ca < cb else "B" if cb < ca else "equal"
            if last is not None and who != last:
                read.append((lo, who))
            last = who
        assert read == break_even_rates(a, b, top)
    # A's vertices for the case: one machine from 0, two above 12,000, ...
    xs, ys = cost_vertices(break_even_steps((12000, 1.36), (7000, 0.768), 30000), 0, 730)
    assert xs == [0.0, 12000, 24000, 30000]
    assert ys == pytest.approx([992.8, 1985.6, 2978.4, 2978.4])


def test_a_break_even_too_fine_to_draw_is_refused_naming_its_range():
    with pytest.raises(UserError, match=r"max_rate: 10,000,000 samples/s takes 200,000 steps "
                                         r".*allowed: up to 2,500,000 samples/s"):
        break_even_steps((100.0, 1.0), (100.0, 1.0), 1e7)
    # the most allowed: 25,000 multiples of 100 each, one breakpoint where they coincide
    assert len(break_even_steps((100.0, 1.0), (100.0, 1.0), MAX_STEPS * 50)) == 25_000


def test_shipped_catalog_is_valid_and_prices_oci_flex_from_unit_rates():
    rates = load_unit_rates()
    catalog = load_catalog(rates=rates)
    assert validate_catalog(catalog, rates) == []
    by = {m.shape: m for m in catalog}
    e4 = by["VM.Standard.E4.Flex 16 OCPU/32 GB"]
    assert (e4.usd_per_hour, e4.vcpus, e4.pricing) == (0.448, 32, "oci_flex")
    a1 = by["VM.Standard.A1.Flex 16 OCPU/32 GB (Ampere Altra; 1 OCPU = 1 vCPU)"]
    assert (a1.usd_per_hour, a1.vcpus, a1.arch) == (0.208, 16, "arm64")
    assert all(m.secondary for m in catalog if m.provider in ("GCP", "Azure"))
    assert {m.provider for m in catalog} == {"OCI", "AWS", "GCP", "Azure"}
    eq = {m.provider: m.shape for m in equivalents(catalog, 32)}
    assert eq["AWS"] == "c6i.8xlarge" and eq["OCI"].startswith("VM.Standard.E3.Flex 16 OCPU")


def test_validation_catches_bad_rows():
    rates = load_unit_rates()
    good = load_catalog(rates=rates)[0]
    # "undated" is allowed (and warned about as stale); a third party's copy must say so.
    bad = [replace(good, usd_per_hour=-1.0), replace(good, source=" "),
           replace(good, as_of="last year"), replace(good, as_of="undated"),
           replace(good, provider="GCP", secondary=False),
           replace(good, first_party="")]
    problems = validate_catalog(bad, rates)
    assert problems == [
        f"{bad[0].label}: usd_per_hour -1.0 must be positive",
        f"{bad[1].label}: no source",
        f"{bad[2].label}: as_of 'last year' is not a date (YYYY[-MM[-DD]] or 'undated')",
        f"GCP {good.shape}: source {good.source!r} is a third party's copy; mark it secondary",
        f"{good.label}: names no first-party source (the provider's price list or API) to "
        "check the price against"]


def test_storage_and_egress_respect_free_allowances():
    rates = load_unit_rates()
    x = storage_egress(rates, storage_gb=0, egress_gb=5000)
    assert x["OCI"] == 0.0  # first 10 TB free
    assert x["AWS"] == pytest.approx((5000 - 100) * 0.09)
    y = storage_egress(rates, storage_gb=100, egress_gb=0)
    assert y["OCI"] == pytest.approx(100 * (0.0255 + 10 * 0.0017))
    assert y["AWS"] == pytest.approx(100 * 0.08)


OCI_LIST = {"lastUpdated": "2026-11-01T00:00:00Z", "items": [
    {"partNumber": "B93113", "displayName": "Compute - Standard - E4 - OCPU",
     "metricName": "OCPU Per Hour", "currencyCodeLocalizations": [
         {"currencyCode": "USD", "prices": [{"model": "PAY_AS_YOU_GO", "value": 0.02}]}]},
    {"partNumber": "B88327", "displayName": "Outbound Data Transfer", "metricName": "GB",
     "currencyCodeLocalizations": [{"currencyCode": "USD", "prices": [
         {"model": "PAY_AS_YOU_GO", "value": 0, "rangeMin": 0},
         {"model": "PAY_AS_YOU_GO", "value": 0.0085, "rangeMin": 10240}]}]}]}

AWS_OFFER = {"formatVersion": "v1.0", "offerCode": "AmazonEC2", "version": "20261101000000",
             "publicationDate": "2026-11-01T00:00:00Z",
             "products": {
                 "SKU1": {"sku": "SKU1", "productFamily": "Compute Instance", "attributes": {
                     "instanceType": "m6i.8xlarge", "vcpu": "32", "memory": "128 GiB",
                     "regionCode": "us-east-1", "operatingSystem": "Linux",
                     "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
                 "SKU2": {"sku": "SKU2", "productFamily": "Compute Instance", "attributes": {
                     "instanceType": "m6i.8xlarge", "vcpu": "32", "memory": "128 GiB",
                     "regionCode": "us-east-1", "operatingSystem": "Windows",
                     "tenancy": "Shared", "preInstalledSw": "NA"}},
                 "SKU3": {"sku": "SKU3", "productFamily": "Compute Instance", "attributes": {
                     "instanceType": "m9x.large", "vcpu": "2", "memory": "8 GiB",
                     "regionCode": "us-east-1", "operatingSystem": "Linux",
                     "tenancy": "Shared", "preInstalledSw": "NA"}}},
             "terms": {"OnDemand": {
                 "SKU1": {"SKU1.A": {"priceDimensions": {"SKU1.A.B": {
                     "unit": "Hrs", "pricePerUnit": {"USD": "1.4000000000"}}}}},
                 "SKU2": {"SKU2.A": {"priceDimensions": {"SKU2.A.B": {
                     "unit": "Hrs", "pricePerUnit": {"USD": "2.9000000000"}}}}},
                 "SKU3": {"SKU3.A": {"priceDimensions": {"SKU3.A.B": {
                     "unit": "Hrs", "pricePerUnit": {"USD": "0.1000000000"}}}}}}}}


def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_oci_price_list_import_reprices_flex_shapes(tmp_path, db_path, capsys):
    f = write(tmp_path, "oci.json", OCI_LIST)
    kind, rates, machines = parse_price_file(f)
    assert kind == "OCI price list" and machines == []
    assert [(r.part, r.usd, r.as_of) for r in rates] == [("B93113", 0.02, "2026-11-01"),
                                                        ("B88327", 0.0085, "2026-11-01")]
    assert main(["prices", "import", str(f), "--db", str(db_path)]) == 0
    assert "imported 2 price updates" in capsys.readouterr().out
    with open_db(db_path) as con:
        catalog, _ = effective_catalog(con)
    e4 = next(m for m in catalog if m.shape == "VM.Standard.E4.Flex 16 OCPU/32 GB")
    assert e4.usd_per_hour == pytest.approx(16 * 0.02 + 32 * 0.0015)  # 0.368
    # the new OCPU rate's source, and the date of its older part: the memory rate is the
    # shipped one of 2026-03-03, so the figure is no newer than that
    assert e4.as_of == "2026-03-03" and "oci.json" in e4.source and e4.secondary


def test_aws_offer_file_import_adds_and_updates_machines(tmp_path, db_path):
    f = write(tmp_path, "aws.json", AWS_OFFER)
    kind, rates, machines = parse_price_file(f)
    assert kind == "AWS offer file" and rates == []
    assert [(m.shape, m.vcpus, m.memory_gb, m.usd_per_hour, m.as_of) for m in machines] == [
        ("m6i.8xlarge", 32, 128.0, 1.4, "2026-11-01"), ("m9x.large", 2, 8.0, 0.1, "2026-11-01")]
    with open_db(db_path) as con:
        save_price_updates(con, rates, machines)
        catalog, _ = effective_catalog(con)
    m6i = [m for m in catalog if m.shape == "m6i.8xlarge"]
    assert len(m6i) == 1 and m6i[0].usd_per_hour == 1.4
    assert m6i[0].source == "AWS Price List offer 20261101000000 (aws.json)"
    assert any(m.shape == "m9x.large" for m in catalog)


@pytest.mark.parametrize("doc, why", [
    ("not json", "not JSON"),
    ({"hello": 1}, "neither an OCI price list"),
    ({"items": [{"displayName": "x"}]}, "items[0] has no partNumber"),
    ({"items": [{"partNumber": "B1", "currencyCodeLocalizations": [
        {"currencyCode": "USD", "prices": [{"model": "PAY_AS_YOU_GO", "value": -1}]}]}]},
     "items[0] (B1) has a negative price -1.0"),
    ({"products": {"S": {"productFamily": "Compute Instance", "attributes": {
        "instanceType": "x.large", "vcpu": "2", "memory": "8 GiB"}}}, "terms": {"OnDemand": {}}},
     "product S (x.large) has no OnDemand USD price"),
])
def test_malformed_price_files_are_refused_and_the_catalog_is_unchanged(
        tmp_path, db_path, capsys, doc, why):
    f = tmp_path / "bad.json"
    f.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with open_db(db_path) as con:
        before, _ = effective_catalog(con)
    assert main(["prices", "import", str(f), "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: file: {f} is not a usable price list: ")
    assert why in err and err.strip().endswith("the catalog is unchanged")
    with open_db(db_path) as con:
        after, _ = effective_catalog(con)
        assert con.execute("SELECT count(*) FROM price_updates").fetchall() == [(0,)]
    assert after == before


def test_prices_check_and_list(capsys, db_path):
    assert main(["prices", "check", "--on", "2026-11-27", "--db", str(db_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "42 machines, 32 unit rates: ok; 48 older than 6 months or undated on 2026-11-27; "
        "70 from a third party's copy (secondary)")
    assert main(["prices", "list", "--provider", "AWS", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "m6i.8xlarge" in out and "OCI" not in out


def test_the_pages_shapes_default_machine_and_oci_vs_aws_come_from_the_catalog():
    from engine.analysis.cost import cpu_shapes, default_shape, oci_vs_aws
    rates = load_unit_rates()
    catalog = load_catalog(rates=rates)
    cpu = cpu_shapes(catalog)
    assert cpu and all(m.accelerator_count == 0 and m.arch == "x86_64" for m in cpu)
    assert len(cpu) < len(catalog)  # Arm and GPU machines are left out
    assert cpu[default_shape(cpu)].label == "OCI VM.Standard.E3.Flex 16 OCPU/32 GB"
    assert default_shape([m for m in cpu if m.provider == "AWS"]) == 0
    claim = oci_vs_aws(cpu, rates, hours=730)
    # Like with like: c6i.8xlarge has 64 GB, so the Flex shape is priced at 64 GB too:
    # 16 x 0.025 + 64 x 0.0015 = $0.496/h = $362.08 a month; 1.36 / 0.496 = 2.74x (at the
    # catalog's 32 GB it was $0.448/h and 3.04x).
    assert (claim["oci"].label, claim["aws"].label, claim["memory_gb"]) == (
        "OCI VM.Standard.E3.Flex 16 OCPU/64 GB", "AWS c6i.8xlarge", 64.0)
    assert claim["oci"].usd_per_hour == pytest.approx(0.496)
    assert claim["ratio"] == pytest.approx(1.36 / 0.496) and round(claim["ratio"], 2) == 2.74
    first = claim["rows"][0]
    assert (first["vCPUs"], first["memory GB"], first["USD/month"]) == (
        32, 64.0, pytest.approx(362.08))
    # Every Flex row at 64 GB; the fixed shape keeps its bundled 240 GB and its price.
    oci_rows = [r for r in claim["rows"] if r["machine"].startswith("OCI")]
    assert {r["memory GB"] for r in oci_rows} == {64.0, 240.0}
    fixed = next(r for r in oci_rows if "Standard2.16" in r["machine"])
    assert (fixed["memory GB"], fixed["USD/hour"]) == (240.0, 1.0208)
    assert oci_vs_aws([m for m in cpu if m.provider == "OCI"], rates)["ratio"] is None


def test_a_flex_shape_is_priced_at_any_memory_and_a_fixed_one_keeps_its_own():
    from engine.analysis.cost import at_memory
    rates = load_unit_rates()
    by = {m.shape: m for m in load_catalog(rates=rates)}
    e5 = at_memory(by["VM.Standard.E5.Flex 16 OCPU/32 GB"], 128, rates)
    assert (e5.shape, e5.memory_gb, e5.ocpus) == ("VM.Standard.E5.Flex 16 OCPU/128 GB", 128, 16)
    assert e5.usd_per_hour == pytest.approx(16 * 0.03 + 128 * 0.002)  # 0.736
    assert e5.price_basis.endswith("(parts B97384/B97385; memory matched)")
    s3 = at_memory(by["VM.Standard3.Flex 16 OCPU/32 GB (Intel Xeon 8358)"], 64, rates)
    assert s3.shape == "VM.Standard3.Flex 16 OCPU/64 GB (Intel Xeon 8358)"
    fixed = by["VM.Standard2.16 (fixed; Xeon Platinum 8167M; 16 OCPU)"]
    assert at_memory(fixed, 64, rates) is fixed
    aws = by["c6i.8xlarge"]
    assert at_memory(aws, 128, rates) is aws
    # A fixed OCI shape with less memory than the AWS machine is no like-for-like headline.
    from engine.analysis.cost import oci_vs_aws
    small = replace(fixed, memory_gb=16.0, usd_per_hour=0.1)
    claim = oci_vs_aws([small, aws], rates)
    assert claim["ratio"] is None and len(claim["rows"]) == 2


def test_a_price_entered_by_hand_is_a_custom_machine():
    from engine.analysis.cost import custom_machine
    from engine.analysis.cost_machines import machine_rows
    m = custom_machine(1.25, 8)
    assert (m.provider, m.label, m.vcpus, m.usd_per_hour, m.source) == (
        "custom", "custom custom 8 vCPUs", 8, 1.25, "you")
    # 8 vCPUs of x86 with SMT are 4 cores: 8 threads measured at 100/s (4 cores) carry over.
    [row] = machine_rows([m], basis([selected(8, 100.0)]))
    assert row["cost_per_million"] == pytest.approx(1.25 / (100.0 * 3600) * 1e6)


def test_contenders_on_one_machine_each_project_their_own_splits():
    from engine.analysis.cost import custom_machine
    from engine.analysis.cost_machines import contender_rows
    rows = [selected(1, 10.0, contender="torch (eager)"),
            selected(2, 18.0, contender="torch (eager)"),
            selected(2, 30.0, contender="tensorflow (tf_function)")]
    machine = custom_machine(3.6, 2)  # one core, as 2 threads were here
    out = contender_rows(rows, machine)
    assert [(r["machine"], r["throughput"], r["estimate"]) for r in out] == [
        ("tensorflow (tf_function)", 30.0, True), ("torch (eager)", 18.0, True)]
    assert [r["cost_per_million"] for r in out] == [pytest.approx(1e6 / 30 / 1000),
                                                     pytest.approx(1e6 / 18 / 1000)]
    assert {r["provider"] for r in out} == {"custom"}


def test_machine_vs_machine_flags_a_p99_from_fewer_than_100_samples():
    from engine.present.cost_text import versus_frame
    rows = [{"machine": "OCI E4", "samples/s": 160.0, "p99 ms": 21.0, "p99 samples": 30},
            {"machine": "AWS c6i", "samples/s": 236.0, "p99 ms": 41.25, "p99 samples": 100},
            {"machine": "AWS old", "samples/s": 99.0, "p99 ms": None, "p99 samples": None}]
    frame = versus_frame(rows)
    assert list(frame.columns) == ["machine", "samples/s", "p99 ms"]
    assert frame["p99 ms"].tolist() == ["21.00 (n=30, low conf.)", "41.25", ""]


def _offer(*shapes):
    """An AWS offer file with one Linux shared machine per (instanceType, vcpu, processor)."""
    products, terms = {}, {}
    for i, (shape, vcpu, processor) in enumerate(shapes):
        sku = f"S{i}"
        products[sku] = {"sku": sku, "productFamily": "Compute Instance", "attributes": {
            "instanceType": shape, "vcpu": str(vcpu), "memory": "128 GiB",
            "regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared",
            "preInstalledSw": "NA", "physicalProcessor": processor,
            "processorArchitecture": "64-bit"}}
        terms[sku] = {f"{sku}.A": {"priceDimensions": {f"{sku}.A.B": {
            "unit": "Hrs", "pricePerUnit": {"USD": "1.0"}}}}}
    return {"version": "v", "publicationDate": "2026-11-01", "products": products,
            "terms": {"OnDemand": terms}}


def test_imported_graviton_and_amd_shapes_carry_their_arch_and_threads_per_core(
        tmp_path, db_path, capsys):
    # The processor named (m6gd), the family alone (c7gn with no processor), AWS AMD 7a
    # (SMT off) and an Intel shape.
    f = write(tmp_path, "aws.json", _offer(("m6gd.8xlarge", 32, "AWS Graviton2 Processor"),
                                           ("c7gn.8xlarge", 32, ""),
                                           ("m7a.8xlarge", 32, "AMD EPYC 9R14"),
                                           ("m6i.2xlarge", 8, "Intel Xeon 8375C")))
    _, _, machines = parse_price_file(f)
    assert [(m.shape, m.arch, m.threads_per_core) for m in machines] == [
        ("m6gd.8xlarge", "arm64", 1), ("c7gn.8xlarge", "arm64", 1),
        ("m7a.8xlarge", "x86_64", 1), ("m6i.2xlarge", "x86_64", 2)]
    assert main(["prices", "import", str(f), "--db", str(db_path)]) == 0
    capsys.readouterr()
    with open_db(db_path) as con:
        catalog = {m.shape: m for m in effective_catalog(con)[0]}
    # 32 vCPUs of Graviton are 32 cores; of Intel, 16
    assert (physical_cores(catalog["m6gd.8xlarge"]), physical_cores(catalog["m6i.8xlarge"])) == (
        32.0, 16.0)
    assert main(["prices", "list", "--provider", "AWS", "--db", str(db_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["provider", "shape", "arch", "vCPUs", "threads/core", "GB",
                                "USD/hour", "as", "of", "secondary"]
    row = {ln.split()[1]: ln.split()[2:5] for ln in lines[2:] if ln.startswith("AWS")}
    assert row["m6gd.8xlarge"] == ["arm64", "32", "1"]
    assert row["c7gn.8xlarge"] == ["arm64", "32", "1"]
    assert row["m6i.2xlarge"] == ["x86_64", "8", "2"]


def test_catalog_rows_carry_arch_and_threads_per_core_and_older_rows_get_them(tmp_path,
                                                                                db_path):
    shipped = {m.shape: m for m in load_catalog()}
    assert [(shipped[s].arch, shipped[s].threads_per_core) for s in (
        "c6i.8xlarge", "c7g.8xlarge (Graviton3)", "VM.Standard.E5.Flex 16 OCPU/32 GB",
        "VM.Standard.A1.Flex 16 OCPU/32 GB (Ampere Altra; 1 OCPU = 1 vCPU)")] == [
        ("x86_64", 2), ("arm64", 1), ("x86_64", 2), ("arm64", 1)]
    # A catalog file without the columns (GCP Arm: Tau T2A and Axion C4A; Tau T2D: AMD
    # with one thread per core): its rows get them from the shape's family.
    header = ("provider,region,shape,vcpus,ocpus,memory_gb,accelerator,accelerator_count,"
              "usd_per_hour,pricing,ocpu_part,memory_part,price_basis,source,as_of,secondary\n")
    body = "".join(f"GCP,us-central1,{s},32,,128,none,0,1.0,fixed,,,x,y,2026-11-01,yes\n"
                   for s in ("t2a-standard-32", "c4a-standard-32", "t2d-standard-32",
                             "n2-standard-32"))
    f = tmp_path / "old.csv"
    f.write_text(header + body)
    assert [(m.shape, m.arch, m.threads_per_core) for m in load_catalog(f)] == [
        ("t2a-standard-32", "arm64", 1), ("c4a-standard-32", "arm64", 1),
        ("t2d-standard-32", "x86_64", 1), ("n2-standard-32", "x86_64", 2)]
    # An update stored before the columns existed is read with them filled in.
    old = {k: v for k, v in asdict(shipped["c7g.8xlarge (Graviton3)"]).items()
           if k not in ("arch", "threads_per_core")}
    with open_db(db_path) as con:
        con.execute("INSERT INTO price_updates VALUES (?, ?, ?, ?, ?, now())",
                    ["machine", "AWS|x|c7g", json.dumps({**old, "shape": "c7gn.4xlarge"}),
                     "s", "2026-11-01"])
        [m] = price_updates(con)[1]
    assert (m.shape, m.arch, m.threads_per_core) == ("c7gn.4xlarge", "arm64", 1)
