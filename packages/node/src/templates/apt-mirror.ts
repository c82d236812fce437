import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * Finds the Debian mirror apt itself uses for `suite`, from sources.list and deb822 .sources files,
 * so no mirror host is hard-coded.
 */
export async function findAptMirror(suite: string, aptDir = '/etc/apt'): Promise<string> {
  const texts: string[] = [];
  texts.push(await readFile(path.join(aptDir, 'sources.list'), 'utf8').catch(() => ''));
  const dir = path.join(aptDir, 'sources.list.d');
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (name.endsWith('.sources') || name.endsWith('.list')) texts.push(await readFile(path.join(dir, name), 'utf8'));
  }
  for (const text of texts) {
    const found = fromOneLineFormat(text, suite) ?? fromDeb822(text, suite);
    if (found) return found;
  }
  throw new Error(`no apt source for Debian ${suite} found under ${aptDir}; add one or set SPACE_DEBIAN_MIRROR`);
}

function fromOneLineFormat(text: string, suite: string): string | null {
  for (const line of text.split('\n')) {
    const words = line
      .replace(/\[[^\]]*\]/, '')
      .trim()
      .split(/\s+/);
    if (words[0] === 'deb' && words[2] === suite && /^https?:\/\//.test(words[1] ?? '')) return words[1]!;
  }
  return null;
}

function fromDeb822(text: string, suite: string): string | null {
  for (const stanza of text.split(/\n\s*\n/)) {
    const field = (name: string): string[] => {
      const match = new RegExp(`^${name}:\\s*(.*)$`, 'mi').exec(stanza);
      return match ? match[1]!.trim().split(/\s+/) : [];
    };
    if (!field('Types').includes('deb') || !field('Suites').includes(suite)) continue;
    if (/^Enabled:\s*no/im.test(stanza)) continue;
    const uri = field('URIs').find((u) => /^https?:\/\//.test(u));
    if (uri) return uri;
  }
  return null;
}
