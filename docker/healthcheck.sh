#!/usr/bin/env bash
# Container health check: exits 0 when ggufd answers GET /health with 200 (ready), 1 otherwise
# (503 while models load, connection refused, timeout). Uses bash's /dev/tcp so the runtime image
# needs no curl. The port is GGUFD_PORT (default 8080): set the port through the environment, not
# with --port, so this check finds it.
set -u
port="${GGUFD_PORT:-8080}"
host=127.0.0.1

exec 3<>"/dev/tcp/${host}/${port}" || exit 1  # its message lands in docker inspect
printf 'GET /health HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$host" "$port" >&3
IFS= read -r -t 5 status_line <&3 || exit 1
exec 3<&-
case "$status_line" in
  "HTTP/1."[01]" 200"*) exit 0 ;;
  *) exit 1 ;;
esac
