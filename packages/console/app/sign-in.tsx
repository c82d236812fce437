import { useState } from 'preact/hooks';
import { signIn } from './api.js';
import { ErrorAlert } from './ui.js';

/** Signing in: the control plane checks the key before it keeps it in the console's cookie. */
export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      await signIn(key.trim());
      onSignedIn();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <main>
      <h1>SPACE console</h1>
      <form onSubmit={submit} class="inline">
        <label for="api-key">API key</label>
        <input id="api-key" type="password" autocomplete="off" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
        <button type="submit">Sign in</button>
      </form>
      <p>The key is kept in a cookie no script can read, until you sign out or close the browser; every call goes through the public API with it.</p>
      <ErrorAlert error={error} />
    </main>
  );
}
