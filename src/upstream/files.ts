/**
 * The API client's files (reference: Authentication): the client secret file (CLIENT_SECRET_FILE)
 * and the TLS files of mutual TLS and a private CA (TLS_CLIENT_CERT_FILE, TLS_CLIENT_KEY_FILE,
 * TLS_CA_FILE). The configuration names them; they are read here, when a client is built and when
 * a command checks them at start, with the messages loadConfig gives a broken setting.
 */
import { readFileSync } from 'node:fs';
import { readFailure, settingError, type SettingFile, type UpstreamConfig } from '../config.js';
import { registerSecret } from '../errors.js';

/** PEM contents (not paths) of the client's TLS files. */
export interface TlsFiles {
  cert?: string;
  key?: string;
  ca?: string;
}

/** What a client needs from its files: the secret (CLIENT_SECRET's, or its file's content now) and the TLS PEMs. */
export interface ClientFiles {
  clientSecret: string;
  tls: TlsFiles;
}

/**
 * The secret in a secret file's text: the text without one trailing newline (`\n` or `\r\n`),
 * which secret files conventionally end with and which is not part of the secret. Never throws.
 */
export function secretFromFileText(text: string): string {
  return text.replace(/\r?\n$/, '');
}

/**
 * Reads the files of one source's client, each once, in the order the settings are listed: the
 * secret file, then the certificate, its key and the CA bundle.
 *
 * @returns the secret (CLIENT_SECRET's value when no file is named) and the TLS files' PEM text.
 * @throws {ConfigError} naming the setting (its variable, or CONFIG_FILE with the line and key
 *   path) for a file that cannot be read, or a secret file that holds nothing; never the secret.
 */
export function readClientFiles(upstream: UpstreamConfig): ClientFiles {
  let clientSecret = upstream.clientSecret;
  if (upstream.clientSecretFile !== undefined) {
    clientSecret = secretFromFileText(readSettingFile(upstream.clientSecretFile));
    if (clientSecret === '') throw settingError(upstream.clientSecretFile, 'must name a file that holds the secret, not an empty file');
    // Masked in every output (src/redact.ts); transient, since a rotated secret replaces it.
    registerSecret(clientSecret, { transient: true });
  }
  // loadConfig requires one of the two: this is a configuration built by hand without either.
  if (clientSecret === undefined) throw new TypeError('UpstreamConfig has neither clientSecret nor clientSecretFile');
  const tls: TlsFiles = {};
  if (upstream.tls.cert !== undefined) tls.cert = readSettingFile(upstream.tls.cert);
  if (upstream.tls.key !== undefined) tls.key = readSettingFile(upstream.tls.key);
  if (upstream.tls.ca !== undefined) tls.ca = readSettingFile(upstream.tls.ca);
  return { clientSecret, tls };
}

function readSettingFile(setting: SettingFile): string {
  try {
    return readFileSync(setting.file, 'utf8');
  } catch (err) {
    throw settingError(setting, `must name a readable file (${readFailure(err)})`);
  }
}
