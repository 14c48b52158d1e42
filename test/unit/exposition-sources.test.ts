/** Several sources in one exposition: target labels added the honor_labels=false way, one family per name, conflicts dropped. */
import { describe, expect, it } from 'vitest';
import { PartWriter, mergeParts, parseExposition, type IndexedPart, type MetricFamily } from '../../src/exposition/index.js';
import { addTargetLabels, mergeSources } from '../../src/exposition/merge.js';
import { serializeOpenMetrics } from '../../src/exposition/openmetrics.js';
import { serializeText } from '../../src/exposition/text.js';

function families(text: string): MetricFamily[] {
  const parsed = parseExposition(text);
  expect(parsed.invalid).toEqual([]);
  return parsed.families;
}

describe('addTargetLabels', () => {
  it('puts the target labels first and keeps a clashing upstream label as exported_<name>', () => {
    const input = families('x{source="web",env="x",a="1"} 1\ny 2\n');
    const out = addTargetLabels(input, [
      ['source', 'prod'],
      ['env', 'production'],
    ]);
    expect(serializeText(out)).toBe(
      '# TYPE x untyped\nx{source="prod",env="production",exported_source="web",exported_env="x",a="1"} 1\n# TYPE y untyped\ny{source="prod",env="production"} 2\n',
    );
    // The input is left as it was.
    expect(input[0]!.samples[0]!.labels).toEqual([
      ['source', 'web'],
      ['env', 'x'],
      ['a', '1'],
    ]);
  });

  it('prefixes again while exported_<name> is taken by the sample itself', () => {
    const out = addTargetLabels(families('x{source="a",exported_source="b"} 1\n'), [['source', 's']]);
    expect(serializeText(out)).toBe('# TYPE x untyped\nx{source="s",exported_exported_source="a",exported_source="b"} 1\n');
  });

  it('keeps histograms whole', () => {
    const text = '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n';
    const out = addTargetLabels(families(text), [['source', 's']]);
    expect(serializeText(out)).toBe(
      '# TYPE h histogram\nh_bucket{source="s",le="1"} 1\nh_bucket{source="s",le="+Inf"} 2\nh_sum{source="s"} 3\nh_count{source="s"} 2\n',
    );
  });
});

describe('mergeSources', () => {
  const a = addTargetLabels(
    families('# HELP x from a\n# TYPE x gauge\nx{k="1"} 1\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\nonly_a 5\n'),
    [['source', 'a']],
  );

  it('serves one HELP and TYPE per family, the samples of every source under it in source order', () => {
    const b = addTargetLabels(families('# HELP x from b\n# TYPE x gauge\nx{k="1"} 2\nonly_b 6\n'), [
      ['source', 'b'],
      ['env', 'sandbox'],
    ]);
    const { families: merged, dropped } = mergeSources([
      { source: 'a', families: a },
      { source: 'b', families: b },
    ]);
    expect(dropped).toEqual([]);
    const text = serializeText(merged);
    expect(text).toBe(
      [
        '# HELP x from a',
        '# TYPE x gauge',
        'x{source="a",k="1"} 1',
        'x{source="b",env="sandbox",k="1"} 2',
        '# TYPE h histogram',
        'h_bucket{source="a",le="+Inf"} 1',
        'h_sum{source="a"} 1',
        'h_count{source="a"} 1',
        '# TYPE only_a untyped',
        'only_a{source="a"} 5',
        '# TYPE only_b untyped',
        'only_b{source="b",env="sandbox"} 6',
        '',
      ].join('\n'),
    );
    expect(text.match(/^# TYPE x /gm)).toHaveLength(1);
    // The sources' own family objects are not changed by the merge.
    expect(a[0]!.samples).toHaveLength(1);
  });

  it("drops a later source's family whose type differs, or that takes a name an earlier family owns, and says which", () => {
    const b = addTargetLabels(families('# TYPE x counter\nx 2\nh_bucket 3\nonly_b 6\n'), [['source', 'b']]);
    const { families: merged, dropped } = mergeSources([
      { source: 'a', families: a },
      { source: 'b', families: b },
    ]);
    expect(dropped).toEqual([
      { source: 'b', family: 'x' },
      { source: 'b', family: 'h_bucket' },
    ]);
    expect(merged.map((f) => [f.name, f.type, f.samples.length])).toEqual([
      ['x', 'gauge', 1],
      ['h', 'histogram', 3],
      ['only_a', 'untyped', 1],
      ['only_b', 'untyped', 1],
    ]);
  });
});

describe('mergeParts', () => {
  function part(families: readonly MetricFamily[]): IndexedPart {
    const writer = new PartWriter(new Map(families.map((f) => [f.name, f.type])));
    for (const family of families) writer.add(family);
    return writer.finish();
  }

  const inputs: Record<string, string> = {
    a:
      '# HELP x from a\n# TYPE x gauge\nx{k="1"} 1\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3\nh_count 2\n' +
      '# TYPE s summary\ns{quantile="0.5"} 1\ns_sum 2\ns_count 3\n# TYPE c_total counter\nc_total 4\nuntyped_a 5 1500\n',
    // Type conflicts (x, c_total), a name histogram h reserves (h_bucket), a histogram that is
    // not valid OpenMetrics (no +Inf bucket) and a negative counter.
    b: '# TYPE x counter\nx 1\nh_bucket 2\n# TYPE c_total counter\nc_total -1\n# TYPE g histogram\ng_bucket{le="1"} 1\n',
    c: '# TYPE h histogram\nh_bucket{le="+Inf"} 7\nh_sum 1\nh_count 7\n# TYPE g histogram\ng_bucket{le="+Inf"} 1\n# TYPE s summary\ns{quantile="2"} 1\n',
  };

  for (const names of [['a'], ['a', 'b'], ['a', 'c'], ['b', 'c'], ['a', 'b', 'c'], ['c', 'b', 'a']]) {
    it(`equals mergeSources' families serialised, in both formats: sources ${names.join(', ')}`, () => {
      const sources = names.map((source) => ({ source, families: addTargetLabels(families(inputs[source]!), [['source', source]]) }));
      const expected = mergeSources(sources);
      const { part: merged, dropped } = mergeParts(sources.map(({ source, families: list }) => ({ source, part: part(list) })));
      expect(dropped).toEqual(expected.dropped);
      expect(merged.text.toString()).toBe(serializeText(expected.families));
      expect(merged.openMetrics.toString()).toBe(serializeOpenMetrics(expected.families, { eof: false }));
      expect(merged.samples).toBe(expected.families.reduce((n, f) => n + f.samples.length, 0));
    });
  }
});
