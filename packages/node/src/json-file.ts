import { readFile, rename, writeFile } from 'node:fs/promises';
import type { z } from 'zod';

/** A small JSON state file the node wrote itself, validated; null when missing, unreadable or malformed. */
export async function readJsonFile<S extends z.ZodTypeAny>(file: string, schema: S): Promise<z.output<S> | null> {
  const raw = await readFile(file, 'utf8').catch(() => null);
  if (raw === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/**
 * Writes the whole file (mode 0600) or leaves the old one: the text goes to a temporary file renamed
 * over it, so a crash never leaves half of it, or an empty one a restart would take for no file.
 */
export async function replaceFile(file: string, text: string): Promise<void> {
  await writeFile(`${file}.tmp`, text, { mode: 0o600 });
  await rename(`${file}.tmp`, file);
}
