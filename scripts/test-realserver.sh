#!/usr/bin/env bash
# The real-server test tier (tests/realserver): OpenAIJudge against llama-cpp-python's OpenAI-compatible
# server running Gemma 3 270M on 127.0.0.1 (docs/llm-judge.md). Installs the `realserver` extra into .venv,
# then runs `pytest -m realserver tests/realserver`.
#
#   --if-cached  run only when llama-cpp-python is installed already or its compiled wheel is in pip's
#                wheel cache (then the install takes seconds); otherwise say why and exit 0. .ci/run uses
#                this: compiling llama-cpp-python takes about 5 minutes on 2 idle cores (53 min 44 s
#                measured under load 3-9; docs/llm-judge.md).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
if [ "${1:-}" = "--if-cached" ]; then
  if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null \
    && ! .venv/bin/python -m pip cache list 'llama_cpp_python' 2>/dev/null | grep -q "llama_cpp_python-0.3.36-"; then
    echo "realserver tier skipped: llama-cpp-python is neither installed nor in pip's wheel cache" \
      "(compiling it takes about 5 minutes on 2 idle cores); run scripts/test-realserver.sh to build and run it"
    exit 0
  fi
fi
started=$(date +%s)
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,realserver]'
echo "realserver extra installed in $(( $(date +%s) - started )) s"
exec .venv/bin/python -m pytest -m realserver tests/realserver -q
