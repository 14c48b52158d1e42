/**
 * The configuration, a leaf of plain types that everything else imports from here. It imports only
 * errors and time, and reads no file a setting names but CONFIG_FILE. Inside config/: types.ts
 * (what loadConfig returns), settings.ts (the one settings table), load.ts (loadConfig),
 * sources-file.ts (CONFIG_FILE), database-url.ts (DATABASE_URL: its TLS, masking, secrets), setting-file.ts.
 */
export * from './config/types.js';
export { SETTINGS, type SettingDoc } from './config/settings.js';
export { loadConfig, withTrailingSlash } from './config/load.js';
export { databaseTlsSettings, type DatabaseTlsSettings, type SslEnvironment, type SslMode } from './config/database-url.js';
export { readFailure, settingError, type SettingFile } from './config/setting-file.js';
