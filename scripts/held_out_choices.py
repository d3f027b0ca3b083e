"""Direct or Winograd, chosen out of sample: the pass's choice on each timed layer of a
``bench_layers.py`` results file, made again with a learned model that never saw the
layer's model, beside the shipped model's choice (in sample: the layer's kernels were
measured) and the roofline's.  A choice is right when its form ran within 2% of the
fastest form timed (``bench_layers.right_choice``).  Nothing is timed again: the
measured times are the results file's.

The issue's choice pairs for algorithms, beside the layout pairs ``train_cost_model.py``
reports: can the model tell which form of a convolution is faster where it has not
measured that convolution?

    python scripts/held_out_choices.py   # the default flow's F(4x4) vs F(2x2) vs direct file
    python scripts/held_out_choices.py --layers benchmarks/results/layers-winograd-llvm-default.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_layers  # noqa: E402
from bench_layers import conv_layer, pass_choice, right_choice  # noqa: E402
from held_out_e2e import held_out_model  # noqa: E402

from tvm_eqsat import provenance  # noqa: E402
from tvm_eqsat.xgb_model import ROUNDS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def source_model(layer: str) -> str:
    """The benchmark model a layer was taken from (``resnet50-conv2`` -> ``resnet50``)."""
    return layer.split("-")[0]


def choose(layer: dict, family: str, compare: str | None, flow: str, target: dict, cost_model: str) -> str:
    """The form the pass picks for the layer under ``cost_model``, as ``bench_layers`` ran it."""
    _, c, size, _, k = layer["shape"]
    report = bench_layers.choose(conv_layer(c, size, k)[0], family, compare, flow, target, cost_model)
    return pass_choice(report.functions["main"].changes, family, compare)


def evaluate(data: dict, model_dir: Path, rounds: int, work: Path, mcpu: str = "generic") -> list[dict]:
    """Each layer's measured forms and the three cost models' choices."""
    family, compare = data["family"], data["rows"][0].get("compare_family")
    target = {"kind": "llvm", **({"mcpu": mcpu} if mcpu != "generic" else {})}
    held_out: dict[str, str] = {}
    rows = []
    for layer in data["rows"]:
        model = source_model(layer["layer"])
        if model not in held_out:
            held_out[model] = str(work / model)
            held_out_model(model_dir, model, rounds, work / model)
        row = {k: layer[k] for k in ("layer", "shape", *(f + "_ms" for f in bench_layers.FORMS)) if k in layer}
        for name, cost_model in (("shipped", str(model_dir)), ("held_out", held_out[model]), ("roofline", "roofline")):
            choice = choose(layer, family, compare, data["flow"], target, cost_model)
            row[name] = {"choice": choice, "right": right_choice({**row, "pass_choice": choice})}
        rows.append(row)
        print(f"{layer['layer']}: " + ", ".join(f"{n} {row[n]['choice']}" for n in ("shipped", "held_out", "roofline")))
    return rows


def time_over_best(rows: list[dict], who: str) -> float:
    """The layers' time in the forms ``who`` chose over their time in the fastest forms."""
    chosen = sum(r[f"{r[who]['choice']}_ms"] for r in rows)
    return chosen / sum(bench_layers.fastest_ms(r) for r in rows)


def markdown(doc: dict) -> str:
    names = {"direct": "direct", "winograd": doc["family"], "compare": doc["compare"] or "-"}
    lines = [
        f"# Direct or Winograd, chosen out of sample: llvm, {doc['flow']} flow",
        "",
        f"Layers and times: `{doc['layers']}` (measured there; nothing timed again). Model: `{doc['model_dir']}`, "
        "trained again without the layer's model (its rows and its measurements) for the held-out column. "
        "A choice is right when its form ran within 2% of the fastest form timed. Command: "
        f"`{doc['command']}`; {doc['date']}, commit {doc['commit'][:10]}.",
        "",
        "| layer | direct ms | "
        + " | ".join(f"{names[f]} ms" for f in ("winograd", "compare") if doc["compare"] or f == "winograd")
        + " | shipped model | held out | roofline |",
        "|---|---|" + "---|" * (1 + bool(doc["compare"])) + "---|---|---|",
    ]
    for r in doc["rows"]:
        times = [f"{r['direct_ms']:.3f}", f"{r['winograd_ms']:.3f}"] + (
            [f"{r['compare_ms']:.3f}"] if doc["compare"] else []
        )
        cells = [
            f"{names[r[n]['choice']]} ({'right' if r[n]['right'] else 'wrong'})"
            for n in ("shipped", "held_out", "roofline")
        ]
        lines.append(f"| {r['layer']} | " + " | ".join(times + cells) + " |")
    n, who = len(doc["rows"]), ("shipped", "held_out", "roofline")
    score = {k: sum(r[k]["right"] for r in doc["rows"]) for k in who}
    over = {k: time_over_best(doc["rows"], k) for k in who}
    lines += ["", f"Right: shipped model {score['shipped']} of {n}, held out {score['held_out']} of {n}, "
              f"roofline {score['roofline']} of {n}. Time of the layers in the forms chosen, over the fastest forms': "
              f"shipped {over['shipped']:.3f}x, held out {over['held_out']:.3f}x, roofline {over['roofline']:.3f}x.",
              ""]  # fmt: skip
    return "\n".join(lines)


def _shown(path: str) -> str:
    """A path as the results file shows it: relative to the repository where it is inside."""
    full = Path(path).resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=str(RESULTS / "layers-winograd-llvm-default-f4-choice.json"))
    ap.add_argument("--model-dir", default=str(ROOT / "cost_models" / "llvm-default"))
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--mcpu", default="generic", help="the CPU whose code the layers were timed as (their file says)")
    ap.add_argument("--out", default=None, help="results stem (default: benchmarks/results/held-out-<layers file>)")
    args = ap.parse_args(argv)
    data = json.loads(Path(args.layers).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        rows = evaluate(data, Path(args.model_dir), args.rounds, Path(tmp), args.mcpu)
    state = provenance.source_state()
    doc = {
        "layers": _shown(args.layers),
        "model_dir": _shown(args.model_dir),
        "flow": data["flow"],
        "family": data["family"],
        "compare": data["rows"][0].get("compare_family"),
        "rows": rows,
        "command": " ".join(["python scripts/held_out_choices.py", *map(shlex.quote, argv or sys.argv[1:])]),
        "date": datetime.date.today().isoformat(),
        "mcpu": args.mcpu,
        "commit": state.get("commit", "?"),
    }
    stem = Path(args.out) if args.out else RESULTS / f"held-out-{Path(args.layers).stem}"
    provenance.write_results(stem, doc, markdown)
    print(f"wrote {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
