#!/usr/bin/env bash
# `nnlens completion bash`: the script parses, and completes a subcommand, a
# subcommand's option, `help`'s argument and a file name.   completion_check.sh NNLENS_TOOL
set -euo pipefail
tool=$1
script=$("$tool" completion bash)
bash -n <<<"$script"
source <(printf '%s\n' "$script")
expect() {  # expect WANT WORD...: completing the last word gives exactly WANT
  local want=$1; shift
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  _nnlens
  if [ "${COMPREPLY[*]}" != "$want" ]; then
    echo "completion of '${COMP_WORDS[*]}': got '${COMPREPLY[*]}', want '$want'"; exit 1
  fi
}
expect exact-line nnlens exa
expect --profile nnlens slice --pro
expect "--precision" nnlens exact-line --prec
expect semslice nnlens help sems
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; touch "$dir/model_a.onnx"
expect "$dir/model_a.onnx" nnlens info "$dir/model_a"
echo completion-ok
