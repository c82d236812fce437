// The article's A/B pattern with the SDK: do some work, checkpoint, fork two sessions, try a
// different strategy in each, keep the winner by restoring the original session to its checkpoint.
// Run against a running platform: SPACE_API_URL=http://127.0.0.1:7070 SPACE_API_KEY=... node examples/ab-fork.mjs
import { Space } from '@space/sdk';

const space = new Space();
const session = await space.sessions.create({ template: process.env.SPACE_EXAMPLE_TEMPLATE ?? 'base' });
console.log(`session ${session.id}`);
try {
  await session.exec('mkdir -p app && printf "step 1\\nstep 2\\n" > app/progress.txt');
  const step = await session.checkpoint({ kind: 'fs' });
  console.log(`checkpoint ${step.id} at step N`);

  const [a, b] = await space.checkpoints.fork(step.id, { count: 2 });
  const strategies = [
    { fork: a, cmd: 'echo "strategy A: rewrite" >> app/progress.txt && false' },
    { fork: b, cmd: 'echo "strategy B: patch" >> app/progress.txt && true' },
  ];
  const results = await Promise.all(strategies.map(async (s) => ({ ...s, result: await s.fork.exec(s.cmd) })));
  for (const r of results) console.log(`${r.fork.id}: exit ${r.result.exitCode}`);

  const winner = results.find((r) => r.result.exitCode === 0);
  if (!winner) throw new Error('no strategy succeeded');
  const kept = await winner.fork.checkpoint({ kind: 'fs' });
  await session.restore(kept.id);
  console.log(`kept the winner: ${(await session.files.read('app/progress.txt')).toString().trim().split('\n').at(-1)}`);
  for (const r of results) await r.fork.delete();
} finally {
  await session.delete();
}
