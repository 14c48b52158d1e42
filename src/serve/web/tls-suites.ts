/** exporter-toolkit's TLS parameters in Node's terms; see docs/design/http-hardening.md, The web configuration. */
import { DEFAULT_CIPHERS } from 'node:tls';

/** Go's TLS 1.2 suites (`tls.CipherSuites()`, older ChaCha20 spellings too) → OpenSSL's names. */
export const TLS12_CIPHER_SUITES: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: 'ECDHE-ECDSA-AES128-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: 'ECDHE-ECDSA-AES256-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: 'ECDHE-RSA-AES128-SHA',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: 'ECDHE-RSA-AES256-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: 'ECDHE-ECDSA-CHACHA20-POLY1305',
};

/** Accepted by name, but Go always enables all three. */
export const TLS13_CIPHER_SUITES: ReadonlySet<string> = new Set(['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']);

/** Without `cipher_suites`: forward-secret AEAD suites only, in Go's order (Node's default has RSA key exchange). */
export const DEFAULT_TLS12_CIPHER_SUITES: readonly string[] = [
  'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
  'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
];

/** Go's tls.CurveID names → Node's `ecdhCurve` names. */
export const CURVES: Readonly<Record<string, string>> = { X25519: 'X25519', CurveP256: 'prime256v1', CurveP384: 'secp384r1', CurveP521: 'secp521r1' };

/** cipher_suites (validated Go names) as Node's `ciphers`: the TLS 1.3 suites first, then the TLS 1.2 ones given. */
export function cipherList(names: readonly string[] = DEFAULT_TLS12_CIPHER_SUITES): string {
  const tls13 = DEFAULT_CIPHERS.split(':').filter((c) => c.startsWith('TLS_'));
  const tls12 = [...new Set(names.filter((n) => !TLS13_CIPHER_SUITES.has(n)).map((n) => TLS12_CIPHER_SUITES[n]!))];
  return [...tls13, ...tls12].join(':');
}

/** Why this runtime cannot serve a TLS version (TLS10, TLS11: OpenSSL 3 refuses them), or undefined. */
export function unservableTlsVersion(name: string): string | undefined {
  if (name !== 'TLS10' && name !== 'TLS11') return undefined;
  return `${name} cannot be served here: Node ${process.version} with OpenSSL ${process.versions.openssl} refuses TLS 1.0 and 1.1 handshakes; use TLS12 or TLS13`;
}
