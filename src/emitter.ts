/**
 * A small typed event emitter: one map of event names to payload types, one payload object
 * per event. A listener that throws is reported and never breaks the emitter's state nor
 * stops the other listeners. Adding the same listener twice is a no-op, as with
 * `addEventListener`.
 *
 * Events may be "retroactive": a listener added for such an event is first called, after
 * `on()` returns, once for each payload of the current state, then for every later event,
 * each exactly once.
 */
export type Listener<T> = (payload: T) => void;

type Replay<Events> = { [E in keyof Events]?: () => Iterable<Events[E]> };

interface Entry<T> {
  listener: Listener<T>;
  /** Still waiting for its replay: live events skip it until then. */
  pending: boolean;
}

function report(error: unknown): void {
  const g = globalThis as { reportError?: (e: unknown) => void };
  if (typeof g.reportError === 'function') g.reportError(error);
  else console.error('Tessera: an event listener threw', error);
}

export class Emitter<Events extends object> {
  private readonly entries = new Map<keyof Events, Entry<never>[]>();

  /** @param replay for retroactive events, the current state to replay to a new listener */
  constructor(private readonly replay: Replay<Events> = {}) {}

  /** Add a listener. Returns a function that removes it. */
  on<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    const list = (this.entries.get(event) ?? []) as Entry<Events[E]>[];
    if (!list.some((e) => e.listener === listener)) {
      const replay = this.replay[event];
      const entry: Entry<Events[E]> = { listener, pending: replay !== undefined };
      list.push(entry);
      this.entries.set(event, list as Entry<never>[]);
      if (replay) {
        queueMicrotask(() => {
          if (!list.includes(entry)) return;
          for (const payload of [...replay()]) {
            if (!list.includes(entry)) break;
            call(listener, payload);
          }
          entry.pending = false;
        });
      }
    }
    return () => this.off(event, listener);
  }

  /** Add a listener called at most once. */
  once<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    const off = this.on(event, (payload) => {
      off();
      listener(payload);
    });
    return off;
  }

  /** Remove a listener. */
  off<E extends keyof Events>(event: E, listener: Listener<Events[E]>): void {
    const list = this.entries.get(event);
    if (!list) return;
    const index = list.findIndex((e) => e.listener === listener);
    if (index >= 0) list.splice(index, 1);
  }

  /** Call every (non-pending) listener of `event` with `payload`. */
  emit<E extends keyof Events>(event: E, payload: Events[E]): void {
    const list = this.entries.get(event) as Entry<Events[E]>[] | undefined;
    if (!list) return;
    for (const entry of [...list]) if (!entry.pending && list.includes(entry)) call(entry.listener, payload);
  }

  /** True when `event` has at least one listener. */
  has<E extends keyof Events>(event: E): boolean {
    return (this.entries.get(event)?.length ?? 0) > 0;
  }

  /** Remove every listener. */
  clear(): void {
    this.entries.clear();
  }
}

/** Call a listener; an exception is reported, never thrown into the caller. */
export function call<T>(listener: Listener<T>, payload: T): void {
  try {
    listener(payload);
  } catch (error) {
    report(error);
  }
}
