/**
 * The settings as global command-line options and the help that shows them: `--help` only the few
 * most people set, `--help-settings` every one in the groups of docs/configuration.md.
 */
import { CommanderError, Option, type Command, type Help } from 'commander';
import { SETTINGS, type SettingDoc } from '../config.js';

/** A heading of docs/configuration.md and `--help-settings`, and its settings in table order. */
export interface SettingGroup {
  title: string;
  /** One sentence. */
  about: string;
  settings: readonly string[];
}

/** The settings by what they are about. Every setting is in exactly one group (checked by test/unit/settings-doc.test.ts). */
export const SETTING_GROUPS: readonly SettingGroup[] = [
  {
    title: 'Sources and credentials',
    about: 'Which platform the exporter reads, and as which API client (E0: OAuth2 client credentials).',
    settings: [
      'CONFIG_FILE',
      'STATISTICS_URL',
      'AUTH_URL',
      'CLIENT_ID',
      'CLIENT_SECRET',
      'CLIENT_SECRET_FILE',
      'TOKEN_AUTH_METHOD',
      'TOKEN_SCOPE',
      'TLS_CLIENT_CERT_FILE',
      'TLS_CLIENT_KEY_FILE',
      'TLS_CA_FILE',
    ],
  },
  {
    title: 'Upstream requests',
    about: 'How each request to the platform (E0, E6, E7) is bounded, retried and paced (Limits).',
    settings: ['UPSTREAM_TIMEOUT', 'UPSTREAM_MAX_ATTEMPTS', 'UPSTREAM_RETRY_MAX_DELAY', 'UPSTREAM_MAX_BODY', 'UPSTREAM_RATE_LIMIT', 'UPSTREAM_RATE_BURST'],
  },
  {
    title: 'Database',
    about: 'Where the records are loaded: a PostgreSQL server, or the embedded database.',
    settings: ['DATABASE_URL', 'PGSSLMODE', 'PGSSLROOTCERT', 'PGSSLCERT', 'PGSSLKEY', 'DATABASE_SCHEMA', 'MIGRATE', 'DATABASE_LOCK_TIMEOUT', 'DATA_DIR'],
  },
  {
    title: 'Sync',
    about: 'What one ETL run reads from E6, in which windows, and when serve runs it and the audit.',
    settings: [
      'SYNC_START_DATE',
      'SYNC_WINDOW',
      'SYNC_SETTLE',
      'SYNC_LOOKBACK',
      'SYNC_PAGE_SIZE',
      'SYNC_CONCURRENCY',
      'SYNC_READ_AHEAD',
      'SYNC_WINDOW_ATTEMPTS',
      'SYNC_WINDOW_MAX_REQUESTS',
      'SYNC_MIN_SPLIT',
      'SYNC_SHRINK',
      'UPSTREAM_TO_DATE',
      'SYNC_SCHEDULE',
      'SYNC_SOURCE_CONCURRENCY',
      'AUDIT_SCHEDULE',
      'RECORD_TIME_FIELD',
    ],
  },
  {
    title: 'Tables',
    about: 'The partitions of records, retention, and the tables derived from the records.',
    settings: [
      'PARTITION_INTERVAL',
      'RETENTION',
      'ROLLUP_DIMENSIONS',
      'ROLLUP_RETENTION',
      'ROLLUP_DISTINCT',
      'ROLLUP_DISTINCT_BY',
      'FIELD_CATALOGUE',
      'TYPED_VIEW_MAX_FIELDS',
      'FIELD_CONTRACT',
    ],
  },
  {
    title: 'The /metrics endpoint',
    about: "The HTTP server of serve, and how it reads and passes on each source's E7 text.",
    settings: [
      'METRICS_LISTEN',
      'METRICS_WINDOW',
      'METRICS_CACHE_TTL',
      'METRICS_SCRAPE_TIMEOUT',
      'UPSTREAM_SAMPLE_LIMIT',
      'UPSTREAM_LABEL_LIMIT',
      'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT',
      'UPSTREAM_METRIC_PREFIX',
      'METRICS_MAX_CONNECTIONS_PER_CLIENT',
      'METRICS_MAX_CONNECTIONS',
      'WEB_CONFIG_FILE',
      'WEB_HEALTH_WITHOUT_AUTH',
      'AUTH_FAILURE_BUDGET',
    ],
  },
  {
    title: 'Logging',
    about: 'What is logged, and in which format.',
    settings: ['LOG_LEVEL', 'LOG_FORMAT'],
  },
];

/** What a first deployment sets; the rest are hidden from `--help`, not refused. */
export const HELP_SETTINGS: ReadonlySet<string> = new Set([
  'CONFIG_FILE',
  'STATISTICS_URL',
  'AUTH_URL',
  'CLIENT_ID',
  'CLIENT_SECRET_FILE',
  'DATABASE_URL',
  'LOG_LEVEL',
]);

export const MORE_SETTINGS_HELP = `Every setting is an environment variable; all but the secrets also have a flag, which wins.
--help-settings lists all ${SETTINGS.length} with their defaults; docs/configuration.md explains them.`;

const BY_ENV = new Map(SETTINGS.map((s) => [s.env, s]));

/** Help, default, variable. */
function describeSetting(setting: SettingDoc): string {
  const byDefault = setting.default === undefined ? '' : ` (default ${setting.default})`;
  return `${setting.help}${byDefault} [env ${setting.env}]`;
}

/** Adds every setting with a flag as a global option, and `--help-settings`, which ends the parse as `--help` does. */
export function addSettingOptions(program: Command): void {
  for (const setting of SETTINGS) {
    if (setting.flag === undefined) continue;
    const option = new Option(`${setting.flag} <value>`, describeSetting(setting));
    program.addOption(HELP_SETTINGS.has(setting.env) ? option : option.hideHelp());
  }
  program.addOption(new Option('--help-settings', 'print every setting, its flag and its default'));
  program.on('option:help-settings', () => {
    process.stdout.write(settingsHelp());
    throw new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)');
  });
}

/** The text of `--help-settings`: every setting under its group's title. */
export function settingsHelp(): string {
  const term = (s: SettingDoc) => (s.flag === undefined ? `${s.env} (secret: no flag)` : `${s.flag} <value>`);
  const width = Math.max(...SETTINGS.map((s) => term(s).length));
  const lines = [
    'Settings: each is read from its environment variable; its flag, given on the command line, wins.',
    'Empty values count as unset. Durations use Prometheus syntax: 500ms, 30s, 15m, 1h30m, 1d.',
    'docs/configuration.md explains each one.',
  ];
  for (const group of SETTING_GROUPS) {
    lines.push('', `${group.title}:`);
    for (const env of group.settings) {
      const setting = BY_ENV.get(env)!;
      lines.push(`  ${term(setting).padEnd(width)}  ${describeSetting(setting)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** Commander's `formatHelp` with the commands first; a command's help names the global options without describing them. */
export function commandsFirstHelp(command: Command, helper: Help): string {
  const width = Math.max(
    helper.longestSubcommandTermLength(command, helper),
    helper.longestOptionTermLength(command, helper),
    helper.longestArgumentTermLength(command, helper),
  );
  const item = (term: string, description: string) => helper.formatItem(term, width, description, helper);
  const description = helper.commandDescription(command);
  const global = helper.visibleGlobalOptions(command).map((o) => o.long ?? o.flags);
  return [
    `${helper.styleTitle('Usage:')} ${helper.styleUsage(helper.commandUsage(command))}`,
    '',
    ...(description === '' ? [] : [helper.boxWrap(helper.styleCommandDescription(description), helper.helpWidth ?? 80), '']),
    ...helper.formatItemList(
      'Arguments:',
      helper
        .visibleArguments(command)
        .map((a) => item(helper.styleArgumentTerm(helper.argumentTerm(a)), helper.styleArgumentDescription(helper.argumentDescription(a)))),
      helper,
    ),
    ...helper.formatItemList(
      'Commands:',
      helper
        .visibleCommands(command)
        .map((c) => item(helper.styleSubcommandTerm(helper.subcommandTerm(c)), helper.styleSubcommandDescription(helper.subcommandDescription(c)))),
      helper,
    ),
    ...helper.formatItemList(
      'Options:',
      helper.visibleOptions(command).map((o) => item(helper.styleOptionTerm(helper.optionTerm(o)), helper.styleOptionDescription(helper.optionDescription(o)))),
      helper,
    ),
    ...helper.formatItemList(
      'Global Options:',
      global.length === 0 ? [] : [helper.boxWrap(`${global.join(', ')}: see analytics-exporter --help`, (helper.helpWidth ?? 80) - 2).replace(/^/gm, '  ')],
      helper,
    ),
  ].join('\n');
}

/** camelCased flag, as commander stores it → the variable it overrides. */
const FLAG_TO_ENV = new Map(
  SETTINGS.filter((s) => s.flag !== undefined).map((s) => [s.flag!.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()), s.env]),
);

/** The flags given (global or the command's own), keyed by the variable each overrides. */
export function configOverrides(command: Command): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const [key, value] of Object.entries(command.optsWithGlobals())) {
    const env = FLAG_TO_ENV.get(key);
    if (env !== undefined && typeof value === 'string') overrides[env] = value;
  }
  return overrides;
}
