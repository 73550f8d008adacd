const refuse = (): never => {
  throw new TypeError('Tessera: this Map is read-only: the SDK keeps it in step with the room');
};

/**
 * A `Map` (`instanceof Map` is true, every reading method works as on any Map) whose
 * mutating methods throw: callers read it, only the SDK changes it, through {@link writeEntry}
 * and {@link deleteEntry}.
 */
export class ReadOnlyMap<K, V> extends Map<K, V> {
  /** Throws: the map is read-only. */
  override set(_key: K, _value: V): this {
    return refuse();
  }
  /** Throws: the map is read-only. */
  override delete(_key: K): boolean {
    return refuse();
  }
  /** Throws: the map is read-only. */
  override clear(): void {
    refuse();
  }
}

const set = Map.prototype.set;
const remove = Map.prototype.delete;

/** Set an entry of a read-only map (the SDK's own writes). */
export function writeEntry<K, V>(map: ReadOnlyMap<K, V>, key: K, value: V): void {
  set.call(map, key, value);
}

/** Delete an entry of a read-only map (the SDK's own writes). */
export function deleteEntry<K, V>(map: ReadOnlyMap<K, V>, key: K): boolean {
  return remove.call(map, key);
}
