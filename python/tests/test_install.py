"""The wheel as installed: coordis-server came with it, into this
interpreter's scripts directory, and runs with no Rust toolchain around."""

import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata, resources

import pytest

import coordis

pytestmark = pytest.mark.coordis_only


@pytest.mark.skipif(os.environ.get("COORDIS_PACKAGE_TEST") != "1", reason="only run.sh's fresh venv is checked")
def test_the_binary_is_the_wheels_and_no_toolchain_is_on_path():
    assert os.environ.get(coordis.BINARY_ENV) is None
    assert shutil.which("cargo") is None and shutil.which("rustc") is None, os.environ["PATH"]
    binary = coordis.find_binary()
    assert os.path.dirname(binary) == sysconfig.get_path("scripts"), binary
    assert os.path.realpath(binary).startswith(os.path.realpath(sys.prefix))
    files = [str(f) for f in metadata.files("coordis") or []]
    assert any(f.endswith("bin/coordis-server") for f in files), files


def test_the_binary_answers_version_as_redis_server_does():
    out = subprocess.run([coordis.find_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("Redis server v=7.0.15"), out


def test_the_package_is_typed_and_registers_the_plugin():
    assert resources.files("coordis").joinpath("py.typed").is_file()
    plugins = [e for e in metadata.entry_points(group="pytest11") if e.name == "coordis"]
    assert [e.value for e in plugins] == ["coordis.pytest_plugin"]
