import { describe, expect, it } from 'vitest';
import { isValidLabelName, normalizeFamilies, parseExposition, type MetricFamily, type Sample } from '../../src/exposition/index.js';
import { INVALID_REASONS } from '../helpers/exposition.js';
import { isValidMetricName } from '../../src/exposition/lexical.js';
import { parseGoFloat } from '../../src/exposition/number.js';
import type { InvalidReason } from '../../src/exposition/types.js';

/** The samples of the only family of `text`, which must parse without invalid lines. */
function samplesOf(text: string): Sample[] {
  const { families, invalid } = parseExposition(text);
  expect(invalid).toEqual([]);
  expect(families).toHaveLength(1);
  return families[0]!.samples;
}

/** The reasons of the invalid lines of `text`. */
function reasonsOf(text: string): InvalidReason[] {
  return parseExposition(text).invalid.map((i) => i.reason);
}

describe('parseExposition: samples', () => {
  it('reads the platform E7 line shape', () => {
    const { families, invalid } = parseExposition('userlogin_event_count{customer="Acme AS",customer_id="cust-0001"} 123\n');
    expect(invalid).toEqual([]);
    expect(families).toEqual([
      {
        name: 'userlogin_event_count',
        type: 'untyped',
        samples: [
          {
            name: 'userlogin_event_count',
            labels: [
              ['customer', 'Acme AS'],
              ['customer_id', 'cust-0001'],
            ],
            value: 123,
          },
        ],
      },
    ]);
  });

  it('reads samples without labels, with empty braces, and with a timestamp', () => {
    expect(parseExposition('a 1\na{} 2\n').families[0]!.samples).toEqual([{ name: 'a', labels: [], value: 1 }]);
    expect(parseExposition('a 1\na{} 2\n').invalid.map((i) => [i.line, i.reason])).toEqual([[2, 'duplicate_series']]);
    expect(samplesOf('b{} 2 1700000000123')).toEqual([{ name: 'b', labels: [], value: 2, timestampMs: 1700000000123 }]);
    expect(samplesOf('c:sub_name{x="y"} -3.5 0')).toEqual([{ name: 'c:sub_name', labels: [['x', 'y']], value: -3.5, timestampMs: 0 }]);
  });

  it('tolerates blanks and tabs wherever Prometheus does, and a trailing comma', () => {
    const expected = [
      {
        name: 'm',
        labels: [
          ['a', 'x'],
          ['b', 'y'],
        ],
        value: 1,
        timestampMs: 5,
      },
    ];
    for (const line of [
      'm{a="x",b="y"} 1 5',
      '  m{a="x",b="y"}\t1\t5  ',
      'm {a="x",b="y"} 1 5',
      'm{ a = "x" , b = "y" } 1 5',
      'm{\ta="x",\tb="y",\t}  1    5',
      'm{a="x",b="y",} 1 5',
      'm{a="x",b="y"}1 5',
    ]) {
      expect(samplesOf(line), line).toEqual(expected);
    }
  });

  it('undoes the label value escapes \\\\, \\" and \\n and keeps everything else literally', () => {
    expect(samplesOf('m{a="C:\\\\DIR\\\\F.TXT",b="say \\"hi\\"\\nbye",c="tab\there {}=,#",d="Bølgen 😀"} 1')[0]!.labels).toEqual([
      ['a', 'C:\\DIR\\F.TXT'],
      ['b', 'say "hi"\nbye'],
      ['c', 'tab\there {}=,#'],
      ['d', 'Bølgen 😀'],
    ]);
  });

  it('accepts CRLF line endings, a byte order mark, blank lines and comments', () => {
    const text = '\uFEFF# a comment\r\n\r\n   \r\n#HELP is a comment without a blank after #\r\nm{a="1"} 1\r\nm{a="2"} 2\r\n#\r\n# TYPE\r\n';
    expect(samplesOf(text)).toEqual([
      { name: 'm', labels: [['a', '1']], value: 1 },
      { name: 'm', labels: [['a', '2']], value: 2 },
    ]);
  });

  it('keeps a CR inside a label value; only the one before LF ends the line', () => {
    expect(samplesOf('m{a="x\ry"} 1\r\n')[0]!.labels).toEqual([['a', 'x\ry']]);
  });

  it('reads values as Go ParseFloat does', () => {
    const cases: Array<[string, number]> = [
      ['0', 0],
      ['-0', -0],
      ['123', 123],
      ['+5', 5],
      ['-1.5', -1.5],
      ['.5', 0.5],
      ['5.', 5],
      ['1e3', 1000],
      ['1E+3', 1000],
      ['2.5e-3', 0.0025],
      ['1.7560473e+07', 17560473],
      ['1_000_000', 1_000_000],
      ['0x10p0', 16],
      ['0x1.8p1', 3],
      ['-0x1p-2', -0.25],
      ['1e-400', 0],
      ['NaN', NaN],
      ['nan', NaN],
      ['+Inf', Infinity],
      ['-Inf', -Infinity],
      ['Inf', Infinity],
      ['inf', Infinity],
      ['-infinity', -Infinity],
      ['+Infinity', Infinity],
    ];
    for (const [text, value] of cases) expect(samplesOf(`m ${text}`)[0]!.value, text).toBe(value);
  });

  it('rejects values Go ParseFloat rejects', () => {
    for (const text of [
      'abc',
      '1,5',
      '1.2.3',
      '1e',
      '1e+',
      'e5',
      '.',
      '+',
      '-',
      '+NaN',
      '-nan',
      'Infinit',
      'Infinityy',
      '0x10',
      '0x',
      '0xp1',
      '1__0',
      '_1',
      '1_',
      '1_.5',
      '0b101',
      '0o17',
      '12abc',
      '1e400',
      '-1e400',
      '0x1p1024',
      '1{',
      'NaN{',
    ]) {
      expect(reasonsOf(`m ${text}`), text).toEqual(['bad_value']);
    }
    expect(reasonsOf('m')).toEqual(['bad_value']);
    expect(reasonsOf('m{a="b"}')).toEqual(['bad_value']);
    expect(reasonsOf('m{a="b"}   ')).toEqual(['bad_value']);
  });

  it('reads timestamps as non-negative integer milliseconds up to 2^53 − 1', () => {
    expect(samplesOf('m 1 9007199254740991')[0]!.timestampMs).toBe(Number.MAX_SAFE_INTEGER);
    expect(samplesOf('m 1 0001')[0]!.timestampMs).toBe(1);
    // Prometheus's lexer takes only [0-9]+ here and fails the whole scrape on anything else.
    for (const text of ['-5', '+5', '1.5', '1e3', '9007199254740992', '99999999999999999999', 'abc', 'NaN']) {
      expect(reasonsOf(`m 1 ${text}`), text).toEqual(['bad_timestamp']);
    }
  });

  it('rejects trailing garbage, exemplars and unterminated labels', () => {
    expect(reasonsOf('m 1 5 extra')).toEqual(['bad_syntax']);
    expect(reasonsOf('m 1 # {trace_id="a"} 1')).toEqual(['bad_timestamp']);
    expect(reasonsOf('m{a="b" 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a="b} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a="b\\')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a="b" c="d"} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a=b} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{,} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{a="b",,} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{"a"="b"} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('m{')).toEqual(['bad_syntax']);
  });

  it('rejects NUL anywhere it would reach the output (Prometheus reads it as end of input)', () => {
    expect(reasonsOf('m{a="x\0y"} 1')).toEqual(['bad_syntax']);
    expect(reasonsOf('# HELP m x\0y')).toEqual(['bad_syntax']);
    expect(reasonsOf('m 1\0')).toEqual(['bad_value']);
    expect(reasonsOf('# comment with \0 is ignored')).toEqual([]);
  });

  it('checks metric and label names', () => {
    expect(reasonsOf('1m 1')).toEqual(['bad_metric_name']);
    expect(reasonsOf('m-x 1')).toEqual(['bad_metric_name']);
    expect(reasonsOf('m.x{a="b"} 1')).toEqual(['bad_metric_name']);
    expect(reasonsOf('{a="b"} 1')).toEqual(['bad_metric_name']);
    expect(reasonsOf('m{1a="b"} 1')).toEqual(['bad_label_name']);
    expect(reasonsOf('m{a-b="c"} 1')).toEqual(['bad_label_name']);
    expect(reasonsOf('m{a.b="c"} 1')).toEqual(['bad_label_name']);
    expect(reasonsOf('m{__name__="x"} 1')).toEqual(['bad_label_name']);
    expect(reasonsOf('m{__x="x"} 1')).toEqual(['bad_label_name']);
    expect(reasonsOf('m{_x="x",x_="y",a1="z"} 1')).toEqual([]);
    expect(reasonsOf('m{a="1",b="2",a="3"} 1')).toEqual(['duplicate_label']);
    expect(reasonsOf('m{a="\\t"} 1')).toEqual(['bad_escape']);
    expect(reasonsOf('m{a="\\u00e9"} 1')).toEqual(['bad_escape']);
  });

  it('finds duplicate label names in long label lists too', () => {
    const labels = Array.from({ length: 50 }, (_, i) => `l${i}="${i}"`);
    expect(reasonsOf(`m{${labels.join(',')}} 1`)).toEqual([]);
    expect(reasonsOf(`m{${labels.join(',')},l7="again"} 1`)).toEqual(['duplicate_label']);
  });
});

describe('parseExposition: HELP and TYPE', () => {
  it('attaches help and type to the family and unescapes help', () => {
    const { families, invalid } = parseExposition(
      '# HELP http_requests_total Requests\\nby code, with a \\\\ and a "quote".\n# TYPE http_requests_total counter\nhttp_requests_total{code="200"} 3\n',
    );
    expect(invalid).toEqual([]);
    expect(families).toEqual([
      {
        name: 'http_requests_total',
        type: 'counter',
        help: 'Requests\nby code, with a \\ and a "quote".',
        samples: [{ name: 'http_requests_total', labels: [['code', '200']], value: 3 }],
      },
    ]);
  });

  it('accepts TYPE before HELP, blanks and tabs around the parts, and the type in any case', () => {
    const { families, invalid } = parseExposition('#\tTYPE  g \t GAUGE \n#  HELP\tg\t  Some help.  \ng 1\n');
    expect(invalid).toEqual([]);
    expect(families).toEqual([{ name: 'g', type: 'gauge', help: 'Some help.  ', samples: [{ name: 'g', labels: [], value: 1 }] }]);
  });

  it('keeps families that have metadata but no samples', () => {
    expect(parseExposition('# HELP a Help.\n# TYPE b counter\n').families).toEqual([
      { name: 'a', type: 'untyped', help: 'Help.', samples: [] },
      { name: 'b', type: 'counter', samples: [] },
    ]);
  });

  it('ignores an empty HELP, as OpenMetrics says, so a later real one is still accepted', () => {
    const { families, invalid } = parseExposition('# HELP a\n# HELP a   \n# HELP a Real help.\na 1\n');
    expect(invalid).toEqual([]);
    expect(families[0]!.help).toBe('Real help.');
  });

  it('rejects bad TYPE lines', () => {
    expect(reasonsOf('# TYPE m')).toEqual(['bad_type']);
    expect(reasonsOf('# TYPE m countr')).toEqual(['bad_type']);
    expect(reasonsOf('# TYPE m unknown')).toEqual(['bad_type']);
    expect(reasonsOf('# TYPE m gaugehistogram')).toEqual(['bad_type']);
    expect(reasonsOf('# TYPE m counter extra')).toEqual(['bad_type']);
    expect(reasonsOf('# TYPE 1m counter')).toEqual(['bad_metric_name']);
    expect(reasonsOf('# HELP m{a="b"} help')).toEqual(['bad_metric_name']);
    expect(reasonsOf('# HELP m bad \\t escape')).toEqual(['bad_escape']);
    expect(reasonsOf('# HELP m \\"quoted\\" is an error in the text format')).toEqual(['bad_escape']);
    expect(reasonsOf('# HELP m trailing backslash \\')).toEqual(['bad_escape']);
  });

  it('rejects a second TYPE or HELP, and TYPE or HELP after samples', () => {
    expect(parseExposition('# TYPE m gauge\n# TYPE m gauge\n# HELP m a\n# HELP m b\nm 1\n').invalid.map((i) => [i.line, i.reason])).toEqual([
      [2, 'duplicate_metadata'],
      [4, 'duplicate_metadata'],
    ]);
    const late = parseExposition('m 1\n# TYPE m gauge\n# HELP m Late.\nm{a="b"} 2\n');
    expect(late.invalid.map((i) => [i.line, i.reason])).toEqual([
      [2, 'late_metadata'],
      [3, 'late_metadata'],
    ]);
    expect(late.families).toEqual([
      {
        name: 'm',
        type: 'untyped',
        samples: [
          { name: 'm', labels: [], value: 1 },
          { name: 'm', labels: [['a', 'b']], value: 2 },
        ],
      },
    ]);
  });
});

describe('parseExposition: families', () => {
  it('groups interleaved families and keeps the order of first appearance', () => {
    const { families, invalid } = parseExposition('b 1\na{x="1"} 1\nb{x="2"} 2\n# TYPE c gauge\na{x="3"} 3\nc 4\n');
    expect(invalid).toEqual([]);
    expect(families.map((f) => [f.name, f.type, f.samples.map((s) => s.value)])).toEqual([
      ['b', 'untyped', [1, 2]],
      ['a', 'untyped', [1, 3]],
      ['c', 'gauge', [4]],
    ]);
  });

  it('puts _bucket, _sum and _count into a typed histogram, even interleaved', () => {
    const text = [
      '# TYPE h histogram',
      'h_bucket{le="1"} 1',
      'other 5',
      'h_bucket{le="+Inf"} 2',
      'h_sum 3',
      'h_count 2',
      'h_bucket{code="500",le="0.5e1"} 1',
    ].join('\n');
    const { families, invalid } = parseExposition(text);
    expect(invalid).toEqual([]);
    expect(families.map((f) => [f.name, f.type, f.samples.map((s) => s.name)])).toEqual([
      ['h', 'histogram', ['h_bucket', 'h_bucket', 'h_sum', 'h_count', 'h_bucket']],
      ['other', 'untyped', ['other']],
    ]);
  });

  it('puts quantiles, _sum and _count into a typed summary', () => {
    const { families, invalid } = parseExposition('# TYPE s summary\ns{quantile="0.5"} 1\ns{quantile="NaN"} 1\ns_sum 3\ns_count 2\n');
    expect(invalid).toEqual([]);
    expect(families.map((f) => [f.name, f.samples.length])).toEqual([['s', 4]]);
  });

  it('without a TYPE, every sample name is its own untyped family', () => {
    const { families } = parseExposition('h_bucket{le="1"} 1\nh_sum 3\nh_count 2\nh 1\n');
    expect(families.map((f) => [f.name, f.type])).toEqual([
      ['h_bucket', 'untyped'],
      ['h_sum', 'untyped'],
      ['h_count', 'untyped'],
      ['h', 'untyped'],
    ]);
  });

  it('rejects samples that do not fit their typed family', () => {
    const text = [
      '# TYPE h histogram',
      'h_bucket 1',
      'h_bucket{le="fast"} 1',
      'h_bucket{le=""} 1',
      'h_sum{le="1"} 1',
      'h_count{le="1"} 1',
      'h 1',
      '# TYPE s summary',
      's 1',
      's{quantile="high"} 1',
      's_sum{quantile="0.5"} 1',
      's_count{quantile="0.5"} 1',
      'h_bucket{le="1"} 1',
      's{quantile="0.5"} 1',
    ].join('\n');
    const { families, invalid } = parseExposition(text);
    expect(invalid.map((i) => [i.line, i.reason])).toEqual([
      [2, 'family_mismatch'],
      [3, 'family_mismatch'],
      [4, 'family_mismatch'],
      [5, 'family_mismatch'],
      [6, 'family_mismatch'],
      [7, 'family_mismatch'],
      [9, 'family_mismatch'],
      [10, 'family_mismatch'],
      [11, 'family_mismatch'],
      [12, 'family_mismatch'],
    ]);
    expect(families.map((f) => [f.name, f.samples.length])).toEqual([
      ['h', 1],
      ['s', 1],
    ]);
  });

  it('rejects metadata that would make two families own one sample name', () => {
    // An untyped x_bucket came first: a histogram x would claim it.
    expect(parseExposition('x_bucket{le="1"} 1\n# TYPE x histogram\nx_sum 1\n').invalid.map((i) => [i.line, i.reason])).toEqual([[2, 'family_mismatch']]);
    // A summary x owns x_sum: neither TYPE nor HELP may name x_sum on its own.
    expect(reasonsOf('# TYPE x summary\n# TYPE x_sum gauge\n# HELP x_count Help.\n')).toEqual(['family_mismatch', 'family_mismatch']);
    // HELP first makes x an untyped family; a TYPE may still make it a histogram, unless that takes a name in use.
    expect(reasonsOf('# HELP x Help.\n# TYPE x histogram\nx_count 1\n')).toEqual([]);
    expect(reasonsOf('# HELP x Help.\nx_count 1\n# TYPE x histogram\n')).toEqual(['family_mismatch']);
  });

  it('keeps the first of a repeated series: label order and empty labels do not matter', () => {
    const { families, invalid } = parseExposition('m{a="1",b="2"} 1\nm{b="2",a="1"} 2\nm{a="1",b="2",c=""} 3\nm{a="1"} 4\nm{a="1",b="2"} 5 1000\n');
    expect(families[0]!.samples.map((s) => s.value)).toEqual([1, 4]);
    expect(invalid.map((i) => [i.line, i.reason])).toEqual([
      [2, 'duplicate_series'],
      [3, 'duplicate_series'],
      [5, 'duplicate_series'],
    ]);
  });

  it('one bad line never changes how its neighbours are read', () => {
    const bad = ['m{a="1} 1', 'm{a="1"', 'm{a="\\', '"', '{', '}', '\\', 'm{a="1",a="1"} 1', '# TYPE', '# TYPE m', '# HELP m \\', 'm 1 2 3', 'm{a="x\0"} 1'];
    for (const line of bad) {
      const { families, invalid } = parseExposition(`good{n="1"} 1\n${line}\ngood{n="2"} 2\n`);
      expect(
        families.flatMap((f) => f.samples.map((s) => s.value)),
        line,
      ).toEqual([1, 2]);
      expect(
        invalid.every((i) => i.line === 2),
        line,
      ).toBe(true);
    }
  });

  it('reports line numbers from 1 and keeps at most 200 characters of the line, never half a surrogate pair', () => {
    const long = `bad-${'x'.repeat(500)} 1`;
    const emoji = `bad-${'y'.repeat(195)}😀😀😀 1`;
    const { invalid } = parseExposition(`ok 1\n\n${long}\r\n${emoji}`);
    expect(invalid.map((i) => [i.line, i.text.length])).toEqual([
      [3, 200],
      [4, 199],
    ]);
    expect(invalid[0]!.text).toBe(long.slice(0, 200));
    expect(invalid[1]!.text.endsWith('y')).toBe(true);
  });

  it('uses only the documented reasons, and each of them', () => {
    const lines = [
      'x{a="b" 1',
      '1x 1',
      'x{1a="b"} 1',
      'x{a="1",a="2"} 1',
      'x{a="\\q"} 1',
      'x abc',
      'x 1 -5',
      '# TYPE y countr',
      '# TYPE z gauge',
      '# TYPE z gauge',
      'w 1',
      '# HELP w Late.',
      '# TYPE h histogram',
      'h_bucket 1',
      'w 2',
      'w 2',
    ];
    const reasons = new Set(reasonsOf(lines.join('\n')));
    expect([...reasons].sort()).toEqual([...INVALID_REASONS].sort());
  });

  it('parses a 10,000-line scrape into its families, every sample in order', () => {
    const events = ['userlogin', 'dialogcreated', 'dialogsubmitted', 'documentcreated', 'pdfcreated', 'smssent', 'emailsent'];
    const lines: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      const event = events[i % events.length]!;
      lines.push(`${event}_event_count{customer="Customer \\"${i}\\" AS",customer_id="cust-${String(i).padStart(6, '0')}"} ${i * 3}`);
    }
    // Speed at 100,000 series is the benchmark's (`npm run bench`, a large upstream), not a test's.
    const { families, invalid } = parseExposition(`${lines.join('\n')}\n`);
    expect(invalid).toEqual([]);
    expect(families.map((f) => f.name)).toEqual(events.map((e) => `${e}_event_count`));
    expect(families.map((f) => f.samples.length)).toEqual([1429, 1429, 1429, 1429, 1428, 1428, 1428]);
    expect(families[1]!.samples[2]).toEqual({
      name: 'dialogcreated_event_count',
      labels: [
        ['customer', 'Customer "15" AS'],
        ['customer_id', 'cust-000015'],
      ],
      value: 45,
    });
    expect(families[6]!.samples.at(-1)).toEqual({
      name: 'emailsent_event_count',
      labels: [
        ['customer', 'Customer "9995" AS'],
        ['customer_id', 'cust-009995'],
      ],
      value: 29985,
    });
  });
});

describe('parseGoFloat', () => {
  it('rounds hexadecimal floats once, also into the subnormal range', () => {
    expect(parseGoFloat('0x1p-1074')).toBe(5e-324);
    expect(parseGoFloat('0x1p-1075')).toBe(0); // exactly half the smallest subnormal: ties to even
    expect(parseGoFloat('0x1.0000000000001p-1075')).toBe(5e-324);
    expect(parseGoFloat('0x1.fffffffffffffp1023')).toBe(Number.MAX_VALUE);
    expect(parseGoFloat('0x1.fffffffffffff8p1023')).toBeUndefined(); // rounds up to 2^1024
    expect(parseGoFloat('0x1.00000000000008p0')).toBe(1); // tie, even mantissa stays
    expect(parseGoFloat('0x1.00000000000018p0')).toBe(1 + 2 * Number.EPSILON); // tie, odd mantissa rounds up
    expect(parseGoFloat('0X_1P+4')).toBe(16);
    expect(parseGoFloat('0x0p99999')).toBe(0);
    expect(parseGoFloat('0x.8p1')).toBe(1);
  });

  it('follows Go on underscores, signs and special words', () => {
    expect(parseGoFloat('1_0.0_1e1_0')).toBe(10.01e10);
    expect(parseGoFloat('1_0._01')).toBeUndefined();
    expect(parseGoFloat('1e_1')).toBeUndefined();
    expect(parseGoFloat('INFINITY')).toBe(Infinity);
    expect(parseGoFloat('-iNf')).toBe(-Infinity);
    expect(parseGoFloat('NAN')).toBeNaN();
    expect(parseGoFloat('+nan')).toBeUndefined();
    expect(parseGoFloat('')).toBeUndefined();
    expect(parseGoFloat(' 1')).toBeUndefined();
    expect(parseGoFloat('1 ')).toBeUndefined();
    expect(parseGoFloat('Infinity'.slice(0, 5))).toBeUndefined();
  });
});

describe('name checks', () => {
  it('follows the text format rules', () => {
    expect(['a', '_', ':', 'a:b_c1', '__x'].every(isValidMetricName)).toBe(true);
    expect(['', '1a', 'a-b', 'a b', 'é'].some(isValidMetricName)).toBe(false);
    expect(['a', '_', '_x', 'a_1'].every(isValidLabelName)).toBe(true);
    expect(['', '1a', 'a:b', '__', '__name__', 'é'].some(isValidLabelName)).toBe(false);
  });
});

describe('normalizeFamilies', () => {
  it('returns a parser result unchanged', () => {
    const { families } = parseExposition('# HELP a A.\n# TYPE a gauge\na{x="1"} 1\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\n');
    expect(normalizeFamilies(families)).toEqual({ families, problems: [] });
  });

  it('leaves out what the parser would have rejected, and says what and why', () => {
    const families = [
      { name: 'ok', type: 'gauge', help: '  Leading blanks go.\r\r', samples: [{ name: 'ok', labels: [], value: 1 }] },
      { name: 'bad name', type: 'gauge', samples: [] },
      { name: 'bad_type', type: 'unknown', samples: [] },
      { name: 'ok', type: 'counter', samples: [] },
      { name: 'h', type: 'histogram', help: 'x\0y', samples: [] },
      { name: 'h_bucket', type: 'untyped', samples: [] },
      { name: 'ok_sum', type: 'untyped', help: '', samples: [] },
      {
        name: 's',
        type: 'summary',
        samples: [
          { name: 's', labels: [['quantile', '0.5']], value: 1 },
          { name: 's', labels: [['quantile', '0.5']], value: 2 },
          { name: 's', labels: [], value: 3 },
          { name: 'other', labels: [], value: 4 },
          { name: 's_sum', labels: [['__x', '1']], value: 5 },
          {
            name: 's_sum',
            labels: [
              ['a', '1'],
              ['a', '2'],
            ],
            value: 6,
          },
          { name: 's_sum', labels: [['a', 'x\0']], value: 7 },
          { name: 's_sum', labels: [], value: '8' },
          { name: 's_sum', labels: [], value: 9, timestampMs: -1 },
          { name: 's_sum', labels: [], value: 10, timestampMs: 1.5 },
          null,
          { name: 's_count', labels: [], value: 11, timestampMs: 12 },
        ],
      },
    ] as unknown as MetricFamily[];
    const result = normalizeFamilies(families);
    expect(result.families).toEqual([
      { name: 'ok', type: 'gauge', help: 'Leading blanks go.', samples: [{ name: 'ok', labels: [], value: 1 }] },
      { name: 'h', type: 'histogram', samples: [] },
      { name: 'ok_sum', type: 'untyped', samples: [] },
      {
        name: 's',
        type: 'summary',
        samples: [
          { name: 's', labels: [['quantile', '0.5']], value: 1 },
          { name: 's_count', labels: [], value: 11, timestampMs: 12 },
        ],
      },
    ]);
    expect(result.problems).toEqual([
      { family: 'bad name', reason: 'bad_metric_name' },
      { family: 'bad_type', reason: 'bad_type' },
      { family: 'ok', reason: 'duplicate_metadata' },
      { family: 'h', reason: 'bad_syntax' },
      { family: 'h_bucket', reason: 'family_mismatch' },
      { family: 's', sample: 's', reason: 'duplicate_series' },
      { family: 's', sample: 's', reason: 'family_mismatch' },
      { family: 's', sample: 'other', reason: 'family_mismatch' },
      { family: 's', sample: 's_sum', reason: 'bad_label_name' },
      { family: 's', sample: 's_sum', reason: 'duplicate_label' },
      { family: 's', sample: 's_sum', reason: 'bad_syntax' },
      { family: 's', sample: 's_sum', reason: 'bad_value' },
      { family: 's', sample: 's_sum', reason: 'bad_timestamp' },
      { family: 's', sample: 's_sum', reason: 'bad_timestamp' },
      { family: 's', sample: 'undefined', reason: 'bad_syntax' },
    ]);
    // The input is left as it was.
    expect(families[0]!.help).toBe('  Leading blanks go.\r\r');
  });

  it('never throws on junk', () => {
    for (const junk of [
      [null],
      [1],
      ['x'],
      [{}],
      [{ name: 'a', type: 'gauge', samples: 'no' }],
      [{ name: 'a', type: 'gauge', samples: [{ name: 'a', labels: [[1, 2]], value: 1 }] }],
    ]) {
      expect(() => normalizeFamilies(junk as unknown as MetricFamily[])).not.toThrow();
    }
  });
});
