"""What the pass does to TVM's build time: for each model, the stock pipeline's build of
the original module, of the pass's module with its constant subgraphs left to TVM
(``fold_constants=False``) and of the pass's module as it is returned (``fold.py``).

    python scripts/build_time.py --small --opt-level 0 --models mobilenet-v2 resnet50
    python scripts/build_time.py --models resnet50      # full size, LLVM -O3

Writes ``benchmarks/results/build-time-llvm-O<n>[-small].md`` (and a JSON sidecar).  The
three builds of a model run one after another in this process (untuned: the default
pipeline's schedules), and their outputs are compared on the model's inputs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _build(mod, target):
    import tvm
    from tvm import relax

    t = time.perf_counter()
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    return ex, time.perf_counter() - t


def _outputs(ex, inputs) -> list[np.ndarray]:
    import tvm
    from tvm import relax

    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*[tvm.runtime.tensor(x) for x in inputs])
    return [out.numpy()] if isinstance(out, tvm.runtime.Tensor) else [o.numpy() for o in out]


def measure(name: str, small: bool, target) -> dict:
    import tvm_eqsat
    from tvm_eqsat import models
    from tvm_eqsat.evaluate import relative_difference

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = models.SMALL[name]() if small else models.MODELS[name]()
    unfolded, _ = tvm_eqsat.optimize(model.mod, target, fold_constants=False)
    t = time.perf_counter()
    folded, report = tvm_eqsat.optimize(model.mod, target)
    pass_s = time.perf_counter() - t
    builds = {}
    for key, mod in (("original", model.mod), ("unfolded", unfolded), ("folded", folded)):
        ex, seconds = _build(mod, target)
        builds[key] = (seconds, _outputs(ex, model.inputs))
    ref = builds["original"][1]
    fns = report.functions.values()
    return {
        "model": name,
        "changed": any(f.changed for f in fns),
        "constants_folded": sum(f.constants_folded for f in fns),
        "pass_s": round(pass_s, 3),
        "fold_s": round(sum(f.seconds.get("fold", 0.0) for f in fns), 3),
        **{f"build_{k}_s": round(v[0], 3) for k, v in builds.items()},
        "max_rel_diff": max(
            relative_difference(a, b) for k in ("unfolded", "folded") for a, b in zip(ref, builds[k][1])
        ),
    }


def main() -> None:
    import tvm

    from tvm_eqsat import models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["mobilenet-v2", "resnet50", "inception-v3", "resnext50"])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--opt-level", type=int, default=3, choices=range(4), help="LLVM's optimisation level")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    target = tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count(), "opt-level": args.opt_level})
    rows = []
    for name in args.models:
        if name not in models.MODELS:
            ap.error(f"unknown model {name!r}; known: {', '.join(sorted(models.MODELS))}")
        rows.append(measure(name, args.small, target))
        print(json.dumps(rows[-1]), flush=True)
    from tvm_eqsat import provenance

    stem = f"build-time-llvm-O{args.opt_level}" + ("-small" if args.small else "")
    header = (
        f"# Build time of the pass's modules, llvm -O{args.opt_level}{' (small models)' if args.small else ''}\n\n"
        f"`python scripts/build_time.py {' '.join(sys.argv[1:])}` on a {os.cpu_count()}-core "
        f"{provenance.cpu_name()}, {time.strftime('%Y-%m-%d')}. `tvm.compile` with the target's default "
        "pipeline (untuned); the pass with its defaults; `fold_constants=False` leaves the constant "
        "subgraphs the rewrites create to TVM's `FoldConstant`.\n"
    )
    doc = {**provenance.record(), "command": " ".join(["python scripts/build_time.py", *sys.argv[1:]]), "rows": rows}
    provenance.write_results(ROOT / "benchmarks" / "results" / stem, doc, lambda d: header + _table(d["rows"]))
    print(header + _table(rows))


def _table(rows: list[dict]) -> str:
    lines = [
        "",
        "| model | constants folded | pass s | of which folding | build original s | build unfolded s "
        "| build folded s | max rel. diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['constants_folded']} | {r['pass_s']:.2f} | {r['fold_s']:.2f} | "
            f"{r['build_original_s']:.2f} | {r['build_unfolded_s']:.2f} | {r['build_folded_s']:.2f} | "
            f"{r['max_rel_diff']:.2g} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
