#!/bin/sh
# A render loop in plain shell: one progress frame per rendered frame, then
# done. With socat, the frames go over one connection as the exact bytes of
# the protocol (JSON + form feed); without it, through `mcp-progress publish`.
#
#   mcp-progress run -- sh examples/render.sh 24
#
# The printf form suits tokens without " or \ (the tokens run and the relay
# make are safe); `mcp-progress publish` takes any token.
set -eu
frames=${1:-24}
delay=${RENDER_DELAY:-0.1}
token=${MCP_PROGRESS_TOKEN:?set MCP_PROGRESS_TOKEN, or run me with: mcp-progress run -- sh render.sh}
socket=${MCP_PROGRESS_SOCKET:-}
publish=${MCP_PROGRESS_BIN:-mcp-progress}

if command -v socat >/dev/null 2>&1 && [ -n "$socket" ]; then
  {
    i=1
    while [ "$i" -le "$frames" ]; do
      sleep "$delay" # render frame $i here
      printf '{"type":"progress","data":{"v":1,"progressToken":"%s","progress":%d,"total":%d,"message":"frame %d"}}\f' \
        "$token" "$i" "$frames" "$i"
      i=$((i + 1))
    done
    printf '{"type":"done","data":{"v":1,"progressToken":"%s","status":"ok","seq":1}}\f' "$token"
  } | socat -t 2 - UNIX-CONNECT:"$socket" | tr '\f' '\n' >&2
else
  i=1
  while [ "$i" -le "$frames" ]; do
    sleep "$delay" # render frame $i here
    $publish publish --progress "$i" --total "$frames" --message "frame $i" || true
    i=$((i + 1))
  done
  $publish publish --done || true
fi
