"""Every code block of README.md does what the README says: Python blocks are executed (their
asserts compare with numpy), ZynML blocks run on the CPU reference, shell blocks are run
command by command with the installed `zynbook`. The set-up commands (`scripts/*.sh`) are
what CI itself runs; here they are checked to exist and to be what `.ci/run` calls."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zynbook

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```$", README, flags=re.S | re.M)


def _blocks(lang: str) -> list[str]:
    return [body for info, body in BLOCKS if info == lang]


def _commands(block: str) -> list[str]:
    """The commands of a shell block, comments dropped."""
    out = []
    for line in block.splitlines():
        cmd = line.split(" #", 1)[0].strip()
        if cmd and not cmd.startswith("#"):
            out.append(cmd)
    return out


def test_readme_has_blocks_of_each_kind():
    langs = {info for info, _ in BLOCKS}
    assert {"bash", "python", "zynml"} <= langs, langs


def test_setup_commands_are_the_scripts_ci_runs():
    setup = [b for b in _blocks("bash") if "scripts/" in b]
    assert setup, "the README starts with the set-up commands"
    commands = _commands(setup[0])
    assert commands == ["bash scripts/main.sh", "bash scripts/test.sh"]
    for cmd in commands:
        assert (REPO / cmd.split()[1]).is_file()
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_zynml_blocks_run_on_the_cpu(monkeypatch):
    from zynbook.backends import registry
    blocks = _blocks("zynml")
    assert blocks
    # `@device("auto")` is the CPU here, as on a machine with no GPU
    monkeypatch.setattr(registry, "best_device_id", lambda: "cpu")
    for block in blocks:
        session = zynbook.Session(device="cpu")
        session.run(block)
        assert session.launches, "the block launched a kernel"
    # the first block: z = x * y + 1 over the inputs it makes
    ns = session.namespace if len(blocks) == 1 else None
    if ns is not None and {"x", "y", "z"} <= set(ns):
        x, y = np.asarray(ns["x"]), np.asarray(ns["y"])
        np.testing.assert_allclose(np.asarray(ns["z"]), x * y + 1.0, rtol=1e-6)


def test_python_blocks_execute(monkeypatch, capsys):
    blocks = _blocks("python")
    assert blocks
    monkeypatch.chdir(REPO)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert "kernel" in capsys.readouterr().out          # print(program.cir_text())


def _cli_commands() -> list[str]:
    return [cmd for block in _blocks("bash") for cmd in _commands(block)
            if cmd.startswith("zynbook ")]


@pytest.mark.parametrize("command", _cli_commands())
def test_cli_commands_work(command):
    args = shlex.split(command)[1:]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    got = subprocess.run([sys.executable, "-m", "zynbook.cli", *args], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    if args[0] in ("cir", "run", "source", "devices"):
        assert got.stdout.strip(), f"{command} printed nothing"
    if args[0] == "source":
        lang = args[args.index("--lang") + 1]
        assert "not available" not in got.stdout
        marker = {"cuda": "__global__", "c": "extern \"C\"", "wgsl": "@compute",
                  "msl": "kernel void", "python": "def ", "launch-ir": "launch zyn_k_"}[lang]
        assert marker in got.stdout, got.stdout[:500]


def test_cli_refuses_an_unknown_language():
    got = subprocess.run([sys.executable, "-m", "zynbook.cli", "source", "examples/gelu.zyn",
                          "--lang", "cobol"], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 2 and "cobol" in got.stderr and not got.stdout.strip()


def test_cli_source_asks_for_the_shapes_of_inputs():
    got = subprocess.run([sys.executable, "-m", "zynbook.cli", "source",
                          "examples/inputs/scale.zyn", "--lang", "cuda"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 2 and "--shape x=" in got.stderr


def test_cli_run_binds_shapes_and_dtypes():
    got = subprocess.run([sys.executable, "-m", "zynbook.cli", "run",
                          "examples/inputs/scale.zyn", "--shape", "x=3x5:f64"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert "shape=[3, 5]" in got.stdout and "f64" in got.stdout


def test_cli_binds_weights_from_a_safetensors_file(tmp_path):
    """`--weights model=FILE` runs the spec's transformer block (what scripts/main.sh does)
    and equals the same program with the weights bound as arrays."""
    path = tmp_path / "block.safetensors"
    subprocess.run([sys.executable, "scripts/example_weights.py", str(path)], cwd=REPO,
                   check=True, capture_output=True, timeout=120)
    source = (REPO / "examples" / "transformer_block.zyn").read_text()
    want = np.asarray(zynbook.run(source, model=zynbook.load_weights(path)))
    got = subprocess.run([sys.executable, "-m", "zynbook.cli", "run",
                          "examples/transformer_block.zyn", "--weights", f"model={path}"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "shape=[2, 100, 24]" in got.stdout
    assert want.shape == (2, 100, 24) and np.isfinite(want).all()
    bad = subprocess.run([sys.executable, "-m", "zynbook.cli", "run",
                          "examples/transformer_block.zyn", "--weights",
                          f"model={tmp_path / 'missing.safetensors'}"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "cannot read weights" in bad.stderr
