"""The topology snippet: what it concludes from each matrix, what it prints, its command
line, and on a GPU machine the real ``nvidia-smi topo -m`` against other readings."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import refused

from snippets.core.cli import guarded, snippet_options
from snippets.hardware import topology
from snippets.hardware.topology import (
    SAMPLE,
    SAMPLE_SOURCE,
    Topology,
    guess_generations,
    main,
    parse_topology,
)
from snippets.hardware.topology_legend import NEAREST_FIRST, link_kind

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "topo-samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "topology"
H200 = FIXTURES / "h200_1gpu_1nic_ansi.txt"
CPU_LIST = re.compile(r"N/A|\d+(-\d+)?(,\d+(-\d+)?)*")


def cases() -> list[Path]:
    found = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    paths = [FIXTURES / c["file"] for c in found]
    return paths + sorted(SHARED.glob("*.txt"))  # the real ones, where they are here


def test_main_on_every_matrix_fits_a_note(capsys: pytest.CaptureFixture) -> None:
    for path in cases():
        case = main(file=str(path))
        assert case["gpus"] == len(parse_topology(path.read_text()).gpus)
        printed = capsys.readouterr().out.splitlines()
        assert printed and max(len(line) for line in printed) <= 88, path.name


def test_what_main_concludes() -> None:
    dgx1 = main(file=str(FIXTURES / "dgx1_v100_cube_mesh_soc.txt"))
    assert dgx1["busbw_gbps"] == 50.0  # the NV2 links alone close a ring
    mixed = main(file=str(FIXTURES / "mixed_4gpu_bridged_pairs.txt"))
    assert mixed["tables"]["tp_groups"][0]["groups"] == "0,1 | 2,3"  # bridged pairs
    nearest = [r["nearest NIC"] for r in mixed["tables"]["affinity"]]
    assert nearest == ["mlx5_0", "mlx5_0", "-", "-"]
    h100 = main(file=str(FIXTURES / "h100_nv18_4nic_ansi.txt"))
    nearest = [r["nearest NIC"] for r in h100["tables"]["affinity"]]
    assert nearest[::2] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert guess_generations(parse_topology(SAMPLE)) == (3, 2)
    one = main(file=str(H200))  # a single GPU: affinity, but no ring and no groups
    assert "ring" not in one and one["tables"]["tp_groups"] == []
    assert one["tables"]["affinity"][0]["nearest NIC"] == "mlx5_0"


def test_a_code_the_model_has_no_bandwidth_for(tmp_path: Path) -> None:
    odd = tmp_path / "c2c.txt"
    odd.write_text(
        "\tGPU0\tGPU1\nGPU0\t X \tC2C\nGPU1\tC2C\t X \n\nLegend:\n  C2C  = chip\n"
    )
    out = main(file=str(odd))
    assert "ring" not in out and out["tables"]["pairs"][0]["kind"] == "other"


def test_without_a_file_it_reads_the_machine_then_the_sample() -> None:
    out = main()
    assert out["source"] == SAMPLE_SOURCE and out["ring"][0] == "GPU0"
    assert out["tables"]["tp_groups"][1]["groups"] == "0,1,2,3 | 4,5,6,7"
    if shutil.which("nvidia-smi") is None:
        assert out["machine"] is None
    said = out["excerpts"]["summary"]  # the note's excerpt: machine, sample, rings
    assert said[0].startswith("this machine:") and said[1] == ""
    assert said[-2].lstrip().startswith("best ring: GPU 0 →")
    assert not [line for line in said if "TP=" in line]  # a table in the note


def fake_nvidia_smi(folder: Path, matrix: Path) -> Path:
    """An ``nvidia-smi`` that prints a saved matrix, and one H200 for ``-L``."""
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = topo ] && exec cat "{matrix}"\n'
        'echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"\n'
    )
    script.chmod(0o755)
    return folder


def test_main_reads_nvidia_smi_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_nvidia_smi(tmp_path, H200)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = main()
    assert out["machine"]["source"] == "this machine's `nvidia-smi topo -m`"
    assert out["machine"]["gpus"] == 1 and out["source"] == SAMPLE_SOURCE
    check_machine(1, present=None)  # the GPU test's own checks, on the fake


def test_cli_missing_file_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative name, read from where the user is
    assert refused(["run", "topology", "--file", "missing.txt"], capfd) == (
        "error: cannot read --file missing.txt: No such file or directory"
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--pcie-gen", "6"], "argument --pcie-gen: invalid choice: 6"),
        (["--nvlink-gen", "x"], "expected a whole number, got 'x'"),
        (["--nvlink-gen", "0"], "must be at least 1, got 0"),
        (["--file", "BAD"], "line 2: expected the row for GPU0, got 'nonsense'"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], says: str, tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    bad = tmp_path / "topo.txt"
    bad.write_text("GPU0 GPU1\nnonsense\n")
    argv = [str(bad) if a == "BAD" else a for a in args]

    def command(options: list[str]) -> int:
        def body() -> int:
            main(**snippet_options(topology, options, "topology"))
            return 0

        return guarded(body)

    line = refused(argv, capfd, entry=command)
    assert line.startswith("error:") and says in line


def test_diagram_is_written_as_a_results_part(tmp_path: Path) -> None:
    from snippets import render
    from snippets.core import results as _results

    record = {
        "command": "python -m snippets run topology",
        "output": "ok",
        "result": main(),
        "provenance": _results.provenance("none", 1, device="cpu"),
    }
    render.write(tmp_path, "topology", record)
    assert not (tmp_path / "topology.diagram.md").exists()  # the chart draws it
    rows = [  # the rendered table, row by row, back to cells
        [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in (tmp_path / "topology.tp_groups.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| TP size")
    ]
    data = record["result"]["tables"]["tp_groups"]
    assert [r[0] for r in rows] == [str(d["TP size"]) for d in data] == ["2", "4"]
    for cells, d in zip(rows, data):  # each row partitions the 8 GPUs into groups
        groups = [sorted(map(int, g.split(","))) for g in cells[1].split(" | ")]
        assert sorted(sum(groups, [])) == list(range(8))
        assert {len(g) for g in groups} == {d["TP size"]}
        assert float(cells[2]) == d["slowest link inside (GB/s)"]


def nvidia_smi(*args: str) -> str:
    run = subprocess.run(
        ["nvidia-smi", *args], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, f"nvidia-smi {' '.join(args)}: {run.stderr}"
    return run.stdout


def cpus(text: str) -> set[int]:
    """'0-3,8' → {0, 1, 2, 3, 8}; N/A → nothing."""
    found: set[int] = set()
    for part in text.split(",") if text != "N/A" else []:
        lo, _, hi = part.partition("-")
        found |= set(range(int(lo), int(hi or lo) + 1))
    return found


def check_machine(device_count: int, present: set[int] | None) -> Topology:
    """This machine's ``nvidia-smi topo -m`` against readings that do not come from it:
    ``nvidia-smi -L``, torch's device count, the kernel's list of present CPUs."""
    topo = parse_topology(nvidia_smi("topo", "-m"))
    listed = re.findall(r"^GPU (\d+):", nvidia_smi("-L"), re.M)
    assert [d.name for d in topo.gpus] == [f"GPU{i}" for i in listed]
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # torch sees a subset; nvidia-smi, all
        assert device_count <= len(listed)
    else:
        assert device_count == len(listed)
    g = [topo.index(d.name) for d in topo.gpus]
    for i, j in itertools.combinations(g, 2):  # every pair, a kind the legend knows
        assert link_kind(topo.matrix[i][j]) in NEAREST_FIRST[:5], topo.matrix[i][j]
    if len(g) == 1:
        assert [[topo.matrix[i][j] for j in g] for i in g] == [["X"]]
    for d in topo.gpus:
        assert d.cpu_affinity is not None and CPU_LIST.fullmatch(d.cpu_affinity), d
        assert d.numa_affinity is None or CPU_LIST.fullmatch(d.numa_affinity), d
        if present is not None:
            assert cpus(d.cpu_affinity) <= present, (d.cpu_affinity, present)
    return topo


MISSING = [
    *(["a CUDA GPU"] if not torch.cuda.is_available() else []),
    *(["nvidia-smi on PATH"] if shutil.which("nvidia-smi") is None else []),
]


@pytest.mark.gpu
@pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)}")
def test_this_machines_matrix() -> None:
    kernel = Path("/sys/devices/system/cpu/present")
    present = cpus(kernel.read_text().strip()) if kernel.exists() else None
    topo = check_machine(torch.cuda.device_count(), present)
    out = main()  # what run-all records on this machine
    assert out["machine"]["source"] == "this machine's `nvidia-smi topo -m`"
    assert out["machine"]["gpus"] == len(topo.gpus)
