"""Training rows from a MetaSchedule database a user already has.

Tuning a model with MetaSchedule measures every fused kernel of it; the database
keeps the best schedule's run time per kernel.  To learn from it, each kernel of
the model is rebuilt as a one-kernel workload (``measure.workload_module``),
fused the way tuning fuses it, and looked up in the database by structural
equality, which is how MetaSchedule itself finds a kernel's records.  A hit gives
the workload (the features) and its tuned latency (the label) without measuring
anything.

The label is the best candidate's time as the tuner measured it: the minimum over
the candidates tried, and one sample, with no spread.  Next to a fresh run of the same
schedule (``retime``: the one-kernel module built from the database and timed like any
other row) it is off in two ways.  It lacks the VM's call, about 1 us: on the 245 kernels
of the small conv models tuned at 64 trials (EPYC, 2 cores) the fresh times were 0.8-1.2 us
longer below 20 us and equal within 2% above.  And a few records are wrong by orders of
magnitude: 8 of those 245 (seven tiny batch norms and a concat) read 0.1-13 ms where a fresh
run on a quiet machine takes 2-8 us, most likely candidates timed while another process held
the second core (a parallel kernel then waits out the scheduler's time slice on every run).  So a dataset
harvested for training is retimed on a quiet machine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm

from .measure import Measurement, module_workloads, time_executable, workload_module
from .tune import build, fuse_for_tuning, tuning_target, use_all_cores
from .tuning_db import PACKED, budgets_by_hash, database_cache, has_database, kernel_hash, read_database, tuned_records
from .verify import random_inputs
from .workload import Workload

log = logging.getLogger("tvm_eqsat")

INVALID_SECS = 1e9  # MetaSchedule writes 1e10 s for candidates that failed to run


@dataclass(frozen=True)
class Harvested:
    """A kernel found in the database: its workload, tuned latency and trial count."""

    workload: Workload
    median_us: float
    trials: int  # the kernel's tuning budget (the fewest over its tasks; records kept where none was recorded)


def best_record_us(database, kernel) -> tuple[float, int] | None:
    """One kernel's (task module's) best record in ``database``: its median run time in
    microseconds and how many records it has; None when it was never tuned or its best
    candidate failed to run."""
    records = tuned_records(database, kernel)
    if not records:
        return None
    secs = [float(s) for s in records[0].run_secs]
    if not secs or max(secs) >= INVALID_SECS:
        return None
    return float(np.median(secs)) * 1e6, len(records)


def lookup(database, w: Workload, target: tvm.target.Target, budgets: dict[str, int] | None = None) -> Harvested | None:
    """``w``'s tuned latency in ``database``, or None when any of its kernels is missing.
    Its trials are the budgets recorded for its kernels (``budgets``, by kernel structure),
    else the records kept (a pruned database keeps one per kernel)."""

    def tuned(kernel) -> tuple[float, int] | None:
        best = best_record_us(database, kernel)
        if best is None:
            return None
        return best[0], (budgets or {}).get(kernel_hash(kernel), best[1])

    return _lookup(w, target, tuned)


def _lookup(w: Workload, target: tvm.target.Target, tuned) -> Harvested | None:
    """``w``'s latency as the sum of its kernels' (``tuned(kernel)``: microseconds and
    trials, or None, which leaves ``w`` out), with the fewest trials of its kernels."""
    from tvm.s_tir import meta_schedule as ms

    tasks = ms.relax_integration.extract_tasks(fuse_for_tuning(workload_module(w), target), target)
    if not tasks:
        return None
    total_us, trials = 0.0, None
    for task in tasks:
        found = tuned(task.dispatched[0])
        if found is None:
            return None
        total_us += found[0]
        trials = found[1] if trials is None else min(trials, found[1])
    return Harvested(w, total_us, trials or 0)


def harvest(
    source: str | Mapping[str, tuple[float, int]], mods: Sequence[tvm.IRModule], target: Any, progress: bool = False
) -> list[Harvested]:
    """Every kernel of ``mods`` that the MetaSchedule database in ``source`` (a folder) has
    tuned, or that ``source`` (a mapping: ``batch_tune.kernel_times`` of an offline tuning's
    device runs) times, by kernel structure.

    ``mods`` are the Relax modules that were tuned (for a module tuned after our pass,
    pass the rewritten one: its kernels are the ones in the database)."""
    tgt = tuning_target(target)
    if isinstance(source, Mapping):

        def find(w: Workload) -> Harvested | None:
            return _lookup(w, tgt, lambda kernel: source.get(kernel_hash(kernel)))

    else:
        if not has_database(source):
            raise FileNotFoundError(
                f"{source}: no MetaSchedule JSON database (database_tuning_record.json[{'|'.join(PACKED)}]) there"
            )
        database = read_database(source)
        budgets = budgets_by_hash(source)

        def find(w: Workload) -> Harvested | None:
            return lookup(database, w, tgt, budgets)

    workloads: dict[str, Workload] = {}
    for mod in mods:
        for w in module_workloads(mod):
            workloads.setdefault(w.key(), w)
    items: Iterable[Workload] = workloads.values()
    if progress:
        import sys

        from tqdm import tqdm

        items = tqdm(items, total=len(workloads), desc="looking up kernels", file=sys.stderr)
    out = []
    for w in items:
        try:
            found = find(w)
        except Exception as err:  # a kernel TVM cannot lower is not in anyone's database
            log.debug("skipped %s: %s", w.op, err)
            continue
        if found is not None:
            out.append(found)
    log.info(
        "%d of %d kernels found in %s",
        len(out),
        len(workloads),
        "the timed kernels" if isinstance(source, Mapping) else source,
    )
    return out


def retime(
    found: Sequence[Harvested],
    work_dir: str,
    target: Any,
    repeat: int = 15,
    progress: bool = False,
    database: Any = None,
) -> list[tuple[Harvested, Measurement | None]]:
    """Each harvested kernel built with its records in ``work_dir`` (nothing is tuned) and
    timed afresh, ``repeat`` samples: a label with a spread, and without the tuner's
    outliers (see the module docstring).  None where the build or the run fails.
    ``database``: ``work_dir``'s, already read (reading a large one takes seconds).  A database
    tuned with cold caches (``tuning_db.database_cache``) is timed the same way: its
    records rank schedules by their cold time, and a label timed warm would not be theirs."""
    use_all_cores()  # timed as the tuner and the benchmark run them
    tgt = tuning_target(target)
    database = read_database(work_dir) if database is None else database
    cold = database_cache(work_dir) == "cold"
    items: Iterable[Harvested] = found
    if progress:
        import sys

        from tqdm import tqdm

        items = tqdm(found, desc="timing harvested kernels", file=sys.stderr)
    out = []
    for h in items:
        mod = workload_module(h.workload)
        try:
            m = time_executable(
                build(mod, tgt, database), tgt, random_inputs(mod["main"]), repeat=repeat, cold_cache=cold
            )
        except Exception as err:  # noqa: BLE001 - one kernel that does not build is skipped, not fatal
            log.warning("could not time %s: %s", h.workload.op, str(err).splitlines()[0][:200])
            m = None
        out.append((h, m))
    return out
