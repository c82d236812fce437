import '@xterm/xterm/css/xterm.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signedIn as stillSignedIn, signOut } from './api.js';
import { SessionPage } from './session-page.js';
import { SessionsPage } from './sessions-page.js';
import { SignIn } from './sign-in.js';
import { MetricsPage } from './metrics-page.js';
import { UsagePage } from './usage-page.js';
import { SecretsPage } from './secrets-page.js';
import { TemplatesPage } from './templates-page.js';

/** The page the hash names: `#/sessions` (default), `#/sessions/<id>`, `#/templates`, `#/secrets`, `#/metrics`, `#/usage`. */
function useRoute(): string {
  const [route, setRoute] = useState(location.hash.slice(1) || '/sessions');
  useEffect(() => {
    const changed = () => setRoute(location.hash.slice(1) || '/sessions');
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

function page(route: string, session: string | undefined) {
  if (session) return <SessionPage id={session} />;
  if (route === '/templates') return <TemplatesPage />;
  if (route === '/secrets') return <SecretsPage />;
  if (route === '/metrics') return <MetricsPage />;
  if (route === '/usage') return <UsagePage />;
  return <SessionsPage />;
}

const pages = [
  ['/sessions', 'Sessions'],
  ['/templates', 'Templates'],
  ['/secrets', 'Secrets'],
  ['/metrics', 'Metrics'],
  ['/usage', 'Usage'],
] as const;

function App() {
  // null until the API has said whether the console's cookie still signs in.
  const [signedIn, setSignedIn] = useState<boolean | null>(null);
  useEffect(() => void stillSignedIn().then(setSignedIn), []);
  const route = useRoute();
  if (signedIn === null) return null;
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const session = /^\/sessions\/(ses_[a-z0-9]+)$/.exec(route)?.[1];
  return (
    <>
      <header>
        <strong>SPACE</strong>
        <nav aria-label="Pages">
          {pages.map(([path, name]) => (
            <a key={path} href={`#${path}`} aria-current={route === path || route.startsWith(`${path}/`) ? 'page' : undefined}>
              {name}
            </a>
          ))}
        </nav>
        <span class="spacer" />
        <button type="button" onClick={() => void signOut().then(() => setSignedIn(false))}>
          Sign out
        </button>
      </header>
      <main>{page(route, session)}</main>
    </>
  );
}

render(<App />, document.getElementById('root')!);
