/** The states of `serve` and the only transitions between them (docs/design/serve-lifecycle.md). */

export type ServeState = 'starting' | 'migrating' | 'ready' | 'stopping' | 'stopped';

const TRANSITIONS: Readonly<Record<ServeState, readonly ServeState[]>> = {
  starting: ['migrating', 'stopping'],
  migrating: ['ready', 'stopping'],
  ready: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/** `to` when the table allows going there from `from`, else `from`. */
export function nextState(from: ServeState, to: ServeState): ServeState {
  return TRANSITIONS[from].includes(to) ? to : from;
}
