"""Extraction benchmark: each extractor on the saturated e-graphs of the models.

For every model: grow the e-graph of each dataflow block with all rule families
(saturation, default limits), then time each extractor on the same snapshot and
record the DAG cost of its answer (roofline costs, llvm).  Writes
``benchmarks/results/extract-llvm.csv`` and a JSON sidecar with the machine and versions.

    python scripts/bench_extract.py --models bert-small resnet-block bert-base resnet50
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import os
import platform
import time

import tvm
from tvm import relax
from tqdm import tqdm

from tvm_eqsat import models
from tvm_eqsat.cost import make_cost_model
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.extract import EXTRACTORS, _choice_cost, extract, snapshot_node_cost
from tvm_eqsat.graph import Unsupported, graph_from_block
from tvm_eqsat.rules import load_library
from tvm_eqsat.search import saturate

FIELDS = ["model", "block", "enodes", "eclasses", "grow_s", "extractor", "extract_s", "dag_cost_us", "vs_ilp"]


def bench_model(name: str, node_limit: int, ilp_limit: float) -> list[dict]:
    model = models.MODELS[name]()
    library = load_library()
    program = library.program()
    cost = make_cost_model("roofline", "llvm")
    rows = []
    for i, block in enumerate(model.mod["main"].body.blocks):
        if not isinstance(block, relax.DataflowBlock):
            continue
        try:
            graph = graph_from_block(block)
        except Unsupported:
            continue
        egraph = TensorEGraph(graph, program)
        t = time.perf_counter()
        saturate(egraph, library.families, node_limit=node_limit, iter_limit=30, deadline=time.monotonic() + 300)
        grow_s = time.perf_counter() - t
        snap = egraph.snapshot()
        node_cost = snapshot_node_cost(snap, cost)
        roots = [snap.root_of[nid] for _, nid in graph.outputs]
        results = {}
        for method in EXTRACTORS:
            t = time.perf_counter()
            choice = extract(snap, roots, node_cost, method, ilp_limit)
            results[method] = (time.perf_counter() - t, _choice_cost(snap, choice, roots, node_cost))
        for method, (seconds, dag) in results.items():
            rows.append(
                {
                    "model": name,
                    "block": i,
                    "enodes": snap.n_nodes,
                    "eclasses": len(snap.classes),
                    "grow_s": round(grow_s, 3),
                    "extractor": method,
                    "extract_s": round(seconds, 3),
                    "dag_cost_us": round(dag, 3),
                    "vs_ilp": round(dag / results["ilp"][1], 5),
                }
            )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bert-small", "resnet-block", "bert-base", "resnet50"])
    parser.add_argument("--node-limit", type=int, default=20000)
    parser.add_argument("--ilp-limit", type=float, default=30.0)
    parser.add_argument("--out", default="benchmarks/results/extract-llvm.csv")
    args = parser.parse_args(argv)
    rows = []
    for name in tqdm(args.models, desc="models"):
        rows.extend(bench_model(name, args.node_limit, args.ilp_limit))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    sidecar = {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "tvm": tvm.__version__,
        "egglog": importlib.metadata.version("egglog"),
        "cost_model": "roofline (llvm)",
        "node_limit": args.node_limit,
        "ilp_time_limit_s": args.ilp_limit,
        "command": "python scripts/bench_extract.py --models " + " ".join(args.models),
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(sidecar, f, indent=2)
    for r in rows:
        print(",".join(str(r[k]) for k in FIELDS))


if __name__ == "__main__":
    main()
