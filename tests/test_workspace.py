"""Workspace layout: root discovery, state folder, output folders, atomic writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kernelstitch.core.runstore import RunStore
from kernelstitch.core.workspace import (
    Workspace,
    find_workspace_root,
    module_output_path,
    write_text_atomic,
)


@pytest.mark.parametrize("marker", [".git", "pyproject.toml", "setup.py", ".kernelstitch"])
def test_root_is_the_nearest_marked_ancestor(tmp_path, marker):
    project = tmp_path / "project"
    source = project / "src" / "models" / "mlp.py"
    source.parent.mkdir(parents=True)
    source.write_text("")
    marked = project / marker
    marked.mkdir() if marker.startswith(".") else marked.write_text("")
    assert find_workspace_root(source) == project.resolve()
    assert find_workspace_root(source.parent) == project.resolve()


def test_nearest_marker_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    inner = tmp_path / "sub"
    inner.mkdir()
    (inner / "setup.py").write_text("")
    assert find_workspace_root(inner / "x.py") == inner.resolve()


def test_the_editors_folder_bounds_the_search(tmp_path):
    """A .kernelstitch a CLI run left above the folder the user opened (their home, /tmp) does
    not take the editor's generated files; a marker inside the folder still wins."""
    from kernelstitch.server.layout import workspace_root

    (tmp_path / ".kernelstitch").mkdir()
    opened = tmp_path / "workspace"
    source = opened / "models" / "model.py"
    source.parent.mkdir(parents=True)
    source.write_text("")
    assert find_workspace_root(source) == tmp_path.resolve()  # the CLI's rule alone
    assert workspace_root(source, [opened]) == opened.resolve()
    assert workspace_root(source, [tmp_path / "elsewhere", opened]) == opened.resolve()
    assert workspace_root(source, []) == tmp_path.resolve()
    (source.parent / "pyproject.toml").write_text("")
    assert workspace_root(source, [opened]) == source.parent.resolve()


def test_a_repository_above_the_opened_folder_is_still_the_root_as_for_the_cli(tmp_path):
    from kernelstitch.server.layout import workspace_root

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    opened = repo / "models"
    source = opened / "m.py"
    opened.mkdir()
    source.write_text("")
    assert workspace_root(source, [opened]) == find_workspace_root(source) == repo.resolve()


def test_a_file_reached_through_a_symlink_out_of_the_folder_belongs_to_the_folder(tmp_path):
    from kernelstitch.server.layout import workspace_root

    (tmp_path / ".kernelstitch").mkdir()  # stray, above everything
    outside = tmp_path / "elsewhere" / "lib"
    outside.mkdir(parents=True)
    (outside / "x.py").write_text("")
    opened = tmp_path / "home" / "ws"
    opened.mkdir(parents=True)
    (opened / "lib").symlink_to(outside, target_is_directory=True)
    assert workspace_root(opened / "lib" / "x.py", [opened]) == opened.resolve()


def test_root_defaults_to_the_file_folder(tmp_path, monkeypatch):
    from kernelstitch.core import workspace

    # tmp_path may sit under a folder with a marker; look only at this tree.
    monkeypatch.setattr(workspace, "ROOT_MARKERS", ("no-such-marker-here",))
    source = tmp_path / "loose" / "m.py"
    source.parent.mkdir()
    source.write_text("")
    assert find_workspace_root(source) == source.parent.resolve()


def test_state_dir_is_created_and_git_ignored(tmp_path):
    ws = Workspace(tmp_path)
    assert not (tmp_path / ".kernelstitch").exists()  # nothing until needed
    state = ws.state_dir
    assert state == tmp_path.resolve() / ".kernelstitch" and state.is_dir()
    lines = (state / ".gitignore").read_text().splitlines()
    assert "*" in lines


def test_output_dir_layout(tmp_path):
    ws = Workspace(tmp_path)
    source = tmp_path / "src" / "models" / "mlp.py"
    out = ws.output_dir(source, "Model")
    assert out == tmp_path.resolve() / ".kernelstitch" / "src__models__mlp" / "Model"
    assert out.is_dir()
    assert ws.output_dir("src/models/mlp.py", "Model") == out  # relative to the root
    assert ws.output_dir(source, "Other") != out
    assert (tmp_path / ".kernelstitch" / ".gitignore").is_file()


def test_module_output_path_creates_nothing(tmp_path):
    path = module_output_path(tmp_path, tmp_path / "pkg" / "mlp.py", "Model")
    assert path == tmp_path.resolve() / ".kernelstitch" / "pkg__mlp" / "Model"
    assert not (tmp_path / ".kernelstitch").exists()
    assert Workspace(tmp_path).output_dir(tmp_path / "pkg" / "mlp.py", "Model") == path


def test_output_dir_outside_the_root_is_hash_prefixed(tmp_path):
    ws = Workspace(tmp_path / "project")
    elsewhere_a = tmp_path / "a" / "mlp.py"
    elsewhere_b = tmp_path / "b" / "mlp.py"
    out_a = ws.output_dir(elsewhere_a, "Model")
    out_b = ws.output_dir(elsewhere_b, "Model")
    assert out_a.parent.parent == ws.state_dir
    assert out_a.parent.name.endswith("__mlp") and out_a != out_b
    assert ws.output_dir(elsewhere_a, "Model") == out_a  # stable


@pytest.mark.parametrize("module", ["../escape", "a/b", ""])
def test_output_dir_rejects_non_class_names(tmp_path, module):
    with pytest.raises(ValueError, match="class name"):
        Workspace(tmp_path).output_dir(tmp_path / "m.py", module)


def test_runstore_lives_in_the_state_dir(tmp_path):
    ws = Workspace(tmp_path)
    store = ws.runstore()
    assert isinstance(store, RunStore)
    assert store.path == ws.state_dir / "runs.sqlite"
    run_id = store.start_run("generate", str(tmp_path / "m.py"), "Model", {})
    assert Workspace(tmp_path).runstore().get_run(run_id) is not None


def test_write_text_atomic_replaces_and_keeps_mode(tmp_path):
    target = tmp_path / "deep" / "report.md"
    write_text_atomic(target, "first")
    assert target.read_text() == "first"
    os.chmod(target, 0o640)
    write_text_atomic(target, "second ünïcode\n")
    assert target.read_text(encoding="utf-8") == "second ünïcode\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.md"]  # no temp left


def test_write_text_atomic_never_leaves_half_a_file(tmp_path):
    target = tmp_path / "model_new.py"
    target.write_text("the user's previous version")

    with pytest.raises(TypeError):
        write_text_atomic(target, 12345)  # type: ignore[arg-type]  # fails mid-write
    assert target.read_text() == "the user's previous version"
    assert [p.name for p in tmp_path.iterdir()] == ["model_new.py"]


def test_workspace_method_writes_too(tmp_path):
    ws = Workspace(tmp_path)
    path = ws.write_text_atomic(Path(tmp_path) / "x.txt", "hello")
    assert path.read_text() == "hello"
