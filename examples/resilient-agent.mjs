// An agent-style loop that keeps working while its sandbox is killed under it: each step appends
// to a file in the session; every few steps the sandbox is killed (as an OOM or a lost node would),
// and the next call resumes the session with its files. Nothing the agent wrote is lost.
// Run against a running platform: SPACE_API_URL=... SPACE_API_KEY=... node examples/resilient-agent.mjs
import { Space } from '@space/sdk';

const space = new Space();
const session = await space.sessions.create({ template: process.env.SPACE_EXAMPLE_TEMPLATE ?? 'base' });
console.log(`session ${session.id}`);
try {
  const steps = Number(process.env.SPACE_EXAMPLE_STEPS ?? 6);
  for (let step = 1; step <= steps; step++) {
    const { stdout } = await session.exec(`echo "step ${step}" >> journal.txt && wc -l < journal.txt`);
    console.log(`step ${step}: journal has ${stdout.trim()} lines`);
    if (step % 3 === 0) {
      await session.killSandbox();
      console.log('  (sandbox killed; the next call resumes the session)');
    }
  }
  const journal = (await session.files.read('journal.txt')).toString().trim().split('\n');
  if (journal.length !== steps) throw new Error(`expected ${steps} journal lines, found ${journal.length}`);
  const history = (await session.refresh()).data.sandboxHistory ?? [];
  console.log(`done: ${journal.length} steps across ${history.length} sandboxes`);
} finally {
  await session.delete();
}
