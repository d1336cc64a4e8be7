"""The floors, each importing only the floors below it.

Three floors across the tree: pure `planner` < runtime `launcher` < the application at
`planner/app/`. Inside the pure planner, lowest first:

- core: the values and the deciding (config, cards, pipeline, graph, problem, solver, rules,
  diagnostics, plan, flags, replicas, cluster); imports no Ray, no torch, no launcher;
- render: `planner/render/`, what the core's values look like (tables, JSON, DOT, the sentences
  of each conflict); decides nothing;
- api: `planner/api.py` and `planner/placements.py`, the entry points: solve with the core, then
  word each diagnostic with render;
- tune: `planner/tune/`, the performance model and ranking over the placements api enumerates,
  with its own report;
- the package's public names (`planner/__init__.py`), which re-export from every floor.

Beside them, `models/`: the cards and the stage code of real models, loaded by the launcher by
name (a card's `factory: models.piper:vocoder`). The launcher knows no model: nothing under
`launcher/` imports `models`, and no code there (names and string literals; docstrings and
comments may give examples) names a card, a model package or a library only a model uses. Stage
code never imports the application.

Every import in the tree is read (also those inside functions, which is where lazy imports hide),
so an upward import fails here before it becomes a cycle nobody notices; and the module import
graph of `planner`, `launcher` and `models` has no cycle (imports under `if TYPE_CHECKING:` aside, as they
never run). No module of either is over MAX_LINES lines.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import yaml

import planner

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500  # a module longer than this does several jobs: split it by job
PACKAGES = ("planner", "launcher", "models")

# The pure planner's floors, lowest first; a module imports its own floor and those below only.
PLANNER_FLOORS = ("core", "render", "api", "tune", "public")
# What the pure planner never imports: the runtime's libraries.
RUNTIME_ONLY = ("ray", "torch")


def _planner_floor(module: str) -> str:
    """The inner floor of a module of the pure planner."""
    if module == "planner":
        return "public"
    if module in ("planner.api", "planner.placements"):
        return "api"
    for inner in ("render", "tune"):
        if module == f"planner.{inner}" or module.startswith(f"planner.{inner}."):
            return inner
    return "core"


def _floor(module: str) -> str:
    # `python -m planner` is the command: it belongs to the application floor.
    if module in ("planner.app", "planner.__main__") or module.startswith("planner.app."):
        return "app"
    if module == "planner" or module.startswith("planner."):
        return "planner"
    if module == "launcher" or module.startswith("launcher."):
        return "launcher"
    if module == "models" or module.startswith("models."):
        return "models"
    return "outside"


def _typing_only(tree: ast.AST) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:` (read by type checkers, never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                   "typing.TYPE_CHECKING"):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(path: Path, *, running_only: bool = False):
    """(line, imported module, names) for every import statement in one file; with
    `running_only`, those under `if TYPE_CHECKING:` are left out."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _typing_only(tree) if running_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import (write it absolute)"
            yield node.lineno, node.module or "", tuple(a.name for a in node.names)


def _modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield ".".join(parts), path


def _violations() -> list[str]:
    public = set(planner.__all__)
    out = []
    for package in PACKAGES:
        for module, path in _modules(package):
            floor = _floor(module)
            for line, target, names in _imports(path):
                where = f"{path.relative_to(ROOT)}:{line}: {module} imports {target}"
                to = _floor(target)
                if floor == "planner" and to in ("launcher", "app"):
                    out.append(f"{where} (the pure planner imports neither launcher nor planner.app)")
                elif floor == "planner" and target.split(".")[0] in RUNTIME_ONLY:
                    out.append(f"{where} (the pure planner imports no runtime library: joining "
                               "a Ray cluster or running torch is the launcher's)")
                elif floor == "planner" and to == "planner":
                    out += _inner_violation(where, module, target, names)
                elif floor in ("launcher", "models") and to == "app":
                    out.append(f"{where} (the runtime never imports the application)")
                elif floor == "launcher" and to == "models":
                    out.append(f"{where} (the launcher knows no model: it loads a card's stages "
                               "by the factory name in the plan)")
                elif floor == "launcher" and to == "planner":
                    private = target != "planner" or any(n not in public for n in names)
                    if private:
                        out.append(f"{where} {names} (the launcher uses planner's public API only: "
                                   "`import planner` or `from planner import <name in __all__>`)")
    return out


def _inner_violation(where: str, module: str, target: str, names: tuple[str, ...]) -> list[str]:
    """An import of the pure planner that reaches a floor above its own."""
    # `from planner import x` names the public names, or a submodule when x is one.
    targets = [f"planner.{n}" if (ROOT / "planner" / n).exists()
               or (ROOT / "planner" / f"{n}.py").exists() else "planner" for n in names] \
        if target == "planner" else [target]
    rank = PLANNER_FLOORS.index
    here = _planner_floor(module)
    return [f"{where} ({here} floor imports the {_planner_floor(t)} floor above it)"
            for t in targets if rank(_planner_floor(t)) > rank(here)]


def _import_graph() -> nx.DiGraph:
    """Module -> module it imports, over planner and launcher, as the interpreter runs them:
    `from a import b` is an edge to `a.b` when that is a module, else to `a`."""
    modules = {m: p for package in PACKAGES for m, p in _modules(package)}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for _, target, names in _imports(path, running_only=True):
            if _floor(target) == "outside":
                continue
            for t in [f"{target}.{n}" if f"{target}.{n}" in modules else target
                      for n in names] or [target]:
                if t != module:
                    graph.add_edge(module, t)
    return graph


def _cycles() -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(_import_graph())
                  if len(c) > 1)


def _long_modules() -> list[str]:
    out = []
    for package in PACKAGES:
        for _, path in _modules(package):
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                out.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return out


# The launcher's wings, lowest first; a module imports its own wing and lower ranks only (two
# wings of one rank do not import each other). The basics at its root serve every wing; the
# stage factories are loaded by name in the workers.
WING_RANK = {"errors": 0, "audio": 0, "words": 0, "cancellation": 0, "off_cpu": 0, "logs": 0,
             "wire": 1, "control": 2, "worker": 2, "standins": 1, "synthetic": 2, "backends": 3,
             "facade": 3, "deployment": 4, "serving": 5, "ray_serve": 6, "__init__": 7}


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _wing_violations() -> list[str]:
    out = []
    for module, path in _modules("launcher"):
        wing = _wing(module)
        for line, target, names in _imports(path):
            if _floor(target) != "launcher":
                continue
            targets = [target] if target != "launcher" else [f"launcher.{n}" for n in names]
            for t in targets:
                other = _wing(t)
                if other == wing:
                    continue
                if WING_RANK.get(other, 99) >= WING_RANK.get(wing, -1):
                    out.append(f"{path.relative_to(ROOT)}:{line}: launcher.{wing} imports {t} "
                               "(a wing imports only the wings below it)")
    return out


# Libraries the stage contract itself passes (its arrays): any other library a model's stage code
# imports is that model's own business (onnxruntime, its voice's wheel, ...).
CONTRACT_LIBRARIES = {"numpy", "torch"}


def _model_words() -> tuple[set[str], set[str]]:
    """(what names a model: every card's name, every package under models/ a card's factory
    names, and the libraries only models import; those libraries alone)."""
    texts = [p.read_text() for p in (ROOT / "models").glob("*.yaml")]
    cards = {yaml.safe_load(text)["name"] for text in texts}
    packages = {m for text in texts for m in re.findall(r"factory:\s*models\.(\w+)", text)}
    libraries = {target.split(".")[0] for _, path in _modules("models")
                 for _, target, _ in _imports(path)}
    libraries -= {*sys.stdlib_module_names, *CONTRACT_LIBRARIES, "models", "planner", "launcher",
                  "__future__"}
    words = {*cards, *(c.replace("-", "_") for c in cards), *packages, *libraries}
    return {w.lower() for w in words}, libraries


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)}


def _model_code_in_launcher() -> list[str]:
    """Each place under launcher/ whose code (an import, a name, a string literal) names a model."""
    words, libraries = _model_words()
    out = []
    for module, path in _modules("launcher"):
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                # an import of `models` or of a model's library is model code whatever its name
                hits = [n for n in names if n.split(".")[0] in {*libraries, "models"}]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                hits = [] if id(node) in docs else [node.value]
            elif isinstance(node, ast.Name):
                hits = [node.id]
            elif isinstance(node, ast.Attribute):
                hits = [node.attr]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                hits = [node.name]
            else:
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                named = [(h, h.split(".")[0]) for h in hits]
            else:
                named = [(h, w) for h in hits for w in sorted(words) if w in h.lower()][:1]
            out += [f"{path.relative_to(ROOT)}:{node.lineno}: {module} names {word!r} in "
                    f"{text[:60]!r} (the launcher knows no model: that code belongs in the "
                    "model's stage code under models/)" for text, word in named]
    return out


def test_each_launcher_wing_imports_only_the_wings_below_it():
    assert _wing_violations() == []


def test_no_floor_imports_a_floor_above_it():
    assert _violations() == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    # The walk itself must be able to fail: a planted upward import is found.
    fake = tmp_path / "planner"
    fake.mkdir()
    (fake / "bad.py").write_text("def f():\n    from launcher.serving import serve\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert any("planner.bad imports launcher.serving" in v for v in _violations())


def test_no_module_imports_itself_through_others():
    assert _cycles() == []


def test_the_checker_sees_a_cycle_and_a_reach_up_inside_the_planner(tmp_path, monkeypatch):
    fake = tmp_path / "planner"
    (fake / "render").mkdir(parents=True)
    (fake / "plan.py").write_text("def to_dict():\n    from planner.render.dicts import d\n")
    (fake / "render" / "dicts.py").write_text("from planner.plan import Plan\n")
    (fake / "cluster.py").write_text("def nodes():\n    import ray\n")
    (fake / "render" / "text.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planner.api import x\n")
    (fake / "api.py").write_text("from planner.render.text import y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _cycles() == [["planner.plan", "planner.render.dicts"]]  # not the type-only one
    found = _violations()
    assert any("planner.plan imports planner.render.dicts (core floor imports the render"
               in v for v in found), found
    assert any("planner.cluster imports ray" in v for v in found), found
    assert not any("planner.api imports" in v for v in found), found


def test_no_module_is_over_the_line_limit():
    assert _long_modules() == []


def test_importing_the_planner_loads_no_launcher_module():
    code = ("import sys, planner; planner.solve('qwen3-tts'); "
            "bad = sorted(m for m in sys.modules if m.startswith(('launcher', 'planner.app', 'torch')));"
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_launcher_knows_no_model():
    assert _model_code_in_launcher() == []


def test_the_checker_sees_a_model_in_the_launcher(tmp_path, monkeypatch):
    (tmp_path / "models" / "vits").mkdir(parents=True)
    (tmp_path / "models" / "vits-joe.yaml").write_text(
        "name: vits-joe\nstages:\n  - {name: vocoder, factory: models.vits:vocoder}\n")
    (tmp_path / "models" / "vits" / "__init__.py").write_text("import onnxruntime\nimport numpy\n")
    (tmp_path / "launcher").mkdir()
    (tmp_path / "launcher" / "ok.py").write_text(
        '"""Stages such as vits-joe\'s are loaded by name."""\nimport numpy\n')
    (tmp_path / "launcher" / "bad.py").write_text(
        "import models.vits\nimport onnxruntime\nCARD = 'vits-joe'\n"
        "def vits_voice():\n    return CARD\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = _model_code_in_launcher()
    assert sorted({int(v.split(":")[1]) for v in found}) == [1, 2, 3, 4], found
    assert not any("ok.py" in v for v in found)  # a docstring may give an example
    assert any("launcher.bad imports models.vits (the launcher knows no model" in v
               for v in _violations()), _violations()
