# syntax=docker/dockerfile:1
#
# analytics-exporter: Prometheus exporter and exactly-once PostgreSQL ETL.
#
#   docker build --build-arg REVISION=$(git rev-parse --short HEAD) -t analytics-exporter .
#   docker run --rm -p 9877:9877 --env-file exporter.env analytics-exporter   # serve (embedded database without DATABASE_URL)
#   docker run --rm --env-file exporter.env analytics-exporter sync  # one ETL run, then exit
#
# The image holds the exporter alone. The demo simulator (packages/simulator, a development
# dependency) has a target of its own, which compose.yaml's simulator services build:
#
#   docker build --target simulator -t analytics-simulator .
#   docker run --rm -p 8080:8080 analytics-simulator --host 0.0.0.0
#
# See docs/deploy.md.

# ---------------------------------------------------------------------------------------------
# Build: dev dependencies, TypeScript → dist/ (the simulator package first, then the exporter),
# dist/revision.txt for build_info.
FROM node:24-bookworm-slim AS build
WORKDIR /app

# Dependencies first, in their own layer, so a source change does not reinstall them. The
# workspace's manifest comes along: npm links the simulator package from it.
# --ignore-scripts: `prepare` (the build) needs the sources, which are not here yet;
# it is run explicitly below, once they are. No dependency has an install script.
COPY package.json package-lock.json ./
COPY packages/simulator/package.json packages/simulator/
RUN npm ci --ignore-scripts --no-audit --no-fund

COPY tsconfig.json tsconfig.build.json ./
COPY scripts/write-revision.mjs scripts/
COPY packages/simulator/tsconfig.json packages/simulator/tsconfig.build.json packages/simulator/
COPY packages/simulator/src/ packages/simulator/src/
COPY src/ src/

# The source revision (there is no .git in the build context): scripts/write-revision.mjs
# writes it to dist/revision.txt, which build_info{revision} reports.
ARG REVISION=""
RUN REVISION="${REVISION}" npm run build

# ---------------------------------------------------------------------------------------------
# Simulator (docker build --target simulator): the demo platform (E0, E6, E7) that compose.yaml's
# simulator services run; its production dependencies and compiled code only, none of the exporter.
FROM node:24-bookworm-slim AS simulator
ENV NODE_ENV=production
WORKDIR /app

# The workspace's manifest and lock, installed for the simulator's workspace alone.
COPY package.json package-lock.json ./
COPY packages/simulator/package.json packages/simulator/
RUN npm ci --omit=dev --workspace @analytics-exporter/simulator --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/packages/simulator/dist/ packages/simulator/dist/

USER 1000:1000
EXPOSE 8080
# Node is PID 1 and stops on SIGTERM/SIGINT itself. Flags are the command: --host 0.0.0.0 --port 8080 …
ENTRYPOINT ["node", "/app/packages/simulator/dist/bin.js"]

# ---------------------------------------------------------------------------------------------
# Runtime (the default target): production dependencies, the compiled code and the SQL
# migrations; no compiler, no sources, no simulator.
FROM node:24-bookworm-slim

ARG REVISION=""
LABEL org.opencontainers.image.title="analytics-exporter" \
      org.opencontainers.image.description="Prometheus exporter and exactly-once PostgreSQL ETL for the forms platform's analytics API" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/node:24-bookworm-slim"

ENV NODE_ENV=production
WORKDIR /app

# --ignore-scripts: `prepare` would try to compile with tsc, which is a dev dependency.
# --workspaces=false: the simulator package (a workspace, a development dependency) stays out.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --workspaces=false --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# Layout as in the package: dist/db/migrate.js reads ../../migrations, i.e. /app/migrations.
# Owned by root and read-only for the user that runs the process.
COPY --from=build /app/dist/ dist/
COPY migrations/ migrations/

# The embedded database (used when DATABASE_URL is unset) lives in DATA_DIR. The folder is
# created and handed to the runtime user before VOLUME, so a fresh named volume inherits that owner.
RUN mkdir -p /data && chown node:node /data
VOLUME /data

ENV METRICS_LISTEN=0.0.0.0:9877 \
    DATA_DIR=/data
EXPOSE 9877

# The base image's unprivileged `node` user, by number so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000

# Liveness of `serve` with Node itself (slim images have no curl or wget): GET /healthz, which
# answers without credentials (WEB_HEALTH_WITHOUT_AUTH), at METRICS_LISTEN's port (its host, or
# loopback for a wildcard), over HTTPS when WEB_CONFIG_FILE has a top-level tls_server_config. The
# certificate is not verified: this is a loopback check of our own process, not of its identity.
# Containers running sync or migrate should be started with --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "const listen = process.env.METRICS_LISTEN || ''; const at = listen.lastIndexOf(':'); const port = listen.slice(at + 1) || '9877'; let host = listen.slice(0, Math.max(at, 0)).replace(/^\\[|\\]$/g, ''); if (host === '' || host === '0.0.0.0') host = '127.0.0.1'; else if (host === '::') host = '::1'; const file = process.env.WEB_CONFIG_FILE; const tls = !!file && /^[\"']?tls_server_config[\"']?\\s*:/m.test(require('node:fs').readFileSync(file, 'utf8')); require(tls ? 'node:https' : 'node:http').get({ host, port, path: '/healthz', rejectUnauthorized: false, timeout: 4000 }, (r) => process.exit(r.statusCode === 200 ? 0 : 1)).on('timeout', () => process.exit(1)).on('error', () => process.exit(1))"]

# Node is PID 1 and handles SIGTERM/SIGINT itself (serve drains, sync rolls back the open window);
# it starts no child processes, so there are no zombies to reap and no init is needed.
# STOPSIGNAL stays SIGTERM; give `serve` more than its 15 s drain (docker stop -t 20).
ENTRYPOINT ["node", "/app/dist/cli.js"]
CMD ["serve"]
