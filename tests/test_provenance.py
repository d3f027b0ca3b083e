from tvm_eqsat import provenance


def test_record_names_machine_versions_and_sources():
    r = provenance.record()
    assert r["machine"] and r["cpus"] >= 1 and r["python"]
    assert r["versions"]["egglog"] == "13.2.0" and r["versions"]["apache-tvm"].startswith("0.27")
    assert len(r["sources_sha256"]) == 16 and int(r["sources_sha256"], 16) >= 0
    assert r["sources_sha256"] == provenance.sources_hash()  # stable while nothing changes
