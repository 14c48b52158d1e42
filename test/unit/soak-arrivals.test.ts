import { describe, expect, it } from 'vitest';
import { arrivalTimes, inTimeForExpiry } from '../../soak/derived.js';

// A window expired at 20:54:20 with a 5-minute audit period and 60 s for the audit's run: records inserted
// upstream after 20:48:20 needed no audit before the drop (the soak of 2026-11-27 20:42 saw 7 such records).
const expiredAt = Date.parse('2026-11-27T20:54:20Z');
const deadline = expiredAt - 6 * 60_000;
const at = (hms: string) => Date.parse(`2026-11-27T${hms}Z`);

describe('soak: late arrivals of expired windows', () => {
  it('keeps records upstream always had and arrivals older than the deadline, leaves out the later ones', () => {
    const arrivals = arrivalTimes([
      { json: '{"id":"early"}', insertedAtMs: at('20:40:00') },
      { json: '{"id":"late"}', insertedAtMs: at('20:50:02') },
      { json: '{"id":"edge"}', insertedAtMs: deadline },
    ]);
    const { kept, left } = inTimeForExpiry(['{"id":"base"}', '{"id":"late"}', '{"id":"early"}', '{"id":"edge"}'], arrivals, deadline);
    expect(kept).toEqual(['{"id":"base"}', '{"id":"early"}', '{"id":"edge"}']);
    expect(left).toEqual(['{"id":"late"}']);
  });

  it('gives each copy of a text its own arrival time, the earliest first', () => {
    // Inserted twice: once in time, once too late. The served pair keeps one copy.
    const arrivals = arrivalTimes([
      { json: 'x', insertedAtMs: at('20:52:00') },
      { json: 'x', insertedAtMs: at('20:30:00') },
    ]);
    expect(arrivals.get('x')).toEqual([at('20:30:00'), at('20:52:00')]);
    expect(inTimeForExpiry(['x', 'x'], arrivals, deadline)).toEqual({ kept: ['x'], left: ['x'] });
  });

  it('treats a copy beyond the arrivals as a record upstream always had', () => {
    const arrivals = arrivalTimes([{ json: 'y', insertedAtMs: at('20:53:00') }]);
    expect(inTimeForExpiry(['y', 'y'], arrivals, deadline)).toEqual({ kept: ['y'], left: ['y'] });
  });
});
