"""Tuning databases on disk: MetaSchedule's JSON files in a folder, plus what they do not
record themselves.

A folder holds one database: the workloads and records (``DATABASE_FILES``), the largest
trial budget each kernel was tuned with (``BUDGETS``, so a resumed run tunes only what it
lacks), whether its candidates were timed with warm or cold caches (``CACHE_FILE``; the
two do not compare), how long a trial took there (``PACE``, for the next run's
estimate), and how its mask arguments were filled (``INPUTS_FILE``: records timed on zero
masks are dropped once).  The benchmark commits pruned, packed copies (``prune_database``);
``read_database`` reads those and ``seed_database`` starts a new folder from them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms

from . import bundle_runner

log = logging.getLogger("tvm_eqsat")

CACHE_FILE = "tvm_eqsat_cache.json"  # {"cpu_cache": "warm" | "cold"}: how a database's records were timed


def database_cache(work_dir: str | os.PathLike) -> str | None:
    """How the records in ``work_dir`` were timed: 'warm' or 'cold' (``CACHE_FILE``), 'warm'
    for a database without the file (every database before it), None for no database."""
    path = Path(work_dir) / CACHE_FILE
    if path.is_file():
        return json.loads(path.read_text())["cpu_cache"]
    return "warm" if has_database(work_dir) else None


def claim_cache(work_dir: str | os.PathLike, cpu_cache: str) -> None:
    """Mark ``work_dir`` as holding records timed ``cpu_cache`` ('warm' or 'cold'); a
    ValueError if it holds records timed the other way (their times do not compare, and
    tuning would rank one against the other)."""
    if cpu_cache not in ("warm", "cold"):
        raise ValueError(f"cpu_cache must be 'warm' or 'cold', not {cpu_cache!r}")
    have = database_cache(work_dir)
    if have not in (None, cpu_cache):
        raise ValueError(
            f"{work_dir} holds kernels timed with {have} caches; adding kernels timed {cpu_cache} would mix the two "
            f"(use another work dir: tune.target_name(..., cold_cache=...) names one per kind)"
        )
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    (Path(work_dir) / CACHE_FILE).write_text(json.dumps({"cpu_cache": cpu_cache}) + "\n")


DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")
REJECTED_RECORDS = "database_tuning_record.rejected.json"  # records TVM wrote but cannot read back


def open_database(work_dir: str | os.PathLike) -> ms.Database:
    """The JSON database in ``work_dir`` (created if missing).

    MetaSchedule can write a record whose trace it cannot replay when it reads the file back,
    and then refuses the whole database.  Seen: two variants of one model whose global-pool
    reductions are equal but for their block names (``lv415_red``, ``lv448_red``: legalization
    names a reduction after its input variable); MetaSchedule keeps one workload for both
    (structural equality ignores names), and the second one's records name blocks the stored
    workload lacks.
    ``tune.tune`` now traces such a kernel in its stored form; databases written before (and
    by other tools) can still hold such records.  They are moved to ``REJECTED_RECORDS``
    beside it, with a warning, so a long tuning run resumes instead of failing; the workload
    keeps the records that replay."""
    path = Path(work_dir)
    path.mkdir(parents=True, exist_ok=True)
    try:
        return _json_database(path)
    except Exception as err:  # TVM's loader raises a bare RuntimeError naming no record
        if not _set_aside_unreadable_records(path):
            raise
        log.debug("the database in %s did not load: %s", path, err)
        return _json_database(path)


def _json_database(path: Path) -> ms.Database:
    return ms.database.JSONDatabase(
        path_workload=str(path / DATABASE_FILES[0]),
        path_tuning_record=str(path / DATABASE_FILES[1]),
        allow_missing=True,
    )


def _set_aside_unreadable_records(path: Path) -> int:
    """Move the tuning records in ``path`` that TVM cannot read back to ``REJECTED_RECORDS``;
    how many were moved (0 when every record reads, so the fault lies elsewhere)."""
    records_file = path / DATABASE_FILES[1]
    if not records_file.is_file():
        return 0
    workload_lines = (path / DATABASE_FILES[0]).read_text().splitlines()
    workloads: dict[int, Any] = {}
    kept, rejected = [], []
    for line in records_file.read_text().splitlines():
        if not line.strip():
            continue
        try:
            index, record = json.loads(line)
            if index not in workloads:
                workloads[index] = ms.database.Workload.from_json(json.loads(workload_lines[index]))
            ms.database.TuningRecord.from_json(record, workloads[index])
        except Exception:  # a line TVM cannot parse or a trace it cannot replay: both fail the load
            rejected.append(line)
            continue
        kept.append(line)
    if rejected:
        with open(path / REJECTED_RECORDS, "a") as out:
            out.write("".join(line + "\n" for line in rejected))
        tmp = records_file.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, records_file)
        log.warning(
            "%s: set aside %d of %d tuning records that TVM cannot read back, in %s; "
            "their kernels keep the records that do",
            path,
            len(rejected),
            len(rejected) + len(kept),
            REJECTED_RECORDS,
        )
    return len(rejected)


# A kernel's 1-byte integer and bool arguments are masks (a ``where``'s condition), not
# indices; the tuning runner fills them with random 0s and 1s (``tune._alloc``).  It filled
# them with zeros until 2026-12-04, so the tuner timed only the masked-out branch and kept
# schedules that recompute a softmax's sums per element where the mask keeps a value:
# BERT-base's masked softmax on the Xeon ran 50 us on zero masks, 10.5 ms on the model's
# mask of ones (ours; TVM's own fast softmax 515 us, tuned 27 us).  Records tuned that way
# are dropped once per folder (``drop_zero_mask_records``), so their kernels are tuned again.
MASK_DTYPES = bundle_runner.MASK_DTYPES  # one list for the tuner and the device bundles
INPUTS_FILE = "tvm_eqsat_inputs.json"  # {"masks": "random01"}: how the folder's mask arguments were filled


def has_mask_args(args_info: list) -> bool:
    """Does a record's ``args_info`` (its JSON: ``[["TENSOR", dtype, shape], ...]``) hold a mask?"""
    return any(len(a) > 1 and a[1] in MASK_DTYPES for a in args_info)


def drop_zero_mask_records(work_dir: str | os.PathLike) -> int:
    """Drop the records (and budgets) of kernels with mask arguments from a folder tuned
    before masks were filled at random (no ``INPUTS_FILE``), so ``tune`` tunes them again;
    mark the folder.  Returns the number of records dropped (0 for a marked folder)."""
    path = Path(work_dir)
    marker = path / INPUTS_FILE
    if marker.is_file():
        return 0
    path.mkdir(parents=True, exist_ok=True)
    records_file = path / DATABASE_FILES[1]
    dropped: list[int] = []
    if records_file.is_file():
        kept = []
        for line in records_file.read_text().splitlines():
            if not line.strip():
                continue
            index, record = json.loads(line)
            if has_mask_args(record[3]):
                dropped.append(index)
            else:
                kept.append(line)
        if dropped:
            workload_lines = (path / DATABASE_FILES[0]).read_text().splitlines()
            hashes = {
                kernel_hash(ms.database.Workload.from_json(json.loads(workload_lines[i])).mod) for i in set(dropped)
            }
            tmp = records_file.with_suffix(".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, records_file)
            budgets = read_budgets(path)
            write_budgets(path, {k: n for k, n in budgets.items() if k.rsplit("-", 1)[1] not in hashes})
            log.warning(
                "%s: dropped %d tuning records of %d kernels with mask arguments, timed on zero masks only; "
                "they are tuned again",
                path,
                len(dropped),
                len(hashes),
            )
    marker.write_text(json.dumps({"masks": "random01"}) + "\n")
    return len(dropped)


# How a committed database's files are packed (``prune_database(..., compress=True)``): xz, whose
# window finds the TIR the kernels of a model share: the committed databases took 31.1 MB
# gzipped (-9) and take 4.8 MB in xz (workloads 4-8x smaller; the emeraldrapids A/A database's
# 58 MB of workloads 3.73 MB and 0.53 MB).  They travel with every device run, in 64 MiB with the
# rest of the tree.  Databases packed before 2026-12-05 are gzipped, and still read.
PACKED = {".xz": "lzma", ".gz": "gzip"}  # suffix -> the stdlib module that opens it; the first one is written


def _packed(path: Path, name: str) -> Path | None:
    """``name`` in ``path`` as a packed file (``PACKED``), None when it is not packed there."""
    return next((p for ext in PACKED if (p := path / f"{name}{ext}").is_file()), None)


def has_database(directory: str | os.PathLike) -> bool:
    """Does ``directory`` hold tuning records, as JSON or packed (a committed database)?"""
    path = Path(directory)
    return (path / DATABASE_FILES[1]).is_file() or _packed(path, DATABASE_FILES[1]) is not None


_UNPACKED: dict[tuple, str] = {}  # (a packed database, its mtime) -> the folder it was unpacked to


def read_database(directory: str | os.PathLike) -> ms.Database:
    """The database in ``directory`` for reading: a packed one (what ``prune_database(...,
    compress=True)`` writes, so the committed databases stay small) is unpacked once into a
    temporary folder; a plain one is opened where it is."""
    import atexit
    import importlib
    import shutil
    import tempfile

    path = Path(directory).resolve()
    records = _packed(path, DATABASE_FILES[1])
    if records is None:
        return open_database(path)
    key = (path, records.stat().st_mtime_ns)
    if key not in _UNPACKED:
        tmp = tempfile.mkdtemp(prefix="tvm_eqsat_db_")
        atexit.register(shutil.rmtree, tmp, True)
        for name in DATABASE_FILES:
            packed = _packed(path, name)
            if packed is not None:
                opener = importlib.import_module(PACKED[packed.suffix])
                with opener.open(packed, "rb") as src, open(Path(tmp) / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        _UNPACKED[key] = tmp
    return open_database(_UNPACKED[key])


BUDGETS = "tvm_eqsat_budgets.json"  # task key -> the largest trial budget it was tuned with


def read_budgets(work_dir) -> dict[str, int]:
    path = Path(work_dir) / BUDGETS
    return json.loads(path.read_text()) if path.is_file() else {}


def budgets_by_hash(work_dir, budgets: dict[str, int] | None = None) -> dict[str, int]:
    """The budgets (``work_dir``'s, or ``budgets`` as read) by kernel structure alone: a task's
    name numbers its fused function within the module it came from (``fused_conv2d13_add9_relu9``
    in one variant of a model is ``fused_conv2d17_add9_relu9`` in another), so the same kernel
    must be found by its hash."""
    out: dict[str, int] = {}
    for key, trials in (read_budgets(work_dir) if budgets is None else budgets).items():
        h = key.rsplit("-", 1)[1]
        out[h] = max(trials, out.get(h, 0))
    return out


def write_budgets(work_dir, budgets: dict[str, int]) -> None:
    (Path(work_dir) / BUDGETS).write_text(json.dumps(budgets, indent=0, sort_keys=True))


PACE = "tvm_eqsat_pace.json"  # {"seconds_per_trial": s, "trials": n}: the last long run's wall time per trial
PACE_MIN_TRIALS = 64  # a shorter run is mostly start-up: it does not set the pace


def read_pace(work_dir) -> float | None:
    """Wall seconds per trial of the last run of at least ``PACE_MIN_TRIALS`` trials that
    tuned into ``work_dir`` (this machine, this target, warm or cold), or None."""
    path = Path(work_dir) / PACE
    try:
        return float(json.loads(path.read_text())["seconds_per_trial"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_pace(work_dir, seconds: float, trials: int) -> None:
    """Record a run's pace; runs under ``PACE_MIN_TRIALS`` trials are ignored."""
    if trials >= PACE_MIN_TRIALS and seconds > 0:
        record = {"seconds_per_trial": round(seconds / trials, 3), "trials": trials}
        (Path(work_dir) / PACE).write_text(json.dumps(record) + "\n")


def kernel_hash(task_mod: tvm.IRModule) -> str:
    """The structural part of ``_task_key`` (a database record knows its module, not its task name)."""
    return f"{tvm_ffi.structural_hash(task_mod) & 0xFFFFFFFFFFFF:x}"


def prune_database(
    work_dir: str | os.PathLike, out_dir: str | os.PathLike, min_trials: int = 0, compress: bool = False
) -> int:
    """The best record of every kernel in ``work_dir`` that was tuned with at least
    ``min_trials`` trials (by its recorded budget; 0: every kernel), with the budgets, as a
    fresh database in ``out_dir`` (what the benchmark commits: anyone can rebuild the
    measured kernels without tuning); ``compress``: its files packed in xz (``PACKED``;
    ``read_database`` reads them; the TIR of the kernels takes about 100x less room).
    Returns the number of kernels."""
    import lzma
    import shutil
    import tempfile

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in DATABASE_FILES:
        for ext in ("", *PACKED):
            (out / f"{name}{ext}").unlink(missing_ok=True)
    budgets = read_budgets(work_dir)
    with tempfile.TemporaryDirectory() as tmp:
        open_database(work_dir).dump_pruned(open_database(tmp))
        by_hash = budgets_by_hash(work_dir, budgets)
        dst = open_database(out)
        for record in open_database(tmp).get_all_tuning_records():
            if min_trials and by_hash.get(kernel_hash(record.workload.mod), 0) < min_trials:
                continue
            workload = dst.commit_workload(record.workload.mod)
            dst.commit_tuning_record(
                ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
            )
    write_budgets(out, {key: trials for key, trials in budgets.items() if trials >= min_trials})
    (out / CACHE_FILE).write_text(json.dumps({"cpu_cache": database_cache(work_dir) or "warm"}) + "\n")
    path = out / DATABASE_FILES[1]
    kernels = sum(1 for line in path.read_text().splitlines() if line.strip()) if path.is_file() else 0
    if compress:
        for name in DATABASE_FILES:
            if (out / name).is_file():
                xz = lzma.open(out / f"{name}.xz", "wb", preset=9 | lzma.PRESET_EXTREME)
                with open(out / name, "rb") as src, xz as dst:
                    shutil.copyfileobj(src, dst)
                (out / name).unlink()
    return kernels


def seed_database(work_dir: str | os.PathLike, seed_dir: str | os.PathLike, trials: int | None = None) -> int:
    """Copy into ``work_dir`` the records of ``seed_dir`` (a pruned database) for kernels
    ``work_dir`` has no record of, with their trial budgets, so that ``tune`` skips them;
    ``trials``: only the kernels tuned with exactly that budget.  A record that does not
    replay on the form ``work_dir`` files its kernel under (other block names, see
    ``open_database``) is left out with its budget.  Returns the number of kernels copied
    (0 if ``seed_dir`` holds no database)."""
    seed = Path(seed_dir)
    if not has_database(seed):
        return 0
    claim_cache(work_dir, database_cache(seed))
    drop_zero_mask_records(work_dir)  # before copying: the seed's mask kernels, tuned on random masks, stay
    src, dst = read_database(seed), open_database(work_dir)
    seed_budgets = read_budgets(seed)
    if trials is not None:
        seed_budgets = {key: n for key, n in seed_budgets.items() if n == trials}
    wanted = {key.rsplit("-", 1)[1] for key in seed_budgets}
    copied, refused = 0, set()
    for record in src.get_all_tuning_records():
        mod = record.workload.mod
        if trials is not None and kernel_hash(mod) not in wanted:
            continue
        if dst.has_workload(mod):
            if tuned_records(dst, mod):  # tuned here already: its own records and budget stand
                refused.add(kernel_hash(mod))
                continue
            if replay(record.trace, stored_form(dst, mod)) is None:
                log.warning("%s: a seed record names blocks the kernel stored here lacks; it is tuned here", seed)
                refused.add(kernel_hash(mod))
                continue
        workload = dst.commit_workload(mod)
        dst.commit_tuning_record(
            ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
        )
        copied += 1
    budgets = read_budgets(work_dir)
    for key, n in seed_budgets.items():  # the seed's budget goes with its records, not without them
        if key.rsplit("-", 1)[1] not in refused:
            budgets[key] = max(n, budgets.get(key, 0))
    write_budgets(work_dir, budgets)
    return copied


def stored_form(database: ms.Database, kernel: tvm.IRModule) -> tvm.IRModule:
    """``kernel`` as ``database`` files it: MetaSchedule keeps structurally equal kernels
    under the first one's workload, whose block names a trace must use (``open_database``)."""
    return database.commit_workload(kernel).mod if database.has_workload(kernel) else kernel


def replay(trace, kernel: tvm.IRModule):
    """A schedule of ``kernel`` with ``trace`` (a Trace, or its JSON) applied; None where the
    trace names blocks ``kernel`` lacks (traced on another form of it)."""
    from tvm.s_tir.schedule import Schedule, Trace

    sch = Schedule(kernel)
    try:
        if isinstance(trace, Trace):
            trace.apply_to_schedule(sch, remove_postproc=False)
        else:
            Trace.apply_json_to_schedule(trace, sch)
    except Exception:  # TVM's ScheduleError, rendered or not
        return None
    return sch


def tuned_records(database: ms.Database, task_mod: tvm.IRModule) -> list:
    """Every valid tuning record of one kernel (task module), best first; [] if never tuned."""
    if not database.has_workload(task_mod):
        return []
    return list(database.get_top_k(database.commit_workload(task_mod), 1 << 20))
