"""The deployment's gunicorn settings read from the environment."""

import importlib.util
import socket
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parents[2] / "memoryproject" / "gunicorn_conf.py"


def _load(monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
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
