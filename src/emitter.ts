/**
 * The typed event emitter of the SDK: `mitt` underneath, with what it lacks on top —
 * a listener that throws is reported and never breaks the emitter's state nor stops the other
 * listeners; adding the same listener twice (with `on` or `once`) is a no-op, as with
 * `addEventListener`; `off(listener)` removes it however it was added.
 *
 * Events may be "retroactive": a listener added for such an event is first called, after
 * `on()` returns, once for each payload of the current state, then for every later event,
 * each exactly once.
 */
import mitt, { type Emitter as Mitt } from 'mitt';
import { SdkError } from './errors.ts';

/** A listener of an event: called with the event's one payload object. */
export type Listener<T> = (payload: T) => void;

type Replay<Events> = { [E in keyof Events]?: () => Iterable<Events[E]> };

/** One listener as added: the function mitt holds for it, and its state. */
interface Entry {
  readonly handler: (payload: unknown) => void;
  /** Still waiting for its replay: live events skip it until then. */
  pending: boolean;
  once: boolean;
  removed: boolean;
}

function report(error: unknown): void {
  const g = globalThis as { reportError?: (e: unknown) => void };
  if (typeof g.reportError === 'function') g.reportError(error);
  else console.error('Tessera: an event listener threw', error);
}

export class Emitter<Events extends object> {
  private readonly bus: Mitt<Record<keyof Events, unknown>> = mitt();
  /** Per event, the entry of each listener: how `off` finds what `on` or `once` added. */
  private readonly entries = new Map<keyof Events, Map<Listener<never>, Entry>>();

  /** @param replay for retroactive events, the current state to replay to a new listener */
  constructor(private readonly replay: Replay<Events> = {}) {}

  /** Add a listener. Returns a function that removes it. */
  on<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    this.add(event, listener, false);
    return () => this.off(event, listener);
  }

  /** Add a listener called at most once. Returns a function that removes it. */
  once<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    this.add(event, listener, true);
    return () => this.off(event, listener);
  }

  /** Remove a listener, whether added with `on` or `once`. */
  off<E extends keyof Events>(event: E, listener: Listener<Events[E]>): void {
    const byListener = this.entries.get(event);
    const entry = byListener?.get(listener as Listener<never>);
    if (!byListener || !entry) return;
    entry.removed = true;
    byListener.delete(listener as Listener<never>);
    this.bus.off(event, entry.handler);
  }

  /** Call every (non-pending) listener of `event` with `payload`. */
  emit<E extends keyof Events>(event: E, payload: Events[E]): void {
    this.bus.emit(event, payload);
  }

  /** True when `event` has at least one listener. */
  has<E extends keyof Events>(event: E): boolean {
    return (this.entries.get(event)?.size ?? 0) > 0;
  }

  /** Remove every listener. */
  clear(): void {
    for (const byListener of this.entries.values()) for (const entry of byListener.values()) entry.removed = true;
    this.entries.clear();
    this.bus.all.clear();
  }

  private add<E extends keyof Events>(event: E, listener: Listener<Events[E]>, once: boolean): void {
    // from plain JavaScript: a listener that is no function would throw later, in an emit
    if (typeof listener !== 'function') throw new SdkError('INVALID_ARGUMENT', `on("${String(event)}"): the listener must be a function, got ${typeof listener}`);
    let byListener = this.entries.get(event);
    if (!byListener) this.entries.set(event, (byListener = new Map()));
    if (byListener.has(listener as Listener<never>)) return;
    const replay = this.replay[event];
    const entry: Entry = {
      pending: replay !== undefined,
      once,
      removed: false,
      handler: (payload) => {
        // mitt walks a copy of its list: a listener removed during this emit is skipped here
        if (entry.pending || entry.removed) return;
        this.deliver(event, listener, entry, payload as Events[E]);
      },
    };
    byListener.set(listener as Listener<never>, entry);
    this.bus.on(event, entry.handler);
    if (replay) {
      queueMicrotask(() => {
        for (const payload of entry.removed ? [] : [...replay()]) {
          if (entry.removed) break;
          this.deliver(event, listener, entry, payload);
        }
        entry.pending = false;
      });
    }
  }

  private deliver<E extends keyof Events>(event: E, listener: Listener<Events[E]>, entry: Entry, payload: Events[E]): void {
    if (entry.once) this.off(event, listener);
    call(listener, payload);
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
