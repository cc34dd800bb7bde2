"""Which Chromium `serve --launch`, `app` and `eval` launch: `$CHROMIUM` first, then Debian's binary, then the usual
names on `PATH`, then the usual macOS and Windows install paths; none at all is an error that names Chromium and
says how to install it. Checked on folders of fake executables (the search is pure logic over the file system)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from runtime.browser import INSTALLED, ON_PATH, find_chromium
from runtime.startup import ChromiumUnavailable

pytestmark = pytest.mark.req("cli:chromium-discovery")

Finder = Callable[..., str]


def executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def check_the_search_order(find: Finder, tmp_path: Path) -> None:
    """Each place is found when it is the only one, and an earlier place wins over a later one."""
    bin_dir, other = tmp_path / "bin", tmp_path / "other"
    for name in ON_PATH:
        found = executable(other / name, name)
        try:
            got: str | None = find({"PATH": str(other / name)}, first=(), installed=())
        except ChromiumUnavailable:
            got = None
        assert got == str(found), f"{name} on PATH not found"
    executable(bin_dir, "google-chrome")
    chromium = executable(bin_dir, "chromium-browser")
    path = os.pathsep.join([str(bin_dir), str(other)])
    assert find({"PATH": path}, first=(), installed=()) == str(chromium), "chromium-browser comes before google-chrome"
    mac = executable(tmp_path / "Applications" / "Chromium.app" / "Contents" / "MacOS", "Chromium")
    assert find({"PATH": ""}, first=(), installed=(str(mac),)) == str(mac), "an install path is not found"
    assert find({"PATH": str(bin_dir)}, first=(), installed=(str(mac),)) == str(chromium), "PATH comes first"
    debian = executable(tmp_path / "usr" / "lib" / "chromium", "chromium")
    assert find({"PATH": str(bin_dir)}, first=(str(debian),), installed=()) == str(debian), "Debian's comes first"
    explicit = executable(tmp_path / "mine", "my-chrome")
    assert find({"CHROMIUM": str(explicit), "PATH": str(bin_dir)}, first=(str(debian),)) == str(explicit)


def test_chromium_is_found_by_chromium_then_debian_then_path_then_install_paths(tmp_path: Path) -> None:
    check_the_search_order(find_chromium, tmp_path)


def test_the_install_paths_are_the_usual_macos_and_windows_ones() -> None:
    assert "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" in INSTALLED
    assert "/Applications/Chromium.app/Contents/MacOS/Chromium" in INSTALLED
    assert r"C:\Program Files\Google\Chrome\Application\chrome.exe" in INSTALLED
    assert ON_PATH == ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"PATH": ""}, "Chromium not found"),
        ({"PATH": "", "CHROMIUM": "/nonexistent/chromium"}, "CHROMIUM=/nonexistent/chromium is not an executable"),
    ],
)
def test_no_chromium_is_an_error_that_names_it_and_says_how_to_install_it(environ: dict[str, str], says: str) -> None:
    with pytest.raises(ChromiumUnavailable) as missing:
        find_chromium(environ, first=(), installed=())
    assert says in missing.value.what
    assert "install Chromium" in missing.value.todo
    assert "apt-get install chromium" in missing.value.todo
    assert "CHROMIUM" in missing.value.todo
    assert missing.value.status == 3


def debian_only(environ: dict[str, str] | None = None, first: Sequence[str] = (), installed: Sequence[str] = ()) -> str:
    """The search of before: `$CHROMIUM`, else the Debian paths (`first`, here), and nothing else."""
    env = os.environ if environ is None else environ
    found = env.get("CHROMIUM") or next((c for c in first if os.access(c, os.X_OK)), None)
    if found is None:
        raise ChromiumUnavailable("Chromium not found", "install Debian's chromium")
    return found


@pytest.mark.negative_control
def test_the_order_check_catches_a_search_of_debian_paths_only(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="on PATH not found"):
        check_the_search_order(debian_only, tmp_path)
