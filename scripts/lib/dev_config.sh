#!/usr/bin/env bash
# Prints a development config (README.md#configuration) with fresh random tokens, secrets and test
# keys for every platform, so that `payledger simulate` works right away, and `query` sections
# that ask the platform simulator scripts/run starts ($PAYLEDGER_SIMULATOR_LISTEN, else
# 127.0.0.1:8090; the first query 20 s after an order's registration). $1 is the folder for the
# key files (.data/, never committed): it writes fresh RSA key pairs under $1/keys/ — the WeChat
# Pay v3 platform key and the Alipay key, whose private halves only `simulate` uses
# (wechat_v3.simulate_private_key, alipay.simulate_private_key), and the Ed25519 key that
# signs checkpoints (audit.signing_key). The database URL comes from
# PAYLEDGER_DATABASE_URL at run time.
set -euo pipefail
DATA_DIR="$(cd "${1:?usage: dev_config.sh DATA_DIR}" && pwd)"
KEY_DIR="$DATA_DIR/keys"
mkdir -p "$KEY_DIR"
chmod 700 "$KEY_DIR"

rand() { openssl rand -hex 16; }

# keypair NAME: $KEY_DIR/NAME_private.pem and NAME_public.pem, RSA 2048.
keypair() {
    local private="$KEY_DIR/$1_private.pem" public="$KEY_DIR/$1_public.pem"
    (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
        -out "$private" 2>/dev/null)
    openssl pkey -in "$private" -pubout -out "$public"
}

keypair wechat_v3_platform
keypair alipay
# The merchant's own keys, which sign what payledger asks the platforms (docs/query.md): the
# WeChat Pay v3 merchant API key and the Alipay app key. `simulate-platform` checks the requests
# with their public halves.
keypair wechat_v3_merchant
keypair alipay_app
# Where `simulate-platform` answers the platforms' query and close APIs (scripts/run starts it).
SIMULATOR="${PAYLEDGER_SIMULATOR_LISTEN:-127.0.0.1:8090}"
# The checkpoint signing key (audit.signing_key, docs/integrity.md#checkpoints): Ed25519.
(umask 077 && openssl genpkey -algorithm ed25519 -out "$KEY_DIR/audit_signing_key.pem")
# A certificate serial as WeChat Pay sends it in Wechatpay-Serial: upper-case hex.
V3_SERIAL="$(openssl rand -hex 20 | tr 'a-f' 'A-F')"
MERCHANT_SERIAL="$(openssl rand -hex 20 | tr 'a-f' 'A-F')"

cat <<JSON
{
  "listen": "127.0.0.1:8080",
  "database_url": "${PAYLEDGER_DATABASE_URL}",
  "tokens": {
    "merchant": ["merchant-$(rand)"],
    "auditor": ["auditor-$(rand)"],
    "admin": ["admin-$(rand)"]
  },
  "generic": {"secret": "generic-$(rand)"},
  "audit": {"signing_key": "$KEY_DIR/audit_signing_key.pem"},
  "wechat_v2": {
    "appid": "wx$(openssl rand -hex 8)",
    "mch_id": "1900000001",
    "api_key": "$(rand)",
    "sign_type": "MD5",
    "query": {"api_base": "http://$SIMULATOR"}
  },
  "wechat_v3": {
    "appid": "wx$(openssl rand -hex 8)",
    "mchid": "1900000002",
    "api_v3_key": "$(rand)",
    "platform_public_keys": {"$V3_SERIAL": "$KEY_DIR/wechat_v3_platform_public.pem"},
    "simulate_private_key": "$KEY_DIR/wechat_v3_platform_private.pem",
    "simulate_serial": "$V3_SERIAL",
    "query": {
      "api_base": "http://$SIMULATOR",
      "merchant_private_key": "$KEY_DIR/wechat_v3_merchant_private.pem",
      "merchant_serial": "$MERCHANT_SERIAL"
    }
  },
  "alipay": {
    "app_id": "2021000000000001",
    "alipay_public_key": "$KEY_DIR/alipay_public.pem",
    "simulate_private_key": "$KEY_DIR/alipay_private.pem",
    "query": {
      "api_base": "http://$SIMULATOR/gateway.do",
      "app_private_key": "$KEY_DIR/alipay_app_private.pem"
    }
  },
  "query": {"first_after_seconds": 20, "schedule_seconds": [20, 60, 300, 1800, 7200, 86400]}
}
JSON
