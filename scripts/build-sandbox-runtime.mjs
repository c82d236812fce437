// Builds what runs inside every sandbox, into packages/agent/dist (mounted read-only at /.space):
// the in-sandbox agent (Go, static, standard library only), the two static C helpers it needs (PID 1
// reaper and PTY) and the compatibility library preloaded into sandbox programs; and the node
// agent's own host-side helpers (the subreaper that runs runsc, the spawner of its host commands).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeAgentProtocol } from './agent-protocol.mjs';
import { goBinary, goEnvironment } from './go-toolchain.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const agentDir = path.join(root, 'packages/agent');
const out = path.join(agentDir, 'dist');
mkdirSync(out, { recursive: true });

await writeAgentProtocol(root);
const go = goBinary();
execFileSync(path.join(path.dirname(go), 'gofmt'), ['-w', path.join(agentDir, 'protocol_gen.go')], { stdio: 'inherit' });
execFileSync(go, ['build', '-trimpath', '-ldflags=-s -w', '-o', path.join(out, 'space-agent'), '.'], { cwd: agentDir, env: goEnvironment(), stdio: 'inherit' });

for (const helper of ['space-init', 'space-pty']) {
  execFileSync('gcc', ['-static', '-O2', '-Wall', '-o', path.join(out, helper), path.join(agentDir, `native/${helper}.c`)], { stdio: 'inherit' });
}
// The helper servers' HTTP on a Unix socket (imported from beside them by both servers below).
copyFileSync(path.join(agentDir, 'helper-http/space_unix_http.py'), path.join(out, 'space_unix_http.py'));
// The code interpreter's server and its modules (imported from beside it), started by the agent in templates with Python and ipykernel.
copyFileSync(path.join(agentDir, 'code-server/space_code_server.py'), path.join(out, 'space-code-server.py'));
for (const module of ['space_code_cell.py', 'space_code_kernels.py']) copyFileSync(path.join(agentDir, 'code-server', module), path.join(out, module));
copyFileSync(path.join(agentDir, 'code-server/space_js_kernel.js'), path.join(out, 'space-js-kernel.js'));
// The desktop's server and its modules (imported from beside it), started by the agent on the first desktop call in templates with a desktop.
copyFileSync(path.join(agentDir, 'desktop-server/space_desktop_server.py'), path.join(out, 'space-desktop-server.py'));
for (const module of ['space_desktop_display.py', 'space_desktop_input.py'])
  copyFileSync(path.join(agentDir, 'desktop-server', module), path.join(out, module));
// Preloaded into the sandbox's programs (glibc templates): works around gaps of gVisor.
execFileSync('gcc', ['-shared', '-fPIC', '-O2', '-Wall', '-o', path.join(out, 'space-compat.so'), path.join(agentDir, 'native/space-compat.c')], {
  stdio: 'inherit',
});

const nodeNative = path.join(root, 'packages/node/dist-native');
mkdirSync(nodeNative, { recursive: true });
execFileSync('gcc', ['-static', '-O2', '-Wall', '-o', path.join(nodeNative, 'space-shim'), path.join(root, 'packages/node/native/space-shim.c')], {
  stdio: 'inherit',
});
// The node agent's host commands, started without forking the agent (packages/node/src/spawner.ts).
execFileSync(go, ['build', '-trimpath', '-ldflags=-s -w', '-o', path.join(nodeNative, 'space-spawner'), '.'], {
  cwd: path.join(root, 'packages/node/native/space-spawner'),
  env: goEnvironment(),
  stdio: 'inherit',
});
