"""Argument helpers every command family shares: typed, range-checked values (the ranges
come from engine.core.limits), the database option and the options of a stored sweep."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from engine.core.errors import UserError
from engine.core.limits import (DEFAULT_ENERGY_S, DEFAULT_MAX_ROUNDS, DEFAULT_VERDICT_MARGIN,
                                ENERGY_S_RANGE, MEMORY_CAP_MB_MIN, ROUNDS_RANGE,
                                VERDICT_MARGIN_RANGE)

__all__ = ["db_arg", "int_arg", "float_arg", "sweep_options", "budget_options",
           "energy_options", "energy_seconds", "memory_cap_option",
           "memory_cap", "user_model_options", "user_model", "machine_shape_option",
           "executor_options", "cluster_runner", "ClusterRun"]


def db_arg(p) -> None:
    p.add_argument("--db", metavar="PATH",
                   help="DuckDB file (default: $BENCH_DB, else ./data/bench.duckdb)")


def int_arg(name, lo, hi=None):
    """An integer within lo..hi (hi None: no upper bound), refused naming field and range."""
    allowed = f"allowed: integer {lo}..{hi if hi is not None else 'any'}"

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not an integer; {allowed}")
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{name}: {v} is out of range; {allowed}")
        return v
    return parse


def float_arg(name):
    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not a number")
    return parse


def sweep_options(p, *, timeout: float, rounds: int, rounds_help: str) -> None:
    """--rounds, --timeout and --memory-cap-mb, and --db: what every stored sweep takes."""
    p.add_argument("--rounds", type=int_arg("rounds", *ROUNDS_RANGE), default=rounds,
                   help=rounds_help)
    p.add_argument("--timeout", type=float_arg("timeout"), default=timeout,
                   help=f"wall-time limit per run in seconds, load included (default "
                        f"{timeout:g})")
    memory_cap_option(p)
    machine_shape_option(p)
    db_arg(p)


def budget_options(p) -> None:
    """--max-rounds, --time-budget and --margin: rounds until decided, for every kind whose
    runs are contests (engine.core.budget.RoundBudget)."""
    p.add_argument("--max-rounds", type=int_arg("max_rounds", *ROUNDS_RANGE),
                   default=None, metavar="N",
                   help=f"rounds until decided: a contest still undecided after --rounds gets "
                        f"more rounds, for its configurations only, up to N in all (at least "
                        f"--rounds; equal to it: no extra rounds; default "
                        f"{DEFAULT_MAX_ROUNDS}, or --rounds when that is higher or 1)")
    p.add_argument("--time-budget", type=float_arg("time_budget_s"), default=None,
                   metavar="S", help="no extra round starts once the sweep would pass S "
                                     "seconds of wall time (default: no limit)")
    p.add_argument("--margin", type=float_arg("margin"), default=DEFAULT_VERDICT_MARGIN,
                   metavar="FRACTION",
                   help=f"a verdict's practical margin: a winner is named only when the 95 %% "
                        f"sequential interval clears ±FRACTION, and a contest whose interval "
                        f"lies inside it stops as equivalent (default "
                        f"{DEFAULT_VERDICT_MARGIN:g}, i.e. ±2 %%; "
                        f"{VERDICT_MARGIN_RANGE[0]:g}..{VERDICT_MARGIN_RANGE[1]:g})")


def energy_options(p, *, figures: str, note: str = "") -> None:
    """--energy and --energy-s: an energy loop of its own after each timed one (figures:
    what it gives, in words)."""
    p.add_argument("--energy", action="store_true",
                   help=f"after each timed loop, an energy loop of its own (default "
                        f"{DEFAULT_ENERGY_S:g} s): {figures} from RAPL (CPU package) or NVML "
                        f"(GPU), or absent with the reason{note}")
    p.add_argument("--energy-s", type=float_arg("energy_s"), default=None, metavar="S",
                   help=f"the energy loop's seconds ({ENERGY_S_RANGE[0]:g}.."
                        f"{ENERGY_S_RANGE[1]:g}; implies --energy)")


def energy_seconds(args) -> float:
    """--energy-s as given, else the default with --energy, else 0 (no energy loop)."""
    if args.energy_s is not None:
        return args.energy_s
    return DEFAULT_ENERGY_S if args.energy else 0.0


def machine_shape_option(p) -> None:
    p.add_argument("--machine-shape", metavar="NAME", default=None,
                   help="the price catalog's shape this machine is, stored with each run "
                        "(`python -m engine prices list`; default: $BENCH_MACHINE_SHAPE)")


def executor_options(p) -> None:
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where workers run: local subprocesses (default) or the nodes of a "
                        "Ray cluster (docs/FLEET.md)")
    p.add_argument("--address", metavar="HOST:PORT", default=None,
                   help="the Ray head, with --executor ray (default: $RAY_ADDRESS)")
    p.add_argument("--placement", nargs="+", metavar="KEY=VALUE", default=None,
                   help="with --executor ray: shape=NAME (a node tagged with the custom "
                        "resource shape:NAME) or node=ID; several: the sweep on each, "
                        "rounds interleaved")
    p.add_argument("--fleet", action="store_true",
                   help="with --executor ray: the sweep on every node kind (shape) of the "
                        "cluster at once, rounds interleaved across nodes")


@dataclass
class ClusterRun:
    plan: object  # engine.run.cluster.fleet.ClusterPlan
    runner: object  # a Runner on one node, or a FleetRunner

    def close(self) -> None:
        import ray

        from engine.run.cluster.join import release

        release(self.runner)
        ray.shutdown()  # the CLI leaves the cluster; the dashboard stays joined


def cluster_runner(args) -> ClusterRun | None:
    """With --executor ray: the nodes chosen and a runner on them; None for local runs.
    The options that only mean something on a cluster are refused without it."""
    import os

    if args.executor != "ray":
        for name in ("address", "placement", "fleet"):
            if getattr(args, name):
                raise UserError(f"{name}: only with --executor ray; allowed here: leave it "
                                "out", field=name)
        return None
    if args.machine_shape:
        raise UserError("machine_shape: on a cluster each node's shape is its shape:NAME "
                        "resource; allowed with --executor ray: leave --machine-shape out",
                        field="machine_shape")
    from engine.run.cluster.join import plan_and_runner
    from store.db import resolve_db_path

    # No --memory-cap-mb: each node caps at 75 % of its own memory (engine/run/cluster/node_host.py)
    plan, runner = plan_and_runner(
        args.address or os.environ.get("RAY_ADDRESS"), args.placement, args.fleet,
        db=resolve_db_path(args.db), timeout_s=args.timeout,
        memory_cap_bytes=args.memory_cap_mb * 2**20 if args.memory_cap_mb else None,
        process_per_run=args.process_per_run)
    for node, shape in zip(plan.nodes, plan.shapes):
        print(f"on {node.label}: {node.cpus} CPU" + (f", priced as {shape}" if shape else
                                                    ", no shape (not priced)"), flush=True)
    return ClusterRun(plan, runner)


def memory_cap_option(p) -> None:
    p.add_argument("--memory-cap-mb", type=int_arg("memory_cap_mb", MEMORY_CAP_MB_MIN),
                   default=None,
                   help="resident memory one run may add to what its worker holds (default: 75%% of RAM; a memory cgroup where the machine allows, else an RSS watchdog)")


def memory_cap(args) -> int:
    """--memory-cap-mb, else 75 % of this machine's memory."""
    from engine.run.process.machine import default_memory_cap
    return args.memory_cap_mb * 2**20 if args.memory_cap_mb else default_memory_cap()


def user_model_options(p) -> None:
    """--model-file / --model-factory and the inputs: a user's own model (issue #14)."""
    g = p.add_argument_group("your own model (instead of --model)")
    g.add_argument("--model-file", metavar="PATH",
                   help="a torch.export program (.pt2), TorchScript (.pt/.pth), ONNX (.onnx), "
                        "Keras v3 (.keras) file or a TensorFlow SavedModel folder")
    g.add_argument("--model-factory", metavar="MODULE:FUNCTION",
                   help="your function returning a torch.nn.Module or a Keras model, imported "
                        "from the current folder or your path (only inside the worker); "
                        "give --framework torch or tensorflow")
    g.add_argument("--input-shape", metavar="C,H,W",
                   help="one float32 input, the dimensions after the batch axis in the "
                        "model's own layout (torch C,H,W; Keras H,W,C). A .keras, .pt2 or "
                        ".onnx file declares its inputs: leave this and --input out to use "
                        "them; a value given is checked against them")
    g.add_argument("--input", action="append", metavar="NAME:DIMS[:DTYPE]",
                   help="one input, batch axis first written as 1, e.g. "
                        "input_ids:1x128:int64 (repeat for several inputs)")
    g.add_argument("--trust-model-code", action="store_true",
                   help="run a TorchScript (.pt/.pth) file or a SavedModel folder: loading "
                        "one runs code from the file, so give this only for a file you trust "
                        "(.pt2, .onnx and .keras load without running code and need none)")
    g.add_argument("--name", metavar="NAME",
                   help="the name results show for your model (default: the file's stem or "
                        "the function's name)")


def user_model(args, catalog_models, batch_sizes=(1,), **allowed):
    """The ModelSource the options describe, or None when --model names catalog models.
    Its inputs are the ones given or, none given, the ones a .keras, .pt2 or .onnx file
    declares (a worker reads them; batch_sizes: those the file's batch axis must take;
    allowed: fill_inputs' allowed_batch, the batch option the refusal names).
    UserError naming the field for anything missing, conflicting or malformed, or for
    inputs that do not fit what the file declares."""
    import os
    import re

    from engine.core.errors import UserError
    from engine.core.model_source import (CODE_FORMATS, ModelSource, check_model_name,
                                          detect_format, parse_factory, parse_input,
                                          parse_input_shape)

    file, factory = args.model_file, args.model_factory
    if not file and not factory:
        if args.input_shape or args.input or args.name or args.trust_model_code:
            raise UserError("model_file: --input-shape, --input, --name and "
                            "--trust-model-code describe your own model; allowed: with "
                            "--model-file or --model-factory",
                            field="model_file")
        if not catalog_models:
            raise UserError("model: none given; allowed: --model NAME..., --model-file PATH "
                            "or --model-factory MODULE:FUNCTION", field="model")
        return None
    if file and factory:
        raise UserError("model_file: give --model-file or --model-factory, not both",
                        field="model_file")
    if catalog_models:
        raise UserError("model: --model names catalog models; allowed: --model, or your own "
                        "model with --model-file/--model-factory, not both", field="model")
    if args.input_shape and args.input:
        raise UserError("input: describe the model's input with --input-shape C,H,W or one "
                        "or more --input NAME:DIMS[:DTYPE] (one of the two)", field="input")
    # none: a .keras, .pt2 or .onnx file's declared inputs (model_inputs, below)
    inputs = ((parse_input_shape(args.input_shape),) if args.input_shape
              else tuple(parse_input(t) for t in args.input or ()))
    if len({i.name for i in inputs}) != len(inputs):
        raise UserError("input: two inputs share a name; allowed: distinct names",
                        field="input")
    if factory:
        factory = parse_factory(factory)
        default = factory.split(":")[1]
        fmt, path = "factory", os.getcwd()  # the folder its module is looked up in first
    else:
        fmt = detect_format(file)
        path = os.path.abspath(file)
        default = os.path.basename(path.rstrip(os.sep)).split(".")[0]
    name = check_model_name(args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", default)[:64])
    src = ModelSource(name, fmt, inputs, path=path, factory=factory or None,
                      trust_code=bool(args.trust_model_code) and fmt in CODE_FORMATS)
    # What the file declares (read by a worker) fills the inputs or checks the ones given,
    # before anything is launched: a mismatch is an error here, not a failed row.
    from engine.run.process.worker_steps import model_inputs
    given = args.input_shape or " ".join(args.input or ()) or None
    return model_inputs(src, batch_sizes, given, **allowed)
