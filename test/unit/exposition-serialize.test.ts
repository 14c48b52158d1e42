import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ExporterError, InvalidArgumentError } from '../../src/errors.js';
import { OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, negotiateFormat, parseExposition, type MetricFamily, type Sample } from '../../src/exposition/index.js';
import { canonicalFloat } from '../../src/exposition/openmetrics-points.js';
import { formatValue } from '../../src/exposition/format.js';
import { mergeFamilies, prefixFamilies } from '../../src/exposition/merge.js';
import { parseGoFloat } from '../../src/exposition/number.js';
import { serializeOpenMetrics } from '../../src/exposition/openmetrics.js';
import { serializeText } from '../../src/exposition/text.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/exposition/', import.meta.url));

function fixture(name: string): string {
  return readFileSync(`${FIXTURES}${name}`, 'utf8');
}

/** Golden inputs and the number of lines each must drop (checked by hand against the input). */
const GOLDEN: Array<[name: string, invalidLines: number]> = [
  ['upstream-plain', 0],
  ['interleaved', 4],
  ['full-format', 0],
  ['garbage', 28],
];

describe('golden files', () => {
  it.each(GOLDEN)('%s: text and OpenMetrics output equal the committed files byte for byte', (name, invalidLines) => {
    const parsed = parseExposition(fixture(`${name}.prom`));
    expect(parsed.invalid).toHaveLength(invalidLines);
    expect(serializeText(parsed.families)).toBe(fixture(`${name}.expected.prom`));
    expect(serializeOpenMetrics(parsed.families)).toBe(fixture(`${name}.expected.openmetrics`));
  });

  it.each(GOLDEN)('%s: the expected text parses back without loss', (name) => {
    const parsed = parseExposition(fixture(`${name}.prom`));
    const again = parseExposition(fixture(`${name}.expected.prom`));
    expect(again.invalid).toEqual([]);
    expect(again.families).toEqual(parsed.families);
  });

  it('garbage.prom drops exactly the lines it says are bad, each for its reason', () => {
    const { invalid } = parseExposition(fixture('garbage.prom'));
    expect(invalid.map((i) => `${i.line} ${i.reason}`)).toEqual([
      '3 bad_value',
      '4 bad_value',
      '5 bad_metric_name',
      '6 bad_metric_name',
      '8 bad_label_name',
      '9 bad_label_name',
      '10 duplicate_label',
      '11 bad_syntax',
      '12 bad_syntax',
      '13 bad_syntax',
      '14 bad_escape',
      '15 bad_value',
      '16 bad_value',
      '17 bad_timestamp',
      '18 bad_timestamp',
      '19 bad_syntax',
      '20 bad_timestamp',
      '21 bad_type',
      '24 duplicate_metadata',
      '25 late_metadata',
      '26 late_metadata',
      '28 family_mismatch',
      '29 family_mismatch',
      '32 family_mismatch',
      '35 family_mismatch',
      '36 duplicate_series',
      '37 bad_escape',
      '38 bad_metric_name',
    ]);
  });
});

const sample = (name: string, value: number, labels: Array<[string, string]> = [], timestampMs?: number): Sample =>
  timestampMs === undefined ? { name, labels, value } : { name, labels, value, timestampMs };

describe('formatValue and canonicalFloat', () => {
  it('writes values that Go ParseFloat reads back exactly', () => {
    const cases: Array<[number, string]> = [
      [0, '0'],
      [-0, '-0'],
      [1, '1'],
      [-2.5, '-2.5'],
      [0.1, '0.1'],
      [1e21, '1e+21'],
      [1.5e-7, '1.5e-7'],
      [5e-324, '5e-324'],
      [Number.MAX_VALUE, '1.7976931348623157e+308'],
      [NaN, 'NaN'],
      [Infinity, '+Inf'],
      [-Infinity, '-Inf'],
    ];
    for (const [value, text] of cases) {
      expect(formatValue(value)).toBe(text);
      expect(Object.is(parseGoFloat(text), value), text).toBe(true);
    }
  });

  it("writes le and quantile values as the OpenMetrics spec's canonical examples", () => {
    const examples = '0.0 0.001 0.002 0.01 0.1 0.9 0.95 0.99 0.999 1.0 1.7 10.0 1e-10 1e-09 1e-05 0.0001 100000.0 1e+06 1e+10 1e+23 1.1e+23';
    for (const text of examples.split(' ')) expect(canonicalFloat(Number(text))).toBe(text);
    expect(canonicalFloat(Infinity)).toBe('+Inf');
    expect(canonicalFloat(-Infinity)).toBe('-Inf');
    expect(canonicalFloat(-0.5)).toBe('-0.5');
    expect(canonicalFloat(123456789)).toBe('1.23456789e+08');
    expect(canonicalFloat(0.00011)).toBe('0.00011');
    expect(canonicalFloat(1.5e300)).toBe('1.5e+300');
  });
});

describe('serializeText', () => {
  it('writes HELP, TYPE and samples per family, escaping label values and help', () => {
    const families: MetricFamily[] = [
      {
        name: 'm',
        type: 'gauge',
        help: 'Line one\nback\\slash "quotes" stay',
        samples: [
          sample(
            'm',
            1,
            [
              ['a', 'x"y\\z\nw'],
              ['b', ''],
            ],
            1700000000000,
          ),
          sample('m', NaN, [['a', '2']]),
        ],
      },
      { name: 'e', type: 'untyped', samples: [] },
    ];
    expect(serializeText(families)).toBe(
      [
        '# HELP m Line one\\nback\\\\slash "quotes" stay',
        '# TYPE m gauge',
        'm{a="x\\"y\\\\z\\nw",b=""} 1 1700000000000',
        'm{a="2"} NaN',
        '# TYPE e untyped',
        '',
      ].join('\n'),
    );
  });

  it('writes nothing for no families', () => {
    expect(serializeText([])).toBe('');
  });

  it('leaves out what would make the output invalid, whatever it is given', () => {
    const families = [
      { name: 'ok', type: 'counter', samples: [sample('ok', 1), sample('ok', 2), sample('other', 3), sample('ok', 4, [['__x', '1']])] },
      { name: 'ok', type: 'gauge', samples: [sample('ok', 5, [['a', '1']])] },
      { name: 'bad name', type: 'gauge', samples: [sample('bad name', 1)] },
      { name: 'h', type: 'histogram', samples: [sample('h', 1), sample('h_bucket', 1), sample('h_bucket', 2, [['le', '+Inf']])] },
      { name: 'h_count', type: 'gauge', samples: [sample('h_count', 1)] },
      null,
    ] as unknown as MetricFamily[];
    expect(serializeText(families)).toBe('# TYPE ok counter\nok 1\n# TYPE h histogram\nh_bucket{le="+Inf"} 2\n');
  });

  it('writes one line per sample of a 10,000-sample scrape, in both formats', () => {
    // Speed at 100,000 series is the benchmark's (`npm run bench`, a large upstream), not a test's.
    const text = Array.from({ length: 10_000 }, (_, i) => `m${i % 10}{customer="C ${i}",customer_id="${i}"} ${i}`).join('\n');
    const { families } = parseExposition(text);
    expect(serializeText(families).split('\n')).toHaveLength(10_000 + 10 + 1);
    expect(serializeOpenMetrics(families).split('\n')).toHaveLength(10_000 + 10 + 2);
  });
});

describe('serializeOpenMetrics', () => {
  it('renames counters to their family name without _total and ends with # EOF', () => {
    const families: MetricFamily[] = [
      { name: 'requests_total', type: 'counter', help: 'Requests, "quoted".', samples: [sample('requests_total', 3, [['code', '200']], 1500)] },
    ];
    expect(serializeOpenMetrics(families)).toBe('# TYPE requests counter\n# HELP requests Requests, \\"quoted\\".\nrequests_total{code="200"} 3 1.5\n# EOF\n');
    expect(serializeOpenMetrics(families, { eof: false })).toBe(
      '# TYPE requests counter\n# HELP requests Requests, \\"quoted\\".\nrequests_total{code="200"} 3 1.5\n',
    );
    expect(serializeOpenMetrics([])).toBe('# EOF\n');
  });

  it('writes timestamps as exact seconds', () => {
    const ts = [0, 7, 1000, 1001, 1010, 1700000000123, Number.MAX_SAFE_INTEGER];
    const out = serializeOpenMetrics([{ name: 'g', type: 'gauge', samples: ts.map((t, i) => sample('g', 1, [['i', String(i)]], t)) }]);
    expect(
      out
        .split('\n')
        .slice(1, -2)
        .map((line) => line.split(' ')[2]),
    ).toEqual(['0', '0.007', '1', '1.001', '1.01', '1700000000.123', '9007199254740.991']);
  });

  it('writes untyped as unknown, and sloppy counters as unknown', () => {
    const families: MetricFamily[] = [
      { name: 'u', type: 'untyped', samples: [sample('u', 1)] },
      { name: 'legacy', type: 'counter', samples: [sample('legacy', 1)] },
      { name: 'negative_total', type: 'counter', samples: [sample('negative_total', -1)] },
      { name: 'nan_total', type: 'counter', samples: [sample('nan_total', NaN)] },
      { name: '_total', type: 'counter', samples: [sample('_total', 1)] },
    ];
    expect(serializeOpenMetrics(families)).toBe(
      [
        '# TYPE u unknown',
        'u 1',
        '# TYPE legacy unknown',
        'legacy 1',
        '# TYPE negative_total unknown',
        'negative_total -1',
        '# TYPE nan_total unknown',
        'nan_total NaN',
        '# EOF',
        '',
      ].join('\n'),
    );
  });

  it('groups histogram samples per point, sorts buckets and writes canonical le', () => {
    const families: MetricFamily[] = [
      {
        name: 'h',
        type: 'histogram',
        samples: [
          sample('h_sum', 1.5, [['path', '/a']]),
          sample('h_bucket', 2, [
            ['path', '/a'],
            ['le', '+Inf'],
          ]),
          sample('h_bucket', 1, [
            ['le', '1'],
            ['path', '/b'],
          ]),
          sample('h_bucket', 1, [
            ['path', '/a'],
            ['le', '1e0'],
          ]),
          sample('h_count', 2, [['path', '/a']]),
          sample('h_bucket', 0, [
            ['path', '/a'],
            ['le', '0.5'],
          ]),
          sample('h_bucket', 1, [
            ['le', 'Inf'],
            ['path', '/b'],
          ]),
        ],
      },
    ];
    expect(serializeOpenMetrics(families)).toBe(
      [
        '# TYPE h histogram',
        'h_bucket{path="/a",le="0.5"} 0',
        'h_bucket{path="/a",le="1.0"} 1',
        'h_bucket{path="/a",le="+Inf"} 2',
        'h_count{path="/a"} 2',
        'h_sum{path="/a"} 1.5',
        'h_bucket{le="1.0",path="/b"} 1',
        'h_bucket{le="+Inf",path="/b"} 1',
        '# EOF',
        '',
      ].join('\n'),
    );
  });

  it('writes a histogram that breaks OpenMetrics rules as unknown families, one per sample name', () => {
    const broken: Array<[string, Sample[]]> = [
      ['no +Inf bucket', [sample('h_bucket', 1, [['le', '1']])]],
      ['not cumulative', [sample('h_bucket', 2, [['le', '1']]), sample('h_bucket', 1, [['le', '+Inf']])]],
      ['count without sum', [sample('h_bucket', 1, [['le', '+Inf']]), sample('h_count', 1)]],
      ['count not the +Inf bucket', [sample('h_bucket', 1, [['le', '+Inf']]), sample('h_count', 2), sample('h_sum', 1)]],
      ['NaN threshold', [sample('h_bucket', 1, [['le', 'NaN']]), sample('h_bucket', 1, [['le', '+Inf']])]],
      ['two equal thresholds', [sample('h_bucket', 1, [['le', '1']]), sample('h_bucket', 1, [['le', '1.0']]), sample('h_bucket', 1, [['le', '+Inf']])]],
      ['fractional bucket value', [sample('h_bucket', 0.5, [['le', '+Inf']])]],
      ['negative sum', [sample('h_bucket', 1, [['le', '+Inf']]), sample('h_count', 1), sample('h_sum', -1)]],
      [
        'sum with a negative threshold',
        [sample('h_bucket', 0, [['le', '-1']]), sample('h_bucket', 1, [['le', '+Inf']]), sample('h_count', 1), sample('h_sum', 1)],
      ],
      ['mixed timestamps', [sample('h_bucket', 1, [['le', '1']], 1000), sample('h_bucket', 1, [['le', '+Inf']], 2000)]],
      ['sum without buckets', [sample('h_sum', 1), sample('h_count', 1)]],
    ];
    for (const [why, samples] of broken) {
      const out = serializeOpenMetrics([{ name: 'h', type: 'histogram', samples }]);
      expect(out, why).not.toContain('histogram');
      const names = [...new Set(samples.map((s) => s.name))];
      expect(
        out.split('\n').filter((l) => l.startsWith('# TYPE')),
        why,
      ).toEqual(names.map((n) => `# TYPE ${n} unknown`));
      // Every sample is still served, under its own name and labels.
      expect(
        out.split('\n').filter((l) => !l.startsWith('#') && l !== ''),
        why,
      ).toHaveLength(samples.length);
    }
    // Negative thresholds without a sum are fine.
    expect(
      serializeOpenMetrics([{ name: 'h', type: 'histogram', samples: [sample('h_bucket', 0, [['le', '-1']]), sample('h_bucket', 1, [['le', '+Inf']])] }]),
    ).toContain('# TYPE h histogram');
  });

  it('writes summaries with canonical quantiles, or as unknown when they break OpenMetrics rules', () => {
    const ok: MetricFamily = {
      name: 's',
      type: 'summary',
      help: 'S.',
      samples: [sample('s_sum', 3), sample('s', 1, [['quantile', '.5']]), sample('s', NaN, [['quantile', '1']]), sample('s_count', 2)],
    };
    expect(serializeOpenMetrics([ok])).toBe('# TYPE s summary\n# HELP s S.\ns{quantile="0.5"} 1\ns{quantile="1.0"} NaN\ns_count 2\ns_sum 3\n# EOF\n');
    for (const samples of [
      [sample('s', 1, [['quantile', '1.5']])],
      [sample('s', -1, [['quantile', '0.5']])],
      [sample('s', 1, [['quantile', '0.5']]), sample('s', 1, [['quantile', '5e-1']])],
      [sample('s_count', 1.5)],
      [sample('s_sum', NaN)],
    ]) {
      expect(serializeOpenMetrics([{ name: 's', type: 'summary', samples }])).not.toContain('summary');
    }
  });

  it('writes a typed family as unknown when its OpenMetrics names are taken by another family', () => {
    const families: MetricFamily[] = [
      { name: 'foo', type: 'gauge', samples: [sample('foo', 1)] },
      { name: 'foo_total', type: 'counter', samples: [sample('foo_total', 2)] },
      { name: 'bar_created', type: 'gauge', samples: [sample('bar_created', 3)] },
      { name: 'bar', type: 'histogram', samples: [sample('bar_bucket', 4, [['le', '+Inf']])] },
      { name: 'baz_total', type: 'counter', samples: [sample('baz_total', 5)] },
      { name: 'baz', type: 'summary', samples: [sample('baz_sum', 6)] },
    ];
    expect(serializeOpenMetrics(families)).toBe(
      [
        '# TYPE foo gauge',
        'foo 1',
        '# TYPE foo_total unknown',
        'foo_total 2',
        '# TYPE bar_created gauge',
        'bar_created 3',
        '# TYPE bar_bucket unknown',
        'bar_bucket{le="+Inf"} 4',
        '# TYPE baz_total unknown',
        'baz_total 5',
        '# TYPE baz summary',
        'baz_sum 6',
        '# EOF',
        '',
      ].join('\n'),
    );
  });

  it('leaves out names OpenMetrics reserves (a leading underscore), which the text format keeps', () => {
    const families: MetricFamily[] = [
      { name: '_hidden', type: 'gauge', samples: [sample('_hidden', 1)] },
      { name: 'g', type: 'gauge', samples: [sample('g', 1, [['_l', 'x']]), sample('g', 2, [['l', 'x']])] },
    ];
    expect(serializeOpenMetrics(families)).toBe('# TYPE g gauge\ng{l="x"} 2\n# EOF\n');
    expect(serializeText(families)).toContain('_hidden 1');
  });
});

describe('negotiateFormat', () => {
  it('answers OpenMetrics to Prometheus 2 and 3', () => {
    expect(
      negotiateFormat('application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'),
    ).toBe('openmetrics');
    expect(
      negotiateFormat(
        'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1',
      ),
    ).toBe('openmetrics');
    expect(negotiateFormat('application/openmetrics-text; version=0.0.1,text/plain;version=0.0.4;q=0.5,*/*;q=0.1')).toBe('openmetrics');
  });

  it('answers text unless OpenMetrics is asked for with a higher q', () => {
    const text = [
      undefined,
      '',
      '*/*',
      'text/plain',
      'text/plain;version=0.0.4',
      'application/openmetrics-text;q=0.5,text/plain;q=0.5',
      'application/openmetrics-text;q=0.4,text/plain;version=0.0.4;q=0.5',
      'application/openmetrics-text;version=2.0.0',
      'application/openmetrics-text;version=2.0.0,*/*;q=0.1',
      'application/json',
      'text/*,application/*;q=0.9',
      'application/openmetrics-text;q=abc',
      'application/openmetrics-text;q=1.5',
      ',,;;==',
    ];
    for (const accept of text) expect(negotiateFormat(accept), String(accept)).toBe('text');
    const openMetrics = [
      'application/openmetrics-text',
      'APPLICATION/OpenMetrics-Text; Version="1.0.0"',
      'application/*',
      'application/*;q=0.9,text/plain;q=0.8',
      'application/openmetrics-text;q=0.2,*/*;q=0.1',
      'application/openmetrics-text;q=0.01,text/plain;q=0',
    ];
    for (const accept of openMetrics) expect(negotiateFormat(accept), accept).toBe('openmetrics');
  });

  it('names the content types of both formats', () => {
    expect(TEXT_CONTENT_TYPE).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(OPENMETRICS_CONTENT_TYPE).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
  });
});

describe('prefixFamilies', () => {
  it('renames families and samples and keeps histograms whole', () => {
    const { families } = parseExposition('# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 2\nu{a="b"} 3 1000\n');
    const prefixed = prefixFamilies(families, 'analytics_');
    expect(prefixed.map((f) => [f.name, f.type, f.samples.map((s) => s.name)])).toEqual([
      ['analytics_h', 'histogram', ['analytics_h_bucket', 'analytics_h_count', 'analytics_h_sum']],
      ['analytics_u', 'untyped', ['analytics_u']],
    ]);
    expect(prefixed[1]!.samples[0]).toEqual({ name: 'analytics_u', labels: [['a', 'b']], value: 3, timestampMs: 1000 });
    expect(families[0]!.name).toBe('h');
    expect(parseExposition(serializeText(prefixed)).families).toEqual(prefixed);
  });

  it('refuses a prefix that would not make valid names', () => {
    for (const prefix of ['', '1x', 'a-b', 'a b', 'é_']) {
      let error: unknown;
      try {
        prefixFamilies([], prefix);
      } catch (e) {
        error = e;
      }
      expect(error, prefix).toBeInstanceOf(InvalidArgumentError);
      expect((error as ExporterError).code).toBe('ERR_INVALID_ARGUMENT');
    }
    expect(prefixFamilies([], ':a_1:')).toEqual([]);
  });
});

describe('mergeFamilies', () => {
  const own: MetricFamily[] = [
    { name: 'x', type: 'histogram', samples: [sample('x_bucket', 1, [['le', '+Inf']])] },
    { name: 'y_total', type: 'counter', samples: [sample('y_total', 1)] },
    { name: 'z', type: 'gauge', samples: [sample('z', 1)] },
  ];

  it('puts ours first and drops every upstream family that collides with a name of ours', () => {
    const upstream: MetricFamily[] = [
      { name: 'kept', type: 'untyped', samples: [sample('kept', 1)] },
      { name: 'x', type: 'gauge', samples: [sample('x', 1)] },
      { name: 'x_bucket', type: 'untyped', samples: [sample('x_bucket', 1)] },
      { name: 'x_sum', type: 'untyped', samples: [] },
      { name: 'x_created', type: 'gauge', samples: [sample('x_created', 1)] },
      { name: 'y', type: 'gauge', samples: [sample('y', 1)] },
      { name: 'y_created', type: 'gauge', samples: [] },
      { name: 'y_total', type: 'untyped', samples: [sample('y_total', 1)] },
      { name: 'z', type: 'summary', samples: [sample('z_sum', 1)] },
      { name: 'w', type: 'histogram', samples: [sample('w_count', 1)] },
      { name: 'z_sum', type: 'untyped', samples: [sample('z_sum', 1)] },
      { name: 'sloppy', type: 'untyped', samples: [sample('z', 1)] },
      { name: 'also_kept_total', type: 'counter', samples: [sample('also_kept_total', 1)] },
      // In OpenMetrics this counter would be family `z`, which is ours.
      { name: 'z_total', type: 'counter', samples: [sample('z_total', 1)] },
    ];
    const { families, dropped } = mergeFamilies(own, upstream);
    expect(families.map((f) => f.name)).toEqual(['x', 'y_total', 'z', 'kept', 'w', 'z_sum', 'also_kept_total']);
    expect(dropped).toEqual(['x', 'x_bucket', 'x_sum', 'x_created', 'y', 'y_created', 'y_total', 'z', 'sloppy', 'z_total']);
    expect(families[0]).toBe(own[0]);
    expect(families[3]).toBe(upstream[0]);
  });

  it('drops the names Prometheus gives its own series (up, scrape_*, ALERTS*) as it drops ours', () => {
    // What the scrape loop (up, scrape_*) and the rule evaluator (ALERTS, ALERTS_FOR_STATE) write:
    // passed through, `up 0` would read as a failed target and trip `up == 0` alerts.
    const upstream = parseExposition(
      ['up 1', 'scrape_duration_seconds 0.1', 'ALERTS{alertname="x"} 1', 'ALERTS_FOR_STATE 1', 'userlogin_event_count{customer="a"} 5', ''].join('\n'),
    ).families;
    const { families, dropped } = mergeFamilies(own, upstream);
    expect(families.slice(own.length).map((f) => f.name)).toEqual(['userlogin_event_count']);
    expect(dropped).toEqual(['up', 'scrape_duration_seconds', 'ALERTS', 'ALERTS_FOR_STATE']);
    // By any name a family puts on the wire: a histogram `scrape` writes `scrape_bucket`, a counter `up_total` is OpenMetrics family `up`.
    const derived: MetricFamily[] = [
      { name: 'scrape', type: 'histogram', samples: [sample('scrape_bucket', 1, [['le', '+Inf']])] },
      { name: 'up_total', type: 'counter', samples: [sample('up_total', 1)] },
      { name: 'sloppy', type: 'untyped', samples: [sample('up', 1)] },
    ];
    expect(mergeFamilies(own, derived).dropped).toEqual(['scrape', 'up_total', 'sloppy']);
    // Names only: case matters, and a longer name is not reserved.
    const near: MetricFamily[] = ['upstream', 'up_down', 'alerts_event_count', 'Up', 'scrape', 'scraped_total'].map((name) => ({
      name,
      type: 'untyped',
      samples: [sample(name, 1)],
    }));
    expect(mergeFamilies(own, near).dropped).toEqual([]);
  });

  it('gives output that both serializers render with every kept family', () => {
    const upstream = prefixFamilies(parseExposition(fixture('upstream-plain.prom')).families, 'analytics_');
    const { families, dropped } = mergeFamilies(own, upstream);
    expect(dropped).toEqual([]);
    const text = parseExposition(serializeText(families));
    expect(text.invalid).toEqual([]);
    expect(text.families.map((f) => f.name)).toEqual(families.map((f) => f.name));
    expect(serializeOpenMetrics(families)).toContain('# TYPE y counter\ny_total 1\n');
  });
});
