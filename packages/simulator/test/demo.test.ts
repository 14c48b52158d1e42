import { describe, expect, it } from 'vitest';
import { DEMO_RECORD_INTERVAL_MS, demoDatasetBounds } from '../src/demo.js';
import { createDataset } from '../src/index.js';

describe('demo data', () => {
  it('keeps past records when a later process has more of them', () => {
    const day = 86_400_000;
    const earlier = createDataset(demoDatasetBounds(Date.parse('2026-06-01T00:00:00Z')));
    const later = createDataset(demoDatasetBounds(Date.parse('2026-06-01T00:00:00Z') + 3 * day));
    expect(later.baseRecords - earlier.baseRecords).toBe(Math.floor((3 * day) / DEMO_RECORD_INTERVAL_MS));
    const from = new Date('2026-05-30T00:00:00Z');
    const to = new Date('2026-05-31T00:00:00Z');
    expect([...later.iterate(from, to, false)]).toEqual([...earlier.iterate(from, to, false)]);
  });
});
