#!/usr/bin/env bash
# Runs source/sqlserver's integration tests against SQL Server 2022 (with its
# agent, for CDC capture) in Docker. One command, from anywhere in the repo:
#
#   source/sqlserver/integration/run.sh
#
# Needs docker and go. Environment (all optional):
#   CDCSNAP_MSSQL_IMAGE   image (default mcr.microsoft.com/mssql/server:2022-latest)
#   CDCSNAP_MSSQL_PORT    host port (default 14333, bound to 127.0.0.1)
#   CDCSNAP_MSSQL_CONTAINER  use this running container (a CI service
#                         container) instead of starting one; its sa password
#                         comes in CDCSNAP_MSSQL_SA_PASSWORD
#   CDCSNAP_KEEP=1        keep the container afterwards, and write its two DSNs
#                         to .cache/mssql-it.env (mode 600), so the suite
#                         reruns against the kept database:
#                         set -a; . .cache/mssql-it.env; go test ./source/sqlserver/integration/
#   extra arguments go to `go test` (e.g. -run Greek)
# Passwords are generated per run and never printed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
image="${CDCSNAP_MSSQL_IMAGE:-mcr.microsoft.com/mssql/server:2022-latest}"
port="${CDCSNAP_MSSQL_PORT:-14333}"
rand() { head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 16; }
reader_pw="Rd-$(rand)-7y"

if [ -n "${CDCSNAP_MSSQL_CONTAINER:-}" ]; then
  name=$CDCSNAP_MSSQL_CONTAINER
  sa_pw=${CDCSNAP_MSSQL_SA_PASSWORD:?CDCSNAP_MSSQL_SA_PASSWORD must hold the sa password of CDCSNAP_MSSQL_CONTAINER}
  port=${CDCSNAP_MSSQL_PORT:-1433}
  echo "run.sh: using the running container $name on 127.0.0.1:$port" >&2
else
  name="cdcsnap-mssql-it-$$"
  sa_pw="Sa-$(rand)-9x"
  cleanup() {
    if [ "${CDCSNAP_KEEP:-}" = 1 ]; then
      echo "run.sh: keeping container $name (docker rm -f $name)" >&2
    else
      docker rm -f "$name" >/dev/null 2>&1 || true
    fi
  }
  trap cleanup EXIT
  echo "run.sh: starting $image as $name on 127.0.0.1:$port" >&2
  docker run -d --name "$name" \
    -e ACCEPT_EULA=Y -e MSSQL_PID=Developer -e MSSQL_AGENT_ENABLED=true \
    -e MSSQL_SA_PASSWORD="$sa_pw" \
    -p "127.0.0.1:$port:1433" "$image" >/dev/null
fi

sqlcmd=""
for i in $(seq 1 90); do
  for c in /opt/mssql-tools18/bin/sqlcmd /opt/mssql-tools/bin/sqlcmd; do
    if docker exec "$name" test -x "$c" 2>/dev/null; then sqlcmd="$c"; fi
  done
  if [ -n "$sqlcmd" ] && docker exec -e SQLCMDPASSWORD="$sa_pw" "$name" "$sqlcmd" -C -S localhost -U sa -Q "SELECT 1" >/dev/null 2>&1; then
    break
  fi
  sleep 2
  if [ "$i" = 90 ]; then echo "run.sh: SQL Server did not start in 3 minutes" >&2; docker logs "$name" | tail -50 >&2; exit 1; fi
done

# CDC's capture job runs in SQL Server Agent, which starts after the
# engine accepts logins: wait for it, or the first changes never arrive
# (FACTS.md F15).
# Two probes, each in its own batch: the agent's sessions, and its service
# (a DMV a platform may not have).
agent_sessions="IF EXISTS (SELECT 1 FROM sys.dm_exec_sessions WHERE program_name LIKE N'SQLAgent%') PRINT 'agent-running'"
agent_service="IF EXISTS (SELECT 1 FROM sys.dm_server_services WHERE servicename LIKE N'SQL Server Agent%' AND status_desc = N'Running') PRINT 'agent-running'"
for i in $(seq 1 60); do
  if { docker exec -e SQLCMDPASSWORD="$sa_pw" "$name" "$sqlcmd" -C -S localhost -U sa -Q "$agent_sessions" 2>/dev/null
       docker exec -e SQLCMDPASSWORD="$sa_pw" "$name" "$sqlcmd" -C -S localhost -U sa -Q "$agent_service" 2>/dev/null; } | grep -q agent-running; then
    break
  fi
  sleep 2
  if [ "$i" = 60 ]; then echo "run.sh: SQL Server Agent did not start in 2 minutes" >&2; docker logs "$name" | tail -50 >&2; exit 1; fi
done

echo "run.sh: creating the test database" >&2
docker cp "$here/setup.sql" "$name:/tmp/setup.sql"
# -f 65001: setup.sql is UTF-8 and holds non-ASCII names and values; sqlcmd
# reads a file without a byte-order mark in the console's code page otherwise
# (sqlcmd utility, option -f).
docker exec -e SQLCMDPASSWORD="$sa_pw" "$name" "$sqlcmd" -C -b -f 65001 -S localhost -U sa \
  -v READER_PASSWORD="$reader_pw" -i /tmp/setup.sql

enc() { python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1"; }
export CDCSNAP_MSSQL_DSN="sqlserver://sa:$(enc "$sa_pw")@127.0.0.1:$port?database=cdcsnap_it&encrypt=disable"
export CDCSNAP_MSSQL_READER_DSN="sqlserver://cdcsnap_reader:$(enc "$reader_pw")@127.0.0.1:$port?database=cdcsnap_it&encrypt=disable"

cd "$root"
if [ "${CDCSNAP_KEEP:-}" = 1 ]; then
  mkdir -p .cache
  (umask 077; printf 'CDCSNAP_MSSQL_DSN=%q\nCDCSNAP_MSSQL_READER_DSN=%q\n' "$CDCSNAP_MSSQL_DSN" "$CDCSNAP_MSSQL_READER_DSN" >.cache/mssql-it.env)
  echo "run.sh: DSNs of the kept database in .cache/mssql-it.env" >&2
fi
go test -count=1 -v -timeout 25m ./source/sqlserver/integration/ "$@"
