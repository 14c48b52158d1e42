import type { AuditResult } from '../../src/sync/audit/source.js';

/** Whether an audit left the source as E6 has it (nothing differing). */
export function auditClean(result: AuditResult): boolean {
  return result.left.length === 0;
}
