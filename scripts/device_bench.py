"""End-to-end benchmark on a machine without TVM (the lent GPU): build here, time there.

``build`` compiles the benchmark's variants of each model (``scripts/benchmark.py``'s
``make_variant``: stock, stock+tvm, stock+nhwc, eqsat, ...) for the target with its
default flow (dlight on CUDA, kernels compiled with nvcc) into one runtime-only bundle
(``tvm_eqsat.bundle``), with each model's outputs computed here on llvm for the device
to compare with.  On the device, ``python <bundle>/run.py --out $OUT`` times every
entry in interleaved rounds.  ``collect`` turns that ``results.json`` into
``benchmarks/results/<target>-default[-small].{csv,md}``, against the best stock variant.

    python scripts/device_bench.py build --small --out out/cuda-small          # here (~64 MiB at most)
    # device tool: python out/cuda-small/run.py --out $OUT
    python scripts/device_bench.py collect out/cuda-small <files_at>/results.json --small
    python scripts/device_bench.py collect out/cuda/part0 part0.json out/cuda/part1 part1.json

By default the device makes each library's weights (``--weights device``: random, made
there, after the build folded the weight-only subgraphs; ``tvm_eqsat.bundle``), so a
library carries code only (0.1-1 MiB gzipped) and the full-size suite fits one run; the
outputs are then not compared there (each rewrite is checked on this machine by the pass
and by ``benchmark.py``).  ``--weights bound`` puts the weights in the libraries and
compares the device's outputs with this machine's; those bundles are packed into parts
(``DIR/part0``, ``DIR/part1``, ...: one device run each) by the bytes of their weights,
and ``collect`` takes each part's results.

The tuned flow runs offline in three steps and two device runs (``tvm_eqsat.batch_tune``):

    python scripts/device_bench.py variants --out out/v                     # the modules, saved
    python scripts/device_bench.py candidates --modules out/v --out out/c   # sampled schedules
    python scripts/device_bench.py candidates --modules out/v --only stock --seed 1000 --out out/aa
    # device: python out/c/run.py --out $OUT/c; python out/aa/run.py --out $OUT/aa
    python scripts/device_bench.py tuned --modules out/v --main out/c c.json --aa out/aa aa.json --out out/t
    # (candidates too many for one run's 64 MiB: one bundle per --models group, --main B1 R1 B2 R2 ...)
    # device: python out/t/run.py --out $OUT
    python scripts/device_bench.py collect out/t <files_at>/results.json --flow tuned
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tvm  # noqa: E402
from benchmark import STOCK_VARIANTS, best_stock_table, make_target, make_variant, pass_options  # noqa: E402

from tvm_eqsat import batch_tune, bundle, models, provenance, tuning_db, verify  # noqa: E402
from tvm_eqsat.graph import TensorTy, module_graphs, ty_of  # noqa: E402

VARIANTS = ("stock", "stock+tvm", "stock+nhwc", "eqsat", "eqsat+tvm")
FIELDS = ["model", "variant", "median_ms", "p10_ms", "p90_ms", "max_rel_diff", "speedup_vs_stock",
          "predicted_speedup", "changed", "rules_fired", "notes"]  # fmt: skip


FLOW_TITLES = {
    "default": "default flow (dlight)",
    "tuned": "tuned flow offline (dlight, with MetaSchedule's fastest of N random schedules of each conv and matmul "
    "kernel where it beat dlight on the device; device_bench.py candidates/tuned)",
}
SAME_MODULE = {"eqsat": "stock", "eqsat+tvm": "stock+tvm"}  # what a variant's module is when the pass changed nothing
RUNTIME_MIB = 8  # the runtime part of a bundle (tvm without its compiler, gzipped; the tvm_ffi wheel), with a margin
CODE_MIB = 0.3  # a library's code beside its weights, in the solid archive (CUDA sm_90, small suite: 0.07 MiB measured)


def _constant_bytes(mod) -> int:
    """Bytes of the constants bound in ``mod``: what each of its libraries carries."""
    return sum(
        t.nbytes for g in module_graphs(mod) for t in (ty_of(c.ty) for c in g.constants) if isinstance(t, TensorTy)
    )


def model_variants(args, target):
    """Each model's variants that differ from stock (``make_variant``, the default flow's
    pass options): yields (model name, its Model, {variant: Variant}, {entry: info}),
    recording variants the pass flagged in ``SKIPPED``."""
    builders = models.SMALL if args.small else models.MODELS
    opts = pass_options(
        argparse.Namespace(
            time_limit=args.time_limit, cost_model="auto", flow="default", speed_check=False, work_dir=None, trials=0
        )
    )
    for name in args.models:
        model = builders[name]()
        mine, info = {}, {}
        for vname in args.variants:
            try:
                v = make_variant(vname, model.mod, target, opts)
            except RuntimeError as err:  # the pass flagged its own run: that variant is not timed
                print(f"{name}/{vname}: left out: {err}", file=sys.stderr)
                SKIPPED[f"{name}/{vname}"] = str(err)[:500]
                continue
            if vname != "stock" and not v.changed:
                continue  # the same module as stock: nothing more to time
            mine[vname] = v
            info[f"{name}/{vname}"] = {
                "predicted_speedup": v.predicted_speedup,
                "changed": int(v.changed),
                "rules_fired": v.rules_fired,
                "notes": v.notes,
            }
        yield name, model, mine, info


SKIPPED: dict[str, str] = {}  # "model/variant": why the pass's run was not used


def build(args) -> None:
    """One bundle, or several (``DIR/part0``, ...) when the models' weights do not fit one:
    models are packed in order into parts whose libraries' weights stay under the limit."""
    target = make_target(args.target, args.arch)
    room = bundle.room_bytes() / 2**20 - RUNTIME_MIB
    parts: list[tuple[list, dict, float]] = [([], {}, 0.0)]
    for name, model, variants, info in model_variants(args, target):
        mine = [
            bundle.Entry(f"{name}/{vname}", v.mod, number=args.number, repeat=args.repeat, weights=args.weights)
            for vname, v in variants.items()
        ]
        weights = _constant_bytes(model.mod) / 2**20 if args.weights == "bound" else 0.0
        mib = len(mine) * (weights + CODE_MIB)
        if mib > room:
            raise ValueError(
                f"{name}: its {len(mine)} libraries take about {mib:.0f} MiB, over the {room:.0f} MiB a "
                "bundle has for them (try --weights device)"
            )
        if parts[-1][0] and parts[-1][2] + mib > room:
            parts.append(([], {}, 0.0))
        entries, infos, used = parts[-1]
        parts[-1] = (entries + mine, {**infos, **info}, used + mib)
    for k, (entries, info, _) in enumerate(parts):
        out = Path(args.out) / f"part{k}" if len(parts) > 1 else Path(args.out)
        path = bundle.build_bundle(entries, target, out, python_version=args.python, rounds=args.rounds, solid=True)
        _write_variants(path, info, args.variants)
        print(f"{path}: {len(entries)} modules, {bundle.bundle_bytes(path) / 2**20:.1f} MiB")


def _write_variants(path: Path, info: dict, variants: list[str]) -> None:
    (path / "variants.json").write_text(
        json.dumps({**info, "__left_out__": SKIPPED, "__variants__": variants}, indent=1)
    )


# ---------------------------------------------------------------- tuned flow, offline


def save_variants(args) -> None:
    """The variants' modules saved (``DIR/modules/<model>__<variant>.json``), so that the
    candidates and the tuned bundle are built from the very modules the pass returned."""
    target = make_target(args.target, args.arch)
    out = Path(args.out) / "modules"
    out.mkdir(parents=True, exist_ok=True)
    infos: dict = {}
    for name, _, variants, info in model_variants(args, target):
        for vname, v in variants.items():
            (out / f"{name}__{vname}.json").write_text(tvm.ir.save_json(v.mod))
        infos.update(info)
    _write_variants(Path(args.out), infos, args.variants)
    print(f"{len(infos)} modules in {out}")


def _saved_modules(folder: str, variants: list[str] | None = None, names: list[str] | None = None) -> dict:
    """{"model/variant": module} saved by ``save_variants`` (only those of ``variants`` and
    of the models ``names``, where given)."""
    found = {}
    for path in sorted((Path(folder) / "modules").glob("*.json")):
        model, vname = path.stem.split("__")
        if (variants is None or vname in variants) and (names is None or model in names):
            found[f"{model}/{vname}"] = tvm.ir.load_json(path.read_text())
    return found


def _kernel_key(task) -> str:
    return tuning_db.kernel_hash(task.dispatched[0])


def candidates(args) -> None:
    """A bundle of ``--n`` sampled schedules of every heavy kernel of the saved modules
    (or ``--budget`` in all, shared by the kernels' work: ``batch_tune.allot``; ``--only``
    some variants: stock for the A/A control, with another ``--seed``), each beside its
    dlight schedule (``tvm_eqsat.batch_tune``).  With ``--budget`` and ``--only``, a kernel
    gets the share it has among every variant's kernels, the count the main bundle of the
    same ``--budget`` gives it: an A/A control on a smaller search is no control."""
    target = make_target(args.target, args.arch)
    select = None if args.all_kernels else batch_tune.heavy
    mods = _saved_modules(args.modules, args.only, args.models)
    tasks = batch_tune.extract_tasks(list(mods.values()), target, select)
    n = args.n
    if args.budget is not None:  # shared over every variant's kernels, as the main bundle's are
        every = tasks
        if args.only:
            every = batch_tune.extract_tasks(
                list(_saved_modules(args.modules, None, args.models).values()), target, select
            )
        shares = dict(zip(map(_kernel_key, every), batch_tune.allot(every, args.budget, least=min(args.n, 4))))
        n = [shares[_kernel_key(t)] for t in tasks]
    print(f"{len(tasks)} kernels of {len(mods)} modules, {n if isinstance(n, int) else sum(n)} samples"
          f"{' each' if isinstance(n, int) else ''}", file=sys.stderr)  # fmt: skip
    path = batch_tune.candidate_bundle(
        tasks, target, args.out, n=n, seed=args.seed, python_version=args.python, number=args.number,
        repeat=args.repeat,
    )  # fmt: skip
    print(f"{path}: {bundle.bundle_bytes(path) / 2**20:.1f} MiB")


def tuned(args) -> None:
    """The device's candidate timings recorded into databases (``<out>-db-main``, and
    ``<out>-db-aa`` for the A/A control, beside ``--out``), then every saved module built
    with them (dlight where no candidate beat it) into a bundle of the tuned flow;
    ``stock-aa`` is stock's module built with the A/A database."""
    target = make_target(args.target, args.arch)
    out = Path(args.out)
    kernels: dict[str, list] = {}
    dbs = {}
    for tag, pairs in (("main", args.main), ("aa", args.aa)):
        if not pairs:
            continue
        if len(pairs) % 2:
            raise SystemExit(f"--{tag} takes BUNDLE RESULTS pairs")
        kernels[tag] = []
        for bundle_dir, results in zip(pairs[::2], pairs[1::2]):  # a bundle per device run, one database
            dbs[tag] = batch_tune.record_results(bundle_dir, results, out.parent / f"{out.name}-db-{tag}", kernels[tag])
    mods = _saved_modules(args.modules, None, args.models)
    for tag, db in dbs.items():
        tuned_mods = [m for k, m in mods.items() if tag == "main" or k.endswith("/stock")]
        lost = batch_tune.unmatched_records(db, batch_tune.extract_tasks(tuned_mods, target))
        if lost:
            raise SystemExit(
                f"{tag}: {lost} kernels' records match no kernel of the modules; the build would not use them"
            )
    entries = [
        bundle.Entry(key, mod, database=dbs["main"], number=args.number, repeat=args.repeat, weights="device")
        for key, mod in mods.items()
    ]
    if "aa" in dbs:
        entries += [
            bundle.Entry(key.replace("/stock", "/stock-aa"), mod, database=dbs["aa"], number=args.number,
                         repeat=args.repeat, weights="device")
            for key, mod in mods.items() if key.endswith("/stock")
        ]  # fmt: skip
    path = bundle.build_bundle(
        entries, target, out, python_version=args.python, rounds=args.rounds, expected=False, solid=True
    )
    info = json.loads((Path(args.modules) / "variants.json").read_text())
    asked = info.pop("__variants__")
    SKIPPED.update(info.pop("__left_out__"))
    _write_variants(path, info, asked + (["stock-aa"] if "aa" in dbs else []))
    (path / "kernels.json").write_text(json.dumps(kernels, indent=1))
    for tag, rows in kernels.items():
        won = [r for r in rows if r["best_ms"] < r["baseline_ms"]]
        print(f"{tag}: a candidate beat dlight on {len(won)} of {len(rows)} kernels")
    print(f"{path}: {len(entries)} modules, {bundle.bundle_bytes(path) / 2**20:.1f} MiB")


def collect(args) -> int:
    """One results file from the device runs of a bundle's parts (``BUNDLE RESULTS`` pairs);
    the exit status: 1 where a build whose outputs were compared there is wrong
    (``verify.wrong_builds_status``; bundles with weights made on the device compare none)."""
    if len(args.pairs) % 2:
        raise SystemExit("collect takes BUNDLE RESULTS pairs (one per part)")
    data: dict[str, dict[str, dict]] = {}
    left_out: dict[str, str] = {}
    results = []
    for bundle_dir, results_file in zip(args.pairs[::2], args.pairs[1::2]):
        result = json.loads(Path(results_file).read_text())
        info = json.loads((Path(bundle_dir) / "variants.json").read_text())
        left_out.update(info.pop("__left_out__", {}))
        asked = info.pop("__variants__", list(VARIANTS))
        manifest = json.loads((Path(bundle_dir) / "manifest.json").read_text())
        results.append(result)
        for row in result["rows"]:
            model, variant = row["name"].split("/")
            data.setdefault(model, {})[variant] = {
                **row, **info.get(row["name"], {}), "model": model, "variant": variant
            }  # fmt: skip
    for vs in data.values():  # a variant left unchanged is timed as the module it equals
        for variant, same in SAME_MODULE.items():
            if (
                variant in asked
                and variant not in vs
                and same in vs
                and f"{vs[same]['model']}/{variant}" not in left_out
            ):
                vs[variant] = {**vs[same], "variant": variant, "changed": 0, "notes": f"unchanged: {same}'s module"}
    result = {
        **results[0],
        "failures": {k: v for r in results for k, v in r["failures"].items()},
        "parts": [{k: v for k, v in r.items() if k != "rows"} for r in results],
    }
    rows = []
    for vs in data.values():
        stock = float(vs["stock"]["median_ms"]) if "stock" in vs else None
        for r in vs.values():
            r["speedup_vs_stock"] = f"{stock / float(r['median_ms']):.4f}" if stock else ""
            rows.append({k: r.get(k, "") for k in FIELDS})
    stem = f"{manifest['target_kind']}-{args.flow}{'-small' if args.small else ''}{'-' + args.tag if args.tag else ''}"
    out = Path(args.out_dir)
    with open(out / f"{stem}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    table_data = {
        m: {v: {k: str(x) for k, x in r.items()} for v, r in vs.items() if v in (*STOCK_VARIANTS, "eqsat", "eqsat+tvm")}
        for m, vs in data.items()
    }
    built = manifest["built_with"]
    dirty = (
        f" with {len(built['uncommitted'])} files changed (sources sha256 {built.get('sources_sha256')})"
        if built.get("uncommitted")
        else ""
    )
    device_made = any(e.get("weights") for e in manifest["entries"])
    weights = "made on the device (random; outputs not compared there)" if device_made else "bound, outputs compared"
    lines = [
        f"# {manifest['target_kind']}, {FLOW_TITLES[args.flow]}{' (small models)' if args.small else ''}",
        "",
        f"Device: {result['device']}, Python {result['python']}, TVM runtime only: {result['runtime_only']}; "
        f"{result['date']}; {result['rounds']} interleaved rounds. Built with "
        f"{manifest['built_with'].get('commit', '?')[:10]}{dirty}; weights {weights}. A variant whose module is that of "
        "stock (eqsat+tvm: of stock+tvm) is not built again: its row repeats that one's time.",
        "",
        *best_stock_table(table_data, tuned=args.flow == "tuned"),
    ]
    if left_out:
        lines += ["", "Not built (the pass flagged its own run and returned it unchanged): " + "; ".join(
            f"{k}: {v}" for k, v in left_out.items())]  # fmt: skip
    if result["failures"]:
        lines += ["", "Failed on the device: " + "; ".join(f"{k}: {v}" for k, v in result["failures"].items())]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (out / f"{stem}.json").write_text(
        json.dumps(
            {
                "device_result": {k: v for k, v in result.items() if k != "rows"},
                "built_with": manifest["built_with"],
                "collected_with": provenance.record(),
            },
            indent=1,
        )
    )
    print("\n".join(lines))
    compared = {f"{r['model']}/{r['variant']}": float(r["max_rel_diff"]) for r in rows if r["max_rel_diff"] != ""}
    return verify.wrong_builds_status(compared, "their llvm build")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the variants into a runtime-only bundle")
    b.add_argument("--models", nargs="+", default=list(models.SUITE))
    b.add_argument("--small", action="store_true")
    b.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    b.add_argument("--arch", default="sm_90")
    b.add_argument("--variants", nargs="+", default=list(VARIANTS))
    b.add_argument("--time-limit", type=float, default=30.0)
    b.add_argument("--number", type=int, default=10)
    b.add_argument("--repeat", type=int, default=5, help="samples per entry per round")
    b.add_argument("--rounds", type=int, default=6)
    b.add_argument(
        "--weights",
        default="device",
        choices=["device", "bound"],
        help="device: random weights made there, libraries carry code only; bound: in the libraries, outputs compared",
    )
    b.add_argument("--python", default=bundle.DEVICE_PYTHON, help="the device's Python (major.minor)")
    b.add_argument("--out", required=True)
    c = sub.add_parser("collect", help="results.json from the device -> results files")
    c.add_argument("pairs", nargs="+", metavar="BUNDLE RESULTS", help="each part's bundle folder and results.json")
    c.add_argument("--small", action="store_true")
    c.add_argument("--tag", default="", help="results file name suffix (a rerun of the same bundle, say)")
    c.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    c.add_argument("--flow", default="default", choices=sorted(FLOW_TITLES), help="what the bundle built")
    v = sub.add_parser("variants", help="tuned flow, step 1: save the variants' modules")
    v.add_argument("--models", nargs="+", default=list(models.SUITE))
    v.add_argument("--variants", nargs="+", default=list(VARIANTS))
    k = sub.add_parser("candidates", help="tuned flow, step 2: a bundle of sampled schedules of their kernels")
    k.add_argument("--modules", required=True, help="the folder `variants` wrote")
    k.add_argument("--only", nargs="+", default=None, help="only these variants' kernels (stock, for the A/A control)")
    k.add_argument("--n", type=int, default=16, help="schedules sampled per kernel")
    k.add_argument(
        "--budget",
        type=int,
        default=None,
        help="candidates in all, shared by the kernels' work (FLOPs x uses; at least min(--n, 4) each, at most 64)"
        " instead of --n each: the dear convolutions get the samples.  Shared over every saved variant's kernels,"
        " also with --only: the A/A control then samples each stock kernel as often as the main bundle does",
    )
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--all-kernels", action="store_true", help="not only convolutions and matrix products")
    k.add_argument("--number", type=int, default=20)
    k.add_argument("--repeat", type=int, default=3)
    t = sub.add_parser("tuned", help="tuned flow, step 3: record the device's timings, build the tuned bundle")
    t.add_argument("--modules", required=True, help="the folder `variants` wrote")
    t.add_argument(
        "--main",
        nargs="+",
        required=True,
        metavar="BUNDLE RESULTS",
        help="the candidates' bundle and timings (several pairs where the candidates took several bundles)",
    )
    t.add_argument("--aa", nargs="+", default=None, metavar="BUNDLE RESULTS", help="the A/A control's candidates")
    t.add_argument("--number", type=int, default=10)
    t.add_argument("--repeat", type=int, default=5)
    t.add_argument("--rounds", type=int, default=6)
    for p in (k, t):
        p.add_argument("--models", nargs="+", default=None, help="only these models of the saved modules")
    for p in (v, k, t):
        p.add_argument("--small", action="store_true")
        p.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
        p.add_argument("--arch", default="sm_90")
        p.add_argument("--time-limit", type=float, default=30.0)
        p.add_argument("--python", default=bundle.DEVICE_PYTHON, help="the device's Python (major.minor)")
        p.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    status = {"build": build, "collect": collect, "variants": save_variants, "candidates": candidates, "tuned": tuned}[
        args.command
    ](args)
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
