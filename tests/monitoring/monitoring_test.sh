#!/usr/bin/env bash
# Tests the monitoring kit in deploy/monitoring against a real tensord:
#   1. promtool check rules and promtool test rules (synthetic series);
#   2. the PrometheusRule in deploy/k8s/overlays/monitoring holds the same rules;
#   3. a real tensord (CPU backend only, loopback, kernel-chosen ports) scraped
#      every second by Debian's prometheus, which also loads the rules;
#   4. a few seconds of ghz load: OK Run calls, invalid ones (INVALID_ARGUMENT),
#      ones larger than the memory budget (RESOURCE_EXHAUSTED), v2 ModelInfer;
#   5. every dashboard panel query returns data, and every rule loaded healthy
#      and its expression runs against the live data.
#   monitoring_test.sh TENSORD
# Needs promtool and prometheus (Debian packages) and ghz
# (bench/load/install-ghz.sh: ~/.local/bin/ghz, or $GHZ, or PATH); tensorctl
# is taken from TENSORD's directory (or $TENSORCTL). Without them it fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/scripts/lib.sh"

if [ "$#" -ne 1 ]; then
  echo "usage: $0 TENSORD" >&2
  exit 2
fi
tensord="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tensorctl="${TENSORCTL:-$(dirname "$tensord")/tensorctl}"
monitoring="$root/deploy/monitoring"
rules="$monitoring/tensord.rules.yml"
rules_test="$monitoring/tensord.rules.test.yml"
dashboard="$monitoring/tensord-dashboard.json"
prometheus_rule="$root/deploy/k8s/overlays/monitoring/prometheusrule.yaml"
started=$SECONDS

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

ghz="${GHZ:-$HOME/.local/bin/ghz}"
if [ ! -x "$ghz" ]; then ghz="$(command -v ghz || true)"; fi
[ -n "$ghz" ] || fail "ghz not found; bench/load/install-ghz.sh installs it"
for tool in promtool prometheus python3; do
  command -v "$tool" >/dev/null || fail "$tool not found (apt-get install prometheus)"
done
[ -x "$tensord" ] || fail "$tensord is not an executable"
[ -x "$tensorctl" ] || fail "$tensorctl is not an executable (set TENSORCTL)"

bench_scratch  # $work, and $servers stopped on exit (scripts/lib.sh)

# 1. The rules, statically and on synthetic series.
promtool check rules "$rules" >"$work/check.out" 2>&1 || { cat "$work/check.out" >&2; fail "promtool check rules"; }
promtool test rules "$rules_test" >"$work/test.out" 2>&1 || { cat "$work/test.out" >&2; fail "promtool test rules"; }
alerts="$(grep -c '^ *- alert: ' "$rules")"
# Every alert has a test case (its name as an alertname in the test file).
for alert in $(sed -n 's/^ *- alert: *//p' "$rules"); do
  grep -q "alertname: $alert\$" "$rules_test" || fail "alert $alert has no case in $rules_test"
done

# 2. The Kubernetes PrometheusRule's spec is the rules file's groups, indented.
if ! diff <(sed -n '/^groups:/,$p' "$rules") \
          <(sed -n '/^spec:$/,$p' "$prometheus_rule" | tail -n +2 | sed 's/^  //'); then
  fail "$prometheus_rule differs from $rules (regenerate it: deploy/monitoring/README.md)"
fi

# 3. tensord: CPU only (no OpenCL device needed), ports chosen by the kernel, and
# a 384 KiB memory budget: a 512 KiB request is refused for memory, while the
# loads' small calls always fit. Each holds about 24 KiB (request_cost.h's
# overheads and its parse) until its reactor is done, which may be after its
# client has sent the next: six ghz workers hold at most twelve, 288 KiB. At
# 96 KiB, five overlapping calls were refused under a loaded CI machine.
python3 - "$work/big.json" <<'EOF'
import json, sys
n = 512 * 256  # float32: 512 KiB, more than the budget
json.dump({"name": "monitoring/big_slice", "op": "slice",
           "inputs": {"input": {"dtype": "float32", "sizes": [1, 1, 512, 256], "data": [0] * n}},
           "attrs": {"offsets": [0, 0, 0, 0], "window_sizes": [1, 1, 1, 4], "window_strides": [1, 1, 1, 1]},
           "outputs": [{"sizes": [1, 1, 1, 4]}],
           "expect": {"outputs": [{"dtype": "float32", "sizes": [1, 1, 1, 4], "data": [0] * 4}]}},
          open(sys.argv[1], "w"))
EOF
"$tensorctl" encode "$root/bench/load/cases/slice_small.json" --case load/slice_small >"$work/slice.bin"
"$tensorctl" encode "$work/big.json" --case monitoring/big_slice >"$work/big.bin"

"$tensord" --address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --http_address= \
  --backends=cpu --worker_threads=2 --max_memory_bytes=393216 \
  >"$work/tensord.out" 2>"$work/tensord.log" &
servers+=("$!")
if ! port="$(tensord_port "$work/tensord.out" "${servers[-1]}")" ||
   ! metrics_port="$(tensord_port "$work/tensord.out" "${servers[-1]}" metrics)"; then
  tail -n 20 "$work/tensord.log" >&2
  fail "tensord did not start"
fi

# Prometheus on a free loopback port, scraping tensord every second and
# evaluating the rules every second.
prom_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: tensord
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
EOF
mkdir "$work/tsdb"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn \
  >"$work/prometheus.log" 2>&1 &
servers+=("$!")
prom="http://127.0.0.1:$prom_port"
export PROM="$prom"

# Queries prometheus: promql EXPR prints the JSON answer's status and number of
# results ("success 3"); exits 1 on an HTTP error.
cat >"$work/promql.py" <<'EOF'
import json, os, sys, urllib.parse, urllib.request
def query(expr):
    url = os.environ["PROM"] + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        return json.load(e)
if __name__ == "__main__":
    r = query(sys.argv[1])
    result = r.get("data", {}).get("result", [])
    print(r["status"], len(result), (result[0]["value"][1] if result and r["data"]["resultType"] == "vector" else ""))
EOF
promql() { python3 "$work/promql.py" "$1" 2>/dev/null || echo "error 0"; }

# Ready, and has scraped tensord at least once (up == 1).
# Bounded (30 s) so a stuck Prometheus fails the test instead of hanging it.
deadline=$((SECONDS + 30))
while :; do
  read -r status n value <<<"$(promql 'up{job="tensord"}')"
  if [ "$status" = success ] && [ "$n" = 1 ] && [ "$value" = 1 ]; then break; fi
  if ((SECONDS >= deadline)) || ! kill -0 "${servers[-1]}" 2>/dev/null; then
    tail -n 20 "$work/prometheus.log" >&2
    fail "prometheus did not scrape tensord (up{job=\"tensord\"}: $status $n $value)"
  fi
  sleep 0.1
done

# 4. Load, rate-limited so it spans several scrapes whatever the core count:
# 3 s of OK Run calls, INVALID_ARGUMENT ones and v2 ModelInfer, then 3 s of
# refused ones. Refused alone: a 512 KiB request fills the 384 KiB budget while
# it is received, and an OK call arriving then would be refused too.
load() {  # name expected-code count rps ghz-args...
  local name="$1" code="$2" count="$3" rps="$4"
  shift 4
  "$ghz" --insecure -n "$count" -c 2 --rps "$rps" -O json -o "$work/$name.json" "$@" \
    "127.0.0.1:$port" >"$work/$name.ghz" 2>&1 || true
  grep -q "\"statusCodeDistribution\":{\"$code\":$count}" "$work/$name.json" 2>/dev/null || {
    cat "$work/$name.ghz" "$work/$name.json" >&2 || true
    echo "ghz $name: expected $count $code" >"$work/$name.failed"
  }
}
loaders=()
load ok OK 300 100 --call tensorop.v1.TensorOp/Run -B "$work/slice.bin" &
loaders+=("$!")
load invalid InvalidArgument 30 10 --call tensorop.v1.TensorOp/Run -d '{}' &
loaders+=("$!")
load v2 OK 60 20 --call inference.GRPCInferenceService/ModelInfer \
  -D "$root/bench/load/cases/v2_slice_small.json" &
loaders+=("$!")
for pid in "${loaders[@]}"; do wait "$pid"; done
load refused ResourceExhausted 9 3 --call tensorop.v1.TensorOp/Run -B "$work/big.bin"
if ls "$work"/*.failed >/dev/null 2>&1; then fail "$(cat "$work"/*.failed)"; fi
calls=$((300 + 30 + 9 + 60))

# 5. Prometheus has scraped the final counts; two more scrape intervals give
# every rate window samples after the load and the rules an evaluation on them.
deadline=$((SECONDS + 30))
while :; do
  read -r status n value <<<"$(promql "sum(tensorop_requests_total{job=\"tensord\"})")"
  if [ "$status" = success ] && [ "$n" = 1 ] && [ "$value" = "$calls" ]; then break; fi
  ((SECONDS < deadline)) || fail "prometheus did not scrape $calls calls from tensord (it has: $status $n $value)"
  sleep 0.1
done
sleep 2.2

python3 - "$dashboard" "127.0.0.1:$metrics_port" "$work/promql.py" >"$work/queries.out" <<'EOF' || { cat "$work/queries.out" >&2; fail "dashboard queries or rules"; }
import importlib.util, json, sys, urllib.request, os
dashboard, instance, helper = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("promql", helper)
promql = importlib.util.module_from_spec(spec)
spec.loader.exec_module(promql)

def substitute(expr):
    for var, value in (("$__rate_interval", "1m"), ("${job}", "tensord"), ("$job", "tensord"),
                       ("${instance}", instance), ("$instance", instance)):
        expr = expr.replace(var, value)
    return expr

def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))

failures, queries = [], 0
for panel in panels(json.load(open(dashboard))["panels"]):
    for target in panel.get("targets", []):
        queries += 1
        expr = substitute(target["expr"])
        r = promql.query(expr)
        n = len(r.get("data", {}).get("result", []))
        if r["status"] != "success" or n == 0:
            failures.append("panel %r target %s: %s, %d results: %s %s" % (
                panel["title"], target["refId"], r["status"], n, expr, r.get("error", "")))

with urllib.request.urlopen(os.environ["PROM"] + "/api/v1/rules", timeout=5) as answer:
    groups = json.load(answer)["data"]["groups"]
rules = 0
for group in groups:
    for rule in group["rules"]:
        rules += 1
        if rule["health"] != "ok":
            failures.append("rule %s: health %s %s" % (rule["name"], rule["health"], rule.get("lastError", "")))
        r = promql.query(rule["query"])
        if r["status"] != "success":
            failures.append("rule %s: query %s: %s" % (rule["name"], rule["query"], r.get("error", "")))
print(queries, rules)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
EOF
read -r queries loaded <"$work/queries.out"
[ "$loaded" = "$alerts" ] || fail "prometheus loaded $loaded rules, $rules has $alerts"

echo "monitoring: $alerts rules tested, $queries dashboard queries returned data, $loaded rules evaluated live ($((SECONDS - started)) s)"
