"""RayBackend's errors before any rollout runs: one clear message naming the fix.

No cluster is started here: these are the cases where there is none to reach.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ray_support import free_port

from osmosis_rollout.backend.ray import RayBackend
from osmosis_rollout.errors import EntrypointError, MissingExtraError, RayClusterError


def test_no_cluster_at_the_address_names_the_address_and_how_to_start_one(
    rollout_dir: Path,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    backend = RayBackend(str(rollout_dir / "main.py"), address=address)
    with pytest.raises(RayClusterError) as error:
        backend.start()
    assert f"no Ray cluster at '{address}'" in str(error.value)
    assert "ray start --head" in str(error.value)


def test_auto_with_a_stale_cluster_marker_names_where_it_looked(
    rollout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(dead)
    with pytest.raises(RayClusterError, match=f"'auto' resolved to '{dead}', but no Ray cluster"):
        RayBackend(str(rollout_dir / "main.py"), address="auto").start()


def test_auto_with_no_cluster_at_all_says_so(
    rollout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(RayClusterError, match="no Ray cluster for address 'auto'"):
        RayBackend(str(rollout_dir / "main.py"), address="auto").start()


def test_without_ray_the_error_carries_the_install_command(
    rollout_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an absent package looks like to import
    with pytest.raises(MissingExtraError, match=r'pip install "pytest-osmosis\[ray\]"'):
        RayBackend(str(rollout_dir / "main.py"), address="auto", actors=1).start()


def test_a_missing_entrypoint_fails_before_connecting(tmp_path: Path) -> None:
    with pytest.raises(EntrypointError, match="entrypoint file not found"):
        RayBackend(str(tmp_path / "nope.py"))


def test_an_entrypoint_outside_the_working_dir_is_refused(
    rollout_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(EntrypointError, match="is not inside working_dir"):
        RayBackend(str(rollout_dir / "main.py"), working_dir=tmp_path)


@pytest.mark.parametrize(
    ("option", "value"),
    [("actors", 0), ("max_concurrent", 0), ("num_cpus", -1), ("max_queue_depth", -1)],
)
def test_bad_pool_sizes_are_rejected(rollout_dir: Path, option: str, value: float) -> None:
    with pytest.raises(ValueError, match=option):
        RayBackend(str(rollout_dir / "main.py"), **{option: value})  # type: ignore[arg-type]


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "osmosis_rollout.cli", "serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_with_no_cluster_at_the_address_exits_2_naming_it(rollout_dir: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    done = _serve("main.py", "--backend", "ray", "--ray-address", address, cwd=rollout_dir)
    assert done.returncode == 2, done.stderr
    assert f"osmosis-rollout serve: error: no Ray cluster at '{address}'" in done.stderr


def test_serve_refuses_ray_options_without_the_ray_backend(rollout_dir: Path) -> None:
    done = _serve("main.py", "--ray-actors", "2", cwd=rollout_dir)
    assert done.returncode == 2
    assert "--ray-address and --ray-actors need --backend ray" in done.stderr
