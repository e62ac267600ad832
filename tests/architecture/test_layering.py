"""The house stays a house: every import in the package goes down the order of rooms
(docs/architecture.md), and the rooms that must start without TensorFlow do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Source folder of each installed top-level package (pyproject's package-dir).
FOLDERS = {
    "nas.search": REPO / "search",
    "nas.storage": REPO / "storage",
    "nas.spaces": REPO / "spaces",
    "nas": REPO / "nas",
}

# Lower numbers are lower rooms. A module may import its own room and any lower one.
LEVELS = {
    "nas": 0,  # the root package: __version__, errors
    "nas.errors": 0,
    "nas.extras": 0.5,  # which extra brings each optional package: its errors are NasErrors
    "nas.storage": 1,
    "nas.spaces": 1,
    "nas.search.records": 2,
    "nas.search.runtime": 2,
    "nas.search.space": 3,
    "nas.search.nets": 4,
    "nas.search.data": 4,
    "nas.search.training": 5,
    "nas.search.hardware": 5,
    "nas.search.deploy": 5,
    "nas.search.engine": 6,
    # A strategy's engine part: above the engine, which is handed it (its space part, the
    # registry and each strategy's settings, is in the space's room: SPACE_PART below).
    "nas.search.strategies": 6.5,
    "nas.search.results": 7,
    "nas.search.workers": 7,
    "nas.search.cli": 8,
    "nas.search": 8,
    "nas.api": 9,
    "nas.tuner": 9,
    "nas.__main__": 9,
}
TENSORFLOW = ("tensorflow", "keras")
# What takes seconds to import; the CLI's start (and so every error message) must not wait for it.
SLOW_TO_IMPORT = (*TENSORFLOW, "keras_tuner", "sklearn", "plotly", "matplotlib", "optuna", "sqlalchemy")
# Modules that load without TensorFlow, all that they import at module level included: the
# space language and static planning (`nas space`), the study and the pool's parent process,
# read-only results, and every CLI module (an error in the input must be reported in a blink).
TF_FREE_ROOMS = (
    "nas.errors",
    "nas.extras",
    "nas.storage",
    "nas.search.records",
    "nas.search.runtime",
    "nas.search.space",
    "nas.search.cli",
    "nas.search.workers",
)
TF_FREE_MODULES = (
    "nas.search.strategies.supernet.strategy",
    "nas.search.strategies.supernet.halving",
    "nas.search.strategies.supernet.budget",
    "nas.search.strategies.trials.strategy",
    "nas.search.nets.plan",
    "nas.search.nets.constraints",
    "nas.search.nets.survey",
    "nas.search.engine.study",
    "nas.search.engine.strategy",
    "nas.search.engine.loop",
    "nas.search.engine.trial",
    "nas.search.engine.evaluation",
    "nas.search.hardware.figures",
    "nas.search.deploy.deployed",
    "nas.search.training.result",
    "nas.search.engine.front",
    "nas.search.engine.events",
    "nas.search.engine.liveness",
    "nas.search.engine.recovery",
    "nas.search.engine.retention",
    "nas.search.engine.early_stopping",
    "nas.search.results.pareto",
    "nas.search.results.choose",
    "nas.search.results.summaries",
    "nas.search.results.report",
    "nas.api",
)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "nas" and parts and parts[0] in ("search", "storage", "spaces"):
                continue
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def room(module: str) -> str | None:
    """The longest LEVELS key that is the module or a package above it; a strategy's space part
    is in the space's room."""
    if module in SPACE_PART:
        return "nas.search.space"
    best = None
    for key in LEVELS:
        if (module == key or module.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    return best


def _surface(package: str) -> dict[str, str]:
    """Name -> defining module, for what a package's `__init__` exports, eagerly or lazily
    (nas._lazy lists lazy names under TYPE_CHECKING)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return {}
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
            found.update((alias.asname or alias.name, node.module) for alias in node.names)
    return found


def _imports(module: str, *, top_level_only: bool) -> list[tuple[int, str]]:
    """(line, imported module) for every import; with top_level_only, only those that run when
    the module is imported (not inside functions; TYPE_CHECKING blocks skipped)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    is_package = MODULES[module].name == "__init__.py"
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if not top_level_only:
                    visit(child, True)
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                out.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                out.append((child.lineno, target))
                for alias in child.names:
                    # `from pkg import submodule`, or a name a package surface takes from its submodule
                    if f"{target}.{alias.name}" in MODULES:
                        out.append((child.lineno, f"{target}.{alias.name}"))
                    elif alias.name in _surface(target):
                        out.append((child.lineno, _surface(target)[alias.name]))
            visit(child, in_function)

    visit(tree, False)
    return out


STRATEGIES = "nas.search.strategies"


def _space_part() -> set[str]:
    """The strategies' registry, each registered strategy's package and `settings` module, and
    every module of the strategies' folder these import: what the space loader reaches
    (`nas.search.strategies.space_part`). The registry names its packages as strings."""
    registry = ast.parse(MODULES[STRATEGIES].read_text(encoding="utf-8"))
    packages = [
        value.value
        for node in ast.walk(registry)
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "REGISTRY"
        for value in getattr(node.value, "values", [])
        if isinstance(value, ast.Constant)
    ]
    assert packages, "no REGISTRY found in nas.search.strategies"
    part: set[str] = set()
    todo = [STRATEGIES, *packages, *(f"{p}.settings" for p in packages)]
    while todo:
        current = todo.pop()
        if current in part or current not in MODULES:
            continue
        part.add(current)
        todo.extend(t for _, t in _imports(current, top_level_only=False) if t.startswith(STRATEGIES + "."))
    return part


SPACE_PART = _space_part()


def test_every_module_belongs_to_a_room() -> None:
    assert not [m for m in MODULES if room(m) is None]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down(module: str) -> None:
    mine = room(module)
    assert mine is not None
    upward = []
    for line, target in _imports(module, top_level_only=False):
        theirs = room(target) if target.startswith("nas") else None
        # `from nas.search import runtime` names the package above; the room is the module's
        if theirs is None or theirs == mine or target == "nas" or module.startswith(target + "."):
            continue
        if LEVELS[theirs] >= LEVELS[mine]:
            upward.append(f"line {line}: {target} ({theirs}, level {LEVELS[theirs]})")
    assert not upward, f"{module} ({mine}, level {LEVELS[mine]}) imports upward or sideways: {upward}"


def test_the_space_part_of_each_strategy_is_there() -> None:
    expected = {f"{STRATEGIES}.trials.settings", f"{STRATEGIES}.supernet.settings", f"{STRATEGIES}.supernet.elastic"}
    assert expected <= SPACE_PART
    assert f"{STRATEGIES}.supernet.strategy" not in SPACE_PART


def test_the_engine_imports_no_strategy() -> None:
    """Nothing below the strategies' engine parts reaches the strategies, the registry included,
    but the space (whose room holds the registry): the engine is handed its strategy."""
    offenders = [
        f"{m} line {line}: {t}"
        for m in MODULES
        if (mine := room(m)) not in (None, "nas.search.space") and LEVELS[mine] < LEVELS[STRATEGIES]
        for line, t in _imports(m, top_level_only=False)
        if t.startswith(STRATEGIES)
    ]
    assert not offenders


def test_storage_knows_nothing_of_search() -> None:
    offenders = [
        (m, t)
        for m in MODULES
        if m.startswith("nas.storage")
        for _, t in _imports(m, top_level_only=False)
        if t.startswith("nas.search")
    ]
    assert not offenders


def _loads_at_import(module: str) -> set[str]:
    """Every module (ours or third-party, by top-level name) that importing `module` loads."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        # importing a.b.c runs a/__init__ and a.b/__init__ first
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES)
        if current in MODULES:
            todo.extend(t for _, t in _imports(current, top_level_only=True))
    return seen


TF_FREE = sorted(m for m in MODULES if m.startswith(TF_FREE_ROOMS) or m in TF_FREE_MODULES or m in SPACE_PART)


@pytest.mark.parametrize("module", TF_FREE)
def test_tensorflow_free_modules_load_without_it(module: str) -> None:
    loaded = _loads_at_import(module)
    heavy = sorted(m for m in loaded if m.split(".")[0] in TENSORFLOW or m == "keras_tuner")
    assert not heavy, f"importing {module} loads {heavy}"


def test_the_command_line_starts_without_slow_imports() -> None:
    slow = sorted(m for m in _loads_at_import("nas.__main__") if m.split(".")[0] in SLOW_TO_IMPORT)
    assert not slow, f"`nas` loads {slow} before any command runs; import them inside the command that needs them"
