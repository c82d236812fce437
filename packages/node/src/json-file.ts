import { readFile } from 'node:fs/promises';
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
