/** Content negotiation for `/metrics`: which of the two formats an `Accept` header gets. */

/** q of an Accept media range; NaN for a malformed one. */
function parseQ(text: string): number {
  return /^\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
}

/**
 * OpenMetrics only when `application/openmetrics-text` (1.x, 0.0.1 or no version) gets a higher q
 * than `text/plain`, each type's q from its most specific range; malformed q ignored. Never throws.
 */
export function negotiateFormat(acceptHeader: string | undefined): 'text' | 'openmetrics' {
  if (acceptHeader === undefined || acceptHeader === '') return 'text';
  let openMetrics = -1;
  let application = -1;
  let text = -1;
  let anyText = -1;
  let any = -1;
  for (const range of acceptHeader.split(',')) {
    const [typeText = '', ...params] = range.split(';');
    const mediaType = typeText.trim().toLowerCase();
    let q = 1;
    let version: string | undefined;
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq === -1) continue;
      const key = param.slice(0, eq).trim().toLowerCase();
      const value = param
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (key === 'q') q = parseQ(value);
      else if (key === 'version') version = value;
    }
    if (!(q >= 0 && q <= 1)) continue;
    switch (mediaType) {
      case 'application/openmetrics-text':
        if (version === undefined || version.startsWith('1.') || version === '0.0.1') openMetrics = Math.max(openMetrics, q);
        break;
      case 'application/*':
        application = Math.max(application, q);
        break;
      case 'text/plain':
        text = Math.max(text, q);
        break;
      case 'text/*':
        anyText = Math.max(anyText, q);
        break;
      case '*/*':
        any = Math.max(any, q);
        break;
    }
  }
  const pick = (specific: number, group: number): number => (specific >= 0 ? specific : group >= 0 ? group : Math.max(any, 0));
  return pick(openMetrics, application) > pick(text, anyText) ? 'openmetrics' : 'text';
}
