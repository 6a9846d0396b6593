# Sourced by the benchmarks that time `lookalike serve`:
#   start_serve BIN DB DIR [FLAGS...]
# starts `BIN serve --db DB --port 0 FLAGS` in the background, its output in
# DIR/serve.out and DIR/serve.err, and returns once it printed its address,
# with $server its pid and $port its port; exits 2 (with the server's
# stderr) if it stops first.
start_serve() {
  _bin=$1 _db=$2 _dir=$3
  shift 3
  "$_bin" serve --db "$_db" --port 0 "$@" >"$_dir/serve.out" 2>"$_dir/serve.err" &
  server=$!
  port=""
  while [ -z "$port" ]; do
    kill -0 "$server" 2>/dev/null || { cat "$_dir/serve.err" >&2; exit 2; }
    # (the file may not exist yet: the server's shell opens it)
    port=$(sed -n 's#.*http://127.0.0.1:\([0-9]*\)/.*#\1#p' "$_dir/serve.out" 2>/dev/null || true)
    [ -n "$port" ] || sleep 0.2  # waiting for the server's address line
  done
}
