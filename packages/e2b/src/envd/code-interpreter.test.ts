import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CodeEventData } from '@space/sdk';
import { e2bLines } from './code-interpreter.js';

test("a kernel's result keys become E2B's names; keys named like Object's properties stay plain keys, and none reaches a prototype", () => {
  // As the SDK hands it on, parsed from the wire: JSON.parse makes `__proto__` a key of its own.
  const event = JSON.parse(
    '{"type":"result","isMainResult":true,"data":{"text/plain":"1","image/png":"iVBO","constructor":"c","__proto__":{"polluted":true},"type":"x"}}',
  ) as CodeEventData;
  const [line] = e2bLines(event);
  assert.deepEqual(Object.keys(line!).sort(), ['__proto__', 'constructor', 'is_main_result', 'png', 'text', 'type']);
  assert.equal(line!.constructor, 'c');
  assert.equal(line!.type, 'result');
  assert.equal(Object.getPrototypeOf(line), Object.prototype);
  assert.equal(line!.polluted, undefined);
});
