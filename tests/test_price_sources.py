"""Prices a buyer can check (issue point 8): every row names the provider's own list to check
it in, third parties' copies are marked secondary, a price's age is judged on a fixed day,
and threads per core come from the catalog row (EC2's DefaultThreadsPerCore on import)."""

import json
from dataclasses import replace
from datetime import date

import pytest

from engine.analysis.cost import (FIRST_PARTY, load_catalog, load_unit_rates,
                                  validate_catalog)
from engine.analysis.cost_machines import basis, figure, physical_cores
from engine.analysis.price_age import (age_text, cutoff, months_old, oldest, price_age,
                                       read_as_of, stale_prices)
from engine.analysis.price_import import parse_instance_types, parse_price_file
from engine.cli import main
from engine.core.errors import UserError
from store.db import open_db
from store.prices import effective_catalog

DAY = date(2026, 11, 27)


# -- a price's age ---------------------------------------------------------------------------

def test_a_price_is_stale_past_six_calendar_months_on_the_day_given():
    assert cutoff(DAY) == date(2026, 5, 27)
    assert cutoff(date(2026, 8, 31)) == date(2026, 2, 28)  # clamped to the month's end
    assert [price_age("x", a, DAY).stale for a in ("2026-05-27", "2026-05-26")] == [
        False, True]
    assert months_old(date(2026, 3, 3), DAY) == 8
    assert months_old(date(2026, 3, 28), DAY) == 7  # the 28th is not reached yet


def test_partial_and_missing_dates_are_read_as_the_oldest_they_can_be():
    assert read_as_of("2025") == (date(2025, 1, 1), True)
    assert read_as_of("2026-03") == (date(2026, 3, 1), True)
    assert read_as_of("2026-03-03") == (date(2026, 3, 3), False)
    assert read_as_of("undated") == (None, False)
    with pytest.raises(ValueError):
        read_as_of("last year")
    year = price_age("AWS c7g.8xlarge (Graviton3)", "2026", DAY)
    assert (year.read_as, year.months, year.stale) == (date(2026, 1, 1), 10, True)
    assert age_text(year, DAY) == (
        "AWS c7g.8xlarge (Graviton3): as of 2026 (read as 2026-01-01, the earliest it can "
        "mean), 10 months (330 days) before 2026-11-27")
    undated = price_age("GCP n2-standard-32", "undated", DAY)
    assert (undated.read_as, undated.months, undated.stale) == (None, None, True)
    assert age_text(undated, DAY) == ("GCP n2-standard-32: undated (its source gives no "
                                      "date), so its age is unknown")
    # a figure built from two rates is as old as the older; undated if either is
    assert oldest("2026-11-01", "2026-03-03") == "2026-03-03"
    assert oldest("2026-03", "2026-02-15") == "2026-02-15"
    assert oldest("2026-11-01", "undated") == "undated"


def test_the_shipped_catalogs_stale_prices_on_a_fixed_day():
    rates = load_unit_rates()
    catalog = load_catalog(rates=rates)
    stale = stale_prices(catalog, rates.values(), today=DAY)
    labels = {a.label for a in stale}
    # 2026-09-24 (AWS, via a copy checked against offer 20260924211011) is 2 months old:
    # not stale; OCI's 2026-03-03 snapshot is 8 months old; GCP is undated (last).
    assert "AWS c6i.8xlarge" not in labels
    assert "OCI VM.Standard.E4.Flex 16 OCPU/32 GB" in labels
    assert "OCI VM.GPU.A10.1 (15 OCPU)" not in labels  # reconfirmed at 2026-09-23
    assert stale[0].label == "unit rate HY3BZPP2B6K8MSJF (EBS gp2 storage us-east-1)"
    assert stale[-1].label.startswith("GCP") and stale[-1].read_as is None
    assert (len(stale), sum(a.label.startswith("unit rate") for a in stale)) == (48, 26)
    # in March the OCI snapshot was new: only older and undated figures remain
    march = {a.label for a in stale_prices(catalog, rates.values(), today=date(2026, 3, 10))}
    assert "OCI VM.Standard.E4.Flex 16 OCPU/32 GB" not in march and len(march) == 11


# -- first-party sources and secondary marks ------------------------------------------------

def test_every_row_names_a_first_party_source_and_copies_are_secondary():
    rates = load_unit_rates()
    catalog = load_catalog(rates=rates)
    assert validate_catalog(catalog, rates) == []
    assert all(m.first_party for m in catalog) and all(r.first_party for r in rates.values())
    # Only Oracle's own page was seen for a figure (Ampere A1 OCPU and memory): those rows,
    # and the two A1 shapes priced from them, are first-party; the rest are copies.
    first = sorted(m.shape for m in catalog if not m.secondary)
    assert first == ["VM.Standard.A1.Flex 16 OCPU/32 GB (Ampere Altra; 1 OCPU = 1 vCPU)",
                     "VM.Standard.A1.Flex 32 OCPU/64 GB (vCPU-matched)"]
    assert sorted(r.part for r in rates.values() if not r.secondary) == ["B93297", "B93298"]
    assert (sum(m.secondary for m in catalog), len(catalog)) == (40, 42)
    assert (sum(r.secondary for r in rates.values()), len(rates)) == (30, 32)
    assert all(FIRST_PARTY.match(m.source) for m in catalog if not m.secondary)
    # the row says what was not reached rather than pretending it was checked
    c6i = next(m for m in catalog if m.shape == "c6i.8xlarge")
    assert c6i.first_party.startswith("not reached from here: AWS Price List API offer file ")


def test_a_copy_marked_first_party_is_refused_and_an_import_is_first_party(tmp_path):
    rates = load_unit_rates()
    c6i = next(m for m in load_catalog(rates=rates) if m.shape == "c6i.8xlarge")
    # the shipped catalog before this change said secondary=no for finopsmcp's copy
    assert validate_catalog([replace(c6i, secondary=False)], {}) == [
        f"AWS c6i.8xlarge: source {c6i.source!r} is a third party's copy; mark it "
        "secondary"]
    # a copy that only mentions the provider's list is still a copy
    assert not FIRST_PARTY.match("2026-10-09 blog (AWS Price List query)")
    assert FIRST_PARTY.match("AWS Price List offer 20261101000000 (aws.json)")
    assert FIRST_PARTY.match("OCI price list (oci.json)")


# -- threads per core: the row, EC2's description, the family as a marked last resort --------

def _offer(*shapes, version="20261101000000"):
    products, terms = {}, {}
    for i, (shape, vcpu, usd) in enumerate(shapes):
        sku = f"S{i}"
        products[sku] = {"sku": sku, "productFamily": "Compute Instance", "attributes": {
            "instanceType": shape, "vcpu": str(vcpu), "memory": "384 GiB",
            "regionCode": "us-east-2", "operatingSystem": "Linux", "tenancy": "Shared",
            "preInstalledSw": "NA", "physicalProcessor": "AMD EPYC 7R13 Processor",
            "processorArchitecture": "64-bit"}}
        terms[sku] = {f"{sku}.A": {"priceDimensions": {f"{sku}.A.B": {
            "unit": "Hrs", "pricePerUnit": {"USD": str(usd)}}}}}
    return {"version": version, "publicationDate": "2026-11-01T00:00:00Z",
            "products": products, "terms": {"OnDemand": terms}}


DESCRIBED = {"InstanceTypes": [
    {"InstanceType": "hpc6a.48xlarge",
     "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
     "VCpuInfo": {"DefaultVCpus": 96, "DefaultCores": 96, "DefaultThreadsPerCore": 1}},
    {"InstanceType": "m6a.24xlarge",
     "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
     "VCpuInfo": {"DefaultVCpus": 96, "DefaultCores": 48, "DefaultThreadsPerCore": 2}}]}


def _write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_an_hpc6a_counts_all_its_cores_from_ec2s_description(tmp_path, db_path, capsys):
    offer = _write(tmp_path, "aws.json", _offer(("hpc6a.48xlarge", 96, 2.88),
                                                ("m6a.24xlarge", 96, 4.1472),
                                                ("c6a.8xlarge", 32, 1.224)))
    types = _write(tmp_path, "types.json", DESCRIBED)
    described = parse_instance_types(types)
    assert described["hpc6a.48xlarge"].threads_per_core == 1
    _, _, machines = parse_price_file(offer, instance_types=described)
    got = {m.shape: (m.threads_per_core, m.threads_inferred, physical_cores(m))
           for m in machines}
    # EC2's DefaultThreadsPerCore, not the name: 96 cores (the name pattern used to give
    # 2 threads per core, 48 cores, and halve the machine's per-core estimate)
    assert got["hpc6a.48xlarge"] == (1, False, 96.0)
    assert got["m6a.24xlarge"] == (2, False, 48.0)
    # not described: the family's rule, marked as inferred
    assert got["c6a.8xlarge"] == (2, True, 16.0)
    # the estimate scales by those cores: 4 threads on 2 SMT cores at 40/s = 20/s per core
    source = basis([{"threads": 4, "replicas": 1, "throughput": 40.0, "runs": 3,
                     "threads_per_core": 2, "machine_shape": None, "selected": True}])
    hpc = next(m for m in machines if m.shape == "hpc6a.48xlarge")
    assert figure(source, hpc).throughput == 20.0 * 96  # 1,920/s; by the name: 960/s
    assert main(["prices", "import", str(offer), "--instance-types", str(types),
                 "--db", str(db_path)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"imported 3 price updates from {offer} (AWS offer file: 0 unit rates, 3 machines; "
        "threads per core of 1 inferred from the shape's family: pass --instance-types to "
        "read EC2's own)")
    with open_db(db_path) as con:
        stored = {m.shape: m for m in effective_catalog(con)[0]}
    assert (stored["hpc6a.48xlarge"].threads_per_core,
            stored["hpc6a.48xlarge"].threads_inferred) == (1, False)
    assert stored["c6a.8xlarge"].threads_inferred
    assert main(["prices", "list", "--provider", "AWS", "--db", str(db_path)]) == 0
    rows = {ln.split()[1]: ln.split()[2:6] for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("AWS")}
    assert rows["hpc6a.48xlarge"] == ["x86_64", "96", "1", "384"]
    assert rows["c6a.8xlarge"] == ["x86_64", "32", "2", "(inferred)"]


def test_without_a_description_an_hpc_shape_is_inferred_from_its_family(tmp_path):
    _, _, [m] = parse_price_file(_write(tmp_path, "a.json", _offer(("hpc6a.48xlarge", 96,
                                                                     2.88))))
    assert (m.threads_per_core, m.threads_inferred, physical_cores(m)) == (1, True, 96.0)


@pytest.mark.parametrize("doc, why", [
    ({"Reservations": []}, "no InstanceTypes[]"),
    ({"InstanceTypes": [{"InstanceType": "x.large", "VCpuInfo": {"DefaultVCpus": 2}}]},
     "InstanceTypes[0] (x.large) lacks VCpuInfo"),
    ({"InstanceTypes": [{"InstanceType": "x.large", "VCpuInfo": {
        "DefaultVCpus": 4, "DefaultCores": 1, "DefaultThreadsPerCore": 2}}]},
     "InstanceTypes[0] (x.large): 4 vCPUs is not 1 cores x 2 threads per core"),
])
def test_a_malformed_description_is_refused(tmp_path, doc, why):
    with pytest.raises(UserError) as err:
        parse_instance_types(_write(tmp_path, "t.json", doc))
    assert why in str(err.value) and err.value.field == "instance_types"


def test_an_offer_that_disagrees_with_the_description_is_refused(tmp_path):
    described = parse_instance_types(_write(tmp_path, "t.json", DESCRIBED))
    with pytest.raises(UserError) as err:
        parse_price_file(_write(tmp_path, "a.json", _offer(("hpc6a.48xlarge", 48, 2.88))),
                         instance_types=described)
    assert "has 48 vCPUs but the instance types' description says 96" in str(err.value)


def test_prices_check_warns_per_stale_row_and_fails_only_when_strict(db_path, capsys):
    assert main(["prices", "check", "--on", "2026-11-27", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    stale = [ln for ln in out if ln.startswith("stale: ")]
    assert len(stale) == 48
    assert ("stale: OCI VM.Standard.E4.Flex 16 OCPU/32 GB: as of 2026-03-03, 8 months "
            "(269 days) before 2026-11-27; check it at not reached from here: Oracle's price "
            "list API apexapps.oracle.com/pls/apex/cetools/api/v1/products/?partNumber=B93113"
            ) in " ".join(stale)
    assert main(["prices", "check", "--on", "2026-11-27", "--strict", "--db",
                 str(db_path)]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit):  # argparse refuses a day it cannot read, naming it
        main(["prices", "check", "--on", "27/11/2026", "--db", str(db_path)])
    assert "on: '27/11/2026' is not a date; allowed: YYYY-MM-DD" in capsys.readouterr().err


# -- a hypervisor that hides SMT -------------------------------------------------------------

def test_a_guest_is_told_by_the_hypervisor_cpu_flag():
    from engine.worker.machine import hypervisor_of
    assert hypervisor_of("processor : 0\nflags : fpu sse2 hypervisor avx2\n") is True
    assert hypervisor_of("processor : 0\nflags : fpu sse2 avx2 ht\n") is False
    assert hypervisor_of("processor : 0\nFeatures : fp asimd\n") is None  # Arm: silent
    assert hypervisor_of("") is None


def _host(tpc, hypervisor, **kw):
    return {"threads": 4, "replicas": 1, "throughput": 400.0, "runs": 3, "cores_used": 4,
            "threads_per_core": tpc, "hypervisor": hypervisor, "machine_shape": None,
            "selected": True, "cpu_model": "AMD EPYC", "platform": "Linux-6.1-x86_64", **kw}


CATALOG = {m.shape: m for m in load_catalog()}
C6I = CATALOG["c6i.8xlarge"]


def test_an_estimate_from_a_vm_with_one_thread_per_core_gives_the_hyperthread_figure():
    # 4 cores counted at 400/s: 100/s per core, c6i.8xlarge's 16 cores: 1,600/s. If the 4
    # were hyperthreads of 2 cores, a core serves 200/s and the 16 cores 3,200/s.
    f = figure(basis([_host(1, True)]), C6I)
    assert (f.throughput, f.if_hyperthreads) == (1600.0, 3200.0)
    assert f.assumption == (
        "estimate: 100.0 samples/s per core from AMD EPYC (best split 4 threads x 1 replica "
        "at 4 cores) scaled to 16 cores; the 4 cores counted (1 thread per core on a VM) may "
        "be hyperthreads of 2 cores: if so the figure would be 3,200.0 samples/s (twice the "
        "throughput per core)")
    # USD per 1 M on c6i.8xlarge ($1.36/h): $0.2361 as estimated, $0.1181 if hyperthreads
    assert round(C6I.usd_per_hour / (1600 * 3600) * 1e6, 4) == 0.2361
    assert round(C6I.usd_per_hour / (3200 * 3600) * 1e6, 4) == 0.1181
    # a host that did not say whether it was a VM (runs before workers recorded it) too
    unknown = figure(basis([_host(1, None)]), C6I)
    assert unknown.if_hyperthreads == 3200.0
    assert "(1 thread per core on a host that did not record whether it is a VM)" in \
        unknown.assumption
    # bare metal with SMT off, or a host that showed its 2 threads per core: no doubt
    assert figure(basis([_host(1, False)]), C6I).if_hyperthreads is None
    assert figure(basis([_host(2, True)]), C6I).if_hyperthreads is None
    # a target that runs one thread per core gains less than twice: said as a bound
    hpc = replace(C6I, shape="hpc6a.48xlarge", vcpus=96, threads_per_core=1)
    h = figure(basis([_host(1, True)]), hpc)
    assert (h.throughput, h.if_hyperthreads) == (9600.0, 19200.0)
    assert h.assumption.endswith("(twice the throughput per core, at most: this shape runs "
                                 "one thread per core)")


def test_part_of_a_shape_measured_on_a_vm_says_so_unless_the_row_settles_it():
    part = _host(1, True, machine_shape="c6i.8xlarge", selected=False)
    f = figure(basis([part]), C6I)
    assert (f.throughput, f.estimate, f.if_hyperthreads) == (1600.0, True, 3200.0)
    # a shape whose catalog row says one thread per core: the host's 1 is the truth
    m7a = replace(C6I, shape="m7a.8xlarge", threads_per_core=1, vcpus=32)
    one = figure(basis([{**part, "machine_shape": "m7a.8xlarge"}]), m7a)
    assert (one.throughput, one.if_hyperthreads) == (3200.0, None)


def test_the_store_reads_the_hypervisor_flag_a_run_recorded(db_path):
    from store.queries import machine_throughput
    from store.runs import save_record
    from seeds.records import LOCAL, ok_record
    with open_db(db_path) as con:
        for i, flag in enumerate((True, None)):
            rec = ok_record(f"h-{i}", batch_size=8, intra_threads=4)
            extra = {**rec.extra, **({"hypervisor": flag} if flag is not None else {})}
            save_record(con, replace(rec, sweep_id=None, system_id=f"sys-{i}",
                                     threads_per_core=1, extra=extra),
                        {**LOCAL, "system_id": f"sys-{i}"})
        got = {s: machine_throughput(con, "inference", ("cpu", "fp32", 1, s))
               for s in ("sys-0", "sys-1")}
    rows = {s: g[g.selected.astype(bool)].to_dict("records") for s, g in got.items()}
    assert [r["hypervisor"] for r in rows["sys-0"]] == [True]
    assert basis(rows["sys-1"]).source[0].hypervisor is None
    assert basis(rows["sys-0"]).source[0].hypervisor is True


def test_the_cost_texts_name_inferred_threads_and_hyperthreads():
    from engine.analysis.cost_machines import Basis, Split
    from engine.present.cost_text import source_caption, stale_text, threads_text
    vm = Split(threads=2, replicas=1, throughput=100.0, runs=3, threads_per_core=1,
               machine="AMD EPYC", hypervisor=True)
    assert source_caption(Basis((vm,), ())) == (
        "Selected machine: AMD EPYC (1 thread per core on a VM: its cores may be "
        "hyperthreads): 2 threads x 1 replica: 100.0 samples/s.")
    assert threads_text(C6I) == "2 threads per core, from its catalog row"
    guessed = replace(C6I, shape="c6a.8xlarge", threads_inferred=True)
    assert threads_text(guessed) == ("2 threads per core, inferred from the shape's name "
                                     "(its catalog row does not say)")
    rates = load_unit_rates()
    e4 = CATALOG["VM.Standard.E4.Flex 16 OCPU/32 GB"]
    assert stale_text(stale_prices([C6I], today=DAY), DAY) is None
    assert stale_text(stale_prices([C6I, e4], today=DAY), DAY) == (
        "1 price used here is older than 6 months on 2026-11-27 or undated: OCI "
        "VM.Standard.E4.Flex 16 OCPU/32 GB: as of 2026-03-03, 8 months (269 days) before "
        "2026-11-27. Check them against the provider's list (the catalog's \"check at\" "
        "column) before signing a budget, or import a current one: `python -m engine prices "
        "import FILE`.")
    assert len(stale_prices(load_catalog(rates=rates), today=DAY)) == 22
