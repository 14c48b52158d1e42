/**
 * A file a setting names (CLIENT_SECRET_FILE, TLS_CA_FILE, PGSSLROOTCERT, …): the configuration
 * keeps its path and how messages name the setting, so that the module that reads the file reports
 * a missing or empty one exactly as loadConfig reports a broken rule of the setting.
 */
import { ConfigError } from '../errors.js';

/** How messages name one setting of one source, and show its value. */
export interface SettingName {
  /** The variable a {@link ConfigError} about the setting names: its own, or CONFIG_FILE for a source of the file. */
  variable: string;
  /** Where the setting is written, the start of a message: `CONFIG_FILE /etc/sources.yaml line 6: `; empty for a variable. */
  at: string;
  /** How messages name the setting: `CLIENT_SECRET_FILE`, `sources[0].client_secret_file`, `DATABASE_URL parameter sslrootcert`. */
  key: string;
  /** The value as messages show it after `got` (`"/run/secrets/production"`; a secret masked). */
  shown: string;
}

/** A file named by a setting, not read: its path and how messages name the setting. */
export interface SettingFile extends SettingName {
  /** The path; a relative path of a CONFIG_FILE source is already resolved against the file's folder. */
  file: string;
}

/**
 * The error for a setting that breaks `rule`, worded as loadConfig words every broken rule:
 * `CLIENT_SECRET_FILE must name a readable file (ENOENT); got "/x"`, or with CONFIG_FILE's
 * location and key path for a source of the file.
 */
export function settingError(setting: SettingName, rule: string): ConfigError {
  return new ConfigError(setting.variable, `${setting.at}${setting.key} ${rule}; got ${setting.shown}`);
}

/** The reason a read failed, for messages: the errno code (`ENOENT`, `EACCES`), else `unreadable`. */
export function readFailure(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? 'unreadable';
}
