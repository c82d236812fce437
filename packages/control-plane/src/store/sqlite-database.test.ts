import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SqliteDatabase } from './sqlite-database.js';

test('statements are compiled once per SQL text and reused with other parameters; the cache stays bounded', async () => {
  const db = await SqliteDatabase.open(':memory:');
  try {
    await db.run('CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)');
    for (let i = 0; i < 5; i++) await db.run('INSERT INTO things (id, name) VALUES (?, ?)', [i, `thing ${i}`]);
    const cached = db.statementsCached;
    for (let i = 0; i < 5; i++) assert.deepEqual(await db.get('SELECT name FROM things WHERE id = ?', [i]), { name: `thing ${i}` });
    assert.equal(db.statementsCached, cached + 1, 'one statement for five reads');
    // Texts that vary (a list of ids) push out the least recently used: the cache never grows past its bound.
    for (let n = 1; n <= 1000; n++) await db.all(`SELECT id FROM things WHERE id IN (${Array(n).fill('?').join(', ')})`, Array(n).fill(1));
    assert.ok(db.statementsCached <= 256, `${db.statementsCached} kept`);
    assert.deepEqual(await db.get('SELECT name FROM things WHERE id = ?', [3]), { name: 'thing 3' });
  } finally {
    await db.close();
  }
});

test('a statement kept across a change of the schema sees the new schema, in and out of transactions', async () => {
  const db = await SqliteDatabase.open(':memory:');
  try {
    await db.run('CREATE TABLE things (id INTEGER PRIMARY KEY)');
    await db.run('INSERT INTO things (id) VALUES (1)');
    assert.deepEqual(await db.get('SELECT * FROM things'), { id: 1 });
    await db.transaction(async (tx) => {
      await tx.run(`ALTER TABLE things ADD COLUMN name TEXT NOT NULL DEFAULT 'one'`);
      assert.deepEqual(await tx.get('SELECT * FROM things'), { id: 1, name: 'one' });
    });
    assert.deepEqual(await db.all('SELECT * FROM things'), [{ id: 1, name: 'one' }]);
    await db
      .transaction(async (tx) => {
        await tx.run('INSERT INTO things (id, name) VALUES (?, ?)', [2, 'two']);
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    assert.deepEqual(await db.all('SELECT * FROM things'), [{ id: 1, name: 'one' }]);
  } finally {
    await db.close();
  }
});
