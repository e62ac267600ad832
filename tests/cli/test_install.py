"""What a plain install gives and what an extra adds, through the real CLI in this process:
`nas --version`, and a missing optional package (simulated: None in sys.modules makes its
import fail, installed or not) as exit status 2 and one line naming the extra to install,
before anything is written."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from nas.errors import NasError
from nas.extras import require

from ..helpers import run_cli


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    return lines[0]


def test_version_prints_the_installed_version() -> None:
    result = run_cli("--version", cwd=Path.cwd())
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"nas {version('nas')}\n"


@pytest.mark.parametrize(
    ("fmt", "missing", "line"),
    [
        (
            "onnx",
            ["tf2onnx"],
            "Error: --format onnx needs tf2onnx, which is not installed: pip install -e '.[onnx]' in the nas clone",
        ),
        (
            "onnx",
            ["onnxruntime"],
            "Error: --format onnx needs onnxruntime, which is not installed: pip install -e '.[onnx]' in the nas clone",
        ),
        (
            "tensorrt",
            ["tensorrt"],
            "Error: --format tensorrt: the tensorrt Python package is not installed "
            "(pip install -e '.[tensorrt]' in the nas clone, on a machine with an NVIDIA GPU)",
        ),
        (
            # A dependency of nas, missing where nas was installed before it became one.
            "tflite",
            ["ai_edge_litert", "ai_edge_litert.interpreter"],
            "Error: the TFLite interpreter (LiteRT) needs ai_edge_litert, which is not installed: "
            "pip install -e . in the nas clone (it is a dependency of nas)",
        ),
    ],
)
def test_export_without_its_package_names_the_extra(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, missing: list[str], line: str
) -> None:
    for module in missing:
        monkeypatch.setitem(sys.modules, module, None)
    result = run_cli("export", "mobilenet", "--format", fmt, "--out", "exported", cwd=workdir)
    assert result.returncode == 2, result.stderr
    assert _one_error_line(result.stderr) == line
    assert not (workdir / "exported").exists() and not (workdir / "nas.db").exists()


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("postgresql+psycopg://u@127.0.0.1/x", "psycopg", "postgres"),
        ("mysql+pymysql://u@127.0.0.1/x", "pymysql", "mysql"),
    ],
)
def test_a_storage_driver_missing_names_the_extra(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, url: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    result = run_cli("status", "--storage", url, cwd=workdir)
    assert result.returncode == 2, result.stderr
    assert _one_error_line(result.stderr).endswith(
        f"driver '{module}' is not installed (pip install -e '.[{extra}]' in the nas clone)"
    )


def test_a_package_that_fails_on_its_own_missing_import_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installing the extra again would not mend a broken package: that is a bug to see whole."""
    (tmp_path / "broken_optional.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        require("broken_optional", "a test", "onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)  # a package of the extra: the extra is the fix
    (tmp_path / "needs_onnx.py").write_text("import onnx\n")
    with pytest.raises(NasError, match=r"^a test needs onnx, which is not installed: pip install -e '\.\[onnx\]'"):
        require("needs_onnx", "a test", "onnx")
