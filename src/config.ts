/**
 * The configuration, a leaf of plain types: everything else imports it from here. It imports
 * nothing from db/, upstream/ or serve/ (only errors and time), and reads no file a setting names except CONFIG_FILE, which holds settings itself.
 *
 * - src/config/types.ts: the types loadConfig returns, the glossary of every setting's meaning;
 * - src/config/settings.ts: the one table of settings (variable, flag, schema, default, help, secrecy);
 * - src/config/load.ts: loadConfig, the rules across settings and the building of each source;
 * - src/config/sources-file.ts: CONFIG_FILE, the YAML list of sources;
 * - src/config/database.ts: DATABASE_URL's TLS settings, libpq's way;
 * - src/config/setting-file.ts: a file a setting names, and how messages about it name the setting.
 */
export * from './config/types.js';
export { SETTINGS, parseRollupDimensions, type SettingDoc } from './config/settings.js';
export { loadConfig, withTrailingSlash } from './config/load.js';
export {
  SSL_MODES,
  SSL_VARIABLES,
  DEFAULT_SSL_MODE,
  databaseTlsSettings,
  type DatabaseTlsSettings,
  type SslEnvironment,
  type SslMode,
} from './config/database.js';
export { readFailure, settingError, type SettingFile, type SettingName } from './config/setting-file.js';
