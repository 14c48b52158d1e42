/**
 * A file a setting names: its path and how messages name the setting, so the module that reads
 * it reports a missing or empty file exactly as loadConfig reports a broken rule.
 */
import { ConfigError } from '../errors.js';

/** How messages name one setting of one source, and show its value. */
export interface SettingName {
  /** Its own, or CONFIG_FILE for a source of the file. */
  variable: string;
  /** `CONFIG_FILE /etc/sources.yaml line 6: `; empty for a variable. */
  at: string;
  /** `CLIENT_SECRET_FILE`, `sources[0].client_secret_file`, `DATABASE_URL parameter sslrootcert`. */
  key: string;
  /** After `got`, a secret masked. */
  shown: string;
}

export interface SettingFile extends SettingName {
  /** A relative path of a CONFIG_FILE source is already resolved against its folder. */
  file: string;
}

/** `CLIENT_SECRET_FILE must name a readable file (ENOENT); got "/x"`, as loadConfig words a broken rule. */
export function settingError(setting: SettingName, rule: string): ConfigError {
  return new ConfigError(setting.variable, `${setting.at}${setting.key} ${rule}; got ${setting.shown}`);
}

/** The errno code (`ENOENT`), else `unreadable`. */
export function readFailure(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? 'unreadable';
}
