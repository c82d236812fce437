// The public API as the scale harness calls it: any control plane for any call (they are
// stateless), each call timed, failures counted by error code instead of thrown.
import { Agent, request } from 'node:http';

export class ScaleApi {
  /** Calls that failed, by `<operation> <code>`. */
  errors = new Map();
  /** The first message of each kind of failure. */
  examples = new Map();
  /** Connections kept per control plane: the harness's calls must not queue behind each other on its side. */
  agent = new Agent({ keepAlive: true, maxSockets: 512 });

  constructor(urls, key) {
    this.urls = urls;
    this.key = key;
  }

  /** A control plane for the next call, at random. */
  url() {
    return this.urls[Math.floor(Math.random() * this.urls.length)];
  }

  /** One call: `{ ok, ms, body }`; a failure is counted under `op` and its error code. */
  async call(op, method, path, body, base = this.url()) {
    const started = performance.now();
    try {
      const { status, type, text } = await this.send(method, `${base}${path}`, body === undefined ? undefined : JSON.stringify(body));
      const ms = performance.now() - started;
      const parsed = text && type.includes('json') ? JSON.parse(text) : text;
      const ok = status >= 200 && status < 300;
      if (!ok) this.fail(op, parsed?.error?.code ?? String(status), parsed?.error?.message ?? String(text).slice(0, 200));
      return { ok, ms, body: parsed };
    } catch (err) {
      this.fail(op, err.code ?? err.name, err.message);
      return { ok: false, ms: performance.now() - started, body: null };
    }
  }

  send(method, url, body) {
    return new Promise((resolve, reject) => {
      const headers = {
        authorization: `Bearer ${this.key}`,
        ...(body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}),
      };
      const req = request(url, { method, headers, agent: this.agent }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'] ?? '', text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  fail(op, code, message) {
    const key = `${op} ${code}`;
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
    if (!this.examples.has(key)) this.examples.set(key, message);
  }

  /** The failures since the last time, by kind: how many and the first message. */
  takeErrors() {
    const errors = Object.fromEntries([...this.errors].map(([key, count]) => [key, { count, example: this.examples.get(key) }]));
    this.errors.clear();
    this.examples.clear();
    return errors;
  }

  close() {
    this.agent.destroy();
  }
}
