/** Size and rate bounds shared by every layer. Everything from inside a sandbox is held to them. */
export const Limits = {
  /** Largest JSON request body accepted by any API. */
  maxJsonBodyBytes: 1024 * 1024,
  /** Largest stdin carried by a buffered exec request. */
  maxExecStdinBytes: 512 * 1024,
  /** Buffered exec keeps at most this much of each of stdout and stderr; the rest is dropped and flagged. */
  maxBufferedOutputBytes: 8 * 1024 * 1024,
  /** Largest single stream message (one WebSocket frame) accepted from a daemon or a client. */
  maxStreamMessageBytes: 1024 * 1024,
  /** Largest file accepted by PUT /files (streamed, never held in memory). */
  maxUploadBytes: 16 * 1024 * 1024 * 1024,
  /** Output kept for re-attaching to a background process. */
  backgroundBacklogBytes: 256 * 1024,
  /** Entries returned by one directory listing. */
  maxListEntries: 10_000,
  /** Exec timeout when the caller gives none, and the most a caller may ask for. */
  defaultExecTimeoutMs: 60_000,
  maxExecTimeoutMs: 24 * 60 * 60 * 1000,
  maxPathLength: 4096,
  maxArgv: 4096,
  maxEnvEntries: 1024,
  /** A request body that sends nothing for this long is answered with 408 and its connection closed. */
  bodyIdleTimeoutMs: 30_000,
  /** Longest request target (path and query) accepted; ids are far shorter. */
  maxUrlLength: 8192,
  /** Largest cell of code a run accepts. */
  maxCodeBytes: 1024 * 1024,
  /** Largest code event (one line of a run's stream: a result's MIME bundle, base64 images included). */
  maxCodeEventBytes: 8 * 1024 * 1024,
  /** Output one cell may send in all (stdout, stderr and results); past it one notice, then nothing but its error and end. */
  maxCellOutputBytes: 32 * 1024 * 1024,
  /** stdout and stderr arrive in chunks of at most this much (coalesced for up to 50 ms). */
  maxCodeStreamChunkBytes: 64 * 1024,
  /** Code contexts (kernels) one sandbox holds at once. */
  maxCodeContexts: 16,
  /** A run's timeout when the caller gives none. */
  defaultCodeTimeoutMs: 300_000,
} as const;
