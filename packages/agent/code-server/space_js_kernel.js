// SPACE's JavaScript context, inside a sandbox: a long-lived Node.js whose global scope carries over
// between cells (variables, functions, `require`d modules). The code interpreter's server is its
// only client: one JSON request per line on stdin ({"code"}), and per cell the events of SPACE's
// code protocol on stdout, then {"type":"done"}. A cell's value is shown with util.inspect; a
// promise is awaited first; `await` at the top of a cell works (the cell then runs as an async
// function, whose `return` gives its value). SIGINT interrupts a running cell (vm's breakOnSigint).

const { createRequire } = require('node:module');
const path = require('node:path');
const readline = require('node:readline');
const util = require('node:util');
const vm = require('node:vm');

const write = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const show = (args) => `${util.format(...args)}\n`;
const console_ = {
  log: (...a) => write({ type: 'stdout', text: show(a) }),
  info: (...a) => write({ type: 'stdout', text: show(a) }),
  debug: (...a) => write({ type: 'stdout', text: show(a) }),
  warn: (...a) => write({ type: 'stderr', text: show(a) }),
  error: (...a) => write({ type: 'stderr', text: show(a) }),
  dir: (value) => write({ type: 'stdout', text: `${util.inspect(value)}\n` }),
  table: (value) => write({ type: 'stdout', text: `${util.inspect(value)}\n` }),
};
const sandbox = { console: console_, require: createRequire(path.join(process.cwd(), 'cell.js')), process, Buffer, URL, TextEncoder, TextDecoder };
for (const name of [
  'setTimeout',
  'clearTimeout',
  'setInterval',
  'clearInterval',
  'setImmediate',
  'clearImmediate',
  'queueMicrotask',
  'fetch',
  'structuredClone',
]) {
  if (name in globalThis) sandbox[name] = globalThis[name];
}
const context = vm.createContext(sandbox);

function traceback(err) {
  return String(err?.stack ?? err)
    .split('\n')
    .filter((line) => !line.includes('node:vm') && !line.includes('space_js_kernel') && !line.includes('space-js-kernel'));
}

async function run(code) {
  let value;
  try {
    try {
      value = vm.runInContext(code, context, { filename: 'cell.js', breakOnSigint: true });
    } catch (err) {
      // `await` at the top of a cell: run it as an async function.
      // The context's own SyntaxError, not this realm's: compared by name.
      if (err?.name !== 'SyntaxError' || !/await is only valid/.test(err.message)) throw err;
      value = vm.runInContext(`(async () => {\n${code}\n})()`, context, { filename: 'cell.js', breakOnSigint: true });
    }
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) write({ type: 'result', isMainResult: true, data: { 'text/plain': util.inspect(value, { depth: 4, maxArrayLength: 200 }) } });
  } catch (err) {
    const interrupted = err?.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
    const name = interrupted ? 'KeyboardInterrupt' : (err?.name ?? typeof err);
    write({ type: 'error', name: String(name), value: String(err?.message ?? err), traceback: interrupted ? [] : traceback(err) });
  }
  write({ type: 'done' });
}

// A SIGINT between cells must not end the kernel.
process.on('SIGINT', () => undefined);
process.on('uncaughtException', (err) => write({ type: 'stderr', text: `${traceback(err).join('\n')}\n` }));
process.on('unhandledRejection', (err) => write({ type: 'stderr', text: `unhandled rejection: ${traceback(err).join('\n')}\n` }));

let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const { code } = JSON.parse(line);
  queue = queue.then(() => run(code));
});
write({ type: 'ready' });
