// The Go toolchain that builds and checks the in-sandbox agent.
import { existsSync } from 'node:fs';

/** Debian's Go from bookworm-backports (./space installs it); SPACE_GO, or a go on PATH, otherwise. */
export function goBinary() {
  if (process.env.SPACE_GO) return process.env.SPACE_GO;
  for (const candidate of ['/usr/lib/go-1.23/bin/go', '/usr/lib/go-1.22/bin/go']) if (existsSync(candidate)) return candidate;
  return 'go';
}

/** No network and no toolchain download: the agent uses the standard library only, built static. */
export function goEnvironment() {
  return { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod', GOPROXY: 'off' };
}
