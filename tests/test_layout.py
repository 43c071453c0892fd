"""The layout keeps the process boundary: checked statically, from the source, on every run.

- Only engine/worker/ imports a deep-learning framework, at module level or lazily.
- Nothing outside engine/worker/ (app.py, views/, store/, the CLI, the parent side) reaches
  it through module-level imports, directly or through any chain of project modules, so
  the dashboard never loads a framework and the parent never pays for one.
- No module is over 450 lines; no page is over 250.
- The rooms import one way: store/ imports no Streamlit and nothing of engine/run,
  engine/present or dashboard/; engine/scenarios/ imports nothing of engine/run; no import
  circle between packages (lazy imports included), nor between modules.
- engine/run is split by job, and its packages import one way too: search -> jobs ->
  cluster -> process; every module of engine/run lives in one of them.
- A run's kind is named by value only where it is defined: its package in engine/scenarios/
  (and store/db.py's migrations, which are history and stay as written); the kinds are
  the registry's (engine.scenarios.SCENARIOS).
- engine/core/ imports nothing of engine/scenarios: the kinds stand on it, not it on them.
- seeds/, the test data tests/ and bench/ share, is imported by nothing of the product.

The checks are pure functions of a tree's root, so the last test can show they fail.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

from engine.scenarios import SCENARIOS
from tests.conftest import ROOT

FRAMEWORKS = {"torch", "torchvision", "tensorflow", "keras", "tf_keras", "onnxruntime",
              "onnx", "onnxscript", "openvino", "transformers", "keras_hub", "tokenizers",
              "safetensors", "huggingface_hub", "optimum", "nncf", "openvino_genai",
              "openvino_tokenizers", "onnxruntime_genai"}
SKIP = {".venv", "tests", "bench", "build", "data", ".git", "node_modules", "test-artifacts"}
WORKER = "engine.worker"
MAX_LINES = 450
MAX_PAGE_LINES = 250
# A run kind's name compared or filtered by value: Python's `kind == "train"`,
# `r["kind"] == "inference"`, SQL's `kind = 'dataload'`.
RUN_KINDS = tuple(SCENARIOS)  # every registered kind: inference, train, dataload, serve
KIND_LITERAL = re.compile(r"""kind['"]?\]?\s*(==|!=|=|IN)\s*\(?\s*['"](%s)['"]"""
                          % "|".join(RUN_KINDS))
# A kind's package (its spec, hooks, messages), and the migrations, which are history
KIND_HOMES = ("engine/scenarios/", "store/db.py")
# One way down, lazy imports included: what each room may not import.
FORBIDDEN = {"store": ("streamlit", "engine.run", "engine.present", "dashboard"),
             "engine.core": ("engine.scenarios",),
             "engine.scenarios": ("engine.run",),
             "engine.present": ("streamlit", "dashboard", "engine.run")}
# engine/run's jobs, top floor first: each package imports only the ones after it (lazy
# imports included), so the process engine knows nothing of jobs or searches, and the Ray
# cluster, one executor among others, nothing of the jobs it runs.
RUN_PACKAGES = ("engine.run.search", "engine.run.jobs", "engine.run.cluster",
                "engine.run.process")


def project_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for every project .py file outside SKIP."""
    out = {}
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)  # never walk into .venv
        paths += [Path(folder) / n for n in names if n.endswith(".py")]
    for p in sorted(paths):
        rel = p.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts) or rel.stem] = p
    return out


def _imports(tree, *, module_level_only: bool, package: str) -> list[str]:
    """Absolute names imported; 'from a.b import c' gives a.b and a.b.c."""
    nodes = []
    if module_level_only:
        stack = list(tree.body)
        while stack:  # module level includes if/try/with blocks, not function bodies
            n = stack.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if isinstance(n, ast.ClassDef):
                    stack.extend(n.body)
                continue
            nodes.append(n)
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(n, field, []) or [])
    else:
        nodes = list(ast.walk(tree))
    names = []
    for n in nodes:
        if isinstance(n, ast.Import):
            names += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:  # relative: resolve against the importing package
                pkg = package.split(".")[:len(package.split(".")) - n.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            names.append(base)
            names += [f"{base}.{a.name}" for a in n.names]
    return names


def _file_imports(path: Path, *, module_level_only: bool, package: str) -> tuple[str, ...]:
    """_imports of a file, parsed once a session while it is unchanged: the checks below
    read the same 240 files over again (about a second each time on two cores)."""
    st = path.stat()
    return _parsed_imports(path, st.st_mtime_ns, st.st_size, module_level_only, package)


@functools.lru_cache(maxsize=None)
def _parsed_imports(path: Path, _mtime_ns: int, _size: int, module_level_only: bool,
                    package: str) -> tuple[str, ...]:
    return tuple(_imports(ast.parse(path.read_text()), module_level_only=module_level_only,
                          package=package))


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def framework_imports(root: Path) -> list[str]:
    """'file: module' for every framework import outside engine/worker/, lazy ones too."""
    bad = []
    for name, path in project_files(root).items():
        if name == WORKER or name.startswith(WORKER + "."):
            continue
        for imp in _file_imports(path, module_level_only=False,
                                 package=_package(name, path)):
            if imp.split(".")[0] in FRAMEWORKS:
                bad.append(f"{path.relative_to(root)}: {imp}")
    return sorted(set(bad))


def worker_reach(root: Path, starts: list[str]) -> list[str]:
    """For each start module that reaches engine.worker through module-level imports of
    project modules, its shortest import chain."""
    files = project_files(root)
    graph = {}
    for name, path in files.items():
        deps = set()
        for imp in _file_imports(path, module_level_only=True, package=_package(name, path)):
            parts = imp.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b too
                if ".".join(parts[:i]) in files:
                    deps.add(".".join(parts[:i]))
        graph[name] = deps - {name}
    chains = []
    for start in starts:
        seen, queue = {start: [start]}, [start]
        while queue:
            cur = queue.pop(0)
            for dep in sorted(graph.get(cur, ())):
                if dep in seen:
                    continue
                seen[dep] = seen[cur] + [dep]
                if dep == WORKER or dep.startswith(WORKER + "."):
                    chains.append(" -> ".join(seen[dep]))
                    queue = []
                    break
                queue.append(dep)
    return chains


def outside_worker(root: Path) -> list[str]:
    """Every project module but the worker side's: the dashboard, the store, the CLI and the
    parent side (which names worker bodies by module path and never imports them)."""
    return [n for n in project_files(root) if n != WORKER and not n.startswith(WORKER + ".")]


def test_only_the_worker_side_imports_a_framework():
    bad = framework_imports(ROOT)
    assert bad == [], "framework imports outside engine/worker/:\n" + "\n".join(bad)


def test_nothing_outside_the_worker_side_reaches_it():
    starts = outside_worker(ROOT)
    assert {"app", "views.run", "store.db", "engine.run.process.runner",
            "engine.cli"} <= set(starts)
    chains = worker_reach(ROOT, starts)
    assert chains == [], "the dashboard side imports worker code:\n" + "\n".join(chains)


def test_no_module_is_over_450_lines():
    big = {str(p.relative_to(ROOT)): n for p in project_files(ROOT).values()
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    big.update({str(p.relative_to(ROOT)): n for p in (ROOT / "bench").glob("*.py")
                if (n := len(p.read_text().splitlines())) > MAX_LINES})
    assert big == {}


def test_no_page_is_over_250_lines():
    big = {p.name: n for p in (ROOT / "views").glob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_PAGE_LINES}
    assert big == {}


def test_no_pages_folder_sits_beside_app_py():
    # Streamlit takes a pages/ folder beside the entry for its legacy pages directory: on a
    # fresh server the first deep link (/compare) runs that file alone, bypassing app.py's
    # st.navigation (no router menu, no guide switch, the Run page open in viewer mode).
    assert not (ROOT / "pages").exists()
    assert (ROOT / "views" / "compare.py").is_file()


def kind_literals(root: Path) -> list[str]:
    """'file: match' for every run kind named by value outside its homes."""
    hits = []
    for p in project_files(root).values():
        rel = p.relative_to(root).as_posix()
        if not rel.startswith(KIND_HOMES):
            hits += [f"{rel}: {m.group(0)}" for m in KIND_LITERAL.finditer(p.read_text())]
    return sorted(hits)


def test_a_runs_kind_is_named_by_value_only_where_it_is_defined():
    assert kind_literals(ROOT) == []


def _room(name: str, root: Path) -> str:
    """The package a module lives in: engine's subpackages are rooms of their own."""
    parts = name.split(".")
    if parts[0] == "engine" and len(parts) >= 2 and (root / "engine" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "engine" if parts[0] == "engine" else parts[0]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules and packages it imports (lazy imports included); a
    folder without __init__.py is named by its dotted path."""
    files = project_files(root)
    # every module's folder, by its dotted path: the folder exists (the module's file is in
    # it), so this is the set of folders holding a module, read without walking the tree
    # (.git, .venv, data/ with its caches: seconds on every call)
    known = set(files) | {n.rpartition(".")[0] for n in files if "." in n}
    graph = {}
    for name, path in files.items():
        deps = set()
        for imp in _file_imports(path, module_level_only=False,
                                 package=_package(name, path)):
            parts = imp.split(".")
            for i in range(len(parts), 0, -1):
                if ".".join(parts[:i]) in known:
                    deps.add(".".join(parts[:i]))
                    break
            else:
                deps.add(imp)  # a library: kept, for the forbidden-import check
        graph[name] = deps - {name}
    return graph


def forbidden_imports(root: Path) -> list[str]:
    bad = []
    for name, deps in import_graph(root).items():
        for room, banned in FORBIDDEN.items():
            if _room(name, root) == room:
                bad += [f"{name} -> {d}" for d in sorted(deps)
                        if any(d == b or d.startswith(b + ".") for b in banned)]
    return bad


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on.discard(group[-1])
            if len(group) > 1:
                out.append(sorted(group))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def room_graph(root: Path) -> dict[str, set[str]]:
    """Package -> packages it imports; the entry point engine/__main__.py is apart."""
    graph: dict[str, set[str]] = {}
    files = project_files(root)
    for name, deps in import_graph(root).items():
        if name == "engine.__main__":
            continue
        graph.setdefault(_room(name, root), set()).update(
            _room(d, root) for d in deps if d in files or _room(d, root) != d.split(".")[0])
    return {k: v - {k} for k, v in graph.items()}


def _run_package(name: str) -> str | None:
    return next((p for p in RUN_PACKAGES if name == p or name.startswith(p + ".")), None)


def run_imports_up(root: Path) -> list[str]:
    """'module -> module' for every import in engine/run from a package to one above it
    in RUN_PACKAGES, and 'module: outside the packages' for a module in none of them."""
    bad = []
    for name, deps in import_graph(root).items():
        if not name.startswith("engine.run."):
            continue
        own = _run_package(name)
        if own is None:
            bad.append(f"{name}: outside the packages")
            continue
        for d in sorted(deps):
            other = _run_package(d)
            if other is not None and RUN_PACKAGES.index(other) < RUN_PACKAGES.index(own):
                bad.append(f"{name} -> {d}")
    return bad


def test_the_rooms_import_one_way():
    assert forbidden_imports(ROOT) == []
    assert circles(room_graph(ROOT)) == []
    assert circles(import_graph(ROOT)) == []


def seed_imports(root: Path) -> list[str]:
    """'module -> import' for every project module outside seeds/ that imports it: the
    test data tests/ and bench/ share is never part of the product."""
    return sorted(f"{name} -> {d}" for name, deps in import_graph(root).items()
                  if _room(name, root) != "seeds"
                  for d in deps if d == "seeds" or d.startswith("seeds."))


def test_the_product_never_imports_the_test_data():
    assert seed_imports(ROOT) == []


def test_engine_run_is_split_by_job_and_its_packages_import_one_way():
    assert run_imports_up(ROOT) == []
    assert {n.split(".")[2] for n in project_files(ROOT)
            if n.startswith("engine.run.")} == {"search", "jobs", "cluster", "process"}


def test_the_run_check_finds_a_lazy_import_up_and_a_loose_module(tmp_path):
    def write(rel, text=""):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for pkg in RUN_PACKAGES:
        write(pkg.replace(".", "/") + "/__init__.py")
    write("engine/run/process/runner.py", "def f():\n    from engine.run.jobs import sweep\n")
    write("engine/run/cluster/fleet.py", "from engine.run.process.runner import f\n")
    write("engine/run/jobs/sweep.py", "from engine.run.cluster import fleet\n"
                                      "from engine.run.search.max_qps import q\n")
    write("engine/run/search/max_qps.py", "from engine.run.jobs import sweep\nq = 1\n")
    write("engine/run/loose.py", "from engine.run.process import runner\n")
    assert run_imports_up(tmp_path) == [
        "engine.run.jobs.sweep -> engine.run.search.max_qps",
        "engine.run.loose: outside the packages",
        "engine.run.process.runner -> engine.run.jobs",
        "engine.run.process.runner -> engine.run.jobs.sweep"]


def test_the_contract_checks_find_a_store_reaching_up_a_circle_and_a_kind_literal(tmp_path):
    def write(rel, text=""):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    write("store/__init__.py")
    write("store/q.py", "def f(con):\n    from engine.run import jobs\n"
                        "    return con.execute(\"SELECT 1 FROM runs WHERE kind = 'train'\")\n")
    write("engine/run/jobs.py", "from store import q\n")
    write("engine/scenarios/a.py", "KIND = 'train'\nok = kind == 'train'\n")
    write("seeds/__init__.py")
    write("seeds/records.py", "SYSTEM = {}\n")
    write("store/p.py", "from seeds.records import SYSTEM\n")
    assert forbidden_imports(tmp_path) == ["store.q -> engine.run", "store.q -> engine.run.jobs"]
    assert seed_imports(tmp_path) == ["store.p -> seeds.records"]
    assert circles(room_graph(tmp_path)) == [["engine.run", "store"]]
    assert kind_literals(tmp_path) == ["store/q.py: kind = 'train'"]


def test_the_checks_find_a_lazy_framework_import_and_a_transitive_worker_import(tmp_path):
    def write(rel, text=""):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for pkg in ("engine", "engine/run", "engine/analysis", "engine/worker", "views"):
        write(f"{pkg}/__init__.py")
    write("views/p.py", "import streamlit as st\nfrom engine.run import a\n")
    write("engine/run/a.py", "try:\n    from engine.worker.b import step\nexcept ImportError:\n"
                             "    step = None\n")
    write("engine/worker/b.py", "import torch\n")
    write("engine/analysis/c.py", "def f():\n    from torch import nn\n    return nn\n")
    write("engine/analysis/d.py", "def g():\n    from engine.worker import b\n")  # lazy: ok
    assert framework_imports(tmp_path) == ["engine/analysis/c.py: torch",
                                           "engine/analysis/c.py: torch.nn"]
    assert worker_reach(tmp_path, ["views.p", "engine.analysis.d"]) == [
        "views.p -> engine.run.a -> engine.worker"]
