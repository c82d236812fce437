/** What a server logs through: the node agent's Logger fits, and so does a control plane's line writer. */
export interface ServerLog {
  warn(message: string): void;
  error(message: string): void;
}

/** A ServerLog that writes every line through one function. */
export function lineLog(write: (message: string) => void): ServerLog {
  return { warn: write, error: write };
}
