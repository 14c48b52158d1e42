import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { useTestDatabase } from '../helpers/db.js';
import { startStack } from '../helpers/stack.js';

describe('the demo stack fixture', () => {
  const db = useTestDatabase();

  it('syncs records into PostgreSQL and is scraped by Prometheus', async () => {
    const stack = await startStack({ databaseUrl: db.url, records: 20_000 });
    try {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const { rows } = await client.query<{ n: number }>('select count(*)::int as n from analytics.records');
      await client.end();
      expect(rows[0]!.n).toBeGreaterThan(1000);
      const logins = await stack.prometheus.query(`sum(userlogin_event_count{job="${stack.job}"})`);
      expect(Number(logins[0]!.value[1])).toBeGreaterThan(0);
    } finally {
      await stack.stop();
    }
  }, 120_000);
});
