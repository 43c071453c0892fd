"""An inference sweep's expansion: a request's lists (models, frameworks, runtimes, batch
sizes, threads, replicas) into validated `RunSpec`s ordered by worker group, the thread x
replica splits left out, and a sweep's contention settings.

Every spec is checked by `RunSpec.validate` before anything is spawned; a bad value is
refused with a `UserError` naming the field and the allowed values.
"""

from __future__ import annotations

from dataclasses import replace

from engine.core.catalog import FRAMEWORKS, RUNTIMES
from engine.core.errors import UserError
from engine.core.limits import logical_cores, require_values, unique
from engine.core.model_source import default_runtime
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import check_sweep_options, row
from engine.scenarios.inference.spec import CONTENTION_MODES, WAIT_POLICIES, RunSpec

__all__ = ["expand_sweep", "runtimes_for", "left_out_splits", "with_contention",
           "check_contention_here"]


def runtimes_for(frameworks, runtimes) -> dict[str, list[str]]:
    """Which of the named runtimes each framework runs (its default when none is named).
    Every named runtime must apply to some framework, and every framework must get one."""
    if not runtimes:
        return {f: [FRAMEWORKS[f]] for f in frameworks if f in FRAMEWORKS}
    out = {f: [r for r in unique(runtimes) if r in RUNTIMES.get(f, {})] for f in frameworks}
    for r in unique(runtimes):
        if not any(r in RUNTIMES.get(f, {}) for f in frameworks):
            allowed = "; ".join(f"{f}: {', '.join(RUNTIMES[f])}" for f in frameworks
                                if f in RUNTIMES)
            raise UserError(f"runtime: {r!r} is not available for {', '.join(frameworks)}; "
                            f"allowed: {allowed}", field="runtime")
    for f, rs in out.items():
        if not rs and f in RUNTIMES:
            raise UserError(f"runtime: none of the named runtimes applies to {f}; allowed "
                            f"for {f}: {', '.join(RUNTIMES[f])}", field="runtime")
    return out


def check_contention_here(contention: bool) -> None:
    """The neighbour is started by this process on this machine's cores: a sweep on a
    cluster's nodes cannot have one."""
    if contention:
        raise UserError("contention: the neighbour runs on this machine's cores, not on a "
                        "cluster node's; allowed with the ray executor: off",
                        field="contention")


def with_contention(specs: list[RunSpec]) -> list[RunSpec]:
    """Every configuration quiet and beside each kind of neighbour, and torch's also with
    OpenMP's passive wait policy under each: what `run --contention` measures. Each worker
    group (the wait policy is part of its environment) stays contiguous."""
    out = []
    for policy in WAIT_POLICIES:
        for s in specs:
            if policy and s.framework != "torch":
                continue
            out += [replace(s, contention=mode, wait_policy=policy)
                    for mode in CONTENTION_MODES]
    return out


def _own(options, framework: str, runtime: str | None) -> dict:
    """The sweep's options that this runtime has (its row's, the framework's default's when
    the runtime is not named yet)."""
    r = row(framework, runtime or FRAMEWORKS.get(framework))
    names = {o.name for o in r.options} if r is not None else set()
    return {k: v for k, v in options.items() if k in names}


def left_out_splits(threads, replicas, cores: int | None = None) -> list[str]:
    """The thread x replica combinations expand_sweep leaves out (more threads than cores),
    as "2 threads x 2 replicas = 4 > 2 cores"; empty when all fit or none does."""
    cores = cores or logical_cores()
    pairs = [(t, r) for t in unique(threads) for r in unique(replicas)]
    over = [(t, r) for t, r in pairs if t * r > cores]
    if len(over) in (0, len(pairs)):
        return []
    return [f"{t} threads x {r} replicas = {t * r} > {cores} cores" for t, r in over]


def expand_sweep(models, frameworks, batch_sizes, threads, *, inter_threads=1,
                 precision="fp32", image_size=None, device="cpu",
                 weight_policy="bn_calibrated", policy=None, cores=None,
                 runtimes=None, profile_steps=0, user_model=None,
                 replicas=(1,), tf32=False, options=None) -> list[RunSpec]:
    """The cartesian product, validated, ordered so each (framework, threads) group is
    contiguous: the runner starts one worker per group and pays the imports once. Within
    a group, a model's batch sizes follow each other so a built model is reused.
    options: runtime options by name, each handed to the runtimes that have it."""
    require_values(model=models, framework=frameworks, batch_size=batch_sizes,
                   threads=threads)
    policy = policy or MeasurementPolicy()
    options = check_sweep_options(options or {})
    for f in frameworks:  # an unknown framework is named before any runtime is
        if f not in FRAMEWORKS:
            RunSpec(models[0], f, 1, 1).validate(cores)
    if user_model is not None and not runtimes:  # the format's default, not the framework's
        per_fw = {f: [default_runtime(user_model.format, f)] for f in unique(frameworks)}
    else:
        per_fw = runtimes_for(unique(frameworks), runtimes)
    cores = cores or logical_cores()
    fits = [(t, r) for t in unique(threads) for r in unique(replicas) if t * r <= cores]
    if not fits or len(fits) == len(unique(threads)) * len(unique(replicas)):
        fits = [(t, r) for t in unique(threads) for r in unique(replicas)]  # validate says
    # Several thread counts and replica counts: the splits of this machine's cores that fit
    # (1x2 and 2x1 on 2 cores); left_out_splits names the rest, for the caller to say.
    specs = [
        RunSpec(model=m, framework=f, batch_size=b, intra_threads=t,
                inter_threads=inter_threads, precision=precision, image_size=image_size,
                device=device, weight_policy=weight_policy, policy=policy,
                runtime=rt, profile_steps=profile_steps, user_model=user_model,
                replicas=r, tf32=tf32, options=_own(options, f, rt)).validate(cores)
        for f in unique(frameworks) for t, r in fits
        for m in unique(models) for rt in per_fw[f] for b in unique(batch_sizes)
    ]
    return specs
