// A store database that counts the statements sent through it (transactions included), for the
// benches that report statements per operation.

/** Wraps `db` (a SqliteDatabase or PostgresDatabase); `count()` says how many statements went through so far. */
export function countedDatabase(db) {
  let statements = 0;
  const counted = (target) =>
    new Proxy(target, {
      get(t, prop) {
        const value = t[prop];
        if (prop === 'run' || prop === 'get' || prop === 'all') return (...args) => (statements++, value.apply(t, args));
        if (prop === 'transaction') return (work) => value.call(t, (tx) => work(counted(tx)));
        return typeof value === 'function' ? value.bind(t) : value;
      },
    });
  return { db: counted(db), count: () => statements };
}
