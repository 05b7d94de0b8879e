"""The deployment's gunicorn settings read from the environment."""

import gc
import importlib.util
import socket
from pathlib import Path

import pytest

from memoryproject import collector

CONF = Path(__file__).resolve().parents[2] / "memoryproject" / "gunicorn_conf.py"


def _load(monkeypatch, *, pause=False, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if not pause:  # the test process's collector stays as it is
        monkeypatch.setattr(collector, "start_up_pause", lambda: None)
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="SO_REUSEPORT is Linux/BSD's")
def test_each_worker_gets_its_own_socket_unless_turned_off(monkeypatch):
    monkeypatch.delenv("GUNICORN_REUSE_PORT", raising=False)
    assert _load(monkeypatch).reuse_port is True
    assert _load(monkeypatch, GUNICORN_REUSE_PORT="0").reuse_port is False
    assert _load(monkeypatch, GUNICORN_REUSE_PORT="1").reuse_port is True


def test_two_single_threaded_gthread_workers_by_default(monkeypatch):
    for name in ("GUNICORN_WORKERS", "GUNICORN_THREADS", "GUNICORN_WORKER_CLASS"):
        monkeypatch.delenv(name, raising=False)
    conf = _load(monkeypatch)
    assert (conf.workers, conf.threads, conf.worker_class) == (2, 1, "gthread")


def test_the_master_starts_with_the_collector_paused_until_it_forks(monkeypatch):
    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    gc.enable()
    try:
        conf = _load(monkeypatch, pause=True, GUNICORN_PRELOAD="0")
        assert not gc.isenabled()  # loading the application, warming its indexes
        conf.when_ready(server=None)  # before the first worker is forked
        assert gc.isenabled() and frozen == [True]
        conf.start_up_pause()  # a reload reads the file again ...
        assert not gc.isenabled()
        conf.on_reload(server=None)  # ... and the new workers are forked after on_reload
        assert gc.isenabled() and frozen == [True, True]
    finally:
        gc.enable()


def test_no_control_socket_unless_a_path_is_given(monkeypatch):
    monkeypatch.delenv("GUNICORN_CONTROL_SOCKET", raising=False)
    conf = _load(monkeypatch)
    assert conf.control_socket_disable is True and not hasattr(conf, "control_socket")
    conf = _load(monkeypatch, GUNICORN_CONTROL_SOCKET=" /run/memory/a.ctl ")
    assert (conf.control_socket_disable, conf.control_socket) == (False, "/run/memory/a.ctl")
