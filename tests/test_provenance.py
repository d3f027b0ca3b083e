from tvm_eqsat import provenance


def test_record_names_machine_versions_and_sources():
    r = provenance.record()
    assert r["machine"] and r["cpus"] >= 1 and r["python"]
    assert r["versions"]["egglog"] == "13.2.0" and r["versions"]["apache-tvm"].startswith("0.27")
    assert len(r["sources_sha256"]) == 16 and int(r["sources_sha256"], 16) >= 0
    assert r["sources_sha256"] == provenance.sources_hash()  # stable while nothing changes


def test_write_results_puts_the_json_and_its_page_side_by_side(tmp_path):
    """``write_results``: the folder is made, the sidecar holds plain JSON values (tuples as
    lists), the page is what ``markdown`` makes of the same document."""
    import json

    stem = tmp_path / "new" / "bench-x"
    provenance.write_results(stem, {"rows": [(1, 2.5)], "name": "x"}, lambda d: f"# {d['name']}\n")
    assert json.loads(stem.with_suffix(".json").read_text()) == {"rows": [[1, 2.5]], "name": "x"}
    assert stem.with_suffix(".md").read_text() == "# x\n"
