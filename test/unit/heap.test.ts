import { describe, expect, it } from 'vitest';
import { limitHeapGrowth } from '../../src/heap.js';

describe('limitHeapGrowth', () => {
  it('sets the heap-growing factor when the operator did not size the heap', () => {
    expect(limitHeapGrowth([], '')).toBe(true);
    expect(limitHeapGrowth(['--enable-source-maps'], '--require ./x.cjs')).toBe(true);
    // A flag whose name merely starts like one of ours is not a heap flag.
    expect(limitHeapGrowth(['--max-old-space-size-typo=1'], '')).toBe(true);
  });

  it.each([
    [['--max-old-space-size=512'], ''],
    [['--max-old-space-size', '512'], ''],
    [['--max_old_space_size=512'], ''],
    [['--heap-growing-percent=0'], ''],
    [['--max-heap-size=600'], ''],
    [[], '--max-old-space-size=2048'],
    [[], '--enable-source-maps --max-old-space-size=2048'],
  ])('leaves V8 alone when execArgv %j / NODE_OPTIONS %j size the heap', (execArgv, nodeOptions) => {
    expect(limitHeapGrowth(execArgv, nodeOptions)).toBe(false);
  });
});
