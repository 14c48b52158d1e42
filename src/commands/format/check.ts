/** What `check` prints: one line per step, and with CONFIG_FILE a line naming each source. Pure text. */
import type { StepResult } from '../../app/check.js';
import type { SourceConfig } from '../../config.js';
import { displayUrl } from '../../errors.js';

/** Formats a step as `ok    token          detail`. */
export function formatStep(result: StepResult): string {
  return `${result.status.padEnd(5)} ${result.step.padEnd(14)} ${result.detail}`;
}

/** The line above a source's steps: `source production: upstream https://statistics.example.com/ {environment="production"}`. */
export function formatSection(source: SourceConfig): string {
  const labels = Object.entries(source.labels).map(([name, value]) => `${name}=${JSON.stringify(value)}`);
  return `source ${source.name}: ${source.upstream ? `upstream ${describeUpstream(source)}` : 'built-in demo simulator'}${labels.length > 0 ? ` {${labels.join(',')}}` : ''}`;
}

/** The configuration step's detail: `2 sources from /etc/sources.yaml: production, sandbox`, or the one upstream. */
export function formatConfigurationDetail(sources: readonly SourceConfig[], configFile: string | undefined): string {
  const first = sources[0]!;
  if (configFile !== undefined)
    return `${sources.length} source${sources.length === 1 ? '' : 's'} from ${configFile}: ${sources.map((s) => s.name).join(', ')}`;
  return first.upstream ? `upstream ${describeUpstream(first)}` : 'STATISTICS_URL unset: checking against the built-in demo simulator';
}

function describeUpstream(source: SourceConfig): string {
  return displayUrl(source.upstream!.statisticsUrl);
}
