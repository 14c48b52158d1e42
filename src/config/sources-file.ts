/**
 * CONFIG_FILE (docs/configuration.md): a YAML list of sources, each read into the values of the
 * environment variables it stands for, so that loadConfig validates them with the environment's
 * schemas and rules. This module checks the file's shape and expands `${NAME}`; every error names
 * the file, the line and the key path. Relative paths are relative to the file's folder.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import type { Document, LineCounter, Node as YamlNode, Pair, YAMLMap } from 'yaml';
import { ConfigError } from '../errors.js';
import { readFailure, settingError, type SettingFile } from './setting-file.js';

/** The `source` column and label value. */
const SOURCE_NAME_PATTERN = /^[a-z0-9_-]{1,64}$/;

const LABEL_NAME_PATTERN = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A source entry's keys holding one value → the variable each stands for. */
const SOURCE_KEYS: Readonly<Record<string, string>> = {
  statistics_url: 'STATISTICS_URL',
  auth_url: 'AUTH_URL',
  client_id: 'CLIENT_ID',
  client_secret: 'CLIENT_SECRET',
  client_secret_file: 'CLIENT_SECRET_FILE',
  token_auth_method: 'TOKEN_AUTH_METHOD',
  scope: 'TOKEN_SCOPE',
  rate_limit: 'UPSTREAM_RATE_LIMIT',
  rate_burst: 'UPSTREAM_RATE_BURST',
  max_body: 'UPSTREAM_MAX_BODY',
  sample_limit: 'UPSTREAM_SAMPLE_LIMIT',
  label_limit: 'UPSTREAM_LABEL_LIMIT',
  label_value_length_limit: 'UPSTREAM_LABEL_VALUE_LENGTH_LIMIT',
};

const TLS_KEYS: Readonly<Record<string, string>> = {
  cert_file: 'TLS_CLIENT_CERT_FILE',
  key_file: 'TLS_CLIENT_KEY_FILE',
  ca_file: 'TLS_CA_FILE',
};

/** The per-source sync settings; the tables' (PARTITION_INTERVAL, RETENTION, ROLLUP_*) are shared, in the environment. */
const SYNC_KEYS: Readonly<Record<string, string>> = {
  start_date: 'SYNC_START_DATE',
  window: 'SYNC_WINDOW',
  settle: 'SYNC_SETTLE',
  lookback: 'SYNC_LOOKBACK',
  page_size: 'SYNC_PAGE_SIZE',
  concurrency: 'SYNC_CONCURRENCY',
  read_ahead: 'SYNC_READ_AHEAD',
  window_attempts: 'SYNC_WINDOW_ATTEMPTS',
  min_split: 'SYNC_MIN_SPLIT',
  schedule: 'SYNC_SCHEDULE',
  shrink: 'SYNC_SHRINK',
  to_date: 'UPSTREAM_TO_DATE',
  record_time_field: 'RECORD_TIME_FIELD',
  field_contract: 'FIELD_CONTRACT',
};

/** The key standing for `variable` (`tls.ca_file`); undefined for a setting a source cannot give. */
export function fileKeyOf(variable: string): string | undefined {
  const find = (table: Readonly<Record<string, string>>) => Object.keys(table).find((key) => table[key] === variable);
  const top = find(SOURCE_KEYS);
  if (top !== undefined) return top;
  const tls = find(TLS_KEYS);
  if (tls !== undefined) return `tls.${tls}`;
  const sync = find(SYNC_KEYS);
  return sync === undefined ? undefined : `sync.${sync}`;
}

/** Resolved against the file's folder. */
const PATH_VARIABLES = new Set(['CLIENT_SECRET_FILE', 'TLS_CLIENT_CERT_FILE', 'TLS_CLIENT_KEY_FILE', 'TLS_CA_FILE']);

/** Variables a CONFIG_FILE replaces: setting one beside it is an error, not a silent choice. */
export const FILE_ONLY_VARIABLES = [
  'STATISTICS_URL',
  'AUTH_URL',
  'CLIENT_ID',
  'CLIENT_SECRET',
  'CLIENT_SECRET_FILE',
  'TLS_CLIENT_CERT_FILE',
  'TLS_CLIENT_KEY_FILE',
  'TLS_CA_FILE',
] as const;

/** One value of a source, as the variable it stands for would hold it. */
interface FileValue {
  /** `${NAME}` expanded, a path made absolute. */
  text: string;
  /** As errors may show it: before `${NAME}` expansion, never a variable's content. */
  shown: string;
  /** `sources[0].sync.window` */
  keyPath: string;
  /** 1-based. */
  line: number;
}

/** One entry of `sources:`, not yet validated by the settings' schemas. */
export interface FileSource {
  name: string;
  line: number;
  keyPath: string;
  labels: Record<string, string>;
  /** By variable (SYNC_WINDOW); keys left out are absent. */
  values: Map<string, FileValue>;
}

/** `CONFIG_FILE /etc/x.yaml line 7: `, how every message about the file starts. */
export function fileLocation(file: string, line: number): string {
  return `CONFIG_FILE ${file} line ${line}: `;
}

/** Reads CONFIG_FILE's sources. @throws {ConfigError} for a file that cannot be read, or as {@link parseSourcesFile}. */
export function readSourcesFile(setting: SettingFile, env: NodeJS.ProcessEnv): FileSource[] {
  let text: string;
  try {
    text = readFileSync(setting.file, 'utf8');
  } catch (err) {
    throw settingError(setting, `must name a readable file (${readFailure(err)})`);
  }
  return parseSourcesFile(setting.file, text, env);
}

/**
 * CONFIG_FILE's sources from its text, in order; `${NAME}` looked up in `env` (empty is unset).
 *
 * @throws {ConfigError} (CONFIG_FILE) naming the file, line and key path of the first thing wrong.
 */
function parseSourcesFile(file: string, text: string, env: NodeJS.ProcessEnv): FileSource[] {
  return new SourcesDocument(file, text, env).sources();
}

/** One CONFIG_FILE parsed as YAML; each method reads one part and throws at the first thing wrong. */
class SourcesDocument {
  readonly #yaml: typeof import('yaml');
  readonly #lines: LineCounter;
  readonly #doc: Document.Parsed;
  readonly #file: string;
  readonly #env: NodeJS.ProcessEnv;
  readonly #base: string;
  /** Each name seen so far → its entry's key path. */
  readonly #names = new Map<string, string>();

  constructor(file: string, text: string, env: NodeJS.ProcessEnv) {
    // Loaded only here (70 modules), synchronously as loadConfig is.
    this.#yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
    this.#lines = new this.#yaml.LineCounter();
    this.#doc = this.#yaml.parseDocument(text, { lineCounter: this.#lines, uniqueKeys: true, prettyErrors: false });
    this.#file = file;
    this.#env = env;
    this.#base = dirname(resolve(file));
  }

  /** @throws {ConfigError} as {@link parseSourcesFile}. */
  sources(): FileSource[] {
    const yaml = this.#yaml;
    const firstError = this.#doc.errors[0];
    if (firstError) {
      const message = firstError.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      this.#fail(this.#lines.linePos(firstError.pos[0]).line, `not valid YAML: ${message}`);
    }
    const root = this.#deref(this.#doc.contents);
    if (!yaml.isMap(root)) return this.#fail(this.#lineOf(root as YamlNode | null), 'must be a map with a sources: list');
    const top = this.#entries(root, 'the file');
    for (const [key, pair] of top) if (key !== 'sources') this.#fail(this.#lineOf(pair), `${key}: unknown key (the file holds sources: only)`);
    const sourcesPair = top.get('sources');
    if (!sourcesPair) return this.#fail(1, 'sources: is required (a list of sources)');
    const list = this.#deref(sourcesPair.value);
    if (!yaml.isSeq(list) || list.items.length === 0) return this.#fail(this.#lineOf(sourcesPair), 'sources: must be a non-empty list of sources');
    return list.items.map((item, index) => this.#source(item, `sources[${index}]`, this.#lineOf(sourcesPair)));
  }

  /** `listLine`: where an entry without a position of its own is reported. */
  #source(item: unknown, keyPath: string, listLine: number): FileSource {
    const node = this.#deref(item);
    const line = this.#lineOf(node as YamlNode | null, listLine);
    if (!this.#yaml.isMap(node)) return this.#fail(line, `${keyPath}: must be a map of the source's keys`);
    const values = new Map<string, FileValue>();
    let labels: Record<string, string> = {};
    let name: string | undefined;
    for (const [key, pair] of this.#entries(node, keyPath)) {
      const path = `${keyPath}.${key}`;
      if (key === 'name') name = this.#name(pair, path, keyPath);
      else if (key in SOURCE_KEYS) this.#put(values, SOURCE_KEYS[key]!, pair, path);
      else if (key === 'tls') this.#table(values, TLS_KEYS, pair, path);
      else if (key === 'sync') this.#table(values, SYNC_KEYS, pair, path);
      else if (key === 'labels') labels = this.#labels(pair, path);
      else this.#fail(this.#lineOf(pair), `${path}: unknown key`);
    }
    if (name === undefined) return this.#fail(line, `${keyPath}.name is required`);
    return { name, line, keyPath, labels, values };
  }

  #name(pair: Pair, path: string, keyPath: string): string {
    const line = this.#lineOf(pair);
    const written = this.#scalar(pair.value, path, line);
    const name = written.text;
    // Shown as the file writes it: a name from ${NAME} names the variable, never its value.
    if (!SOURCE_NAME_PATTERN.test(name)) this.#fail(line, `${path}: must be 1 to 64 lower-case letters, digits, _ or -; got ${JSON.stringify(written.shown)}`);
    const earlier = this.#names.get(name);
    if (earlier !== undefined) this.#fail(line, `${path}: ${JSON.stringify(written.shown)} is also the name of ${earlier}; names must be unique`);
    this.#names.set(name, keyPath);
    return name;
  }

  /** A `tls:` or `sync:` map of `table`'s keys. */
  #table(values: Map<string, FileValue>, table: Readonly<Record<string, string>>, pair: Pair, path: string): void {
    const map = this.#deref(pair.value);
    if (!this.#yaml.isMap(map)) this.#fail(this.#lineOf(pair), `${path}: must be a map (keys: ${Object.keys(table).join(', ')})`);
    for (const [inner, innerPair] of this.#entries(map, path)) {
      const variable = table[inner];
      if (variable === undefined) this.#fail(this.#lineOf(innerPair), `${path}.${inner}: unknown key (known: ${Object.keys(table).join(', ')})`);
      this.#put(values, variable, innerPair, `${path}.${inner}`);
    }
  }

  /** Prometheus label names, none the exporter sets itself. */
  #labels(pair: Pair, path: string): Record<string, string> {
    const map = this.#deref(pair.value);
    if (!this.#yaml.isMap(map)) this.#fail(this.#lineOf(pair), `${path}: must be a map of label names to values`);
    const labels: Record<string, string> = {};
    for (const [label, labelPair] of this.#entries(map, path)) {
      const line = this.#lineOf(labelPair);
      const labelPath = `${path}.${label}`;
      if (!LABEL_NAME_PATTERN.test(label) || label.startsWith('__')) {
        this.#fail(line, `${labelPath}: must be a Prometheus label name (letters, digits and _, not starting with a digit or __)`);
      }
      if (label === 'source') this.#fail(line, `${labelPath}: the source label is the source's name; choose another label name`);
      // They name a histogram's bucket or a summary's quantile.
      if (label === 'le' || label === 'quantile') {
        this.#fail(line, `${labelPath}: ${label} names a histogram bucket or summary quantile; choose another label name`);
      }
      labels[label] = this.#scalar(labelPair.value, labelPath, line).text;
    }
    return labels;
  }

  #put(values: Map<string, FileValue>, variable: string, pair: Pair, path: string): void {
    const line = this.#lineOf(pair.value as YamlNode | null, this.#lineOf(pair));
    const { text: value, shown } = this.#scalar(pair.value, path, line);
    const isPath = PATH_VARIABLES.has(variable);
    const text = isPath && value !== '' ? resolve(this.#base, value) : value;
    // A path is shown resolved, unless it came from ${NAME}: then as written, naming the variable.
    values.set(variable, { text, shown: isPath && shown === value ? text : shown, keyPath: path, line });
  }

  /** A single value, expanded and as written. */
  #scalar(node: unknown, keyPath: string, line: number): { text: string; shown: string } {
    const n = this.#deref(node);
    const value: unknown = this.#yaml.isScalar(n) ? n.value : undefined;
    let raw: string;
    if (typeof value === 'string') raw = value;
    // As written (`0x10`): the schema reads the text, as from the environment.
    else if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') raw = (n as { source?: string }).source ?? String(value);
    else return this.#fail(line, `${keyPath}: must be a single value (text or number)`);
    // Empty counts as unset in the environment; in the file, leaving the key out says that.
    if (raw === '') return this.#fail(line, `${keyPath}: must not be empty (leave the key out instead)`);
    return { text: expand(raw, this.#env, (message) => this.#fail(line, `${keyPath}: ${message}`)), shown: raw };
  }

  /** A map's keys, in order; each must be plain text. */
  #entries(map: YAMLMap, where: string): Map<string, Pair> {
    const out = new Map<string, Pair>();
    for (const pair of map.items) {
      const key = this.#deref(pair.key);
      if (!this.#yaml.isScalar(key) || typeof key.value !== 'string') this.#fail(this.#lineOf(pair), `${where}: keys must be plain text`);
      out.set((key as { value: string }).value, pair);
    }
    return out;
  }

  #deref(node: unknown): unknown {
    return this.#yaml.isAlias(node) ? node.resolve(this.#doc) : node;
  }

  /** The 1-based line a node or a pair's key starts on. */
  #lineOf(node: YamlNode | Pair | null | undefined, fallback = 1): number {
    const offset = node && 'range' in node ? node.range?.[0] : node && 'key' in node ? (node.key as YamlNode | null)?.range?.[0] : undefined;
    return offset === undefined ? fallback : this.#lines.linePos(offset).line;
  }

  #fail(line: number, message: string): never {
    throw new ConfigError('CONFIG_FILE', `${fileLocation(this.#file, line)}${message}`);
  }
}

/** Replaces `${NAME}` with NAME's value and `$${` with `${`; `report` (which throws) is told a rule broken. */
function expand(text: string, env: NodeJS.ProcessEnv, report: (message: string) => never): string {
  return text.replace(/\$\$\{|\$\{([^}]*)(\}?)/g, (match, name: string | undefined, close: string | undefined) => {
    if (match === '$${') return '${';
    if (close !== '}' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name ?? '')) {
      return report('${ must start ${NAME} (letters, digits and _) ended by }; write $${ for a literal ${');
    }
    const value = env[name!];
    if (value === undefined || value === '') return report(`\${${name}} names environment variable ${name}, which is unset or empty`);
    return value;
  });
}
