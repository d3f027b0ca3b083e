"""Optimise a model with tvm-eqsat and compare it with the stock Relax build.

Prints the predicted costs, the pass time, a numerical check of the rewritten
module against the original (both built by TVM, same random inputs) and the
measured latency of both builds (stock pipeline vs. tvm-eqsat + stock pipeline,
default schedules, interleaved runs, medians).

    python scripts/compare.py                      # small BERT on llvm
    python scripts/compare.py --model resnet-block --repeat 50
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import numpy as np
import tvm
from tvm import relax

import tvm_eqsat
from tvm_eqsat import models, provenance, verify


def _measure(vm_a, vm_b, inputs, repeat: int) -> tuple[list[float], list[float]]:
    """Interleaved timings (ms) of two VMs on the same inputs: A B A B ..."""
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(x) for x in inputs]
    timers = [vm.time_evaluator("main", dev, number=1, repeat=1) for vm in (vm_a, vm_b)]
    for t in timers:  # warm-up
        t(*args)
    out: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for k, t in enumerate(timers):
            out[k].append(t(*args).mean * 1e3)
    return out


def _stats(ms: list[float]) -> str:
    a = np.asarray(ms)
    return f"{np.median(a):8.3f} ms (p10 {np.percentile(a, 10):.3f}, p90 {np.percentile(a, 90):.3f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert-small", choices=sorted(models.MODELS))
    parser.add_argument("--target", default="llvm", help="llvm (measured here) or cuda (pass only)")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per build")
    parser.add_argument("--time-limit", type=float, default=30.0, help="pass time limit (s)")
    parser.add_argument(
        "--cost-model", default="auto", help="the pass's cost_model (auto, roofline, xgb, or a model directory)"
    )
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")

    t = time.perf_counter()
    model = models.MODELS[args.model]()
    print(f"model {model.name}: imported in {time.perf_counter() - t:.1f} s")

    # both builds below use default schedules, so the pass costs for that flow
    options = {"time_limit_s": args.time_limit, "cost_model": args.cost_model, "flow": "default"}
    new_mod, report = tvm_eqsat.optimize(model.mod, args.target, **options)
    print(report.summary())
    fn = report.functions["main"]
    print(f"pass time {report.seconds:.2f} s; rules applied: {fn.rules_applied or 'none'}")

    result = {
        "model": model.name,
        "target": args.target,
        **provenance.record(),
        "report": report.to_dict(),
    }
    cmp = verify.compare(model.mod, new_mod)
    print(
        f"numerical check (llvm, random inputs): max abs diff {cmp.max_abs_diff:.3g}, "
        f"max rel diff {cmp.max_rel_diff:.3g} over {cmp.outputs} outputs"
    )
    result["max_abs_diff"] = cmp.max_abs_diff
    ok = cmp.max_rel_diff <= 1e-5

    if tvm.target.Target(args.target).kind.name == "llvm" and args.repeat > 0:
        target = tvm.target.Target(args.target)
        with tvm.transform.PassContext(opt_level=3):
            stock = tvm.compile(model.mod, target, relax_pipeline=relax.get_default_pipeline(target))
            ours = tvm.compile(model.mod, target, relax_pipeline=tvm_eqsat.pipeline(target, **options))
        vms = [relax.VirtualMachine(ex, tvm.cpu()) for ex in (stock, ours)]
        stock_ms, ours_ms = _measure(vms[0], vms[1], model.inputs, args.repeat)
        speedup = float(np.median(stock_ms) / np.median(ours_ms))
        print("measured latency, default schedules (untuned), interleaved runs:")
        print(f"  stock   {_stats(stock_ms)}")
        print(f"  eqsat   {_stats(ours_ms)}")
        print(f"  speedup {speedup:.3f}x (median / median)")
        result.update(stock_ms=stock_ms, eqsat_ms=ours_ms, speedup=speedup)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if not ok:
        print("FAILED: the rewritten module does not match the original", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
