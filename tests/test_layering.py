"""The three floors: pure `planner` < runtime `launcher` < the application at `planner/app/`.

Every import in the tree is read (also those inside functions, which is where lazy imports hide), so
an upward import fails here before it becomes a cycle nobody notices.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import planner

ROOT = Path(__file__).resolve().parents[1]


def _floor(module: str) -> str:
    # `python -m planner` is the command: it belongs to the application floor.
    if module in ("planner.app", "planner.__main__") or module.startswith("planner.app."):
        return "app"
    if module == "planner" or module.startswith("planner."):
        return "planner"
    if module == "launcher" or module.startswith("launcher."):
        return "launcher"
    return "outside"


def _imports(path: Path):
    """(line, imported module, names) for every import statement in one file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
    for package in ("planner", "launcher"):
        for module, path in _modules(package):
            floor = _floor(module)
            for line, target, names in _imports(path):
                where = f"{path.relative_to(ROOT)}:{line}: {module} imports {target}"
                to = _floor(target)
                if floor == "planner" and to in ("launcher", "app"):
                    out.append(f"{where} (the pure planner imports neither launcher nor planner.app)")
                elif floor == "launcher" and to == "app":
                    out.append(f"{where} (the runtime never imports the application)")
                elif floor == "launcher" and to == "planner":
                    private = target != "planner" or any(n not in public for n in names)
                    if private:
                        out.append(f"{where} {names} (the launcher uses planner's public API only: "
                                   "`import planner` or `from planner import <name in __all__>`)")
    return out


# The launcher's wings, lowest first; a module imports its own wing and lower ranks only (two
# wings of one rank do not import each other). The basics at its root serve every wing; the
# stage factories are loaded by name in the workers.
WING_RANK = {"errors": 0, "audio": 0, "cancellation": 0, "wire": 1, "control": 2, "worker": 2,
             "standins": 1, "synthetic": 2, "piper": 2, "backends": 3, "deployment": 4,
             "serving": 5, "__init__": 6}


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


def test_importing_the_planner_loads_no_launcher_module():
    code = ("import sys, planner; planner.solve('qwen3-tts'); "
            "bad = sorted(m for m in sys.modules if m.startswith(('launcher', 'planner.app', 'torch')));"
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
