/**
 * The states of `serve` and the only transitions between them, in one table: `starting` while
 * resources are acquired, `migrating` while serving with the database not yet migrated, `ready`
 * once it has been, then `stopping` and `stopped`. A stop may come in any state.
 */

export type ServeState = 'starting' | 'migrating' | 'ready' | 'stopping' | 'stopped';

const TRANSITIONS: Readonly<Record<ServeState, readonly ServeState[]>> = {
  starting: ['migrating', 'stopping'],
  migrating: ['ready', 'stopping'],
  ready: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/**
 * The state after asking to go from `from` to `to`: `to` when the table allows it, `from`
 * otherwise (a migration that ends after the stop leaves `stopping` as it is). Never throws.
 */
export function nextState(from: ServeState, to: ServeState): ServeState {
  return TRANSITIONS[from].includes(to) ? to : from;
}
