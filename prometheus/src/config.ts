/**
 * The parameters of the alerting and recording rules (what monitoring-mixins call `_config`): the
 * selector of the exporter's series, every threshold, range and `for` duration, the runbook's
 * address and the schema the runbook's SQL names. {@link DEFAULT_RULES_CONFIG} generates the
 * committed prometheus/rules/analytics-exporter.rules.yml; a JSON file of overrides
 * (`npm run rules -- --config FILE --out FILE`) generates one for another deployment.
 *
 * Glossary:
 * - selector: PromQL label matchers without braces (`job="analytics-exporter"`), put into every
 *   selector of every rule.
 * - duration: a Prometheus duration of one unit, `30s`, `5m`, `1h`, `1d` (the rules' texts say
 *   it in words, so one unit keeps them readable).
 * - sync interval: the minutes between two scheduled sync runs of a source (SYNC_SCHEDULE's
 *   default `*\/15 * * * *` is 15); the sync thresholds are multiples of it.
 */
import { z } from 'zod';

/** A Prometheus duration of one unit (`30s`, `5m`, `1h`, `1d`). */
const duration = z.string().regex(/^[1-9]\d*[smhd]$/, 'a Prometheus duration of one unit, such as 30s, 5m, 1h or 1d');
const forOnly = z.strictObject({ for: duration });

/** The zod schema of the whole configuration; overrides are checked against its partial form. */
export const rulesConfigSchema = z.strictObject({
  /** Label matchers (no braces) selecting the exporter's series; every rule's every selector carries them. */
  selector: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"(\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*")*$/, {
    message: 'PromQL label matchers without braces, such as job="analytics-exporter"',
  }),
  /**
   * The runbook's address without a fragment; each alert's `runbook_url` adds `#` and its section's
   * anchor (the alert's name in lower case, as GitHub makes anchors of docs/runbook.md's headings).
   */
  runbookUrl: z
    .string()
    .min(1)
    .regex(/^[^#\s]+$/, 'an address without # or spaces'),
  /** DATABASE_SCHEMA, as the runbook queries in the descriptions name the tables. */
  databaseSchema: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case SQL identifier, as DATABASE_SCHEMA'),
  /** Minutes between two scheduled sync runs of a source (SYNC_SCHEDULE). */
  syncIntervalMinutes: z.number().int().positive(),
  /** Range of the recording rules' rate() and avg_over_time(). */
  rateRange: duration,
  exporterDown: forOnly,
  exporterAbsent: forOnly,
  /** `for` is also the range of the error counter the description names the top reason from. */
  upstreamDown: forOnly,
  /** Alerts after `intervals` sync intervals without success; `lookback` keeps a success from before a restart. */
  syncStale: z.strictObject({ intervals: z.number().positive(), lookback: duration, for: duration }),
  /** Alerts when more than `ratio` (0 to 1) of the runs finished within `range` failed. */
  syncFailing: z.strictObject({ ratio: z.number().min(0).lt(1), range: duration, for: duration }),
  /** Alerts while any record was quarantined within `range`. */
  recordsQuarantined: z.strictObject({ range: duration, for: duration }),
  /** Alerts when more than `count` pairs of reads disagreed within `range`. */
  syncUnstableInstants: z.strictObject({ count: z.number().int().min(0), range: duration, for: duration }),
  syncWindowsParked: forOnly,
  auditDriftLeft: forOnly,
  /** Alerts while the last reload of CONFIG_FILE failed (the sources in use are the last good ones). */
  configReloadFailed: forOnly,
  /** Range of the recording rule of windows the audits repaired (AUDIT_SCHEDULE runs once a day by default). */
  auditRepairedRange: duration,
});

/** Every parameter of the rules. */
export type RulesConfig = z.infer<typeof rulesConfigSchema>;

/**
 * The parameters of the committed rule file: the scrape job of prometheus/prometheus.yml,
 * SYNC_SCHEDULE's 15 minutes, DATABASE_SCHEMA's `analytics`, and the runbook as a path from the
 * repository's root (`docs/runbook.md`): set `runbookUrl` to where your team reads it (a web
 * address of docs/runbook.md) so that alert notifications link to it.
 */
export const DEFAULT_RULES_CONFIG: RulesConfig = {
  selector: 'job="analytics-exporter"',
  runbookUrl: 'docs/runbook.md',
  databaseSchema: 'analytics',
  syncIntervalMinutes: 15,
  rateRange: '5m',
  exporterDown: { for: '5m' },
  exporterAbsent: { for: '5m' },
  upstreamDown: { for: '10m' },
  syncStale: { intervals: 2, lookback: '1h', for: '5m' },
  syncFailing: { ratio: 0.5, range: '1h', for: '15m' },
  recordsQuarantined: { range: '1h', for: '5m' },
  syncUnstableInstants: { count: 2, range: '1h', for: '15m' },
  syncWindowsParked: { for: '5m' },
  auditDriftLeft: { for: '15m' },
  configReloadFailed: { for: '5m' },
  auditRepairedRange: '1d',
};

/** Overrides as a JSON file gives them: any top-level key, and any key of the nested objects. */
const overridesSchema = z.strictObject(
  Object.fromEntries(
    Object.entries(rulesConfigSchema.shape).map(([key, schema]) => [key, (schema instanceof z.ZodObject ? schema.partial() : schema).optional()]),
  ),
);

/** Overrides of {@link DEFAULT_RULES_CONFIG}: any key, nested objects in part. */
export type RulesConfigOverrides = { [K in keyof RulesConfig]?: RulesConfig[K] extends object ? Partial<RulesConfig[K]> : RulesConfig[K] };

/**
 * {@link DEFAULT_RULES_CONFIG} with `overrides` applied (nested objects merged key by key).
 *
 * @param overrides parsed JSON (unknown input): an object of the keys of {@link RulesConfig}.
 * @throws z.ZodError naming the key, when a key is unknown or a value breaks its rule.
 */
export function rulesConfig(overrides: unknown = {}): RulesConfig {
  const given = overridesSchema.parse(overrides) as Record<string, unknown>;
  const merged: Record<string, unknown> = { ...DEFAULT_RULES_CONFIG };
  for (const [key, value] of Object.entries(given)) {
    if (value === undefined) continue;
    const base = merged[key];
    merged[key] = typeof base === 'object' && base !== null ? { ...base, ...(value as object) } : value;
  }
  return rulesConfigSchema.parse(merged);
}
