"""The ``gateway`` command fixes grpcio's experiments before grpc loads, and only then."""

from __future__ import annotations

import os
import subprocess
import sys

from gateway.cli import grpc_env


def test_sets_the_listener_off_on_a_measured_grpcio_before_grpc_loads() -> None:
    env: dict[str, str] = {}
    assert grpc_env.apply(env, version="1.85.3", loaded=False) == "-event_engine_listener"
    assert env == {"GRPC_EXPERIMENTS": "-event_engine_listener"}


def test_a_users_own_setting_even_empty_is_kept() -> None:
    for mine in ("", "-event_engine_client", "event_engine_listener"):
        env = {"GRPC_EXPERIMENTS": mine}
        assert grpc_env.apply(env, version="1.85.3", loaded=False) is None
        assert env == {"GRPC_EXPERIMENTS": mine}


def test_nothing_is_set_once_grpc_is_loaded() -> None:
    env: dict[str, str] = {}
    assert grpc_env.apply(env, version="1.85.3", loaded=True) is None
    assert env == {}


def test_nothing_is_set_on_a_grpcio_it_was_not_measured_on() -> None:
    for version in ("1.84.0", "1.86.0", "2.85.0", "1", "", "1.x"):
        env: dict[str, str] = {}
        assert grpc_env.apply(env, version=version, loaded=False) is None, version
        assert env == {}
    assert grpc_env.experiments_for(None) is None  # grpcio not installed


def test_importing_the_command_sets_it_before_grpc_is_imported() -> None:
    """The real entry point: ``gateway.cli`` imported first in a fresh interpreter leaves
    ``grpc`` unloaded and the variable set for the installed grpcio (when it is measured)."""
    code = ("import os, sys, gateway.cli; from gateway.cli import grpc_env; "
            "print('grpc' in sys.modules, os.environ.get('GRPC_EXPERIMENTS'), "
            "grpc_env.experiments_for(grpc_env._grpcio_version()))")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    loaded, value, expected = out
    assert loaded == "False"
    assert value == str(expected)
