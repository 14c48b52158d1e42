/**
 * The API client's files (reference: Authentication): CLIENT_SECRET_FILE and the TLS files. The
 * configuration names them; they are read here, with the messages loadConfig gives a broken setting.
 */
import { readFileSync } from 'node:fs';
import { readFailure, settingError, type SettingFile, type UpstreamConfig } from '../config.js';
import { registerSecret } from '../errors.js';

/** PEM contents, not paths. */
export interface TlsFiles {
  cert?: string;
  key?: string;
  ca?: string;
}

export interface ClientFiles {
  clientSecret: string;
  tls: TlsFiles;
}

/** The text without one trailing newline, which secret files conventionally end with. */
export function secretFromFileText(text: string): string {
  return text.replace(/\r?\n$/, '');
}

/**
 * Reads one client's files, each once: the secret file, the certificate, its key, the CA bundle.
 *
 * @throws {ConfigError} naming the setting, for an unreadable file or an empty secret file.
 */
export function readClientFiles(upstream: UpstreamConfig): ClientFiles {
  let clientSecret = upstream.clientSecret;
  if (upstream.clientSecretFile !== undefined) {
    clientSecret = secretFromFileText(readSettingFile(upstream.clientSecretFile));
    if (clientSecret === '') throw settingError(upstream.clientSecretFile, 'must name a file that holds the secret, not an empty file');
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
