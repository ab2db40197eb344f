# tests/sh/lib/cluster.sh - what the tests of the shared tier with real Redis
# processes add to tests/sh/lib.sh (sourced by tests/sh/cluster_*.sh, never
# run alone): the skip when Redis, curl or NVRTC is missing, and servers,
# requests and answers of the tier tests.
#
# The sourcing test sets NAME (its file name, for messages) first; after
# it, besides lib.sh's TMP, PIDS, ok/bad/check/has: free_port, until_ok,
# server, body, post, key, cached and finish.

. tests/sh/lib.sh
tl_init "$NAME"
tl_need curl redis-server redis-cli python3
tl_need_nvrtc "the server cannot compile"

free_port() { tl_free_port; }
until_ok() { tl_until "$@"; }
# server NAME FLAG...: tl_server with one worker and no access log; sets
# PORT and LAST (its pid)
server() {
  _name=$1
  shift
  tl_server "$_name" --workers 1 --log-format off "$@"
  LAST=$PID
}
# body NAME: a compile request (tilus_add_one renamed NAME, for sm_80) in $TMP/NAME.req
body() {
  python3 -c "import json,sys; p=json.load(open('examples/tilus_add_one.json')); p['name']=sys.argv[1]; print(json.dumps({'program': p, 'targets': ['sm_80']}))" "$1" >"$TMP/$1.req"
}
# post PORT NAME: compiles NAME; prints the HTTP status, the answer in $TMP/NAME.json
post() {
  curl -s -o "$TMP/$2.json" -w '%{http_code}' -XPOST -H 'Content-Type: application/json' \
    --data-binary "@$TMP/$2.req" "http://127.0.0.1:$1/v1/compile"
}
# key NAME, cached NAME: the build key and "cached" of NAME's answer
key() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['key'])" "$TMP/$1.json"; }
cached() { python3 -c "import json,sys; print(str(json.load(open(sys.argv[1]))['results'][0]['cached']).lower())" "$TMP/$1.json"; }
# the end of every test: the counts, and the exit status
finish() { tl_done; }
