"""What the workaround costs and what it buys: a model with and without the ``nchwc`` family,
tuned, built from one database with LLVM's loop vectorizer on and off, timed interleaved.

Three builds of the pass's output (``tvm_eqsat.optimize``, tuned flow): its default families
less ``nchwc`` as usual, the same with ``cl-opt=-vectorize-loops=false``, and with ``nchwc``
and the option (without it, the family's fused copies can compute garbage in AVX2 code:
``minimal.py``).  Each build's outputs are compared with stock's built untuned.  The row is
appended to ``benchmarks/results/family-nchwc-<target>-novec-t<trials>.json``.

    python benchmarks/repro/avx2-copy-miscompile/option_cost.py inception-v3 --mcpu znver3 \\
        --work-dir ~/.cache/tvm_eqsat/ms-llvm-znver3-cold
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import optimize, provenance, timing, tune
from tvm_eqsat.cost import cpu_vector_bits, make_cost_model, priced_layouts
from tvm_eqsat.family_defaults import LOOP_VECTORIZER_OFF, default_families
from tvm_eqsat.models import MODELS
from tvm_eqsat.verify import executable_outputs, output_diffs, wrong_outputs

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--mcpu", default="host")
    ap.add_argument("--work-dir", required=True, help="the MetaSchedule database (cold-cache tuned)")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-ms", type=float, default=200.0)
    args = ap.parse_args()
    mcpu = tune.resolve_mcpu(args.mcpu)
    usual = tune.llvm_target(mcpu)
    novec = {**usual, "cl-opt": [LOOP_VECTORIZER_OFF]}
    model = MODELS[args.model]()
    cost = make_cost_model("auto", "llvm", "tuned", cpu_vector_bits(mcpu), mcpu)
    base = [f for f in default_families("llvm", "tuned", priced_layouts(cost)) if f != "nchwc"]
    mods = {
        rules: optimize(model.mod, tvm.target.Target(usual), flow="tuned", rules=list(rules))[0]
        for rules in (tuple(base), (*base, "nchwc"))
    }
    for mod in mods.values():  # one database: the last call opens it with every record
        db = tune.tune(mod, usual, args.work_dir, args.trials, progress=True, cold_cache=True)
    builds = {
        "eqsat": (mods[tuple(base)], usual),
        "eqsat, loop vectorizer off": (mods[tuple(base)], novec),
        "eqsat+nchwc, loop vectorizer off": (mods[(*base, "nchwc")], novec),
    }
    dev, samplers, outs = tvm.cpu(), {}, {}
    truth = executable_outputs(tune.build(model.mod, usual, None), model.inputs, dev)
    for label, (mod, target) in builds.items():
        ex = tune.build(mod, target, db)
        samplers[label] = timing.tvm_sampler(ex, dev, model.inputs, args.min_ms, cold=True)[2]
        outs[label] = executable_outputs(ex, model.inputs, dev)
    times = timing.time_interleaved(samplers, args.repeat)
    row = {
        "model": model.name,
        "mcpu": mcpu,
        "trials": args.trials,
        "cpu_cache": "cold",
        "ms": {k: float(np.median(v)) for k, v in times.items()},
        "p10_p90_ms": {k: [float(np.percentile(v, 10)), float(np.percentile(v, 90))] for k, v in times.items()},
        "max_rel_diff": {k: output_diffs(truth, v)[1] for k, v in outs.items()},
        "machine": provenance.machine(),
        "command": "python " + " ".join(sys.argv),
    }
    row["speedup_vs_eqsat"] = {k: row["ms"]["eqsat"] / v for k, v in row["ms"].items()}
    row["wrong_outputs"] = wrong_outputs(row["max_rel_diff"])
    print(json.dumps(row, indent=1))
    name = tune.target_name("llvm", mcpu, True)
    path = ROOT / "benchmarks" / "results" / f"family-nchwc-{name}-novec-t{args.trials}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*rows, row], indent=1) + "\n")


if __name__ == "__main__":
    main()
