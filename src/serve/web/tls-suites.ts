/**
 * The TLS parameters of `serve`'s web configuration (WEB_CONFIG_FILE, exporter-toolkit's format)
 * in Node's terms: Go's cipher suite and curve names as OpenSSL's, the default TLS 1.2 suites, and
 * which TLS versions this runtime can serve.
 */
import { DEFAULT_CIPHERS } from 'node:tls';

/**
 * Go's names of the TLS 1.2 cipher suites exporter-toolkit accepts (Go's `tls.CipherSuites()`),
 * with OpenSSL's name of each. Go's older spellings of the ChaCha20 suites are accepted too.
 */
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

/** TLS 1.3 suites: Go (and so exporter-toolkit) accepts their names but always enables all three. */
export const TLS13_CIPHER_SUITES: ReadonlySet<string> = new Set(['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']);

/**
 * The TLS 1.2 suites offered when `cipher_suites` is not set: forward-secret (ECDHE) with an AEAD
 * cipher (AES-GCM, ChaCha20-Poly1305) only, Go's preference order. Node's own default would also
 * offer RSA key exchange (`AES128-GCM-SHA256`: no forward secrecy), DHE and CBC suites.
 */
export const DEFAULT_TLS12_CIPHER_SUITES: readonly string[] = [
  'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256',
  'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256',
];

/** exporter-toolkit's curve names (Go's tls.CurveID) and Node's `ecdhCurve` name of each. */
export const CURVES: Readonly<Record<string, string>> = { X25519: 'X25519', CurveP256: 'prime256v1', CurveP384: 'secp384r1', CurveP521: 'secp521r1' };

/**
 * exporter-toolkit's cipher_suites as an OpenSSL cipher list (Node's `ciphers` option): Node's
 * default TLS 1.3 suites first, since Go enables every TLS 1.3 suite whatever cipher_suites says,
 * then the TLS 1.2 suites in the order given.
 *
 * @param names Go's suite names, already validated against {@link TLS12_CIPHER_SUITES} and
 *   {@link TLS13_CIPHER_SUITES}; undefined (cipher_suites unset) for {@link DEFAULT_TLS12_CIPHER_SUITES}.
 */
export function cipherList(names: readonly string[] = DEFAULT_TLS12_CIPHER_SUITES): string {
  const tls13 = DEFAULT_CIPHERS.split(':').filter((c) => c.startsWith('TLS_'));
  const tls12 = [...new Set(names.filter((n) => !TLS13_CIPHER_SUITES.has(n)).map((n) => TLS12_CIPHER_SUITES[n]!))];
  return [...tls13, ...tls12].join(':');
}

/**
 * Why this runtime cannot serve a TLS version of exporter-toolkit's names, or undefined when it
 * can. TLS 1.0 and 1.1 cannot be served: Node's OpenSSL 3 refuses their handshakes at its default
 * security level (1 in Node 20, 2 from Node 24.5; they need `@SECLEVEL=0`: on Node 20 the handshake
 * fails with "no suitable signature algorithm"), and none of the
 * default suites exists before TLS 1.2. A server accepting `min_version: TLS10` would start and
 * then fail every TLS 1.0/1.1 handshake.
 */
export function unservableTlsVersion(name: string): string | undefined {
  if (name !== 'TLS10' && name !== 'TLS11') return undefined;
  return `${name} cannot be served here: Node ${process.version} with OpenSSL ${process.versions.openssl} refuses TLS 1.0 and 1.1 handshakes; use TLS12 or TLS13`;
}
