// The platforms' own Node SDKs, as sign_notices.mjs, verify_simulated.mjs, verify_queries.mjs
// and verify_answers.mjs use them, pinned in package.json beside this file (scripts/test
// installs them with `npm ci --prefix tests/platform_sdks`):
//   - alipay-sdk, Alipay's official SDK: AlipaySdk#checkNotifySign and #checkNotifySignV2 (how a
//     merchant verifies a notice), #checkResponseSign (how its `exec` verifies an OpenAPI
//     answer), and the signing functions of its util.js, which the package does not export by
//     name: `sign` (every OpenAPI request) and `signatureV3` (RSA2 over the bytes given).
//   - wechatpay-axios-plugin: Hash (APIv2 MD5 and HMAC-SHA256 `sign`), Aes (AES-256-ECB of the
//     APIv2 refund `req_info`, AES-256-GCM of the APIv3 resource), Rsa (the APIv3
//     Wechatpay-Signature), Formatter (the APIv3 message signed), Transformer (its APIv2 XML, its
//     request signer and answer verifier) and Decorator (the request signer and answer verifier
//     its APIv3 axios instance runs).
// Not installed: exit 77 (ctest: skipped), except under CI, where that is a failure.

export const SKIP = 77;

async function load() {
  try {
    const wechatpay = (await import("wechatpay-axios-plugin")).default;
    const alipay = await import("alipay-sdk");
    const alipayUtil = await import(new URL("./util.js", import.meta.resolve("alipay-sdk")));
    return { wechatpay, alipay, alipayUtil };
  } catch (error) {
    console.error("the platform SDKs are not installed (npm ci --prefix tests/platform_sdks): " +
                  error.message);
    process.exit(process.env.CI ? 1 : SKIP);
  }
}

const loaded = await load();
export const { Hash, Aes, Rsa, Formatter, Transformer, Decorator } = loaded.wechatpay;
export const { AlipaySdk } = loaded.alipay;
export const alipaySign = loaded.alipayUtil.sign;
export const alipaySignatureV3 = loaded.alipayUtil.signatureV3;

// An AlipaySdk as a merchant configures it to verify notices: `alipayPublicKeyPem` is the
// platform's key. The SDK insists on an app private key, which verification never uses.
export function AlipayVerifier(appId, alipayPublicKeyPem, appPrivateKeyPem) {
  return new AlipaySdk({ appId, privateKey: appPrivateKeyPem, keyType: "PKCS8",
                         alipayPublicKey: alipayPublicKeyPem });
}

// UTF-8 text as GBK bytes. Node decodes GBK (TextDecoder, full ICU) but has no encoder: the
// table is the decoder's, inverted over the two-byte range. ASCII stays one byte.
let gbkTable = null;
export function EncodeGbk(text) {
  if (gbkTable === null) {
    gbkTable = new Map();
    const decoder = new TextDecoder("gbk", { fatal: true });
    for (let lead = 0x81; lead <= 0xfe; lead += 1) {
      for (let trail = 0x40; trail <= 0xfe; trail += 1) {
        if (trail === 0x7f) continue;
        try {
          const char = decoder.decode(Uint8Array.of(lead, trail));
          if (!gbkTable.has(char)) gbkTable.set(char, [lead, trail]);
        } catch {
          // Not a GBK code: nothing to invert.
        }
      }
    }
  }
  const bytes = [];
  for (const char of text) {
    if (char.codePointAt(0) < 0x80) {
      bytes.push(char.codePointAt(0));
    } else if (gbkTable.has(char)) {
      bytes.push(...gbkTable.get(char));
    } else {
      throw new Error(`${char} has no GBK code`);
    }
  }
  return Buffer.from(bytes);
}

// A form body (application/x-www-form-urlencoded) of [name, Buffer value] pairs, every byte
// that is not unreserved percent-encoded, as Alipay writes it (a GBK notice in GBK bytes).
export function EncodeFormBytes(pairs) {
  const unreserved = /[A-Za-z0-9\-._*]/;
  const encode = (bytes) => [...bytes].map((byte) => {
    const char = String.fromCharCode(byte);
    if (byte < 0x80 && unreserved.test(char)) return char;
    if (byte === 0x20) return "+";
    return "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }).join("");
  return Buffer.from(pairs.map(([name, value]) => `${encode(Buffer.from(name))}=${encode(value)}`)
    .join("&"));
}
