/**
 * deploy/kubernetes/ as a cluster would get it: each overlay (and the examples) rendered
 * with `kubectl kustomize`, every object validated against the Kubernetes and prometheus-operator
 * schemas (kubernetes-models, @kubernetes-models/prometheus-operator), the objects checked against
 * each other and the code (ports, probes, labels, the sources file through the program's own
 * loader; the TLS and basic auth example's probes sent to a server with its web configuration),
 * and the rules inside the rendered PrometheusRule put through the promtool unit tests of
 * prometheus/rules/. No cluster is needed; kubectl must be installed (`npm test` installs Debian's
 * kubernetes-client where there is none).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import * as monitoringV1 from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as coreV1 from 'kubernetes-models/v1';
import { DEFAULT_METRICS_PORT, loadConfig, SETTINGS } from '../../src/config.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { createMetricsServer } from '../../src/serve/http.js';
import { E7Scraper } from '../../src/serve/scrape.js';
import { loadWebConfig, WebConfigSource } from '../../src/serve/web/webconfig.js';
import { createTestPki } from '../helpers/certs.js';
import { promtool } from '../helpers/prometheus.js';
import { silentLogger } from '../helpers/silent-logger.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KUBERNETES_DIR = join(ROOT, 'deploy/kubernetes');
const RULES_FILE = join(ROOT, 'prometheus/rules/analytics-exporter.rules.yml');
const RULES_TEST_FILE = join(ROOT, 'prometheus/rules/analytics-exporter.rules.test.yml');
const DASHBOARDS_DIR = join(ROOT, 'grafana/dashboards');

// ---------------------------------------------------------------------------------------------
// Rendering

/** kubectl on PATH, else /usr/bin/kubectl; the test fails naming it when there is none. */
function findKubectl(): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== ''), '/usr/bin'];
  const found = dirs.map((dir) => resolve(dir, 'kubectl')).find((path) => existsSync(path));
  if (found === undefined) {
    throw new Error('kubectl not found on PATH or at /usr/bin/kubectl: install it (Debian: apt-get install kubernetes-client; npm test does as root)');
  }
  return found;
}

/**
 * True when kubectl's kustomize is older than v3 (Debian 12's kubernetes-client, kubectl 1.20,
 * carries kustomize v2.0.3, and prints no "Kustomize Version"): it takes directories in `bases:`
 * only, and knows no `patches:`.
 */
function isOldKustomize(kubectl: string): boolean {
  const text = execFileSync(kubectl, ['version', '--client'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const version = /Kustomize Version: v(\d+)/.exec(text)?.[1];
  return version === undefined || Number(version) < 3;
}

/**
 * A copy of deploy/kubernetes with every kustomization written the way kustomize v2 reads it:
 * directories moved from `resources:` to `bases:`, `patches: [{path}]` to `patchesStrategicMerge:`.
 * The objects rendered are the same (only the generated names' hashes differ: checked by hand
 * against kubectl 1.32's kustomize v5.5).
 */
function copyForOldKustomize(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kustomize-v2-'));
  cpSync(KUBERNETES_DIR, dir, { recursive: true });
  adaptForOldKustomize(dir);
  return dir;
}

/** Rewrites every kustomization.yaml under `dir` for kustomize v2 (see {@link copyForOldKustomize}). */
function adaptForOldKustomize(dir: string): void {
  const walk = (folder: string): void => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name === 'kustomization.yaml') {
        const k = parse(readFileSync(path, 'utf8')) as Record<string, unknown> & { resources?: string[]; patches?: { path: string }[] };
        const isDir = (entry: string): boolean => statSync(join(folder, entry)).isDirectory();
        const resources = k.resources ?? [];
        if (resources.some(isDir)) k.bases = resources.filter(isDir);
        k.resources = resources.filter((entry) => !isDir(entry));
        if (k.patches !== undefined) k.patchesStrategicMerge = k.patches.map((patch) => patch.path);
        delete k.patches;
        writeFileSync(path, stringify(k));
      }
    }
  };
  walk(dir);
}

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

const kubectl = findKubectl();
const oldKustomize = isOldKustomize(kubectl);
const renderRoot = oldKustomize ? copyForOldKustomize() : KUBERNETES_DIR;
afterAll(() => {
  if (renderRoot !== KUBERNETES_DIR) rmSync(renderRoot, { recursive: true, force: true });
});

/**
 * `kubectl kustomize <dir>`'s objects (`dir` relative to deploy/kubernetes, or absolute). Fails with kubectl's stderr when it exits non-zero, and on
 * a current kustomize when it prints anything there (a deprecated field is a warning on stderr).
 */
function render(kustomization: string): K8sObject[] {
  const result = spawnSync(kubectl, ['kustomize', resolve(renderRoot, kustomization)], { encoding: 'utf8' });
  if (result.error !== undefined) throw new Error(`${kubectl} could not be started`, { cause: result.error });
  if (result.status !== 0) throw new Error(`${kubectl} kustomize ${kustomization} exited ${result.status}: ${result.stderr}`);
  if (!oldKustomize && result.stderr !== '') throw new Error(`${kubectl} kustomize ${kustomization} warned: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((doc) => doc.toJS() as K8sObject);
}

const rendered = {
  serve: render('overlays/serve'),
  cronjob: render('overlays/cronjob'),
  probePerSource: render('examples/probe-per-source'),
  tlsBasicAuth: render('examples/tls-basic-auth'),
};

function find<T = K8sObject>(objects: K8sObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name || o.metadata.name.startsWith(`${name}-`)));
  expect(found, `one ${kind}${name === undefined ? '' : ` ${name}`}`).toHaveLength(1);
  return found[0] as T;
}

// ---------------------------------------------------------------------------------------------
// Schemas

type Model = new (data: object) => { validate(): void };
const MODELS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'apps/v1': appsV1,
  'batch/v1': batchV1,
  'policy/v1': policyV1,
  'monitoring.coreos.com/v1': monitoringV1,
};

/** Validates `object` against the schema of its apiVersion and kind; throws naming the first violation. */
function validate(object: K8sObject): void {
  const model = MODELS[object.apiVersion]?.[object.kind] as Model | undefined;
  if (model === undefined) throw new Error(`no schema for ${object.apiVersion} ${object.kind}`);
  new model(object).validate();
}

describe('kubectl kustomize deploy/kubernetes', () => {
  it.each(Object.entries(rendered))('renders %s into objects that all validate against their schemas', (_name, objects) => {
    expect(objects.length).toBeGreaterThan(0);
    for (const object of objects) expect(() => validate(object), `${object.kind} ${object.metadata.name}`).not.toThrow();
  });

  it('validation rejects an object that breaks its schema', () => {
    const deployment = structuredClone(find<K8sObject & { spec: { replicas: unknown } }>(rendered.serve, 'Deployment'));
    deployment.spec.replicas = 'two';
    expect(() => validate(deployment)).toThrow(/replicas/);
    const rule = structuredClone(find<K8sObject & { spec: { groups: { rules: { for?: string }[] }[] } }>(rendered.serve, 'PrometheusRule'));
    rule.spec.groups[0]!.rules[0]!.for = 'five minutes';
    expect(() => validate(rule)).toThrow(/for/);
  });
});

// ---------------------------------------------------------------------------------------------
// The objects agree with each other and the code

interface Probe {
  httpGet?: { path: string; port: string | number; scheme?: string; httpHeaders?: unknown[] };
}
interface Container {
  name: string;
  args?: string[];
  image: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { limits?: { memory?: string } };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: { name: string; mountPath: string; subPath?: string }[];
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; secret?: { secretName: string }; configMap?: { name: string }; emptyDir?: object }[];
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number };
  automountServiceAccountToken?: boolean;
}
interface ConfigMap extends K8sObject {
  data: Record<string, string>;
}

const SECRET = 'analytics-exporter';
/** The schema owner's DATABASE_URL, for the `migrate` init container only. */
const MIGRATE_SECRET = 'analytics-exporter-migrate';
const known = new Set(SETTINGS.map((s) => s.env));

/**
 * Checks a pod of either overlay and returns its container's environment (ConfigMaps included):
 * non-root as the image's user, a read-only root with every written folder a volume, DATABASE_URL
 * from the Secret, CONFIG_FILE in the mounted sources ConfigMap, only known settings.
 */
function expectPod(objects: K8sObject[], pod: PodSpec, command: string): Map<string, string | undefined> {
  expect(pod.containers).toHaveLength(1);
  const container = pod.containers[0]!;
  expect(container.args).toEqual([command]);
  expect(container.image).toBe('registry.example.com/analytics-exporter:0.1.0');
  expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 });
  expect(pod.automountServiceAccountToken).toBe(false);
  expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  expect(container.resources?.limits?.memory).toBe('512Mi');

  const env = new Map<string, string | undefined>();
  for (const source of container.envFrom ?? []) {
    for (const [key, value] of Object.entries(find<ConfigMap>(objects, 'ConfigMap', source.configMapRef!.name).data)) env.set(key, value);
  }
  for (const variable of container.env ?? []) env.set(variable.name, variable.value);
  for (const key of env.keys()) expect(known.has(key), `${command} pod: ${key} is not a configuration variable`).toBe(true);
  expect(container.env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({ name: SECRET, key: 'database_url' });
  expect(env.has('DATA_DIR'), 'no embedded database in a cluster').toBe(false);

  const mounts = container.volumeMounts ?? [];
  const volume = (name: string) => pod.volumes?.find((v) => v.name === name);
  for (const mount of mounts) expect(mount.subPath, `${mount.mountPath}: a subPath mount is never updated`).toBeUndefined();
  const tmp = mounts.find((m) => m.mountPath === '/tmp');
  expect(volume(tmp!.name)?.emptyDir).toBeDefined();
  const configFile = env.get('CONFIG_FILE')!;
  const sourcesMount = mounts.find((m) => m.mountPath === posix.dirname(configFile))!;
  const sourcesMap = find<ConfigMap>(objects, 'ConfigMap', volume(sourcesMount.name)!.configMap!.name);
  expect(Object.keys(sourcesMap.data)).toEqual([posix.basename(configFile)]);
  const secretMount = mounts.find((m) => volume(m.name)?.secret?.secretName === SECRET);
  expect(secretMount, `the Secret ${SECRET} is mounted`).toBeDefined();

  // The sources file loads with the program's own loader, each client secret a file of the mounted Secret.
  const config = loadSources(sourcesMap.data[posix.basename(configFile)]!, secretMount!.mountPath, env);
  expect(config.sources.length).toBeGreaterThan(0);
  return env;
}

/**
 * The pod's `migrate` init container: the same image, the owner's DATABASE_URL from its own Secret,
 * no sources file nor the runtime's Secret; the runtime container (`env`) refuses to migrate.
 */
function expectMigrateInit(pod: PodSpec, env: Map<string, string | undefined>): void {
  expect(pod.initContainers?.map((c) => c.name)).toEqual(['migrate']);
  const init = pod.initContainers![0]!;
  expect(init.args).toEqual(['migrate']);
  expect(init.image).toBe(pod.containers[0]!.image);
  expect(init.env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({ name: MIGRATE_SECRET, key: 'database_url' });
  expect(init.env?.find((v) => v.name === 'CONFIG_FILE')).toEqual({ name: 'CONFIG_FILE', value: '' });
  for (const variable of init.env ?? []) expect(known.has(variable.name), `migrate: ${variable.name} is not a configuration variable`).toBe(true);
  const secretVolumes = new Set((pod.volumes ?? []).filter((v) => v.secret !== undefined).map((v) => v.name));
  expect(
    (init.volumeMounts ?? []).filter((m) => secretVolumes.has(m.name)),
    "no mount of the runtime's Secret",
  ).toEqual([]);
  expect(init.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  expect(env.get('MIGRATE'), 'the runtime role does not migrate').toBe('off');
}

/** The sources file loaded by loadConfig, every client_secret_file under `secretDir` (the Secret's mount) made a temp file. */
function loadSources(text: string, secretDir: string, env: Map<string, string | undefined>): ReturnType<typeof loadConfig> {
  const dir = mkdtempSync(join(tmpdir(), 'kubernetes-sources-'));
  try {
    const files = [...text.matchAll(/client_secret_file: (\S+)/g)].map((m) => m[1]!);
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      expect(posix.dirname(file), `${file} is a key of the Secret mounted at ${secretDir}`).toBe(secretDir);
      writeFileSync(join(dir, posix.basename(file)), 'a-client-secret\n');
    }
    writeFileSync(join(dir, 'sources.yaml'), text.replaceAll(`${secretDir}/`, `${dir}/`));
    const vars = Object.fromEntries([...env].filter((entry): entry is [string, string] => entry[1] !== undefined));
    return loadConfig({ ...vars, DATABASE_URL: 'postgres://exporter@db.example.com/analytics', CONFIG_FILE: join(dir, 'sources.yaml') });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the serve overlay', () => {
  const objects = rendered.serve;
  const deployment = find<K8sObject & { spec: { replicas: number; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } }>(
    objects,
    'Deployment',
  );
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0]!;
  const service = find<K8sObject & { spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] } }>(
    objects,
    'Service',
  );

  it('runs serve in two non-root replicas on PostgreSQL, migrated by the owner first, probed on /healthz and /readyz', () => {
    const env = expectPod(objects, pod, 'serve');
    expectMigrateInit(pod, env);
    expect(deployment.spec.replicas).toBe(2);
    expect(env.get('SYNC_SCHEDULE'), 'every replica keeps every source schedule').toBeUndefined();
    const port = container.ports?.find((p) => p.containerPort === DEFAULT_METRICS_PORT);
    expect(port?.name).toBe('metrics');
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
  });

  it('keeps one replica up through disruptions', () => {
    const pdb = find<K8sObject & { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } }>(objects, 'PodDisruptionBudget');
    expect(pdb.spec.minAvailable).toBe(1);
    expect(deployment.spec.template.metadata.labels).toMatchObject(pdb.spec.selector.matchLabels);
  });

  it('scrapes the Service whose name is the job the rules select', () => {
    expect(deployment.spec.template.metadata.labels).toMatchObject(service.spec.selector);
    expect(service.spec.ports).toEqual([{ name: 'metrics', port: DEFAULT_METRICS_PORT, targetPort: 'metrics' }]);
    const monitor = find<K8sObject & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] } }>(
      objects,
      'ServiceMonitor',
    );
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(monitor.spec.endpoints).toMatchObject([{ port: 'metrics', path: '/metrics' }]);
    // The ServiceMonitor's job label is the Service's name.
    const rule = find<K8sObject & { spec: { groups: { rules: { expr: string }[] }[] } }>(objects, 'PrometheusRule');
    const jobs = new Set(rule.spec.groups.flatMap((g) => g.rules).flatMap((r) => [...r.expr.matchAll(/job="([^"]*)"/g)].map((m) => m[1])));
    expect([...jobs]).toEqual([service.metadata.name]);
  });

  it('ships the three dashboards as ConfigMaps for the Grafana sidecar, equal to grafana/dashboards', () => {
    const dashboards = objects.filter((o): o is ConfigMap => o.kind === 'ConfigMap' && o.metadata.labels?.grafana_dashboard === '1');
    const files = readdirSync(DASHBOARDS_DIR).filter((name) => name.endsWith('.json'));
    expect(dashboards).toHaveLength(files.length);
    for (const file of files) {
      const map = dashboards.find((d) => file in d.data);
      expect(map, file).toBeDefined();
      expect(map!.data[file]).toBe(readFileSync(join(DASHBOARDS_DIR, file), 'utf8'));
    }
  });
});

describe('the cronjob overlay', () => {
  const objects = rendered.cronjob;

  it('runs sync in a CronJob that forbids overlapping runs, migrated by the owner first, and no serve', () => {
    const cronJob = find<K8sObject & { spec: { concurrencyPolicy: string; jobTemplate: { spec: { template: { spec: PodSpec } } } } }>(objects, 'CronJob');
    expect(cronJob.spec.concurrencyPolicy).toBe('Forbid');
    const pod = cronJob.spec.jobTemplate.spec.template.spec;
    expectMigrateInit(pod, expectPod(objects, pod, 'sync'));
    expect(objects.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'ConfigMap', 'CronJob', 'ServiceAccount']);
  });
});

describe('the probe-per-source example', () => {
  it('scrapes /probe once per source of the sources file, and /metrics without the sources series', () => {
    const objects = rendered.probePerSource;
    const monitor = find<
      K8sObject & { spec: { endpoints: { path: string; params?: { source: string[] }; honorLabels?: boolean; metricRelabelings?: unknown[] }[] } }
    >(objects, 'ServiceMonitor');
    const sourcesMap = find<ConfigMap>(objects, 'ConfigMap', 'analytics-exporter-sources');
    const names = (parse(sourcesMap.data['sources.yaml']!) as { sources: { name: string }[] }).sources.map((s) => s.name);
    const probes = monitor.spec.endpoints.filter((e) => e.path === '/probe');
    expect(probes.map((e) => e.params?.source)).toEqual(names.map((name) => [name]));
    for (const probe of probes) expect(probe.honorLabels).toBe(true);
    const metrics = monitor.spec.endpoints.filter((e) => e.path === '/metrics');
    expect(metrics).toHaveLength(1);
    expect(metrics[0]!.metricRelabelings).toEqual([{ sourceLabels: ['source'], regex: '.+', action: 'drop' }]);
  });
});

describe('the tls-basic-auth example', () => {
  const objects = rendered.tlsBasicAuth;
  const pod = find<K8sObject & { spec: { template: { spec: PodSpec } } }>(objects, 'Deployment').spec.template.spec;
  const container = pod.containers[0]!;
  const mounts = container.volumeMounts ?? [];
  const volume = (name: string) => pod.volumes?.find((v) => v.name === name);
  const TLS_SECRET = 'analytics-exporter-tls';

  /** A GET as the kubelet probes: HTTPS without verifying the certificate, no credentials. */
  const probe = (port: number, path: string) =>
    new Promise<number>((resolve, reject) => {
      httpsGet({ host: '127.0.0.1', port, path, rejectUnauthorized: false, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      }).on('error', reject);
    });

  it('probes /healthz and /readyz over HTTPS without credentials, which a server with its web configuration answers 200 (/metrics 401)', async () => {
    const env = expectPod(objects, pod, 'serve');
    const probes = [container.livenessProbe!.httpGet!, container.readinessProbe!.httpGet!];
    expect(probes.map((p) => p.path)).toEqual(['/healthz', '/readyz']);
    for (const p of probes) {
      expect(p).toMatchObject({ scheme: 'HTTPS', port: 'metrics' });
      expect(p.httpHeaders, 'no credentials in the Deployment').toBeUndefined();
    }
    // WEB_CONFIG_FILE is a file of a mounted ConfigMap, its certificate and key files of the TLS Secret.
    const webConfigFile = env.get('WEB_CONFIG_FILE')!;
    const webMount = mounts.find((m) => m.mountPath === posix.dirname(webConfigFile))!;
    const text = find<ConfigMap>(objects, 'ConfigMap', volume(webMount.name)!.configMap!.name).data[posix.basename(webConfigFile)]!;
    const tlsMount = mounts.find((m) => volume(m.name)?.secret?.secretName === TLS_SECRET)!;
    expect(text).toContain(`cert_file: ${tlsMount.mountPath}/tls.crt`);
    expect(text).toContain(`key_file: ${tlsMount.mountPath}/tls.key`);
    expect(text).toMatch(/^basic_auth_users:/m);

    // That configuration served, the Secret's files a test PKI's, with the pod's settings.
    const pki = createTestPki();
    const metrics = new ExporterMetrics({ processMetrics: false });
    const file = join(pki.dir, 'web-config.yml');
    writeFileSync(join(pki.dir, 'tls.crt'), pki.serverCert);
    writeFileSync(join(pki.dir, 'tls.key'), pki.serverKey);
    writeFileSync(file, text.replaceAll(`${tlsMount.mountPath}/`, `${pki.dir}/`));
    const server = createMetricsServer({
      metrics,
      scraper: new E7Scraper({ sources: [], metrics, windowMs: 60_000, cacheTtlMs: 0, prefix: undefined, ownFamilies: async () => [], log: silentLogger }),
      readiness: async () => ({ ready: true, detail: 'ready' }),
      defaultScrapeTimeoutMs: 10_000,
      web: new WebConfigSource(loadWebConfig(file)),
      healthWithoutAuth: loadConfig({ WEB_HEALTH_WITHOUT_AUTH: env.get('WEB_HEALTH_WITHOUT_AUTH') }).serve.healthWithoutAuth,
      connections: { perClient: 8, total: 8 },
      log: silentLogger,
    });
    try {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as AddressInfo).port;
      expect(await Promise.all(probes.map((p) => probe(port, p.path)))).toEqual([200, 200]);
      expect(await probe(port, '/metrics')).toBe(401);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      pki.cleanup();
    }
  });

  it('scrapes /metrics over HTTPS with basic auth, the CA and user from Secrets', () => {
    const monitor = find<
      K8sObject & {
        spec: { endpoints: { path: string; scheme?: string; tlsConfig?: { ca?: { secret?: { name: string; key: string } } }; basicAuth?: object }[] };
      }
    >(objects, 'ServiceMonitor');
    expect(monitor.spec.endpoints).toHaveLength(1);
    const endpoint = monitor.spec.endpoints[0]!;
    expect(endpoint).toMatchObject({ path: '/metrics', scheme: 'https', tlsConfig: { ca: { secret: { name: TLS_SECRET, key: 'ca.crt' } } } });
    expect(endpoint.basicAuth).toEqual({
      username: { name: 'analytics-exporter-scrape', key: 'username' },
      password: { name: 'analytics-exporter-scrape', key: 'password' },
    });
  });
});

describe("docs/deploy.md's overlay of your own", () => {
  it('sets the namespace, and replaces the image and the sources file of the serve overlay', () => {
    const blocks = [...readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((match) => parse(match[1]!) as unknown)
      .filter((doc): doc is DocOverlay => typeof doc === 'object' && doc !== null && (doc as { kind?: unknown }).kind === 'Kustomization');
    expect(blocks, 'one Kustomization in docs/deploy.md').toHaveLength(1);
    const kustomization = blocks[0]!;
    expect(kustomization.resources).toEqual(['../analytics-exporter/deploy/kubernetes/overlays/serve']);
    const dir = mkdtempSync(join(tmpdir(), 'my-overlay-'));
    try {
      const mine = 'sources:\n  - name: mine\n    statistics_url: https://statistics.example.com\n';
      writeFileSync(join(dir, 'sources.yaml'), mine);
      const resources = [posix.relative(dir, join(renderRoot, 'overlays/serve'))];
      writeFileSync(join(dir, 'kustomization.yaml'), stringify({ ...kustomization, resources }));
      if (oldKustomize) adaptForOldKustomize(dir);
      const objects = render(dir);
      const { newName, newTag } = kustomization.images[0]!;
      const pod = find<K8sObject & { spec: { template: { spec: PodSpec } } }>(objects, 'Deployment').spec.template.spec;
      expect(pod.containers[0]!.image).toBe(`${newName}:${newTag}`);
      expect(find<ConfigMap>(objects, 'ConfigMap', 'analytics-exporter-sources').data['sources.yaml']).toBe(mine);
      for (const object of objects) expect((object.metadata as { namespace?: string }).namespace, object.kind).toBe(kustomization.namespace);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The overlay of your own that docs/deploy.md shows. */
interface DocOverlay {
  kind: 'Kustomization';
  namespace: string;
  resources: string[];
  images: { name: string; newName: string; newTag: string }[];
}

// ---------------------------------------------------------------------------------------------
// The rendered rules pass the rule file's promtool tests

describe('the rendered PrometheusRule', () => {
  it('holds the rules of prometheus/rules/, which pass its promtool unit tests', async () => {
    const rule = find<K8sObject & { spec: { groups: unknown[] } }>(rendered.serve, 'PrometheusRule');
    expect(rule.spec.groups).toEqual((parse(readFileSync(RULES_FILE, 'utf8')) as { groups: unknown[] }).groups);
    const dir = mkdtempSync(join(tmpdir(), 'prometheusrule-'));
    try {
      writeFileSync(join(dir, 'rendered.rules.yml'), stringify({ groups: rule.spec.groups }));
      const tests = parse(readFileSync(RULES_TEST_FILE, 'utf8')) as { rule_files: string[] };
      writeFileSync(join(dir, 'rendered.rules.test.yml'), stringify({ ...tests, rule_files: ['rendered.rules.yml'] }));
      const result = await promtool(['test', 'rules', join(dir, 'rendered.rules.test.yml')]);
      expect(result.stderr).toBe('');
      expect(result.stdout).toContain('SUCCESS');
      expect(result.code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
