/** The logger every component receives; `main` decides where lines go. */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export function consoleLogger(prefix: string, quiet = false): Logger {
  const line = (level: string, message: string): void => {
    process.stderr.write(`${new Date().toISOString()} ${level} [${prefix}] ${message}\n`);
  };
  return {
    info: (m) => (quiet ? undefined : line('info', m)),
    warn: (m) => line('warn', m),
    error: (m) => line('error', m),
  };
}
