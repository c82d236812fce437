import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SettingsError, readSettings, setting } from './settings.js';

const table = {
  size: setting.integer('T_SIZE', { default: 2, min: 0, max: 10, doc: 'a size' }),
  share: setting.positive('T_SHARE', { default: 2, max: 100, doc: 'a share' }),
  mode: setting.choice('T_MODE', ['fast', 'safe'], { default: 'safe', doc: 'a mode' }),
  on: setting.flag('T_ON', { default: false, doc: 'a switch' }),
  url: setting.text('T_URL', { default: undefined, check: /^https?:\/\//, expects: 'an http(s) URL', doc: 'a URL' }),
  names: setting.list('T_NAMES', { default: ['a', 'b'], check: /^[a-z]+$/, doc: 'names' }),
};

test('unset or empty settings take their defaults', () => {
  const defaults = { size: 2, share: 2, mode: 'safe', on: false, url: undefined, names: ['a', 'b'] };
  assert.deepEqual(readSettings(table, {}), defaults);
  assert.deepEqual(readSettings(table, { T_SIZE: '', T_NAMES: '  ', T_URL: '' }), defaults);
});

test('set values are parsed into their types', () => {
  assert.deepEqual(readSettings(table, { T_SIZE: ' 10 ', T_SHARE: '0.5', T_MODE: 'fast', T_ON: '1', T_URL: 'http://x:1', T_NAMES: 'c, d,,' }), {
    size: 10,
    share: 0.5,
    mode: 'fast',
    on: true,
    url: 'http://x:1',
    names: ['c', 'd'],
  });
});

test('every bad value is named with what it expects, all at once', () => {
  const bad = { T_SIZE: '11', T_SHARE: '0', T_MODE: 'quick', T_ON: 'yes', T_URL: 'ftp://x', T_NAMES: 'a,B' };
  const err = (() => {
    try {
      readSettings(table, bad);
    } catch (e) {
      return e;
    }
    return null;
  })();
  assert.ok(err instanceof SettingsError);
  assert.deepEqual(err.problems, [
    'T_SIZE must be a whole number from 0 to 10, got "11"',
    'T_SHARE must be a number above 0 and up to 100, got "0"',
    'T_MODE must be one of fast, safe, got "quick"',
    'T_ON must be 0 or 1, got "yes"',
    'T_URL must be an http(s) URL, got "ftp://x"',
    'T_NAMES must be comma-separated names, got "a,B"',
  ]);
  assert.match(err.message, /^6 settings are wrong: T_SIZE must be/);
});

test('numbers refuse what Number() would let through', () => {
  for (const raw of ['1e3', '0x10', '2.5', '-1', 'Infinity', '1 2'])
    assert.throws(() => readSettings({ size: table.size }, { T_SIZE: raw }), /T_SIZE must be a whole number/);
  for (const raw of ['-1', 'NaN', '1e3', '101'])
    assert.throws(() => readSettings({ share: table.share }, { T_SHARE: raw }), /T_SHARE must be a number above 0/);
  assert.throws(() => readSettings({ size: table.size }, { T_SIZE: '-1' }), { message: 'T_SIZE must be a whole number from 0 to 10, got "-1"' });
});

test('the docs see each default as it is shown', () => {
  assert.equal(table.size.shownDefault, '`2`');
  assert.equal(table.on.shownDefault, '`0`');
  assert.equal(table.url.shownDefault, null);
  assert.equal(table.names.shownDefault, '`a,b`');
  assert.equal(setting.text('T_DIR', { default: undefined, shownDefault: '`<data>/x`', doc: 'd' }).shownDefault, '`<data>/x`');
});
