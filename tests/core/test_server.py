"""The REST API's server (memoryproject/server.py): its settings from the environment and the
command line, each request's environ kept apart from the server's environment, the collector
around start-up."""

import gc

import pytest
from granian.wsgi import _callback_wrapper

from memoryproject import collector, server
from memoryproject.server import ServerSettings, environ_isolated, server_settings


def test_two_workers_of_one_thread_on_the_loopback_by_default():
    assert server_settings({}, []) == ServerSettings(
        host="127.0.0.1", port=8000, workers=2, threads=1, preload=True, access_log=False
    )


def test_the_environment_sets_and_the_command_line_overrides():
    environ = {"SERVER_BIND": "0.0.0.0:9000", "SERVER_WORKERS": "4", "SERVER_PRELOAD": "0"}
    settings = server_settings(environ, ["--workers", "3", "--access-log"])
    assert (settings.host, settings.port, settings.workers) == ("0.0.0.0", 9000, 3)
    assert settings.preload is False and settings.access_log is True
    assert server_settings({"SERVER_BIND": "[::1]:8001"}, []).host == "::1"


def test_on_and_off_read_as_the_settings_read_them():
    def preload(value):
        return server_settings({"SERVER_PRELOAD": value}, []).preload

    assert [preload(v) for v in ("", " ", "1", "yes", "On", "2")] == [True] * 6
    assert [preload(v) for v in ("0", "off", "false", "no", "maybe")] == [False] * 5
    assert server_settings({"SERVER_ACCESS_LOG": "maybe"}, []).access_log is False


@pytest.mark.parametrize(
    ("environ", "argv", "message"),
    [
        ({}, ["--bind", "localhost"], "bind: expected HOST:PORT"),
        ({"SERVER_BIND": "127.0.0.1:0"}, [], "port from 1 to 65535"),
        ({"SERVER_WORKERS": "0"}, [], "workers: expected a whole number of at least 1"),
        ({}, ["--threads", "two"], "threads: expected a whole number"),
        ({}, ["--log-level", "loud"], "log level: expected one of"),
    ],
)
def test_a_bad_setting_is_named_with_its_rule(environ, argv, message):
    with pytest.raises(ValueError, match=message):
        server_settings(environ, argv)


def _request_environ(app, inherited, scope):
    """The environ ``app`` receives when granian serves ``scope`` from a process whose
    environment is ``inherited`` (granian's own wrapper, which copies the environment)."""
    seen = {}

    def application(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [])
        return [b""]

    class Proto:
        def response_bytes(self, status, headers, body):
            pass

    with pytest.MonkeyPatch.context() as m:
        m.setattr("os.environ", inherited)
        runner = _callback_wrapper(app(application, dict(inherited)), {})
    runner(Proto(), scope)
    return seen


def test_no_request_sees_the_servers_environment():
    inherited = {
        "SECRET_KEY": "s3cret",
        "DATABASE_URL": "postgres://app:hunter2@db/app",
        "HTTP_PROXY": "http://proxy.internal:3128",
        "HTTP_AUTHORIZATION": "Bearer from-the-environment",
    }
    scope = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/healthz",
        "QUERY_STRING": "",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_AUTHORIZATION": "Bearer the-clients-own",
    }
    environ = _request_environ(environ_isolated, inherited, scope)
    assert "SECRET_KEY" not in environ and "DATABASE_URL" not in environ
    assert "HTTP_PROXY" not in environ  # no header the client did not send
    assert environ["HTTP_AUTHORIZATION"] == "Bearer the-clients-own"
    assert environ["PATH_INFO"] == "/healthz" and environ["SERVER_SOFTWARE"] == "Granian"
    # Without the wrapper, granian hands every request the whole environment.
    bare = _request_environ(lambda app, _inherited: app, inherited, scope)
    assert bare["DATABASE_URL"] == inherited["DATABASE_URL"] and "HTTP_PROXY" in bare


def test_start_up_pauses_the_collector_then_freezes_what_it_built(monkeypatch):
    frozen, during = [], []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(server, "_preload", lambda: during.append(gc.isenabled()))
    monkeypatch.setattr(collector, "_start_up_paused", False)
    gc.enable()
    try:
        server.start_up(ServerSettings())
        assert during == [False]  # the application loaded with the collector off
        assert gc.isenabled() and frozen == [True]  # on again, start-up's objects frozen
    finally:
        gc.enable()
