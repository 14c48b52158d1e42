/**
 * The deployment files agree with each other and with the code: Dockerfile, .dockerignore,
 * compose.yaml, and the Prometheus and Grafana files compose mounts. Docker need not be installed:
 * everything here is read and compared as text, and the parts that are configuration of this
 * program (the exporter's environment, the simulator's flags) go through the program's own parsers.
 */
import { Script } from 'node:vm';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULT_METRICS_PORT, loadConfig, SETTINGS } from '../../src/config.js';
import { MIGRATIONS_DIR } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { DEFAULT_SCOPE, runSimulate } from '@analytics-exporter/simulator';
import { readClientFiles } from '../../src/upstream/files.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; license: string; bin: Record<string, string> };
const simulatorPkg = JSON.parse(read('packages/simulator/package.json')) as { name: string; bin: Record<string, string> };

// ---------------------------------------------------------------------------------------------
// Dockerfile

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Instructions with continuation lines joined and comments (including parser directives) dropped. */
function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line.startsWith('#') || (pending === '' && line === '')) return;
    if (pending === '') start = index + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      return;
    }
    pending += line;
    const match = /^(\S+)\s*(.*)$/s.exec(pending)!;
    instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!.trim(), line: start });
    pending = '';
  });
  expect(pending, 'Dockerfile ends inside a continuation line').toBe('');
  return instructions;
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/);
      expect(as === undefined || as.toUpperCase() === 'AS', `FROM on line ${instruction.line}`).toBe(true);
      stages.push({ image: image!, name, instructions: [] });
    } else if (stages.length > 0) {
      stages.at(-1)!.instructions.push(instruction);
    } else {
      expect(instruction.keyword, `only ARG may come before the first FROM (line ${instruction.line})`).toBe('ARG');
    }
  }
  return stages;
}

/** `KEY=value KEY2="value 2"` (ENV, LABEL, ARG with a default). */
function keyValues(args: string): Map<string, string> {
  const pairs = new Map<string, string>();
  for (const match of args.matchAll(/([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    const value = match[2]!;
    pairs.set(match[1]!, value.startsWith('"') ? (JSON.parse(value) as string) : value);
  }
  return pairs;
}

/** Exec form (`["a", "b"]`), the only form used for ENTRYPOINT, CMD and HEALTHCHECK here. */
function execForm(args: string, what: string): string[] {
  expect(args.startsWith('['), `${what} must use the exec form (JSON array), got ${args}`).toBe(true);
  return JSON.parse(args) as string[];
}

/** COPY/ADD: flags, sources and destination. */
function copyArgs(args: string): { flags: Map<string, string>; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  const flags = new Map<string, string>();
  while (words[0]?.startsWith('--')) {
    const [flag, value] = words.shift()!.slice(2).split('=');
    flags.set(flag!, value ?? '');
  }
  const dest = words.pop()!;
  return { flags, sources: words, dest };
}

const dockerfile = parseDockerfile(read('Dockerfile'));
const stages = stagesOf(dockerfile);
const buildStage = stages[0]!;
const finalStage = stages.at(-1)!;
/** The demo simulator's own target (compose.yaml's simulator services build it). */
const simulatorStage = stages.find((stage) => stage.name === 'simulator');
const all = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);
const one = (stage: Stage, keyword: string): Instruction => {
  const found = all(stage, keyword);
  expect(found, `exactly one ${keyword} in the stage FROM ${stage.image}`).toHaveLength(1);
  return found[0]!;
};
const finalEnv = new Map(all(finalStage, 'ENV').flatMap((i) => [...keyValues(i.args)]));
const finalWorkdir = one(finalStage, 'WORKDIR').args;

/** A destination of COPY or a path in the image, made absolute against WORKDIR. */
const inImage = (path: string, workdir: string): string => posix.resolve(workdir, path);

/** .dockerignore as Docker reads it: patterns relative to the context root, `!` re-includes, last match wins. */
function dockerignore(): (path: string) => boolean {
  const rules = read('.dockerignore')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const negate = line.startsWith('!');
      const pattern = posix.normalize(line.slice(negate ? 1 : 0)).replace(/^\/+|\/+$/g, '');
      const source = pattern
        .split('/')
        .map((part) =>
          part === '**'
            ? '.*'
            : part
                .replace(/[.+^${}()|[\]\\]/g, '\\$&')
                .replace(/\*/g, '[^/]*')
                .replace(/\?/g, '[^/]'),
        )
        .join('/')
        .replace(/\.\*\//g, '(?:.*/)?');
      return { negate, pattern, regex: new RegExp(`^${source}$`) };
    });
  return (path: string) => {
    // A path is excluded when it, or a folder above it, matches the last rule that applies.
    const parts = posix.normalize(path).replace(/\/+$/, '').split('/');
    let excluded = false;
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      for (const rule of rules) if (rule.regex.test(prefix)) excluded = !rule.negate;
    }
    return excluded;
  };
}

describe('Dockerfile', () => {
  it('builds and runs on one Node major, slim, that package.json engines allow', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const majors = new Set<number>();
    for (const stage of stages) {
      if (stages.some((s) => s.name === stage.image)) continue; // FROM an earlier stage
      const match = /^node:(\d+)(-[a-z]+)?-slim$/.exec(stage.image);
      expect(match, `base image ${stage.image} is an official slim Node image`).not.toBeNull();
      majors.add(Number(match![1]));
    }
    expect(majors.size, 'the build and the runtime use the same Node major').toBe(1);
    const engines = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    const minimum = Number(/^>=\s*(\d+)/.exec(engines)?.[1]);
    expect([...majors][0]!, `engines ${engines}`).toBeGreaterThanOrEqual(minimum);
    expect(buildStage.name, 'the build stage is named so the runtime can COPY --from it').toBeTruthy();
  });

  it('compiles in the build stage with dev dependencies, REVISION reaching write-revision.mjs', () => {
    const runs = all(buildStage, 'RUN');
    const install = runs.find((r) => /\bnpm ci\b/.test(r.args));
    expect(install, 'npm ci in the build stage').toBeDefined();
    expect(install!.args, 'the build stage needs the dev dependencies (tsc)').not.toMatch(/--omit[= ]dev|--production/);
    const arg = all(buildStage, 'ARG').find((a) => /^REVISION(=|$)/.test(a.args));
    expect(arg, 'ARG REVISION in the build stage').toBeDefined();
    const build = runs.find((r) => /\bnpm run build\b/.test(r.args) || (/\bnpm ci\b/.test(r.args) && !/--ignore-scripts/.test(r.args)));
    expect(build, 'a RUN that builds (npm run build, or npm ci running prepare)').toBeDefined();
    expect(build!.line, 'ARG REVISION comes before the build').toBeGreaterThan(arg!.line);
    // ARG values are in the environment of later RUNs; the build reads process.env.REVISION.
    expect(read('scripts/write-revision.mjs')).toContain('process.env.REVISION');
    expect(read('package.json')).toContain('write-revision.mjs');
  });

  it('installs only production dependencies in the runtime, without running prepare', () => {
    expect(finalEnv.get('NODE_ENV')).toBe('production');
    const install = all(finalStage, 'RUN').find((r) => /\bnpm ci\b/.test(r.args));
    expect(install, 'npm ci in the runtime stage').toBeDefined();
    expect(install!.args).toMatch(/--omit[= ]dev/);
    expect(install!.args, 'prepare would run tsc, a dev dependency').toMatch(/--ignore-scripts/);
  });

  it('leaves the simulator package out of the runtime image', () => {
    // npm links every workspace it finds, production install or not: --workspaces=false, and no
    // packages/ copied in, keep the development dependency @analytics-exporter/simulator out.
    const install = all(finalStage, 'RUN').find((r) => /\bnpm ci\b/.test(r.args));
    expect(install!.args).toMatch(/--workspaces[= ]false/);
    for (const copy of all(finalStage, 'COPY').map((c) => copyArgs(c.args))) {
      for (const source of copy.sources) expect(source, 'the runtime copies nothing of packages/').not.toMatch(/(^|\/)packages(\/|$)/);
    }
  });

  it('builds the simulator package before the exporter, its manifest installed with the others', () => {
    const manifest = all(buildStage, 'COPY').find((c) => copyArgs(c.args).sources.includes('packages/simulator/package.json'));
    const install = all(buildStage, 'RUN').find((r) => /\bnpm ci\b/.test(r.args));
    expect(manifest, 'COPY packages/simulator/package.json in the build stage').toBeDefined();
    expect(manifest!.line, 'the workspace manifest before npm ci, which links the package').toBeLessThan(install!.line);
    expect(read('package.json')).toMatch(/"build": "npm run build --workspace @analytics-exporter\/simulator && /);
  });

  it('has a simulator target: the package with its production dependencies, none of the exporter', () => {
    expect(simulatorStage, 'FROM … AS simulator').toBeDefined();
    const stage = simulatorStage!;
    expect(stages.indexOf(stage), 'the exporter stays the last (default) target').toBeLessThan(stages.length - 1);
    const install = all(stage, 'RUN').find((r) => /\bnpm ci\b/.test(r.args));
    expect(install, 'npm ci in the simulator stage').toBeDefined();
    expect(install!.args).toMatch(/--omit[= ]dev/);
    expect(install!.args).toContain(`--workspace ${simulatorPkg.name}`);
    const workdir = one(stage, 'WORKDIR').args;
    const copies = all(stage, 'COPY').map((c) => copyArgs(c.args));
    const dist = copies.find((c) => c.flags.get('from') === buildStage.name);
    expect(dist?.sources, 'COPY --from=<build stage> the package dist only').toEqual(['/app/packages/simulator/dist/']);
    for (const copy of copies.filter((c) => !c.flags.has('from'))) {
      for (const source of copy.sources) expect(['package.json', 'package-lock.json', 'packages/simulator/package.json']).toContain(source);
    }
    const entrypoint = execForm(one(stage, 'ENTRYPOINT').args, 'ENTRYPOINT');
    expect(entrypoint[0]).toBe('node');
    expect(inImage(entrypoint[1]!, workdir)).toBe(posix.join(inImage(dist!.dest, workdir), posix.relative('dist', simulatorPkg.bin['analytics-simulator']!)));
    expect(all(stage, 'USER').at(-1)?.args.split(':')[0]).toMatch(/^(node|1000)$/);
  });

  it('ships dist/ and migrations/ where dist/db/migrate.js looks for them', () => {
    const copies = all(finalStage, 'COPY').map((c) => copyArgs(c.args));
    const dist = copies.find((c) => c.flags.get('from') === buildStage.name && c.sources.some((s) => /(^|\/)dist\/?$/.test(s)));
    const migrations = copies.find((c) => !c.flags.has('from') && c.sources.some((s) => /^migrations\/?$/.test(s)));
    expect(dist, 'COPY --from=<build stage> …/dist').toBeDefined();
    expect(migrations, 'COPY migrations').toBeDefined();
    const distDir = inImage(dist!.dest, finalWorkdir);
    const migrationsDir = inImage(migrations!.dest, finalWorkdir);
    // src/db/migrate.ts resolves ../../migrations from its own file; dist/ mirrors src/.
    expect(relative(ROOT, MIGRATIONS_DIR)).toBe('migrations');
    expect(posix.resolve(posix.dirname(posix.join(distDir, 'db/migrate.js')), '../../migrations')).toBe(migrationsDir);
    // version.ts reads ../package.json from dist/.
    const pkgCopy = copies.find((c) => !c.flags.has('from') && c.sources.includes('package.json'));
    expect(pkgCopy, 'package.json in the runtime (VERSION reads it)').toBeDefined();
    expect(posix.resolve(distDir, '../package.json')).toBe(posix.join(inImage(pkgCopy!.dest, finalWorkdir), 'package.json'));
  });

  it('copies only files that exist and that .dockerignore lets through', () => {
    const ignored = dockerignore();
    for (const stage of stages) {
      for (const copy of all(stage, 'COPY').map((c) => copyArgs(c.args))) {
        if (copy.flags.has('from')) continue;
        for (const source of copy.sources) {
          expect(existsSync(join(ROOT, source)), `COPY source ${source} exists`).toBe(true);
          expect(ignored(source), `COPY source ${source} is excluded by .dockerignore`).toBe(false);
        }
      }
    }
    for (const path of [
      'node_modules',
      'dist',
      'data',
      '.git',
      'coverage',
      'debug.log',
      'test/unit/deploy.test.ts',
      '.env',
      'packages/simulator/dist',
      'packages/simulator/node_modules',
      'packages/simulator/test/server.test.ts',
    ]) {
      expect(ignored(path), `.dockerignore keeps ${path} out of the build context`).toBe(true);
    }
  });

  it('runs as the unprivileged node user', () => {
    const users = all(finalStage, 'USER');
    expect(users.length, 'USER in the runtime stage').toBeGreaterThan(0);
    const user = users.at(-1)!;
    const [name] = user.args.split(':');
    expect(name, "the node image's node user, by name or uid").toMatch(/^(node|1000)$/);
    expect(user.line).toBeLessThan(one(finalStage, 'ENTRYPOINT').line);
  });

  it('keeps the embedded database in a volume the node user owns', () => {
    expect(finalEnv.get('DATA_DIR')).toBe('/data');
    const volume = one(finalStage, 'VOLUME');
    const volumes = volume.args.startsWith('[') ? (JSON.parse(volume.args) as string[]) : volume.args.split(/\s+/);
    expect(volumes).toContain('/data');
    const chown = all(finalStage, 'RUN').find((r) => /\bchown\b[^&]*\bnode:node\b[^&]*\/data\b|\bchown\b[^&]*\b1000(:1000)?\b[^&]*\/data\b/.test(r.args));
    expect(chown, 'RUN chown node:node /data').toBeDefined();
    expect(chown!.line, 'chown before VOLUME, or the volume keeps root as owner').toBeLessThan(volume.line);
  });

  it('exposes the port METRICS_LISTEN binds, 0.0.0.0:9877', () => {
    expect(one(finalStage, 'EXPOSE').args.split(/\s+/)).toEqual([String(DEFAULT_METRICS_PORT)]);
    expect(finalEnv.get('METRICS_LISTEN')).toBe(`0.0.0.0:${DEFAULT_METRICS_PORT}`);
  });

  it('checks health with Node on /healthz at the METRICS_LISTEN port', () => {
    const healthcheck = one(finalStage, 'HEALTHCHECK').args;
    const cmd = /\bCMD\s+(\[.*\])$/s.exec(healthcheck);
    expect(cmd, 'HEALTHCHECK … CMD ["node", …]').not.toBeNull();
    const argv = execForm(cmd![1]!, 'HEALTHCHECK CMD');
    expect(argv[0]).toBe('node');
    const script = argv.at(-1)!;
    expect(script).toContain('/healthz');
    expect(script).toContain('METRICS_LISTEN');
    expect(script).toContain(`'${DEFAULT_METRICS_PORT}'`);
    // The script is valid JavaScript (syntax only: compiling does not run it).
    expect(() => new Script(script)).not.toThrow();
  });

  it('starts the CLI with node itself (signals reach it) and serve by default', () => {
    const entrypoint = execForm(one(finalStage, 'ENTRYPOINT').args, 'ENTRYPOINT');
    expect(entrypoint).toHaveLength(2);
    expect(entrypoint[0]).toBe('node');
    expect(inImage(entrypoint[1]!, finalWorkdir)).toBe(posix.join(finalWorkdir, pkg.bin['analytics-exporter']!));
    expect(pkg.bin['analytics-exporter']).toBe('dist/cli.js');
    expect(execForm(one(finalStage, 'CMD').args, 'CMD')).toEqual(['serve']);
    expect(all(finalStage, 'STOPSIGNAL').every((s) => s.args === 'SIGTERM')).toBe(true);
  });

  it('labels the image with OCI annotations that match package.json', () => {
    const labels = new Map(all(finalStage, 'LABEL').flatMap((i) => [...keyValues(i.args)]));
    expect(labels.get('org.opencontainers.image.title')).toBe('analytics-exporter');
    expect(labels.get('org.opencontainers.image.version')).toBe(pkg.version);
    expect(labels.get('org.opencontainers.image.licenses')).toBe(pkg.license);
    expect(labels.get('org.opencontainers.image.revision')).toBe('${REVISION}');
    expect(
      all(finalStage, 'ARG').some((a) => /^REVISION(=|$)/.test(a.args)),
      'ARG REVISION redeclared in the runtime stage',
    ).toBe(true);
    for (const key of labels.keys()) expect(key).toMatch(/^org\.opencontainers\.image\.[a-z.]+$/);
  });
});

// ---------------------------------------------------------------------------------------------
// compose.yaml

interface Service {
  image?: string;
  build?: string | { context: string; dockerfile?: string; target?: string; args?: Record<string, string> | string[] };
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | number | { target: number; published?: string | number })[];
  volumes?: (string | { type: string; source: string; target: string })[];
  secrets?: (string | { source: string; target?: string })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test: string | string[]; disable?: boolean };
}

interface ComposeFile {
  services: Record<string, Service>;
  secrets?: Record<string, { file?: string; environment?: string }>;
  volumes?: Record<string, unknown>;
}

const compose = parse(read('compose.yaml')) as ComposeFile;
const services = compose.services;
/** The simulator services: two environments of the platform, one per source of compose/sources.yaml. */
const SIMULATORS = ['simulator-production', 'simulator-sandbox'];
const OUR_IMAGE_SERVICES = [...SIMULATORS, 'analytics-exporter'];

/** Compose interpolation with an empty environment: `${VAR:-default}` and `${VAR-default}` give the default, `$$` is `$`. */
function interpolate(value: string): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (match, _name: string | undefined, fallback: string | undefined) =>
    match === '$$' ? '$' : (fallback ?? ''),
  );
}

function environmentOf(service: Service): Map<string, string> {
  const env = new Map<string, string>();
  const raw = service.environment ?? {};
  const entries: [string, string][] = Array.isArray(raw)
    ? raw.map((item) => {
        const at = item.indexOf('=');
        return at < 0 ? [item, ''] : [item.slice(0, at), item.slice(at + 1)];
      })
    : Object.entries(raw).map(([key, value]) => [key, value === null ? '' : String(value)]);
  for (const [key, value] of entries) env.set(key, interpolate(value));
  return env;
}

const argvOf = (service: Service): string[] =>
  service.command === undefined ? [] : Array.isArray(service.command) ? service.command.map(String) : service.command.split(/\s+/);

function flagValue(argv: string[], flag: string): string | undefined {
  const at = argv.indexOf(flag);
  if (at >= 0) return argv[at + 1];
  return argv.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1);
}

/** Environment a container of our image sees: the Dockerfile's ENV, then compose's. */
const containerEnv = (service: Service): Map<string, string> => new Map([...finalEnv, ...environmentOf(service)]);

const portOf = (listen: string): number => Number(listen.slice(listen.lastIndexOf(':') + 1));

/** The port each service listens on inside its container. */
function listenPort(name: string): number {
  const service = services[name]!;
  switch (name) {
    case 'analytics-exporter':
      return portOf(containerEnv(service).get('METRICS_LISTEN')!);
    case 'simulator-production':
    case 'simulator-sandbox':
      return Number(flagValue(argvOf(service), '--port') ?? 8080);
    case 'postgres':
      return 5432;
    case 'prometheus': {
      const listen = flagValue(argvOf(service), '--web.listen-address');
      return listen === undefined ? 9090 : portOf(listen);
    }
    case 'grafana':
      return Number(environmentOf(service).get('GF_SERVER_HTTP_PORT') ?? 3000);
    default:
      throw new Error(`no listen port known for service ${name}`);
  }
}

/** Container port of a `ports:` entry (`"9877:9877"`, `"127.0.0.1:9877:9877/tcp"`, `9877`, long form). */
function containerPort(entry: string | number | { target: number }): number {
  if (typeof entry === 'number') return entry;
  if (typeof entry === 'object') return entry.target;
  return Number(
    entry
      .replace(/\/(tcp|udp)$/, '')
      .split(':')
      .at(-1),
  );
}

interface Mount {
  source: string;
  target: string;
  bind: boolean;
}

function mountsOf(service: Service): Mount[] {
  return (service.volumes ?? []).map((volume) => {
    if (typeof volume === 'object') return { source: volume.source, target: volume.target, bind: volume.type === 'bind' };
    const [source, target] = volume.split(':');
    return { source: source!, target: target!, bind: /^(\.{1,2}\/|\/|~)/.test(source!) };
  });
}

/** Host path of a bind mount whose container side holds `containerPath`, or undefined. */
function hostPathOf(service: Service, containerPath: string): string | undefined {
  for (const mount of mountsOf(service)) {
    if (!mount.bind) continue;
    if (containerPath === mount.target || containerPath.startsWith(`${mount.target}/`)) {
      return join(ROOT, mount.source, containerPath.slice(mount.target.length));
    }
  }
  return undefined;
}

function mustExist(path: string, what: string): void {
  expect(existsSync(path), `${what}: ${relative(ROOT, path)} does not exist in the repository`).toBe(true);
}

/** `host:port` of a URL or a bare `host:port`. */
function hostAndPort(address: string): { host: string; port: number } {
  const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `tcp://${address}`);
  const defaults: Record<string, number> = { 'http:': 80, 'https:': 443 };
  return { host: url.hostname, port: url.port === '' ? defaults[url.protocol]! : Number(url.port) };
}

/** Every `host:port` a service of this file is reached at must be a service listening there. */
function expectServiceAddress(address: string, what: string): void {
  const { host, port } = hostAndPort(address);
  expect(Object.keys(services), `${what} ${address}: no service named ${host}`).toContain(host);
  expect(port, `${what} ${address}: ${host} listens on ${listenPort(host)}`).toBe(listenPort(host));
}

/** Host file of the compose secret a container of `service` reads at `containerPath` (`/run/secrets/<name>`), or undefined. */
function secretFileOf(service: Service, containerPath: string): string | undefined {
  for (const secret of service.secrets ?? []) {
    const name = typeof secret === 'string' ? secret : secret.source;
    const target = typeof secret === 'string' ? `/run/secrets/${name}` : posix.resolve('/run/secrets', secret.target ?? name);
    if (target === containerPath) return join(ROOT, compose.secrets![name]!.file!);
  }
  return undefined;
}

/** A source of CONFIG_FILE as compose/sources.yaml writes it: the keys this test reads. */
interface SourceEntry {
  name: string;
  statistics_url: string;
  auth_url: string;
  client_id: string;
  client_secret?: string;
  client_secret_file?: string;
  scope?: string;
  labels?: Record<string, string>;
}

/**
 * The exporter's CONFIG_FILE as its container reads it: the host file bind-mounted at the path
 * CONFIG_FILE names, and its sources.
 */
function sourcesFile(): { path: string; containerPath: string; sources: SourceEntry[] } {
  const exporter = services['analytics-exporter']!;
  const containerPath = environmentOf(exporter).get('CONFIG_FILE');
  expect(containerPath, 'the exporter reads its sources from CONFIG_FILE').toBeDefined();
  const path = hostPathOf(exporter, containerPath!);
  expect(path, `CONFIG_FILE ${containerPath} lies in a bind mount of the exporter`).toBeDefined();
  mustExist(path!, 'CONFIG_FILE');
  const doc = parse(readFileSync(path!, 'utf8')) as { sources?: SourceEntry[] } | null;
  expect(Array.isArray(doc?.sources), `${relative(ROOT, path!)} has a sources: list`).toBe(true);
  return { path: path!, containerPath: containerPath!, sources: doc!.sources! };
}

/** The simulator service a source reads from: the host of its statistics_url. */
const simulatorOf = (source: SourceEntry): string => new URL(source.statistics_url).hostname;

const yamlFilesIn = (dir: string): string[] =>
  existsSync(dir) && statSync(dir).isDirectory()
    ? readdirSync(dir)
        .filter((f) => /\.ya?ml$/.test(f))
        .map((f) => join(dir, f))
    : [];

describe('compose.yaml', () => {
  it('has the six services, ours built from this Dockerfile: the exporter its default target, the simulators its simulator target', () => {
    expect(Object.keys(services).sort()).toEqual(['analytics-exporter', 'grafana', 'postgres', 'prometheus', ...SIMULATORS].sort());
    const images = new Set<string>();
    for (const name of OUR_IMAGE_SERVICES) {
      const build = services[name]!.build;
      expect(build, `${name} is built`).toBeDefined();
      const context = typeof build === 'string' ? build : build!.context;
      expect(posix.normalize(context)).toBe('.');
      const dockerfilePath = typeof build === 'object' && build.dockerfile !== undefined ? build.dockerfile : 'Dockerfile';
      mustExist(join(ROOT, context, dockerfilePath), `${name} build`);
      if (typeof build === 'object' && build.args !== undefined && !Array.isArray(build.args)) {
        for (const arg of Object.keys(build.args)) {
          expect(
            dockerfile.some((i) => i.keyword === 'ARG' && i.args.split('=')[0] === arg),
            `build arg ${arg} is an ARG of the Dockerfile`,
          ).toBe(true);
        }
      }
      expect(services[name]!.image, `${name} names the image it builds, so services of one target share it`).toBeTruthy();
      images.add(services[name]!.image!);
    }
    // The exporter's image is the last stage (no target): the one without the simulator.
    const exporterBuild = services['analytics-exporter']!.build;
    expect(typeof exporterBuild === 'object' ? exporterBuild.target : undefined).toBeUndefined();
    expect(images.size).toBe(2);
    for (const name of SIMULATORS) {
      expect(services[name]!.build).toEqual({ ...(exporterBuild as object), target: simulatorStage!.name });
      expect(services[name]!.image).toBe(services[SIMULATORS[0]!]!.image);
      expect(services[name]!.image).not.toBe(services['analytics-exporter']!.image);
    }
  });

  it('pins the images it pulls to a tag other than latest', () => {
    const pulled = Object.entries(services).filter(([name]) => !OUR_IMAGE_SERVICES.includes(name));
    for (const [name, service] of pulled) {
      expect(service.build, `${name} is pulled, not built`).toBeUndefined();
      expect(service.image, `${name}: image:tag`).toMatch(/^[a-z0-9./-]+:[A-Za-z0-9._-]+$/);
      expect(service.image!.endsWith(':latest'), `${name} pinned`).toBe(false);
    }
    expect(services['postgres']!.image).toBe('postgres:16');
    expect(services['prometheus']!.image).toMatch(/^prom\/prometheus:/);
    expect(services['grafana']!.image).toMatch(/^grafana\/grafana:/);
  });

  it("runs serve in the exporter and the simulator's program, given its flags, in the simulators", () => {
    expect(argvOf(services['analytics-exporter']!)).toEqual(['serve']);
    for (const name of SIMULATORS) {
      const simulator = argvOf(services[name]!);
      expect(simulator[0], `${name}: the simulator target's entrypoint is the program; the command is its flags`).toMatch(/^--/);
      expect(flagValue(simulator, '--host'), `${name} must listen beyond loopback`).toBe('0.0.0.0');
    }
  });

  it('quotes whatever a YAML 1.1 parser would not read as a string (dates, numbers) in commands', () => {
    // Compose implementations differ in their YAML schema; under YAML 1.1 an unquoted
    // 2026-01-01T00:00:00Z is a timestamp and docker-compose 1.x rejects the command.
    const strict = parse(read('compose.yaml'), { schema: 'yaml-1.1' }) as ComposeFile;
    for (const [name, service] of Object.entries(strict.services)) {
      for (const word of Array.isArray(service.command) ? service.command : []) {
        expect(typeof word, `${name} command word ${String(word)}`).toBe('string');
      }
    }
  });

  it.each(SIMULATORS)('accepts the flags of %s, and issues a token to the client of its source in compose/sources.yaml', async (name) => {
    const source = sourcesFile().sources.find((entry) => simulatorOf(entry) === name);
    expect(source, `a source reads from ${name}`).toBeDefined();
    const secretFile = secretFileOf(services['analytics-exporter']!, source!.client_secret_file ?? '');
    expect(secretFile, `source ${source!.name}: client_secret_file is a secret of the exporter`).toBeDefined();
    let tokenStatus: number | undefined;
    const argv = argvOf(services[name]!);
    const raw: Record<string, unknown> = {};
    for (let i = 0; i < argv.length; i++) {
      const flag = argv[i]!;
      expect(flag, `simulator arguments are --flag value pairs, got ${flag}`).toMatch(/^--[a-z-]+$/);
      const key = flag.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) raw[key] = true;
      else raw[key] = argv[++i]!;
    }
    raw.host = '127.0.0.1';
    raw.port = '0';
    const stderr: string[] = [];
    const stop = new AbortController();
    let url: string | undefined;
    const status = await runSimulate(
      raw,
      {
        stdout: () => undefined,
        stderr: (line) => stderr.push(line),
        signal: stop.signal,
        onListening: (listening) => {
          url = listening;
          // A token with the source's credentials, as compose gives them to the exporter.
          const body = new URLSearchParams({
            grant_type: 'client_credentials',
            client_id: source!.client_id,
            client_secret: readFileSync(secretFile!, 'utf8').trim(),
            scope: source!.scope ?? DEFAULT_SCOPE,
          });
          void fetch(`${listening}/connect/token`, { method: 'POST', body }).then(
            (response) => {
              tokenStatus = response.status;
              stop.abort();
            },
            () => stop.abort(),
          );
        },
      },
      createLogger('silent'),
    );
    expect(stderr).toEqual([]);
    expect(status).toBe(0);
    expect(url).toBeDefined();
    expect(tokenStatus, `${name} issues a token for the credentials of source ${source!.name}`).toBe(200);
  });

  it('names only dependencies that exist, healthy only where there is a healthcheck', () => {
    for (const [name, service] of Object.entries(services)) {
      const dependsOn = service.depends_on ?? [];
      const entries: [string, string | undefined][] = Array.isArray(dependsOn)
        ? dependsOn.map((d) => [d, undefined])
        : Object.entries(dependsOn).map(([d, v]) => [d, v?.condition]);
      for (const [dependency, condition] of entries) {
        expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency);
        expect([undefined, 'service_started', 'service_healthy', 'service_completed_successfully']).toContain(condition);
        if (condition === 'service_healthy') {
          const target = services[dependency]!;
          const hasCheck = (target.healthcheck !== undefined && target.healthcheck.disable !== true) || OUR_IMAGE_SERVICES.includes(dependency);
          expect(hasCheck, `${name} waits for ${dependency} to be healthy, which needs a healthcheck`).toBe(true);
        }
      }
    }
    const exporter = services['analytics-exporter']!.depends_on as Record<string, { condition?: string }>;
    expect(exporter['postgres']?.condition).toBe('service_healthy');
    for (const name of SIMULATORS) expect(exporter[name], name).toBeDefined();
  });

  it('checks health on the port each service listens on', () => {
    const postgres = services['postgres']!.healthcheck!.test;
    expect(JSON.stringify(postgres)).toContain('pg_isready');
    for (const name of SIMULATORS) {
      const simulator = services[name]!.healthcheck;
      expect(simulator, `${name} overrides the image's /healthz check (it serves no /healthz)`).toBeDefined();
      expect(JSON.stringify(simulator!.test)).toContain(`127.0.0.1:${listenPort(name)}/`);
    }
    expect(services['analytics-exporter']!.healthcheck, "the exporter keeps the image's HEALTHCHECK").toBeUndefined();
  });

  it('binds only host paths and secret files that exist in the repository', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const mount of mountsOf(service)) {
        if (mount.bind) mustExist(join(ROOT, mount.source), `${name} bind mount → ${mount.target}`);
        else expect(Object.keys(compose.volumes ?? {}), `${name}: named volume ${mount.source} is declared`).toContain(mount.source);
      }
      for (const secret of service.secrets ?? []) {
        const secretName = typeof secret === 'string' ? secret : secret.source;
        expect(Object.keys(compose.secrets ?? {}), `${name}: secret ${secretName} is declared`).toContain(secretName);
      }
    }
    for (const [name, secret] of Object.entries(compose.secrets ?? {})) {
      expect(secret.file, `secret ${name} comes from a file`).toBeDefined();
      mustExist(join(ROOT, secret.file!), `secret ${name}`);
      expect(readFileSync(join(ROOT, secret.file!), 'utf8').trim(), `secret ${name} is not empty`).not.toBe('');
    }
  });

  it('mounts the Prometheus and Grafana files at the paths their images read', () => {
    const prometheus = services['prometheus']!;
    expect(hostPathOf(prometheus, '/etc/prometheus/prometheus.yml')).toBe(join(ROOT, 'prometheus/prometheus.yml'));
    expect(hostPathOf(prometheus, '/etc/prometheus/rules')).toBe(join(ROOT, 'prometheus/rules'));
    const grafana = services['grafana']!;
    expect(hostPathOf(grafana, '/etc/grafana/provisioning')).toBe(join(ROOT, 'grafana/provisioning'));
    expect(hostPathOf(grafana, '/var/lib/grafana/dashboards')).toBe(join(ROOT, 'grafana/dashboards'));
  });

  it('publishes each service on the port it listens on; the exporter on 9877 as the Dockerfile exposes', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const entry of service.ports ?? []) {
        expect(containerPort(entry), `${name} publishes ${JSON.stringify(entry)}`).toBe(listenPort(name));
      }
    }
    const exposed = Number(one(finalStage, 'EXPOSE').args);
    expect(listenPort('analytics-exporter')).toBe(exposed);
    expect(exposed).toBe(DEFAULT_METRICS_PORT);
    expect((services['analytics-exporter']!.ports ?? []).map(containerPort)).toContain(exposed);
    expect((services['prometheus']!.ports ?? []).map(containerPort)).toContain(9090);
    expect((services['grafana']!.ports ?? []).map(containerPort)).toContain(3000);
  });

  it('gives our containers only known configuration variables', () => {
    const known = new Set(SETTINGS.map((s) => s.env));
    for (const name of OUR_IMAGE_SERVICES) {
      for (const key of environmentOf(services[name]!).keys()) {
        expect(known.has(key), `${name}: ${key} is not a configuration variable of src/config.ts`).toBe(true);
      }
    }
    for (const key of finalEnv.keys()) {
      if (key === 'NODE_ENV') continue;
      expect(known.has(key), `Dockerfile ENV ${key} is not a configuration variable`).toBe(true);
    }
  });

  it('configures one source per simulator in compose/sources.yaml, each with the client that simulator accepts', () => {
    const exporter = services['analytics-exporter']!;
    const env = environmentOf(exporter);
    for (const variable of ['STATISTICS_URL', 'AUTH_URL', 'CLIENT_ID', 'CLIENT_SECRET', 'CLIENT_SECRET_FILE'])
      expect(env.has(variable), `${variable}: the sources come from CONFIG_FILE alone`).toBe(false);
    const { sources } = sourcesFile();
    expect(sources.map((source) => source.name)).toEqual(['production', 'sandbox']);
    expect(sources.map(simulatorOf).sort(), 'one source per simulator').toEqual([...SIMULATORS].sort());
    for (const source of sources) {
      const where = `source ${source.name}`;
      expect(source.name, where).toMatch(/^[a-z0-9_-]{1,64}$/);
      expectServiceAddress(source.statistics_url, `${where} statistics_url`);
      expectServiceAddress(source.auth_url, `${where} auth_url`);
      expect(new URL(source.auth_url).hostname, `${where}: tokens from the simulator it reads`).toBe(simulatorOf(source));
      const simulator = argvOf(services[simulatorOf(source)]!);
      expect(source.client_id, `${where}: client_id is the simulator's --client-id`).toBe(flagValue(simulator, '--client-id'));
      expect(source.client_secret, `${where}: the secret comes from a file, not from the config file`).toBeUndefined();
      const secretFile = secretFileOf(exporter, source.client_secret_file ?? '');
      expect(secretFile, `${where}: client_secret_file ${source.client_secret_file} is a secret compose mounts into the exporter`).toBeDefined();
      expect(readFileSync(secretFile!, 'utf8').trim(), `${where}: the secret file holds the simulator's --client-secret`).toBe(
        flagValue(simulator, '--client-secret'),
      );
      expect(source.scope ?? DEFAULT_SCOPE, `${where}: scope`).toBe(flagValue(simulator, '--scope') ?? DEFAULT_SCOPE);
      expect(source.labels, `${where}: labels its samples with its environment`).toEqual({ environment: source.name });
    }
    // Two environments: their own data and their own clients.
    for (const flag of ['--seed', '--client-id', '--client-secret']) {
      const values = SIMULATORS.map((name) => flagValue(argvOf(services[name]!), flag));
      expect(values.every((value) => value !== undefined) && new Set(values).size === SIMULATORS.length, `the simulators' ${flag}: ${values.join(', ')}`).toBe(
        true,
      );
    }
  });

  it('loads compose/sources.yaml as the exporter container would: both sources with their clients and secrets', () => {
    const config = exporterConfig();
    const { sources } = sourcesFile();
    expect(config.sources.map((source) => source.name)).toEqual(sources.map((source) => source.name));
    for (const source of config.sources) {
      const entry = sources.find((s) => s.name === source.name)!;
      const simulator = argvOf(services[simulatorOf(entry)]!);
      expect(source.upstream, `source ${source.name} has an upstream`).toBeDefined();
      expect(source.upstream!.clientId).toBe(flagValue(simulator, '--client-id'));
      expect(readClientFiles(source.upstream!).clientSecret).toBe(flagValue(simulator, '--client-secret'));
      expect(source.labels).toEqual(entry.labels);
    }
  });

  it('connects the exporter to the postgres service and listens where compose publishes it', () => {
    const config = exporterConfig();
    const databaseUrl = new URL(config.database.url!);
    expectServiceAddress(`${databaseUrl.hostname}:${databaseUrl.port || 5432}`, 'DATABASE_URL');
    const postgres = environmentOf(services['postgres']!);
    expect(databaseUrl.pathname).toBe(`/${postgres.get('POSTGRES_DB')}`);
    expect(postgres.get('POSTGRES_DB')).toBe('analytics');
    expect(decodeURIComponent(databaseUrl.username)).toBe(postgres.get('POSTGRES_USER'));
    expect(decodeURIComponent(databaseUrl.password)).toBe(postgres.get('POSTGRES_PASSWORD'));
    expect(config.serve.port).toBe(DEFAULT_METRICS_PORT);
  });

  it('scrapes the exporter at its service name and port (prometheus/prometheus.yml)', () => {
    const path = hostPathOf(services['prometheus']!, '/etc/prometheus/prometheus.yml')!;
    mustExist(path, 'Prometheus configuration');
    const config = parse(readFileSync(path, 'utf8')) as {
      global?: { scrape_interval?: string; scrape_timeout?: string };
      rule_files?: string[];
      scrape_configs?: { job_name: string; static_configs?: { targets: string[] }[] }[];
    };
    const jobs = config.scrape_configs ?? [];
    const job = jobs.find((j) => j.job_name === 'analytics-exporter');
    expect(job, 'a scrape job named analytics-exporter').toBeDefined();
    const targets = (job!.static_configs ?? []).flatMap((c) => c.targets);
    expect(targets).toContain(`analytics-exporter:${listenPort('analytics-exporter')}`);
    for (const j of jobs) {
      for (const target of (j.static_configs ?? []).flatMap((c) => c.targets)) {
        // localhost:9090 is Prometheus scraping itself.
        if (/^(localhost|127\.0\.0\.1):9090$/.test(target)) continue;
        expectServiceAddress(target, `job ${j.job_name} target`);
      }
    }
    const rulesDir = hostPathOf(services['prometheus']!, '/etc/prometheus/rules')!;
    mustExist(rulesDir, 'Prometheus rules folder');
    for (const ruleFile of config.rule_files ?? []) {
      const inContainer = posix.resolve('/etc/prometheus', ruleFile);
      const host = hostPathOf(services['prometheus']!, posix.dirname(inContainer));
      expect(host, `rule_files ${ruleFile} lies in a mounted folder`).toBeDefined();
      const glob = new RegExp(
        `^${posix
          .basename(inContainer)
          .replace(/[.+^${}()|[\]\\]/g, '\\$&')
          .replace(/\*/g, '.*')}$`,
      );
      const matches = existsSync(host!) ? readdirSync(host!).filter((f) => glob.test(f)) : [];
      expect(matches.length, `rule_files ${ruleFile} matches files in ${relative(ROOT, host!)}`).toBeGreaterThan(0);
      for (const match of matches) {
        // Prometheus loads every match as a rule file: a promtool unit-test file there stops it starting.
        const doc = parse(readFileSync(join(host!, match), 'utf8')) as { groups?: unknown[] } | null;
        expect(Array.isArray(doc?.groups), `${relative(ROOT, join(host!, match))}, matched by rule_files ${ruleFile}, is a rule file (groups:)`).toBe(true);
      }
    }
    expect(yamlFilesIn(rulesDir).length, 'rule files in prometheus/rules').toBeGreaterThan(0);
  });

  it('provisions Grafana datasources at services that exist, with the variables compose sets', () => {
    const grafana = services['grafana']!;
    const grafanaEnv = environmentOf(grafana);
    expect(grafanaEnv.get('GF_AUTH_ANONYMOUS_ENABLED')).toBe('true');
    expect(grafanaEnv.get('GF_AUTH_ANONYMOUS_ORG_ROLE')).toBe('Viewer');
    const postgresEnv = environmentOf(services['postgres']!);
    expect(grafanaEnv.get('POSTGRES_USER')).toBe(postgresEnv.get('POSTGRES_USER'));
    expect(grafanaEnv.get('POSTGRES_PASSWORD')).toBe(postgresEnv.get('POSTGRES_PASSWORD'));

    const dir = hostPathOf(grafana, '/etc/grafana/provisioning/datasources')!;
    mustExist(dir, 'Grafana datasource provisioning');
    const files = yamlFilesIn(dir);
    expect(files.length, 'datasource files in grafana/provisioning/datasources').toBeGreaterThan(0);
    const types = new Set<string>();
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      const doc = parse(text) as { datasources?: { type: string; url?: string; database?: string; jsonData?: { database?: string } }[] };
      // Grafana expands $VAR and ${VAR} in the values of provisioning files from its environment.
      for (const match of stringsIn(doc)
        .join('\n')
        .matchAll(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g)) {
        const variable = match[1] ?? match[2]!;
        if (variable.startsWith('__')) continue; // $__file{…}, $__env{…}
        expect(grafanaEnv.has(variable), `${relative(ROOT, file)} uses $${variable}, which compose does not set for grafana`).toBe(true);
      }
      for (const ds of doc.datasources ?? []) {
        types.add(ds.type);
        if (ds.url !== undefined) expectServiceAddress(ds.url, `${relative(ROOT, file)} datasource ${ds.type}`);
        if (/postgres/.test(ds.type)) expect(ds.jsonData?.database ?? ds.database).toBe(postgresEnv.get('POSTGRES_DB'));
      }
    }
    expect(
      [...types].some((t) => t === 'prometheus'),
      'a Prometheus datasource',
    ).toBe(true);
    expect(
      [...types].some((t) => /postgres/.test(t)),
      'a PostgreSQL datasource',
    ).toBe(true);
  });

  it('provisions dashboards from the folder compose mounts (grafana/dashboards)', () => {
    const grafana = services['grafana']!;
    const dir = hostPathOf(grafana, '/etc/grafana/provisioning/dashboards')!;
    mustExist(dir, 'Grafana dashboard provisioning');
    const providers = yamlFilesIn(dir).flatMap(
      (file) => (parse(readFileSync(file, 'utf8')) as { providers?: { options?: { path?: string } }[] }).providers ?? [],
    );
    expect(providers.length, 'dashboard providers in grafana/provisioning/dashboards').toBeGreaterThan(0);
    for (const provider of providers) {
      const path = provider.options?.path;
      expect(path, 'provider options.path').toBeDefined();
      const host = hostPathOf(grafana, path!);
      expect(host, `dashboard path ${path} is mounted into grafana`).toBeDefined();
      mustExist(host!, `dashboards at ${path}`);
    }
    const dashboards = hostPathOf(grafana, '/var/lib/grafana/dashboards')!;
    mustExist(dashboards, 'Grafana dashboards folder');
    const json = readdirSync(dashboards, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.json'));
    expect(json.length, 'dashboard JSON files in grafana/dashboards').toBeGreaterThan(0);
    for (const file of json) expect((): unknown => JSON.parse(readFileSync(join(dashboards, file), 'utf8')), file).not.toThrow();
  });
});

/** Every string value inside a parsed YAML document (keys and comments excluded). */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap(stringsIn);
  return [];
}

/**
 * The exporter's configuration as its container would load it: the image ENV, compose's
 * environment, the secret files, and CONFIG_FILE. Compose mounts each secret at
 * /run/secrets/<name>, which the host lacks: variables naming one get the file it comes from, and
 * CONFIG_FILE is a copy of the mounted file with those paths rewritten the same way.
 */
function exporterConfig(): ReturnType<typeof loadConfig> {
  const service = services['analytics-exporter']!;
  const env = Object.fromEntries(containerEnv(service));
  for (const [key, value] of Object.entries(env)) env[key] = secretFileOf(service, value) ?? value;
  if (env.CONFIG_FILE === undefined) return loadConfig(env);
  const { path } = sourcesFile();
  let text = readFileSync(path, 'utf8');
  for (const secret of service.secrets ?? []) {
    const name = typeof secret === 'string' ? secret : secret.source;
    const target = typeof secret === 'string' ? `/run/secrets/${name}` : posix.resolve('/run/secrets', secret.target ?? name);
    text = text.replaceAll(target, secretFileOf(service, target)!);
  }
  const dir = mkdtempSync(join(tmpdir(), 'compose-config-file-'));
  try {
    writeFileSync(join(dir, 'sources.yaml'), text);
    return loadConfig({ ...env, CONFIG_FILE: join(dir, 'sources.yaml') });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
