/** What the figures were measured on: CPU, cores, memory, OS, Node and PostgreSQL versions. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

export interface Machine {
  cpu: string;
  cores: number;
  memory: string;
  os: string;
  node: string;
  postgres: string;
  psql: string;
}

function cpuModel(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (match) return match[1]!.trim();
  } catch {
    // Not Linux.
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

export async function describeMachine(databaseUrl: string): Promise<Machine> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  let postgres: string;
  try {
    const { rows } = await client.query<{ version: string }>('select version()');
    postgres = rows[0]!.version;
  } finally {
    await client.end();
  }
  let psql = 'not found';
  try {
    psql = execFileSync('psql', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // Reported as missing; the store-limit benchmark then fails with how to install it.
  }
  return {
    cpu: cpuModel(),
    cores: os.availableParallelism(),
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres,
    psql,
  };
}
