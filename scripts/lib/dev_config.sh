#!/usr/bin/env bash
# Prints a development config (SPEC §9) with fresh random tokens and secrets. $1 is the
# folder for any key files. The database URL comes from PAYLEDGER_DATABASE_URL at run time.
set -euo pipefail
rand() { openssl rand -hex 16; }
cat <<JSON
{
  "listen": "127.0.0.1:8080",
  "database_url": "${PAYLEDGER_DATABASE_URL}",
  "tokens": {
    "merchant": ["merchant-$(rand)"],
    "auditor": ["auditor-$(rand)"],
    "admin": ["admin-$(rand)"]
  },
  "generic": {"secret": "generic-$(rand)"}
}
JSON
